#include "tiers/peer_directory.hpp"

#include <algorithm>

namespace kvtier::tiers {

namespace {

/// RAM before SSD, then by node: the order `lookup` returns holders in.
bool better(const peer_directory::holder& a, const peer_directory::holder& b) {
  if (a.tier != b.tier)
    return a.tier < b.tier;
  return a.node < b.node;
}

} // namespace

void peer_directory::refile(entry_ref ref, std::string_view ns,
                            const token_seq& tokens) {
  auto hs = index_.erase(ref);
  if (hs.empty())
    return;
  bool trims = std::any_of(hs.begin(), hs.end(),
                           [](const holder& h) { return h.trimmable; });
  uint64_t floor = trims ? 0 : tokens.size();
  index_.insert(ns, tokens, std::move(hs), floor);
}

void peer_directory::hold(const std::string& node, const feed_holding& h) {
  if (h.tokens.empty())
    return;
  auto ref = index_.find(h.ns, h.tokens);
  if (!ref)
    ref = index_.insert(h.ns, h.tokens, holders_t{}, h.tokens.size()).ref;
  auto& hs = index_.handle(ref);
  holder mine{node, h.tier, h.tokens.size(), h.bytes, h.trimmable};
  auto same = std::find_if(hs.begin(), hs.end(), [&](const holder& x) {
    return x.node == node && x.tier == h.tier;
  });
  if (same != hs.end())
    *same = mine;
  else
    hs.push_back(mine);
  refile(ref, h.ns, h.tokens);
  nodes_[node].held[{h.ns, h.tokens}].insert(h.tier);
}

void peer_directory::release(const std::string& node, feed_tier tier,
                             const std::string& ns, const token_seq& tokens) {
  if (auto ref = index_.find(ns, tokens)) {
    auto& hs = index_.handle(ref);
    std::erase_if(
      hs, [&](const holder& x) { return x.node == node && x.tier == tier; });
    refile(ref, ns, tokens);
  }
  auto& held = nodes_[node].held;
  if (auto i = held.find({ns, tokens}); i != held.end()) {
    i->second.erase(tier);
    if (i->second.empty())
      held.erase(i);
  }
}

peer_directory::applied peer_directory::apply(const feed_event& e) {
  auto& n = nodes_[e.node];
  if (e.seq <= n.seq)
    return applied::duplicate;
  if (e.seq != n.seq + 1)
    return applied::gap;
  n.seq = e.seq;
  auto& h = e.entry;
  switch (e.kind) {
    case feed_kind::put: hold(e.node, h); break;
    case feed_kind::durable: {
      auto on_ssd = h;
      on_ssd.tier = feed_tier::ssd;
      hold(e.node, on_ssd);
      break;
    }
    case feed_kind::demote: {
      release(e.node, feed_tier::ram, h.ns, h.tokens);
      auto on_ssd = h;
      on_ssd.tier = feed_tier::ssd;
      hold(e.node, on_ssd);
      break;
    }
    case feed_kind::evict:
    case feed_kind::superseded:
    case feed_kind::removed: release(e.node, h.tier, h.ns, h.tokens); break;
  }
  return applied::ok;
}

void peer_directory::drop(const std::string& node) {
  auto i = nodes_.find(node);
  if (i == nodes_.end())
    return;
  auto held = std::move(i->second.held);
  nodes_.erase(i);
  for (auto& [key, tiers] : held)
    for (auto t : tiers)
      release(node, t, key.first, key.second);
  nodes_.erase(node); // release() made an empty entry again
}

void peer_directory::apply(const feed_snapshot& s) {
  drop(s.node);
  for (auto& h : s.entries)
    hold(s.node, h);
  nodes_[s.node].seq = s.seq;
}

std::optional<peer_directory::match>
peer_directory::lookup(std::string_view ns,
                       std::span<const token> prompt) const {
  auto m = index_.longest_usable(ns, prompt);
  if (!m)
    return std::nullopt;
  match out;
  out.length = m->length;
  out.key = index_.key(m->ref);
  for (auto& h : index_.handle(m->ref))
    if (!m->needs_trim || h.trimmable)
      out.holders.push_back(h);
  std::sort(out.holders.begin(), out.holders.end(), better);
  return out;
}

uint64_t peer_directory::seq(const std::string& node) const {
  auto i = nodes_.find(node);
  return i == nodes_.end() ? 0 : i->second.seq;
}

size_t peer_directory::holdings() const noexcept {
  size_t n = 0;
  for (auto& [name, st] : nodes_)
    for (auto& [key, tiers] : st.held)
      n += tiers.size();
  return n;
}

} // namespace kvtier::tiers
