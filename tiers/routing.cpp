#include "tiers/routing.hpp"

#include <algorithm>

namespace kvtier::tiers {

const char* to_string(route_tier t) {
  switch (t) {
    case route_tier::none: return "none";
    case route_tier::ram: return "ram";
    case route_tier::ssd: return "ssd";
    case route_tier::peer_ram: return "peer-ram";
    case route_tier::peer_ssd: return "peer-ssd";
  }
  return "?";
}

namespace {

/// A node's longest copy and where it lives (RAM on a tie: cheaper).
struct copy {
  uint64_t tokens = 0;
  bool on_ssd = false;
};

copy longest_copy(const route_node& n) {
  if (n.ssd_tokens > n.ram_tokens)
    return {n.ssd_tokens, true};
  return {n.ram_tokens, false};
}

double tier_cost(const route_costs& c, route_tier t) {
  switch (t) {
    case route_tier::ram: return c.ram;
    case route_tier::ssd: return c.ssd;
    case route_tier::peer_ram: return c.peer;
    case route_tier::peer_ssd: return c.peer_ssd;
    case route_tier::none: break;
  }
  return 0;
}

} // namespace

route_ranking evaluate(const route_costs& c, std::span<const route_node> nodes,
                       std::span<const double> recent, uint64_t prompt_tokens) {
  route_ranking out;
  out.nodes.resize(nodes.size());
  // The two longest copies over all nodes: a node's best peer copy is the
  // longest one held by another node.
  int64_t first = -1;
  int64_t second = -1;
  auto longer = [&](int64_t a, int64_t b) {
    if (b < 0)
      return true;
    auto x = longest_copy(nodes[static_cast<size_t>(a)]);
    auto y = longest_copy(nodes[static_cast<size_t>(b)]);
    if (x.tokens != y.tokens)
      return x.tokens > y.tokens;
    return !x.on_ssd && y.on_ssd;
  };
  for (int64_t i = 0; i < static_cast<int64_t>(nodes.size()); ++i) {
    if (longer(i, first)) {
      second = first;
      first = i;
    } else if (longer(i, second)) {
      second = i;
    }
  }
  auto p = static_cast<double>(prompt_tokens);
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto& n = nodes[i];
    auto& e = out.nodes[i];
    // The node's own lookup: RAM, then SSD if strictly longer, then a peer
    // if strictly longer again.
    if (n.ram_tokens > 0) {
      e.tier = route_tier::ram;
      e.usable = n.ram_tokens;
    }
    if (n.ssd_tokens > e.usable) {
      e.tier = route_tier::ssd;
      e.usable = n.ssd_tokens;
    }
    auto other = static_cast<int64_t>(i) == first ? second : first;
    if (other >= 0) {
      auto o = longest_copy(nodes[static_cast<size_t>(other)]);
      if (o.tokens > e.usable) {
        e.tier = o.on_ssd ? route_tier::peer_ssd : route_tier::peer_ram;
        e.usable = o.tokens;
        e.from = other;
      }
    }
    e.usable = std::min(e.usable, prompt_tokens);
    e.recent = i < recent.size() ? recent[i] : 0.0;
    auto u = static_cast<double>(e.usable);
    e.cost = c.prefill * (p - u) + tier_cost(c, e.tier) * u
             + c.load_weight * e.recent + (n.full ? c.full_penalty * p : 0.0);
  }
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    if (out.best < 0) {
      out.best = static_cast<int64_t>(i);
      continue;
    }
    auto& b = out.nodes[static_cast<size_t>(out.best)];
    auto& e = out.nodes[i];
    if (e.cost < b.cost || (e.cost == b.cost && e.recent < b.recent))
      out.best = static_cast<int64_t>(i);
  }
  return out;
}

route_load::route_load(uint64_t window)
  : keep_(1.0 - 1.0 / static_cast<double>(std::max<uint64_t>(window, 1))) {}

double route_load::recent(const std::string& node) const {
  auto i = recent_.find(node);
  return i == recent_.end() ? 0.0 : i->second;
}

void route_load::record(const std::string& node, uint64_t tokens) {
  for (auto& [_, v] : recent_)
    v *= keep_;
  recent_[node] += static_cast<double>(tokens);
}

void route_load::forget(const std::string& node) {
  recent_.erase(node);
}

} // namespace kvtier::tiers
