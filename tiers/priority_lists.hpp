// Items in (priority, recency) order: one doubly linked list per priority
// (0 to `max_priority`), each in the order its items were appended, so the
// first item of the lowest priority holding any is the least recently
// appended of that priority. What the RAM tier's `lru` policy evicts by
// (docs/eviction.md "In the RAM tier").
//
// The links live with the owner, not here: `Links` is an accessor whose
// `prev(i)` and `next(i)` are item i's link fields (`member_links` reads
// them from `prev` / `next` members), so a list costs an item nothing
// beyond the two ids its owner keeps; this object is a head, a tail and a
// mask bit per priority. The RAM tier links its records this way,
// `entry_ranking`'s lru policy its slots.
//
// Rules: an item is on at most one list; the caller names the priority an
// item was linked at (`erase`, `to_back`, `next`); ids are below `none`.
// Every operation is O(1) (`front` and `next` find the next priority
// holding items in a 128-bit mask); `first` walks the order from its
// start. Not thread-safe; no I/O.
#pragma once

#include "tiers/state.hpp" // max_priority

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace kvtier::tiers {

/// Links kept in `prev` / `next` members of `(*items)[i]` (`Items` const:
/// read-only).
template <class Items>
struct member_links {
  Items* items;
  template <class Id>
  auto& prev(Id i) const {
    return (*items)[i].prev;
  }
  template <class Id>
  auto& next(Id i) const {
    return (*items)[i].next;
  }
};

template <class Id>
class priority_lists {
public:
  static constexpr Id none = std::numeric_limits<Id>::max();
  static constexpr size_t levels = size_t{max_priority} + 1;
  static_assert(levels <= 128, "the mask holds 128 priorities");

  priority_lists() noexcept {
    head_.fill(none);
    tail_.fill(none);
  }

  size_t size() const noexcept {
    return size_;
  }
  bool empty() const noexcept {
    return size_ == 0;
  }
  /// The first / last item of priority `p` (none when it holds none).
  Id front(uint8_t p) const noexcept {
    return head_[p];
  }
  Id back(uint8_t p) const noexcept {
    return tail_[p];
  }

  /// The first item in order (none when empty).
  Id front() const noexcept {
    auto p = lowest(0);
    return p < levels ? head_[p] : none;
  }

  /// The item after `i` (linked at priority `p`) in order; none after the
  /// last.
  template <class Links>
  Id next(const Links& l, Id i, uint8_t p) const noexcept {
    if (Id n = l.next(i); n != none)
      return n;
    auto q = lowest(size_t{p} + 1);
    return q < levels ? head_[q] : none;
  }

  /// Links `i` (on no list) at priority `p`, before `at` (an item linked at
  /// `p`; none: at the back).
  template <class Links>
  void insert(const Links& l, Id i, uint8_t p, Id at = none) noexcept {
    Id before = at == none ? tail_[p] : l.prev(at);
    l.prev(i) = before;
    l.next(i) = at;
    (before == none ? head_[p] : l.next(before)) = i;
    (at == none ? tail_[p] : l.prev(at)) = i;
    mask_[p / 64] |= uint64_t{1} << (p % 64);
    ++size_;
  }

  /// Unlinks `i`, linked at priority `p`.
  template <class Links>
  void erase(const Links& l, Id i, uint8_t p) noexcept {
    Id before = l.prev(i), after = l.next(i);
    (before == none ? head_[p] : l.next(before)) = after;
    (after == none ? tail_[p] : l.prev(after)) = before;
    l.prev(i) = l.next(i) = none;
    if (head_[p] == none)
      mask_[p / 64] &= ~(uint64_t{1} << (p % 64));
    --size_;
  }

  /// Moves `i` (linked at priority `p`) to the back of its list.
  template <class Links>
  void to_back(const Links& l, Id i, uint8_t p) noexcept {
    if (l.next(i) == none)
      return; // already the last
    erase(l, i, p);
    insert(l, i, p);
  }

  /// The first item in order for which `ok(i)` holds; none when no item
  /// does. `ok` must not change the lists.
  template <class Links, class Ok>
  Id first(const Links& l, Ok&& ok) const {
    for (auto p = lowest(0); p < levels; p = lowest(p + 1))
      for (Id i = head_[p]; i != none; i = l.next(i))
        if (ok(i))
          return i;
    return none;
  }

private:
  /// The lowest priority from `from` on holding an item (`levels`: none).
  size_t lowest(size_t from) const noexcept {
    if (from >= levels)
      return levels;
    auto w = from / 64;
    auto m = mask_[w] & (~uint64_t{0} << (from % 64));
    while (m == 0) {
      if (++w == mask_.size())
        return levels;
      m = mask_[w];
    }
    return w * 64 + static_cast<size_t>(std::countr_zero(m));
  }

  std::array<Id, levels> head_;
  std::array<Id, levels> tail_;
  std::array<uint64_t, 2> mask_{};
  size_t size_ = 0;
};

} // namespace kvtier::tiers
