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

void entry_ranking::rank(id i) {
  auto& s = slots_[i];
  s.stamp = ++stamps_;
  s.rank = policy_ == ram_policy::gdsf ? clock_ + value(s) : 0.0;
  order_.insert(key_of(i));
}

void entry_ranking::insert(id i, uint64_t tokens, uint8_t priority,
                           uint64_t key, uint32_t inherited) {
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
  rank(i);
}

void entry_ranking::touch(id i) {
  if (!contains(i))
    return;
  order_.erase(key_of(i));
  auto& s = slots_[i];
  if (s.count < UINT32_MAX)
    ++s.count;
  rank(i);
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
  order_.erase(key_of(i));
  slots_[i].ranked = false;
}

void entry_ranking::set_priority(id i, uint8_t priority) {
  if (!contains(i))
    return;
  order_.erase(key_of(i));
  slots_[i].priority = std::min(priority, max_priority);
  order_.insert(key_of(i));
}

} // namespace kvtier::tiers
