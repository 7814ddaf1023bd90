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
//   - A failed item stays, marked failed, until its owner makes it writable
//     again (`retry`, `retry_failed`); it then goes first again (arrival
//     order), so a retry is attempted when its owner's clock says.
//   - `cancel` takes back the items of a key that are not being written
//     (queued or failed): an erased key's pending writes never happen. An
//     item in flight cannot be taken back; its owner orders what follows.
//   - Items hold their entry's buffers; removing an item (done, dropped,
//     superseded) releases them at once.
//
// Cost: no operation walks the queue. Items are indexed by id and by key
// (a key has at most a few items: one in flight, one failed, one queued),
// the writable ones are kept in arrival order, and every count (in flight,
// failed, per reason, bytes) is kept as items change, so a push, a start,
// a completion or a lookup costs O(log n) in the items held, whatever the
// backlog (a flush may queue thousands). Only `retry_failed` and `items`
// are proportional to what they return.
//
// Owned by the SSD tier; single-threaded.
#pragma once

#include "tiers/state.hpp"
#include "tiers/storage_key.hpp"

#include <array>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
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
  /// Read-only outside the queue (its counts follow them).
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

  /// The items of `key` (queued, in flight or failed), oldest first.
  std::vector<const write_item*> items_of(const std::string& key) const;

  /// Removes a written item, releasing its buffers.
  void done(uint64_t id);

  /// Removes the items of `key` that are not in flight (queued or failed)
  /// and hands them back, oldest first; their buffers go with the result.
  std::vector<write_item> cancel(const std::string& key);

  /// Removes the item with `id` (in flight or not) and hands it back.
  std::optional<write_item> take(uint64_t id);

  /// Marks an in-flight item failed (kept for a retry).
  void fail(uint64_t id);

  /// Makes the failed item `id` writable again; false when it is not
  /// failed.
  bool retry(uint64_t id);

  /// Makes failed items writable again; returns how many.
  uint64_t retry_failed();

  /// The ids of the failed items, oldest first.
  std::vector<uint64_t> failed_ids() const;

  /// Items queued, in flight or failed.
  size_t size() const noexcept {
    return items_.size();
  }

  size_t in_flight() const noexcept {
    return in_flight_;
  }

  size_t failed() const noexcept {
    return failed_.size();
  }

  /// Items of `reason` (queued, in flight or failed).
  size_t count(write_reason reason) const noexcept {
    return reasons_[static_cast<size_t>(reason)];
  }

  /// Items of key kind `kind` (queued, in flight or failed).
  size_t count(key_kind kind) const noexcept {
    return kinds_[static_cast<size_t>(kind)];
  }

  /// Whether an item could start now or is being written.
  bool active() const noexcept {
    return items_.size() > failed_.size();
  }

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
  using iterator = std::list<write_item>::iterator;

  /// Takes item `i` out of the queue and every index.
  write_item remove(iterator i);
  bool key_in_flight(const std::string& key) const;

  uint64_t byte_cap_;
  uint64_t bytes_ = 0;
  uint64_t next_id_ = 1;
  std::list<write_item> items_;
  std::unordered_map<uint64_t, iterator> by_id_;
  /// Each key's items, oldest first (a few at most).
  std::unordered_map<std::string, std::vector<iterator>> by_key_;
  /// Items neither failed nor in flight, by id (ids grow with arrival).
  std::map<uint64_t, iterator> ready_;
  std::set<uint64_t> failed_;
  size_t in_flight_ = 0;
  std::array<size_t, 4> reasons_{};
  std::array<size_t, 3> kinds_{};
};

} // namespace kvtier::tiers::ssd
