#include "tiers/entry_ranking.hpp"

#include <xxhash.h>

#include <algorithm>

namespace kvtier::tiers {

std::optional<ram_policy> parse_ram_policy(std::string_view name) {
  if (name == "lru")
    return ram_policy::lru;
  if (name == "gdsf")
    return ram_policy::gdsf;
  return std::nullopt;
}

std::string_view to_string(ram_policy p) {
  return p == ram_policy::gdsf ? "gdsf" : "lru";
}

uint64_t ranking_key(std::string_view ns, std::span<const uint32_t> tokens) {
  auto seed = XXH3_64bits(ns.data(), ns.size());
  auto h = XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), seed);
  return h == 0 ? 1 : h;
}

entry_ranking::entry_ranking(ram_policy p, size_t ghosts)
  : policy_(p)
  , ghost_cap_(ghosts) {
  // nop
}

double entry_ranking::value(const slot& s) const {
  return std::min(s.count, frequency_cap)
         * (1.0 + static_cast<double>(s.tokens) / 65536.0);
}

size_t entry_ranking::item_bytes(ram_policy p) noexcept {
  static_assert(sizeof(slot) == 48 && sizeof(place_t) == 16);
  return sizeof(slot) + (p == ram_policy::gdsf ? sizeof(place_t) : 0);
}

void entry_ranking::place(size_t at, const place_t& p) noexcept {
  heap_[at] = p;
  slots_[p.item].prev = static_cast<id>(at);
}

void entry_ranking::sift_up(size_t at) noexcept {
  auto p = heap_[at];
  while (at > 0) {
    auto parent = (at - 1) / arity;
    if (!before(p, heap_[parent]))
      break;
    place(at, heap_[parent]);
    at = parent;
  }
  place(at, p);
}

void entry_ranking::sift_down(size_t at) noexcept {
  auto p = heap_[at];
  auto n = heap_.size();
  for (;;) {
    auto c = arity * at + 1;
    if (c >= n)
      break;
    auto best = c;
    for (auto k = c + 1; k < std::min(c + arity, n); ++k)
      if (before(heap_[k], heap_[best]))
        best = k;
    if (!before(heap_[best], p))
      break;
    place(at, heap_[best]);
    at = best;
  }
  place(at, p);
}

void entry_ranking::fix(size_t at) noexcept {
  if (at > 0 && before(heap_[at], heap_[(at - 1) / arity]))
    sift_up(at);
  else
    sift_down(at);
}

void entry_ranking::rank(id i, bool fresh) {
  auto& s = slots_[i];
  s.stamp = ++stamps_;
  if (policy_ == ram_policy::lru) {
    // The newest stamp: the back of its priority's list.
    if (fresh)
      lists_.insert(links(), i, s.priority);
    else
      lists_.to_back(links(), i, s.priority);
    return;
  }
  s.rank = clock_ + value(s);
  if (fresh) {
    heap_.push_back({s.rank, i, s.priority});
    sift_up(heap_.size() - 1);
  } else {
    heap_[s.prev].rank = s.rank;
    fix(s.prev); // down: its rank and stamp only grow
  }
}

void entry_ranking::unlink(id i) {
  auto& s = slots_[i];
  if (policy_ == ram_policy::lru) {
    lists_.erase(links(), i, s.priority);
    return;
  }
  size_t at = s.prev;
  auto last = heap_.back();
  heap_.pop_back();
  if (at == heap_.size())
    return; // it was the last
  place(at, last);
  fix(at);
}

void entry_ranking::insert(id i, uint64_t tokens, uint8_t priority,
                           uint64_t key, uint32_t inherited, bool coldest) {
  if (i >= slots_.size())
    slots_.resize(static_cast<size_t>(i) + 1);
  auto& s = slots_[i];
  if (s.ranked)
    erase(i);
  s = slot{};
  s.ranked = true;
  s.priority = std::min(priority, max_priority);
  s.tokens = tokens;
  s.key = key;
  uint32_t remembered = 0;
  if (key != 0)
    if (auto g = ghosts_.find(key); g != ghosts_.end())
      remembered = g->second;
  s.count = std::max(inherited, remembered) + 1;
  if (coldest)
    link_coldest(i);
  else
    rank(i, true);
}

void entry_ranking::make_coldest(id i) {
  if (!contains(i))
    return;
  unlink(i);
  link_coldest(i);
}

void entry_ranking::link_coldest(id i) {
  auto& s = slots_[i];
  s.stamp = --cold_stamps_;
  if (policy_ == ram_policy::lru) {
    lists_.insert(links(), i, s.priority, lists_.front(s.priority));
    return;
  }
  s.rank = 0;
  heap_.push_back({s.rank, i, s.priority});
  sift_up(heap_.size() - 1);
}

void entry_ranking::touch(id i) {
  if (!contains(i))
    return;
  auto& s = slots_[i];
  if (s.count < UINT32_MAX)
    ++s.count;
  rank(i, false);
}

void entry_ranking::evicted(id i) {
  if (!contains(i))
    return;
  auto& s = slots_[i];
  if (policy_ == ram_policy::gdsf) {
    clock_ = std::max(clock_, s.rank);
    if (s.key != 0 && ghost_cap_ > 0) {
      auto [g, fresh] = ghosts_.try_emplace(s.key, s.count);
      if (fresh) {
        ghost_order_.push_back(s.key);
        if (ghost_order_.size() > ghost_cap_) {
          ghosts_.erase(ghost_order_.front());
          ghost_order_.pop_front();
        }
      } else {
        g->second = std::max(g->second, s.count);
      }
    }
  }
  erase(i);
}

void entry_ranking::erase(id i) {
  if (!contains(i))
    return;
  unlink(i);
  slots_[i].ranked = false;
}

void entry_ranking::set_priority(id i, uint8_t priority) {
  if (!contains(i))
    return;
  unlink(i);
  auto& s = slots_[i];
  s.priority = std::min(priority, max_priority);
  if (policy_ == ram_policy::gdsf) {
    heap_.push_back({s.rank, i, s.priority});
    sift_up(heap_.size() - 1);
    return;
  }
  // Before the first item of its new priority touched after it.
  auto at = none;
  for (auto j = lists_.back(s.priority); j != none && slots_[j].stamp > s.stamp;
       j = slots_[j].prev)
    at = j;
  lists_.insert(links(), i, s.priority, at);
}

} // namespace kvtier::tiers
