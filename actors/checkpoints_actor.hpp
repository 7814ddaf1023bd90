// The checkpoints actor: sole owner of a `tiers::checkpoint_store`. It keeps
// the newest resumable point of each (request id, namespace), writes them
// to SSD on flush (as SpillEntry orders of reason `checkpoint` under the
// store's storage namespace), removes a completed generation's files, and
// after a restart restores a checkpoint that only its file still holds.
// Without an SSD actor checkpoints live in memory only.
//
// Durable marks follow the files: the SSD actor (to which runtime/spawn.cpp
// attaches this actor, `attach_ckpt_atom`) sends an SsdEvictEvent for each
// checkpoint file its tier stops holding, after every reply that called
// that file durable; the checkpoint held in memory whose file it was is
// then written again by the next flush. A completed release erases the
// request's files and the keys of its writes still unanswered, which
// cancels a queued write (answered `cancelled`) and removes the file of
// one in flight once it finishes.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/checkpoints.hpp"

#include <memory>

namespace kvtier::actors {

struct checkpoints_state {
  static inline const char* name = "checkpoints";

  tiers::checkpoint_store store;
  ssd_tier_actor ssd;
  /// checkpoint_every_tokens; 0 keeps none.
  uint64_t every = 0;
  /// After CloseService: a late SaveCheckpoint fails `closed`.
  bool closed = false;
};

using checkpoints_pointer =
  checkpoints_actor::stateful_pointer<checkpoints_state>;

/// The behaviour; `saved` are checkpoint files found on SSD at start
/// (storage namespace and tokens, from the saved-prefix listing).
checkpoints_actor::behavior_type
checkpoints(checkpoints_pointer self, uint64_t every, ssd_tier_actor ssd,
            std::vector<tiers::checkpoint_file> saved);

} // namespace kvtier::actors
