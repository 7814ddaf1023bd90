#include "tiers/peer_directory.hpp"

#include <algorithm>
#include <tuple>

namespace kvtier::tiers {

const char* to_string(peer_tier t) {
  return t == peer_tier::ram ? "ram" : "ssd";
}

namespace {

bool cheaper(const peer_holding& a, const peer_holding& b) {
  return std::tie(a.tier, a.node) < std::tie(b.tier, b.node);
}

/// The floor the index keeps for holders of a key of `length` tokens.
uint64_t floor_of(const std::vector<peer_holding>& holders, uint64_t length) {
  bool all = std::all_of(holders.begin(), holders.end(),
                         [](const peer_holding& h) { return h.trimmable; });
  return all ? 0 : length;
}

} // namespace

bool peer_directory::put(const std::string& node, std::string_view ns,
                         std::span<const token> key, peer_tier tier,
                         uint64_t bytes, bool trimmable) {
  if (node.empty() || key.empty())
    return false;
  std::vector<peer_holding> holders;
  if (auto ref = index_.find(ns, key))
    holders = index_.handle(ref);
  auto same = [&](const peer_holding& h) {
    return h.node == node && h.tier == tier;
  };
  auto i = std::find_if(holders.begin(), holders.end(), same);
  if (i != holders.end()) {
    i->bytes = bytes;
    i->trimmable = trimmable;
  } else {
    holders.push_back(peer_holding{node, tier, bytes, trimmable});
    std::sort(holders.begin(), holders.end(), cheaper);
    ++per_node_[node];
  }
  auto floor = floor_of(holders, key.size());
  index_.insert(ns, key, std::move(holders), floor);
  namespaces_.emplace(ns);
  by_node_[node].of(tier).insert(ns, key, 0, trimmable ? 0 : key.size());
  return true;
}

bool peer_directory::remove(const std::string& node, std::string_view ns,
                            std::span<const token> key, peer_tier tier) {
  auto ref = index_.find(ns, key);
  if (!ref)
    return false;
  auto holders = index_.handle(ref);
  auto i =
    std::find_if(holders.begin(), holders.end(), [&](const peer_holding& h) {
      return h.node == node && h.tier == tier;
    });
  if (i == holders.end())
    return false;
  holders.erase(i);
  if (auto n = per_node_.find(node); n != per_node_.end() && --n->second == 0)
    per_node_.erase(n);
  if (auto b = by_node_.find(node); b != by_node_.end()) {
    b->second.of(tier).erase(ns, key);
    if (b->second.ram.size() == 0 && b->second.ssd.size() == 0)
      by_node_.erase(b);
  }
  if (holders.empty()) {
    index_.erase(ref);
    return true;
  }
  auto floor = floor_of(holders, key.size());
  index_.insert(ns, key, std::move(holders), floor);
  return true;
}

size_t peer_directory::drop(const std::string& node) {
  auto n = per_node_.find(node);
  if (n == per_node_.end())
    return 0;
  size_t gone = 0;
  for (auto& ns : namespaces_) {
    for (auto ref : index_.descendants(ns, {})) {
      auto& holders = index_.handle(ref);
      auto before = holders.size();
      std::erase_if(holders,
                    [&](const peer_holding& h) { return h.node == node; });
      if (holders.size() == before)
        continue;
      gone += before - holders.size();
      if (holders.empty()) {
        index_.erase(ref);
        continue;
      }
      auto key = index_.key(ref);
      auto kept = std::move(holders);
      auto floor = floor_of(kept, key.size());
      index_.insert(ns, key, std::move(kept), floor);
    }
  }
  per_node_.erase(n);
  if (auto b = by_node_.find(node); b != by_node_.end())
    by_node_.erase(b);
  return gone;
}

std::optional<peer_directory::candidate>
peer_directory::longest_usable(std::string_view ns,
                               std::span<const token> prompt) const {
  auto m = index_.longest_usable(ns, prompt);
  if (!m)
    return std::nullopt;
  return candidate{m->length, m->needs_trim, index_.length(m->ref),
                   index_.handle(m->ref)};
}

std::vector<peer_directory::node_prefixes>
peer_directory::per_node(std::string_view ns,
                         std::span<const token> prompt) const {
  std::vector<node_prefixes> out;
  out.reserve(by_node_.size());
  for (auto& [node, ix] : by_node_) {
    node_prefixes p{node, 0, 0};
    if (auto m = ix.ram.longest_usable(ns, prompt))
      p.ram_tokens = m->length;
    if (auto m = ix.ssd.longest_usable(ns, prompt))
      p.ssd_tokens = m->length;
    out.push_back(std::move(p));
  }
  return out;
}

size_t peer_directory::holdings(const std::string& node) const {
  auto n = per_node_.find(node);
  return n == per_node_.end() ? 0 : n->second;
}

} // namespace kvtier::tiers
