// The facade's route (tiers/routing.hpp, docs/cluster.md "Routing"): asks,
// in parallel and each within the tier deadline, RAM (PeekPrefix), the SSD
// (FindPrefix, index only), the peer tier (PeerHoldings: every up peer's
// longest prefixes from the directory, and its last heartbeat's load) and
// admission (this node's load). A part that fails or is late holds
// nothing (without an answer of the peer tier only this node is weighed).
// The cost model ranks the nodes; the router's recent load records the
// choice. Reads only: no tier changes recency or counts a hit.
#include "actors/cache_service_ops.hpp"
#include "actors/tier_counters.hpp"

namespace kvtier::actors::ops {

namespace {

using route_promise =
  caf::typed_response_promise<sealed<msg::RouteRequestReply>>;

struct route_call {
  route_promise rp;
  uint64_t prompt_tokens = 0;
  /// The request's projected KV bytes (prompt + max new tokens).
  uint64_t projected = 0;
  uint64_t ram = 0;
  uint64_t ssd = 0;
  std::optional<sealed<msg::ReadReportReply>> admission;
  std::optional<sealed<msg::PeerHoldingsReply>> peers;
  size_t left = 0;
};

using route_ptr = std::shared_ptr<route_call>;

/// A node cannot start the request now: admits wait in its queue, or its
/// free budget is below the request's bytes.
bool lacks_headroom(uint64_t held, uint64_t budget, uint64_t waiting,
                    uint64_t projected) {
  if (waiting > 0)
    return true;
  return budget > 0 && (held >= budget || budget - held < projected);
}

msg::Tier tag_of(tiers::route_tier t) {
  switch (t) {
    case tiers::route_tier::ram: return msg::Tier::RAM;
    case tiers::route_tier::ssd: return msg::Tier::SSD;
    case tiers::route_tier::peer_ram:
    case tiers::route_tier::peer_ssd: return msg::Tier::PEER;
    case tiers::route_tier::none: break;
  }
  return msg::Tier::NONE;
}

void answer(self_ptr self, const route_ptr& c) {
  auto& st = self->state;
  std::vector<tiers::route_node> nodes;
  tiers::route_node me;
  me.node_id = st.node_id;
  me.address = st.address;
  me.ram_tokens = c->ram;
  me.ssd_tokens = c->ssd;
  if (c->admission) {
    auto a = read_part<tiers::report::admission>(c->admission->root());
    me.full =
      lacks_headroom(a.held_bytes, a.budget_bytes, a.waiting, c->projected);
  }
  nodes.push_back(std::move(me));
  if (c->peers)
    for (auto p : c->peers->root().getPeers()) {
      tiers::route_node n;
      n.node_id = p.getNodeId().cStr();
      n.address = p.getAddress().cStr();
      n.ram_tokens = p.getRamTokens();
      n.ssd_tokens = p.getSsdTokens();
      if (p.hasLoad()) {
        auto l = p.getLoad();
        n.full = lacks_headroom(l.getHeldBytes(), l.getBudgetBytes(),
                                l.getWaiting(), c->projected);
      }
      nodes.push_back(std::move(n));
    }
  std::vector<double> recent;
  recent.reserve(nodes.size());
  for (auto& n : nodes)
    recent.push_back(st.routed.recent(n.node_id));
  auto r = tiers::evaluate(st.route, nodes, recent, c->prompt_tokens);
  auto best = static_cast<size_t>(r.best);
  st.routed.record(nodes[best].node_id, c->prompt_tokens);
  msg::draft<msg::RouteRequestReply> d;
  d.root().setBest(static_cast<uint32_t>(best));
  auto out = d.root().initOptions(static_cast<unsigned>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto o = out[static_cast<unsigned>(i)];
    auto& e = r.nodes[i];
    o.setNodeId(nodes[i].node_id);
    o.setAddress(nodes[i].address);
    o.setSource(tag_of(e.tier));
    o.setFromSsd(e.tier == tiers::route_tier::ssd
                 || e.tier == tiers::route_tier::peer_ssd);
    o.setUsableTokens(e.usable);
    o.setCost(e.cost);
    o.setRecentTokens(e.recent);
    o.setFull(nodes[i].full);
  }
  c->rp.deliver(std::move(d).seal());
}

void part_done(self_ptr self, const route_ptr& c) {
  if (--c->left == 0)
    answer(self, c);
}

/// A request of `Root` with the route request's namespace and prompt.
template <class Root>
sealed<Root> with_prompt(msg::RouteRequest::Reader in) {
  msg::draft<Root> d;
  d.root().setNs(in.getNs());
  d.root().setPrompt(in.getPrompt());
  return std::move(d).seal();
}

/// One part of the route: `m` to `to` under the tier deadline; `f` takes
/// the reply; a failure or a late answer leaves the part empty.
template <class Reply, class Dest, class Root, class F>
void ask(self_ptr self, const route_ptr& c, const Dest& to, sealed<Root> m,
         F f) {
  self->request(to, tier_timeout(self), std::move(m))
    .then(
      [self, c, f](const sealed<Reply>& r) {
        f(r);
        part_done(self, c);
      },
      [self, c](const caf::error&) { part_done(self, c); });
}

} // namespace

caf::result<sealed<msg::RouteRequestReply>>
route(self_ptr self, const sealed<msg::RouteRequest>& m) {
  auto& st = self->state;
  if (st.closed || st.closing)
    return closed_error();
  auto in = m.root();
  auto n = in.getPrompt().size();
  if (n == 0)
    return make_error(ec::invalid_argument, "route: the prompt is empty");
  auto c = std::make_shared<route_call>();
  c->rp = self->make_response_promise<sealed<msg::RouteRequestReply>>();
  c->prompt_tokens = n;
  c->projected = st.geometry.projected_bytes(n, in.getMaxNewTokens());
  auto& t = st.tiers;
  c->left = 2 + (t.ssd ? 1 : 0) + (t.peer ? 1 : 0);
  ask<msg::PeekPrefixReply>(self, c, t.ram, with_prompt<msg::PeekPrefix>(in),
                            [c](auto r) { c->ram = r.root().getTokens(); });
  if (t.ssd)
    ask<msg::FindPrefixReply>(
      self, c, t.ssd, with_prompt<msg::FindPrefix>(in),
      [c](auto r) { c->ssd = r.root().getUsableTokens(); });
  if (t.peer)
    ask<msg::PeerHoldingsReply>(self, c, t.peer,
                                with_prompt<msg::PeerHoldings>(in),
                                [c](auto r) { c->peers = std::move(r); });
  ask<msg::ReadReportReply>(self, c, t.admission,
                            msg::draft<msg::ReadReport>{}.seal(),
                            [c](auto r) { c->admission = std::move(r); });
  return c->rp;
}

} // namespace kvtier::actors::ops
