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
// Every operation is O(log n) in the ranked items (an ordered set and a
// vector by id); `first` walks the order from its start.
#pragma once

#include "tiers/state.hpp" // max_priority, default_priority

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
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
  void insert(id i, uint64_t tokens, uint8_t priority, uint64_t key = 0,
              uint32_t inherited = 0);

  /// `i` served a request (or was used again): its count rises and it
  /// becomes the most recent of its rank. No-op when not ranked.
  void touch(id i);

  /// `i` left by eviction: gdsf's clock rises to its rank and its count is
  /// remembered under its key. No-op when not ranked.
  void evicted(id i);

  /// `i` left otherwise (replaced, superseded, dropped, written out).
  /// No-op when not ranked.
  void erase(id i);

  /// Sets `i`'s priority (clamped to `max_priority`). No-op when not
  /// ranked.
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
    return order_.size();
  }

  /// The first item in eviction order for which `ok(id)` holds; `none`
  /// when no item does.
  template <class Ok>
  id first(Ok&& ok) const {
    for (auto& k : order_)
      if (ok(std::get<3>(k)))
        return std::get<3>(k);
    return none;
  }

private:
  // (priority, rank, touch, id): ascending is the eviction order.
  using key_t = std::tuple<uint8_t, double, uint64_t, id>;
  struct slot {
    bool ranked = false;
    uint8_t priority = default_priority;
    uint32_t count = 0;
    double rank = 0;
    uint64_t stamp = 0;
    uint64_t tokens = 0;
    uint64_t key = 0;
  };
  key_t key_of(id i) const {
    auto& s = slots_[i];
    return {s.priority, s.rank, s.stamp, i};
  }
  double value(const slot& s) const;
  void rank(id i);

  ram_policy policy_;
  size_t ghost_cap_;
  std::vector<slot> slots_;
  std::set<key_t> order_;
  double clock_ = 0; // gdsf's L
  uint64_t stamps_ = 0;
  std::unordered_map<uint64_t, uint32_t> ghosts_;
  std::deque<uint64_t> ghost_order_; // oldest first
};

} // namespace kvtier::tiers
