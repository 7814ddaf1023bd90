// The RAM tier's eviction order over whole entries (docs/eviction.md "In
// the RAM tier"): which resident item leaves first when a put goes over
// the cap. Owned by its tier (and by the replay's reference model, which
// must decide exactly as the tier does); single-threaded, no I/O, no
// clocks (time is the ranking's own touch counter).
//
// Items are named by the owner's ids (dense, reused after `erase`). Each
// carries a priority (0 to 100, as an engine's request says; larger stays
// longer) and a rank. The eviction order is ascending (priority, rank,
// last touch): every item of a lower priority leaves before any of a
// higher one, whatever the policy.
//
// Two policies rank within a priority:
//   lru    rank 0: the least recently touched item goes first.
//   gdsf   GreedyDual-Size-Frequency with an inflation clock `L`: an item's
//          rank is L + value when it was last touched, value =
//          min(count, frequency_cap) × (1 + tokens / 65536) — how often it
//          served, times what recomputing one of its tokens costs (prefill
//          attention grows with the position). Its bytes do not divide the
//          value: a hit on an item saves its tokens, so tokens saved per
//          byte held do not depend on the item's length. When an item is
//          evicted, L rises to its rank, so what is not touched ages out
//          behind what is. A new item's count starts from what it takes
//          over (`insert`'s `inherited`: the count of the item its key
//          replaced or the ancestors it supersedes — a conversation's next
//          turn carries on its previous turn's count) or from the count an
//          evicted item of the same key left in the ghost list (bounded,
//          oldest forgotten first).
// Kept compactly: a 48-byte slot per id (a vector by id) and, per policy,
// - lru: the slots' own links in one list per priority (`priority_lists`),
//   appended to on each touch: insert, touch, erase and eviction are O(1);
// - gdsf: a 4-ary heap in a flat vector, 16 bytes a place (the item's
//   priority and rank, so a sift compares within one cache line, and its
//   id), each slot holding its place: insert, touch, erase and eviction
//   are O(log n).
// `first` walks the order from its start (under gdsf best-first over the
// heap: O(k log k) for k items `ok` turns down). The RAM tier keeps the
// lru order in its own records instead (tiers/ram_tier.hpp), with the same
// `priority_lists`, and this ranking only under gdsf.
#pragma once

#include "tiers/priority_lists.hpp"
#include "tiers/state.hpp" // max_priority, default_priority

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

enum class ram_policy : uint8_t { lru, gdsf };

/// "lru" or "gdsf"; nullopt for anything else.
std::optional<ram_policy> parse_ram_policy(std::string_view name);
std::string_view to_string(ram_policy p);

/// The ghost key of the entry (ns, tokens): never 0.
uint64_t ranking_key(std::string_view ns, std::span<const uint32_t> tokens);

class entry_ranking {
public:
  using id = uint32_t;
  static constexpr id none = UINT32_MAX;
  /// Largest count that raises a gdsf value.
  static constexpr uint32_t frequency_cap = 16;

  /// `ghosts`: evicted keys whose counts gdsf remembers (0: none).
  explicit entry_ranking(ram_policy p = ram_policy::lru,
                         size_t ghosts = size_t{1} << 16);

  ram_policy policy() const noexcept {
    return policy_;
  }

  /// `i` becomes ranked (it must not be): `tokens` long, its `priority`,
  /// `key` a hash of its namespace and tokens (0 for an item without one,
  /// e.g. an object), `inherited` the count it takes over (see the header
  /// comment). Counts as its first use.
  /// `coldest`: the first of its priority instead (`make_coldest`).
  void insert(id i, uint64_t tokens, uint8_t priority, uint64_t key = 0,
              uint32_t inherited = 0, bool coldest = false);

  /// `i` becomes the first of its priority, before every item ranked or
  /// made coldest before (an owner rebuilding an order it recorded, oldest
  /// last): lru puts it at the front of its priority's list; gdsf ranks it
  /// 0 (below every rank), its count unchanged, so it rises to the clock
  /// at its next touch. No-op when not ranked.
  void make_coldest(id i);

  /// `i` served a request (or was used again): its count rises and it
  /// becomes the most recent of its rank. No-op when not ranked.
  void touch(id i);

  /// `i` left by eviction: gdsf's clock rises to its rank and its count is
  /// remembered under its key. No-op when not ranked.
  void evicted(id i);

  /// `i` left otherwise (replaced, superseded, dropped, written out).
  /// No-op when not ranked.
  void erase(id i);

  /// Sets `i`'s priority (clamped to `max_priority`), keeping its rank and
  /// last touch. No-op when not ranked. Under lru O(the items of the new
  /// priority touched since `i` was).
  void set_priority(id i, uint8_t priority);

  bool contains(id i) const noexcept {
    return i < slots_.size() && slots_[i].ranked;
  }
  /// `i`'s count (0 when not ranked).
  uint32_t count(id i) const noexcept {
    return contains(i) ? slots_[i].count : 0;
  }
  uint8_t priority(id i) const noexcept {
    return contains(i) ? slots_[i].priority : default_priority;
  }
  size_t size() const noexcept {
    return policy_ == ram_policy::lru ? lists_.size() : heap_.size();
  }
  /// Evicted keys whose counts gdsf remembers now.
  size_t ghosts() const noexcept {
    return ghost_order_.size();
  }
  /// Bytes one remembered ghost costs (its table node and bucket, its
  /// place in the FIFO), for an owner's memory estimate.
  static constexpr size_t ghost_bytes = 64;

  /// What the ranking holds per ranked item under `p` (its slot, and under
  /// gdsf its place in the heap), for an owner's memory estimate.
  static size_t item_bytes(ram_policy p) noexcept;

  /// The first item in eviction order for which `ok(id)` holds; `none`
  /// when no item does. `ok` must not change the ranking.
  template <class Ok>
  id first(Ok&& ok) const {
    if (policy_ == ram_policy::lru)
      return lists_.first(member_links<const std::vector<slot>>{&slots_}, ok);
    if (heap_.empty())
      return none;
    if (ok(heap_[0].item))
      return heap_[0].item;
    // Best-first over the heap: every place whose parent `ok` turned down
    // waits in `frontier_` (a binary heap, earliest item on top); each
    // place taken is the earliest item not yet seen.
    auto later = [this](uint32_t a, uint32_t b) {
      return before(heap_[b], heap_[a]);
    };
    auto& f = frontier_;
    f.clear();
    for (size_t at = 0;;) {
      for (auto c = arity * at + 1; c <= arity * at + arity && c < heap_.size();
           ++c) {
        f.push_back(static_cast<uint32_t>(c));
        std::push_heap(f.begin(), f.end(), later);
      }
      if (f.empty())
        return none;
      std::pop_heap(f.begin(), f.end(), later);
      at = f.back();
      f.pop_back();
      if (ok(heap_[at].item))
        return heap_[at].item;
    }
  }

private:
  static constexpr size_t arity = 4;
  struct slot {
    double rank = 0; // gdsf's
    uint64_t stamp = 0;
    uint64_t tokens = 0;
    uint64_t key = 0;
    uint32_t count = 0;
    // lru: its neighbours in its priority's list; gdsf: `prev` is its
    // place in the heap.
    id prev = none;
    id next = none;
    uint8_t priority = default_priority;
    bool ranked = false;
  };
  member_links<std::vector<slot>> links() noexcept {
    return {&slots_};
  }
  /// A place in gdsf's heap: its item's order key but the touch (which
  /// decides only between equal ranks).
  struct place_t {
    double rank;
    id item;
    uint8_t priority;
  };
  /// Whether `a` leaves before `b`: ascending (priority, rank, touch).
  bool before(const place_t& a, const place_t& b) const noexcept {
    if (a.priority != b.priority)
      return a.priority < b.priority;
    if (a.rank != b.rank)
      return a.rank < b.rank;
    return slots_[a.item].stamp < slots_[b.item].stamp; // unique
  }
  double value(const slot& s) const;
  /// Stamps and ranks `i` anew and puts it in its place.
  void rank(id i, bool fresh);
  /// Takes `i` out of the order (lists or heap).
  void unlink(id i);
  /// Puts `i` (not in the order) first of its priority (`make_coldest`).
  void link_coldest(id i);
  void place(size_t at, const place_t& p) noexcept;
  void sift_up(size_t at) noexcept;
  void sift_down(size_t at) noexcept;
  /// Moves the item at `at` up or down to its place.
  void fix(size_t at) noexcept;

  ram_policy policy_;
  size_t ghost_cap_;
  std::vector<slot> slots_;
  priority_lists<id> lists_;               // lru
  std::vector<place_t> heap_;              // gdsf
  mutable std::vector<uint32_t> frontier_; // gdsf's `first`
  double clock_ = 0;                       // gdsf's L
  /// Touches count up from here, `make_coldest` down: every coldest stamp
  /// is below every touch's.
  uint64_t stamps_ = uint64_t{1} << 63;
  uint64_t cold_stamps_ = uint64_t{1} << 63;
  std::unordered_map<uint64_t, uint32_t> ghosts_;
  std::deque<uint64_t> ghost_order_; // oldest first
};

/// An id for `item` in a ranking whose ids name `by` (`by[id]` is the
/// item): one `free` holds (an id its owner gave back) or a new one. For
/// owners without dense ids of their own (the SSD index, the replay's
/// reference).
template <class T>
entry_ranking::id take_id(std::vector<T>& by,
                          std::vector<entry_ranking::id>& free, T item) {
  if (free.empty()) {
    by.push_back(item);
    return static_cast<entry_ranking::id>(by.size() - 1);
  }
  auto id = free.back();
  free.pop_back();
  by[id] = item;
  return id;
}

} // namespace kvtier::tiers
