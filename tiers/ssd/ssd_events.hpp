// What the SSD tier reports to its owner: what became of each queued write
// (`write_event`) and of each indexed file it stops holding
// (`remove_event`). Plain values; the tier calls the owner's
// `ssd_config::on_write` and `ssd_config::on_remove` with them on the
// owner's thread.
#pragma once

#include "tiers/ssd/write_queue.hpp"

#include <caf/error.hpp>

namespace kvtier::tiers::ssd {

/// What became of one queued write (see `ssd_config::on_write`).
enum class write_outcome : uint8_t {
  /// The file is durable and indexed.
  durable,
  /// The write failed; the item stays queued for a retry (`retry`, or a
  /// flush). Not final: a later report of the same item follows.
  failed,
  /// Dropped over the queue's byte cap: never written.
  dropped,
  /// Replaced in the queue by a newer state of the same key.
  superseded,
  /// Taken back by `erase` before it was written (or, when its write was
  /// running and failed, instead of a retry): never written.
  cancelled,
  /// Released unwritten by `close` (queued, or failed and kept for a
  /// retry, or failing after the close): never written.
  abandoned,
  /// Failed `ssd_config::max_attempts` times: released, never written
  /// (`err` says why the last attempt failed).
  given_up,
};

const char* to_string(write_outcome o);

/// One report of the write-behind queue to its owner.
struct write_event {
  uint64_t id = 0;
  std::string ns;
  token_seq tokens;
  write_reason reason = write_reason::spill;
  write_outcome outcome = write_outcome::durable;
  /// Why, for `failed` and `given_up`: the step and the error, without the
  /// entry's name (so equal failures of several entries read the same).
  caf::error err;
  /// Attempts made so far (1 after the first).
  uint32_t attempts = 0;
};

/// Why the tier stopped holding an entry file (see `ssd_config::on_remove`).
enum class removal_reason : uint8_t {
  /// Least recently used over the byte cap.
  evicted,
  /// A restore found it corrupt or truncated; the file is removed.
  corrupt,
  /// A restore found it gone or replaced behind the tier's back; forgotten.
  gone,
  /// Removed on request (`erase`).
  erased,
  /// A trimmable longer file of the same namespace became durable and
  /// serves every prompt this one did (as a trimmable RAM entry
  /// supersedes its ancestors).
  superseded,
};

const char* to_string(removal_reason r);

/// One indexed file the tier no longer holds, reported to its owner.
struct remove_event {
  std::string ns;
  token_seq tokens;
  removal_reason reason = removal_reason::evicted;
  /// Bytes the file occupied.
  uint64_t bytes = 0;
  /// The file's key kind and, for a checkpoint, its owner (the header's).
  key_kind kind = key_kind::prefix;
  uint64_t request = 0;
  uint32_t attempt = 0;

  storage_key key() const {
    return {kind, ns, tokens, request, attempt};
  }
};

} // namespace kvtier::tiers::ssd
