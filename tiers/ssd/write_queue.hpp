// The write-behind queue of the SSD tier: every entry waiting to be written
// (eviction spills, idle demotions, snapshots) in arrival order, byte-capped.
//
// Policy:
//   - Over the byte cap, `push` drops the oldest items that are not being
//     written until the queue fits; the item being pushed is never its own
//     victim (a queue holding only it may exceed the cap). A dropped spill is
//     a future miss, never a wrong result.
//   - A queued, not-yet-started item for the same file key is superseded by
//     the newer one (same ns and tokens: the newer state replaces the older).
//   - Writes for one key never overlap: `start_next` skips keys in flight.
//   - A failed item stays, marked failed, and is retried by `retry_failed`.
//   - `cancel` takes back the items of a key that are not being written
//     (queued or failed): an erased key's pending writes never happen. An
//     item in flight cannot be taken back; its owner orders what follows.
//   - Items hold their entry's buffers; removing an item (done, dropped,
//     superseded) releases them at once.
// Owned by the SSD tier; single-threaded.
#pragma once

#include "tiers/state.hpp"
#include "tiers/storage_key.hpp"

#include <list>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvtier::tiers::ssd {

/// Why an entry is being written.
enum class write_reason : uint8_t { spill, demotion, snapshot, checkpoint };

const char* to_string(write_reason r);

struct write_item {
  uint64_t id = 0;
  /// The entry's file name: one per storage key (kind, request, ns,
  /// tokens).
  std::string key;
  entry state;
  /// The key's kind and, for a checkpoint, its request and attempt.
  key_kind kind = key_kind::prefix;
  uint64_t request = 0;
  uint32_t attempt = 0;
  uint64_t bytes = 0;
  write_reason reason = write_reason::spill;
  bool in_flight = false;
  bool failed = false;
  uint32_t attempts = 0;
};

/// What a push displaced. The displaced items are handed back so the owner
/// can report them; their buffers go when the result does.
struct push_result {
  uint64_t id = 0;
  uint64_t dropped = 0;
  uint64_t superseded = 0;
  std::vector<write_item> dropped_items;
  std::vector<write_item> superseded_items;
};

class write_queue {
public:
  explicit write_queue(uint64_t byte_cap)
    : byte_cap_(byte_cap) {}

  /// Appends an item and makes room as the policy says; `owner` gives the
  /// item's kind, request and attempt (its ns and tokens are `e`'s).
  push_result push(std::string key, entry e, write_reason reason,
                   const storage_key& owner = {});

  /// The oldest item that is neither failed, in flight, nor of a key in
  /// flight (nor in `blocked`), now marked in flight; nullptr when there
  /// is none.
  write_item* start_next(const std::multiset<std::string>& blocked = {});

  /// The item with `id`, or nullptr.
  write_item* find(uint64_t id);

  /// Whether an item for `key` is queued, in flight or failed.
  bool holds(const std::string& key) const noexcept;

  /// Removes a written item, releasing its buffers.
  void done(uint64_t id);

  /// Removes the items of `key` that are not in flight (queued or failed)
  /// and hands them back, oldest first; their buffers go with the result.
  std::vector<write_item> cancel(const std::string& key);

  /// Removes the item with `id` (in flight or not) and hands it back.
  std::optional<write_item> take(uint64_t id);

  /// Marks an in-flight item failed (kept for a retry).
  void fail(uint64_t id);

  /// Makes failed items writable again; returns how many.
  uint64_t retry_failed();

  /// Items queued, in flight or failed.
  size_t size() const noexcept {
    return items_.size();
  }

  size_t in_flight() const noexcept;
  size_t failed() const noexcept;

  /// Whether an item could start now or is being written.
  bool active() const noexcept;

  /// Bytes held by all items.
  uint64_t bytes() const noexcept {
    return bytes_;
  }

  uint64_t byte_cap() const noexcept {
    return byte_cap_;
  }

  /// The items, oldest first.
  const std::list<write_item>& items() const noexcept {
    return items_;
  }

private:
  void erase(std::list<write_item>::iterator i);

  uint64_t byte_cap_;
  uint64_t bytes_ = 0;
  uint64_t next_id_ = 1;
  std::list<write_item> items_;
};

} // namespace kvtier::tiers::ssd
