// Checkpoints: the resumable points of generations (DESIGN.md section 2
// "Checkpoints and sessions"). Plain single-threaded C++; the checkpoints
// actor owns the only instance and does all I/O through the SSD actor.
//
// Identity: a checkpoint belongs to (engine request id, namespace). The
// engine hands the same request id again to resume a generation, also after
// a restart. Only the newest checkpoint of an identity is kept in memory;
// it stays until its request is released as completed (or the service
// closes). On SSD a checkpoint is an ordinary entry file whose namespace is
// `storage_ns(id)` ("kvtier.checkpoint/<request id>/<ns>"), so the file
// format needs no new field and no prefix lookup ever sees it; after a
// restart the start-up listing of saved prefixes rebuilds the index from
// file headers alone. Once a newer checkpoint is durable, older files of the
// same identity are given back for removal.
//
// Durable marks follow the files: the owner records each write it orders
// (`ordered`) and its answer (`settled`), and tells the store of every
// checkpoint file the SSD tier stops holding (`file_removed`: evicted over
// the cap, found corrupt or gone at a restore). The checkpoint held in
// memory whose file went is no longer durable, so the next flush writes it
// again; a newer checkpoint of the identity keeps its own mark. `remove`
// also gives back the keys of writes still ordered, so the owner can
// cancel them with the files: a completed generation leaves no file, even
// when its write was still queued.
//
// Not an error: saving a checkpoint that is not newer (fewer tokens) than
// the one held (it is disposed); finding none.
#pragma once

#include "tiers/state.hpp"

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::tiers {

struct checkpoint_id {
  uint64_t request = 0;
  std::string ns;

  auto operator<=>(const checkpoint_id&) const = default;
};

/// A storage key of a checkpoint file.
struct checkpoint_file {
  std::string ns; // storage_ns(id)
  token_seq tokens;
};

class checkpoint_store {
public:
  /// What `find` knows of an identity's newest checkpoint.
  struct found {
    /// The state, when held in memory.
    std::optional<entry> state;
    /// Otherwise the newest durable file to restore.
    std::optional<checkpoint_file> file;
  };

  /// Keeps `e` as the newest checkpoint of `id`; false (disposed) when it
  /// covers no more tokens than the one held.
  bool save(const checkpoint_id& id, entry e);

  /// The newest checkpoint of `id`; nullopt when there is none.
  std::optional<found> find(const checkpoint_id& id) const;

  /// Records that a file of `id` with `tokens` is durable (found at start,
  /// or a write answered); returns older files of `id` that it makes
  /// redundant (to remove).
  std::vector<checkpoint_file> mark_durable(const checkpoint_id& id,
                                            const token_seq& tokens);

  /// Records that a write of `id`'s checkpoint with `tokens` was ordered.
  void ordered(const checkpoint_id& id, const token_seq& tokens);

  /// The final answer to an order of `ordered` (not a failure the SSD tier
  /// keeps queued for a retry: such an order stays ordered until `remove`):
  /// settles it and, when `durable`, is `mark_durable`. An order the identity
  /// no longer holds (released meanwhile, maybe saved again under a reused id)
  /// changes nothing: returns no file.
  std::vector<checkpoint_file> settled(const checkpoint_id& id,
                                       const token_seq& tokens, bool durable);

  /// The file of `id` with `tokens` is no longer on SSD: forgets it, and
  /// when it was the file of the checkpoint held in memory, that one is no
  /// longer durable (the next `undurable` lists it). Returns whether a
  /// durable mark was cleared. Not an error: an identity or file unknown.
  bool file_removed(const checkpoint_id& id, const token_seq& tokens);

  /// Forgets every checkpoint of `request`; returns their files and the
  /// keys of their writes still ordered (to erase and cancel).
  std::vector<checkpoint_file> remove(uint64_t request);

  /// Checkpoints of `request` (identities held).
  uint32_t count(uint64_t request) const;

  /// In-memory checkpoints whose newest state is not durable yet.
  std::vector<std::pair<checkpoint_id, entry>> undurable() const;

  /// Drops every in-memory state; durable files stay known.
  void clear_memory();

  /// Identities held.
  size_t size() const noexcept {
    return held_.size();
  }

  /// The storage namespace of `id`'s files.
  static std::string storage_ns(const checkpoint_id& id);

  /// The identity a storage namespace names; nullopt for other namespaces.
  static std::optional<checkpoint_id> parse_storage_ns(std::string_view ns);

private:
  struct record {
    std::optional<entry> state;
    uint64_t tokens = 0;
    bool durable = false;
    /// Durable files, oldest first.
    std::vector<token_seq> files;
    /// Writes ordered and not answered yet (one per order).
    std::vector<token_seq> writing;
  };

  std::map<checkpoint_id, record> held_;
};

} // namespace kvtier::tiers
