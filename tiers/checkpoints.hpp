// Checkpoints: the resumable points of generations (docs/api.md
// "Calls": checkpoint, release). Plain single-threaded C++; the checkpoints
// actor owns the only instance and does all I/O through the SSD actor.
//
// Identity: a checkpoint belongs to (engine request id, namespace); the
// record remembers the attempt that owns it (a retry of the same request
// id is a new attempt, docs/api.md). Only the newest checkpoint of an
// identity is kept in memory, until its owning attempt is released as
// completed (or the service closes). On SSD a checkpoint file is its own
// kind of key (tiers/storage_key.hpp, `key_kind::checkpoint`): its header
// names the request and the attempt that wrote it, so no publish can ever
// name one and no prompt lookup can find one; after a restart the SSD
// tier's start-up scan hands the files back by their headers. Once a newer
// checkpoint is durable, older files of the same identity are given back
// for removal.
//
// Rules (each decided here, so the actor only carries them out):
//   - Resume (`resumes`): a checkpoint resumes a request only when its
//     tokens begin with the request's prompt (and are at least as many);
//     otherwise it is stale for that request: never served, kept.
//   - Save: from an attempt older than the owner, disposed. From the
//     owner, disposed when the held checkpoint already begins with its
//     tokens (not newer: an earlier point of the same generation, or the
//     same one); otherwise kept as the newest. From a newer attempt, kept:
//     that attempt owns the identity from then on.
//   - Adopt: a newer attempt that resumes a checkpoint owns it from then
//     on; its state is written again under the new owner by the next
//     flush (so a restart remembers the owner).
//   - Remove: `remove(request, attempt)` forgets only the identities that
//     attempt owns; a later attempt's survive.
//
// Durable marks follow the files: the owner records each write it orders
// (`ordered`, an order id per write) and its answer (`settled`), and tells
// the store of every checkpoint file the SSD tier stops holding
// (`file_removed`: evicted over the cap, found corrupt or gone at a
// restore). The checkpoint held in memory whose file went is no longer
// durable, so the next flush writes it again; a newer checkpoint of the
// identity keeps its own mark. An answer to an order of an identity that
// was removed meanwhile (maybe saved again under a reused request id)
// changes nothing.
//
// Not an error: a save that is disposed; finding none.
#pragma once

#include "tiers/state.hpp"
#include "tiers/storage_key.hpp"

#include <compare>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers {

struct checkpoint_id {
  uint64_t request = 0;
  std::string ns;

  auto operator<=>(const checkpoint_id&) const = default;
};

class checkpoint_store {
public:
  /// What `find` knows of an identity's newest checkpoint.
  struct found {
    /// The state, when held in memory.
    std::optional<entry> state;
    /// Otherwise the newest durable file to restore.
    std::optional<storage_key> file;
    /// The checkpoint's tokens (the state's or the file's).
    token_seq tokens;
    /// The attempt that owns it.
    uint32_t owner = 0;
  };

  /// A checkpoint not durable yet, for the flush to write.
  struct pending {
    checkpoint_id id;
    /// The owner: the attempt the file's header names.
    uint32_t attempt = 0;
    entry state;
  };

  /// Whether a checkpoint of `tokens` resumes a request with `prompt`: its
  /// tokens begin with the prompt (and are at least as many).
  static bool resumes(std::span<const token> tokens,
                      std::span<const token> prompt) noexcept;

  /// Keeps `e` as the newest checkpoint of `id`, saved by `attempt`; false
  /// when disposed (see the rules above).
  bool save(const checkpoint_id& id, uint32_t attempt, entry e);

  /// The newest checkpoint of `id`; nullopt when there is none.
  std::optional<found> find(const checkpoint_id& id) const;

  /// `attempt` resumed `id`'s checkpoint: a newer attempt owns it from now
  /// on. `restored` is the state read back from its file when the store
  /// held only the file; it is kept in memory when the owner changed, so
  /// the next flush writes it under the new owner.
  void adopt(const checkpoint_id& id, uint32_t attempt,
             const std::optional<entry>& restored = std::nullopt);

  /// A checkpoint file the SSD tier held at start, told in any order (the
  /// start-up scan hands the files it reaches after the service started
  /// serving later): files rank by their write ids, below every state this
  /// store was given since (older, as written before the start). The
  /// newest file's writer owns an identity no state of which is held.
  /// Returns files of its identity it makes redundant (itself when older
  /// than a file or state known; to remove).
  std::vector<storage_key> found_file(const checkpoint_file& file);

  /// Records that a write of `id`'s checkpoint not yet durable was ordered
  /// (the state `undurable` listed, under its owner); returns the order id.
  uint64_t ordered(const checkpoint_id& id);

  /// The final answer to order `order` (not a failure the SSD tier keeps
  /// queued for a retry: such an order stays ordered until `remove`):
  /// settles it and, when `durable`, records the file; returns older files
  /// it makes redundant. An order the store no longer holds changes
  /// nothing and returns no file.
  std::vector<storage_key> settled(uint64_t order, bool durable);

  /// The file of `id` with `tokens` is no longer on SSD: forgets it, and
  /// when it was the file of the checkpoint held in memory, that one is no
  /// longer durable (the next `undurable` lists it). Returns whether a
  /// durable mark was cleared. Not an error: an identity or file unknown.
  bool file_removed(const checkpoint_id& id, const token_seq& tokens);

  /// An identity `remove` forgot.
  struct removed {
    checkpoint_id id;
    /// A write of it was ordered or a file of it was known: the SSD tier
    /// may hold something of it (which the owner must then remove).
    bool on_ssd = false;
  };

  /// Forgets every checkpoint of `request` that `attempt` owns; returns
  /// their identities (whose files and writes the owner then removes).
  std::vector<removed> remove(uint64_t request, uint32_t attempt);

  /// Checkpoints of `request` that `attempt` owns.
  uint32_t count(uint64_t request, uint32_t attempt) const;

  /// In-memory checkpoints whose newest state is not durable under its
  /// owner yet.
  std::vector<pending> undurable() const;

  /// Drops every in-memory state; durable files stay known.
  void clear_memory();

  /// Identities held.
  size_t size() const noexcept {
    return held_.size();
  }

private:
  /// Store-wide order of the states: a file found at start by its write
  /// id, below every state given since, numbered in order.
  struct age {
    bool this_run = false;
    uint64_t n = 0;
    auto operator<=>(const age&) const = default;
  };

  struct file_info {
    token_seq tokens;
    uint32_t attempt = 0;
    /// The newest file has the largest.
    age seq;
  };

  struct order {
    uint64_t id = 0;
    file_info file;
  };

  struct record {
    std::optional<entry> state;
    /// The state's age (its writes carry it).
    age seq;
    uint32_t owner = 0;
    /// The state has a durable file written under `owner`.
    bool durable = false;
    /// Durable files, oldest first.
    std::vector<file_info> files;
    /// Writes ordered and not answered yet.
    std::vector<order> writing;
    /// A write was ever ordered or a file known (see `removed::on_ssd`).
    bool on_ssd = false;
  };

  /// Records `f` as a durable file of `id`; returns the files it makes
  /// redundant.
  std::vector<storage_key> add_file(const checkpoint_id& id, file_info f);
  static const token_seq* newest_tokens(const record& r);
  void erase(std::map<checkpoint_id, record>::iterator i);

  std::map<checkpoint_id, record> held_;
  /// Order id -> the identity that ordered it.
  std::map<uint64_t, checkpoint_id> orders_;
  uint64_t next_order_ = 1;
  uint64_t next_seq_ = 1;
};

} // namespace kvtier::tiers
