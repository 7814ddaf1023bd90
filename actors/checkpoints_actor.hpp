// The checkpoints actor: sole owner of a `tiers::checkpoint_store`. It keeps
// the newest resumable point of each (request id, namespace) and the
// attempt that owns it, writes them to SSD on flush (SpillEntry orders of
// reason `checkpoint` under a checkpoint key: request and attempt), serves
// a request's checkpoint only when it extends the request's prompt (else
// the reply says it is stale), removes a completed attempt's checkpoints
// durably (RemoveCheckpoints: the release is answered once a removal
// record is durable), and after a restart restores a checkpoint that only
// its file still holds. Without an SSD actor checkpoints live in memory
// only.
//
// Durable marks follow the files: the SSD actor (to which
// runtime/service/spawn.cpp attaches this actor, `attach_ckpt_atom`) sends an
// SsdEvictEvent for each checkpoint file its tier stops holding, after every
// reply that called that file durable; the checkpoint held in memory whose file
// it was is then written again by the next flush. A completed release sends one
// RemoveCheckpoints per identity the attempt owned: the SSD tier cancels
// the identity's queued writes (answered `cancelled`), unlinks its files,
// and those of writes in flight once they finish, behind a removal record
// a restart applies before it indexes anything.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/checkpoints.hpp"

#include <chrono>
#include <memory>

namespace kvtier::actors {

struct checkpoints_state {
  static inline const char* name = "checkpoints";

  tiers::checkpoint_store store;
  /// The store checkpoints are written to (the SSD actor); null: none.
  store_actor ssd;
  /// How long the SSD may take to answer a request (the storage deadline):
  /// a late erase or find is treated as failed. A completed release waits
  /// two fifths of it for the removal and then answers that the removal is
  /// pending (`ec::timeout` in its removal error); the SSD tier finishes it
  /// or a flush retries it, and reports it until it is durable.
  std::chrono::milliseconds deadline{10000};
  /// checkpoint_every_tokens; 0 keeps none.
  uint64_t every = 0;
  /// The report's counters (its "checkpoints" part).
  uint64_t saved = 0, disposed = 0, resumed = 0, stale = 0, removed = 0;
  /// After CloseService: a late SaveCheckpoint fails `closed`.
  bool closed = false;
};

using checkpoints_pointer =
  checkpoints_actor::stateful_pointer<checkpoints_state>;

/// The behaviour; `saved` are the checkpoint files found on SSD at start,
/// by their headers' keys and write ids (`ssd_tier::checkpoint_files`);
/// those the start-up scan reaches while serving come later
/// (`found_checkpoints`, in any order: `checkpoint_store::found_file`).
checkpoints_actor::behavior_type
checkpoints(checkpoints_pointer self, uint64_t every, store_actor ssd,
            std::vector<tiers::checkpoint_file> saved, uint64_t deadline_ms);

} // namespace kvtier::actors
