// The eviction ranking of tiers/entry_ranking.hpp as its header states it:
// a plain ordered set of (priority, rank, last touch, id) and a vector of
// items by id (the structure the ranking had before issue #31), the reference
// the compact structures are checked against item for item
// (tests/tiers/entry_ranking_test.cpp) and timed against
// (tests/bench/bench_ranking.cpp). Same operations, same arithmetic (so
// ranks compare bit for bit); O(log n) per operation. Single-threaded.
#pragma once

#include "tiers/entry_ranking.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kvtier::tests {

using tiers::default_priority;
using tiers::entry_ranking;
using tiers::max_priority;
using tiers::ram_policy;

/// The ranking as a plain ordered set of (priority, rank, touch, id), as
/// the header states it: the reference the compact structures must match
/// item for item.
class reference_ranking {
public:
  using id = entry_ranking::id;
  reference_ranking(ram_policy p, size_t ghosts)
    : policy_(p)
    , cap_(ghosts) {}
  void insert(id i, uint64_t tokens, uint8_t priority, uint64_t key) {
    if (i >= items_.size())
      items_.resize(size_t{i} + 1);
    erase(i);
    item s;
    s.in = true;
    s.priority = std::min(priority, max_priority);
    s.tokens = tokens;
    s.key = key;
    auto g = key != 0 ? ghosts_.find(key) : ghosts_.end();
    s.count = (g != ghosts_.end() ? g->second : 0) + 1;
    items_[i] = s;
    rank(i);
  }
  void touch(id i) {
    if (!has(i))
      return;
    order_.erase(key_of(i));
    ++items_[i].count;
    rank(i);
  }
  void evicted(id i) {
    if (!has(i))
      return;
    auto& s = items_[i];
    if (policy_ == ram_policy::gdsf) {
      clock_ = std::max(clock_, s.rank);
      if (s.key != 0 && cap_ > 0) {
        auto [g, fresh] = ghosts_.try_emplace(s.key, s.count);
        if (fresh) {
          fifo_.push_back(s.key);
          if (fifo_.size() > cap_) {
            ghosts_.erase(fifo_.front());
            fifo_.pop_front();
          }
        } else {
          g->second = std::max(g->second, s.count);
        }
      }
    }
    erase(i);
  }
  void erase(id i) {
    if (!has(i))
      return;
    order_.erase(key_of(i));
    items_[i].in = false;
  }
  void set_priority(id i, uint8_t p) {
    if (!has(i))
      return;
    order_.erase(key_of(i));
    items_[i].priority = std::min(p, max_priority);
    order_.insert(key_of(i));
  }
  uint32_t count(id i) const {
    return has(i) ? items_[i].count : 0;
  }
  size_t size() const {
    return order_.size();
  }
  template <class Ok>
  id first(Ok&& ok) const {
    for (auto& k : order_)
      if (ok(std::get<3>(k)))
        return std::get<3>(k);
    return entry_ranking::none;
  }

private:
  struct item {
    bool in = false;
    uint8_t priority = default_priority;
    uint32_t count = 0;
    double rank = 0;
    uint64_t stamp = 0;
    uint64_t tokens = 0;
    uint64_t key = 0;
  };
  using key_t = std::tuple<uint8_t, double, uint64_t, id>;
  bool has(id i) const {
    return i < items_.size() && items_[i].in;
  }
  key_t key_of(id i) const {
    auto& s = items_[i];
    return {s.priority, s.rank, s.stamp, i};
  }
  void rank(id i) {
    auto& s = items_[i];
    s.stamp = ++stamps_;
    s.rank = policy_ == ram_policy::gdsf
               ? clock_
                   + std::min(s.count, entry_ranking::frequency_cap)
                       * (1.0 + static_cast<double>(s.tokens) / 65536.0)
               : 0.0;
    order_.insert(key_of(i));
  }
  ram_policy policy_;
  size_t cap_;
  std::vector<item> items_;
  std::set<key_t> order_;
  double clock_ = 0;
  uint64_t stamps_ = 0;
  std::unordered_map<uint64_t, uint32_t> ghosts_;
  std::deque<uint64_t> fifo_;
};

} // namespace kvtier::tests
