#include "actors/peer_tier_actor.hpp"
#include "actors/peer_tier_ops.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/peer_directory.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

namespace kvtier::actors {

using namespace peer_ops;

namespace {

/// The best candidate for `prompt` among holders that are up, longer than
/// `better_than`; holders are those up, cheapest first.
std::optional<tiers::peer_directory::candidate>
candidate_for(self_ptr self, std::string_view ns,
              std::span<const tiers::token> prompt, uint64_t better_than) {
  if (self->state.closed)
    return std::nullopt;
  auto c = self->state.directory.longest_usable(ns, prompt);
  if (!c || c->length <= better_than)
    return std::nullopt;
  auto& hs = c->holders;
  hs.erase(std::remove_if(hs.begin(), hs.end(),
                          [&](const tiers::peer_holding& h) {
                            return self->state.peers.count(h.node) == 0;
                          }),
           hs.end());
  if (hs.empty())
    return std::nullopt;
  return c;
}

/// A prompt from a facade request, checked.
caf::error check_prompt(self_ptr self, capnp::Text::Reader ns, size_t n) {
  if (ns.size() > max_ns_bytes || n > self->state.cfg.max_prompt_tokens)
    return make_error(ec::invalid_argument,
                      "peer tier: a namespace of " + std::to_string(ns.size())
                        + " bytes or a prompt of " + std::to_string(n)
                        + " tokens is over its limit");
  return {};
}

/// Every up peer with its longest usable prefixes of the prompt and its
/// last reported load (a peer the directory knows nothing of: 0 tokens).
sealed<msg::PeerHoldingsReply> holdings(self_ptr self,
                                        msg::PeerHoldings::Reader in) {
  auto& st = self->state;
  msg::draft<msg::PeerHoldingsReply> d;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(d).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  std::map<std::string, tiers::peer_directory::node_prefixes> held;
  for (auto& p : st.directory.per_node(in.getNs().cStr(), prompt.span()))
    held.emplace(p.node, p);
  auto out = d.root().initPeers(static_cast<unsigned>(st.peers.size()));
  unsigned k = 0;
  for (auto& [node, _] : st.peers) {
    auto o = out[k++];
    o.setNodeId(node);
    if (auto h = held.find(node); h != held.end()) {
      o.setRamTokens(h->second.ram_tokens);
      o.setSsdTokens(h->second.ssd_tokens);
    }
    if (auto l = st.loads.find(node); l != st.loads.end()) {
      o.setAddress(l->second.first);
      if (l->second.second)
        o.setLoad(l->second.second->root());
    }
  }
  return std::move(d).seal();
}

sealed<msg::FindPrefixReply> find_prefix(self_ptr self,
                                         msg::FindPrefix::Reader in) {
  msg::draft<msg::FindPrefixReply> d;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(d).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  auto c =
    candidate_for(self, in.getNs().cStr(), prompt.span(), in.getBetterThan());
  if (!c)
    return std::move(d).seal();
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return std::move(d).seal();
  }
  ++self->state.count.finds;
  d.root().setUsableTokens(c->length);
  auto key = d.root().initKey();
  key.setNs(in.getNs());
  tiers::write_tokens(key.initTokens(c->length + 1),
                      prompt.span().first(c->length + 1));
  key.getKind().setPrefix();
  return std::move(d).seal();
}

sealed<msg::RestoreEntryReply> failed_reply(caf::error err) {
  msg::draft<msg::RestoreEntryReply> d;
  write_error(d.root().initFailed(), err);
  return std::move(d).seal();
}

caf::result<sealed<msg::RestoreEntryReply>>
restore(self_ptr self, msg::RestoreEntry::Reader in) {
  auto key = in.getKey();
  auto usable = in.getUsableTokens();
  auto n = key.getTokens().size();
  if (!key.getKind().isPrefix() || usable == 0 || usable >= n
      || check_prompt(self, key.getNs(), n))
    return failed_reply(make_error(ec::invalid_argument,
                                   "peer tier: not a key its FindPrefix "
                                   "answered"));
  tiers::tokens_of prompt{key.getTokens()};
  auto c = candidate_for(self, key.getNs().cStr(), prompt.span(), usable - 1);
  if (!c || c->length != usable) {
    ++self->state.count.failed_none;
    return failed_reply(
      make_error(ec::not_found, "no peer holds the prefix any more"));
  }
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return failed_reply(
      make_error(ec::queue_full, "over cluster.fetch-max-bytes"));
  }
  auto rp = self->make_response_promise<sealed<msg::RestoreEntryReply>>();
  waiter w;
  w.restore = rp;
  start_fetch(self, key.getNs().cStr(),
              tiers::token_seq(prompt.span().begin(), prompt.span().end()),
              usable, c->holders, std::move(w));
  return rp;
}

caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(self_ptr self, msg::PrefetchPrefix::Reader in) {
  msg::draft<msg::PrefetchPrefixReply> none;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(none).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  auto c =
    candidate_for(self, in.getNs().cStr(), prompt.span(), in.getBetterThan());
  if (!c)
    return std::move(none).seal();
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return std::move(none).seal();
  }
  auto rp = self->make_response_promise<sealed<msg::PrefetchPrefixReply>>();
  waiter w;
  w.prefetch = rp;
  auto p = prompt.span().first(c->length + 1);
  start_fetch(self, in.getNs().cStr(), tiers::token_seq(p.begin(), p.end()),
              c->length, c->holders, std::move(w));
  return rp;
}

/// A peer went down: its entries leave, its fetches move on.
void peer_gone(self_ptr self, const std::string& node) {
  auto& st = self->state;
  st.peers.erase(node);
  st.loads.erase(node);
  st.directory.drop(node);
  std::vector<uint64_t> hit;
  for (auto& [id, f] : st.fetches)
    if (f.holder == node)
      hit.push_back(id);
  for (auto id : hit) {
    auto& f = st.fetches.at(id);
    f.has_transfer = false; // nobody to tell
    attempt_failed(self, id,
                   make_error(ec::peer_unreachable,
                              "peer " + node + " went down mid-fetch"));
  }
}

void apply(self_ptr self, const directory_batch& b) {
  auto& dir = self->state.directory;
  if (b.node.empty())
    return;
  if (b.replace) {
    dir.drop(b.node);
    auto& c = self->state.count;
    ++c.feed_snapshots;
    c.feed_gap_resyncs += b.why == directory_batch::after_gap ? 1 : 0;
    c.feed_restart_resyncs += b.why == directory_batch::after_restart ? 1 : 0;
  }
  for (auto& it : b.items) {
    if (it.tier > 1 || it.key.empty() || it.ns.size() > max_ns_bytes)
      continue;
    auto t = static_cast<tiers::peer_tier>(it.tier);
    if (it.present)
      dir.put(b.node, it.ns, it.key, t, it.bytes, it.trimmable);
    else
      dir.remove(b.node, it.ns, it.key, t);
  }
}

/// The peer part: the fetching side's counters (the same names) and, from
/// `serve`'s reply when it answered, the serving side's.
sealed<msg::ReadReportReply> report(self_ptr self,
                                    const sealed<msg::ReadReportReply>* serve) {
  auto& st = self->state;
  auto part = tiers::report::peer::from(st.count);
  part.peers_up = st.peers.size();
  part.entries = st.directory.entries();
  part.in_flight_bytes = st.in_flight;
  if (serve)
    read_part(serve->root(), part);
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(part).write(d.root());
  return std::move(d).seal();
}

/// Whether the current message came from another process: the peer tier
/// serves its own node only (peers learn its handle as the sender of its
/// requests, and must not steer its directory, its peers or its fetches).
/// Counted; requests get `not_permitted`.
bool from_elsewhere(self_ptr self) {
  if (!from_other_process(self))
    return false;
  ++self->state.count.refused_remote;
  return true;
}

caf::error not_local() {
  return make_error(ec::not_permitted,
                    "peer tier: requests from another process are refused");
}

/// The close: every fetch in flight fails `closed` (its waiters answered),
/// leases end, and from now on no candidate is offered.
sealed<msg::CloseServiceReply> close(self_ptr self) {
  self->state.closed = true;
  std::vector<uint64_t> ids;
  for (auto& [id, f] : self->state.fetches)
    ids.push_back(id);
  for (auto id : ids)
    finish(self, id, std::nullopt,
           make_error(ec::closed, "the peer tier is closed"));
  self->state.leases.clear();
  return msg::draft<msg::CloseServiceReply>{}.seal();
}

peer_tier_actor::behavior_type peer_tier(self_ptr self, peer_tier_config cfg,
                                         tiers::model_geometry geometry,
                                         store_actor ssd, caf::actor serve) {
  auto& st = self->state;
  st.cfg = cfg;
  // Peers learn its handle (it sends them fetches).
  guard_signals(
    self, [self](const std::string&) { ++self->state.count.refused_remote; });
  st.geometry = std::move(geometry);
  st.ssd = std::move(ssd);
  st.serve = std::move(serve);
  self->set_down_handler([self](const caf::down_msg& dm) {
    for (auto& [node, h] : self->state.peers)
      if (h.address() == dm.source) {
        auto gone = node;
        return peer_gone(self, gone);
      }
  });
  return {
    [self](const sealed<msg::FindPrefix>& m)
      -> caf::result<sealed<msg::FindPrefixReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::FindPrefixReply>>(
        [&] { return find_prefix(self, m.root()); });
    },
    [self](const sealed<msg::RestoreEntry>& m)
      -> caf::result<sealed<msg::RestoreEntryReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::RestoreEntryReply>>(
        [&] { return restore(self, m.root()); });
    },
    [self](const sealed<msg::PrefetchPrefix>& m)
      -> caf::result<sealed<msg::PrefetchPrefixReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::PrefetchPrefixReply>>(
        [&] { return prefetch(self, m.root()); });
    },
    [self](const sealed<msg::ReleasePrefetch>& m)
      -> caf::result<sealed<msg::ReleasePrefetchReply>> {
      if (from_elsewhere(self))
        return not_local();
      msg::draft<msg::ReleasePrefetchReply> d;
      d.root().setReleased(self->state.leases.erase(m.root().getLeaseId()) > 0);
      return std::move(d).seal();
    },
    [self](const sealed<msg::FlushState>&)
      -> caf::result<sealed<msg::FlushStateReply>> {
      if (from_elsewhere(self))
        return not_local();
      // Copies of other nodes' state: none of its own to make durable.
      return nothing_to_flush();
    },
    [self](const sealed<msg::CloseService>&)
      -> caf::result<sealed<msg::CloseServiceReply>> {
      if (from_elsewhere(self))
        return not_local();
      return close(self);
    },
    [self](const sealed<msg::ReadStats>&)
      -> caf::result<sealed<msg::ReadStatsReply>> {
      if (from_elsewhere(self))
        return not_local();
      return msg::draft<msg::ReadStatsReply>{}.seal(); // writes nothing
    },
    [self](const sealed<msg::ReadReport>&)
      -> caf::result<sealed<msg::ReadReportReply>> {
      if (from_elsewhere(self))
        return not_local();
      if (!self->state.serve)
        return report(self, nullptr);
      auto rp = self->make_response_promise<sealed<msg::ReadReportReply>>();
      self
        ->request(self->state.serve, std::chrono::milliseconds{1000},
                  msg::draft<msg::ReadReport>{}.seal())
        .then(
          [self, rp](const sealed<msg::ReadReportReply>& r) mutable {
            rp.deliver(report(self, &r));
          },
          [self, rp](const caf::error&) mutable {
            rp.deliver(report(self, nullptr));
          });
      return rp;
    },
    [self](lane_done_atom, uint64_t id, uint64_t attempt) {
      if (from_elsewhere(self))
        return;
      auto* f = current(self, id, attempt);
      if (!f || !f->slot)
        return;
      auto slot = std::move(f->slot);
      if (!slot->result)
        return attempt_failed(self, id, std::move(slot->result.error()));
      verified(
        self, id,
        sealed<msg::RestoreEntryReply>::from_flat(std::move(*slot->result)));
    },
    [self](fetch_deadline_atom, uint64_t id) {
      if (from_elsewhere(self))
        return;
      auto i = self->state.fetches.find(id);
      if (i == self->state.fetches.end())
        return;
      ++self->state.count.failed_timeout;
      finish(self, id, std::nullopt,
             make_error(ec::timeout, "the peer fetch took longer than "
                                     "cluster.fetch-deadline-ms"));
    },
    [self](const directory_batch& b) {
      if (!from_elsewhere(self))
        apply(self, b);
    },
    [self](peer_up_atom, const std::string& node, const caf::actor& h) {
      if (from_elsewhere(self) || !h || node.empty())
        return;
      self->monitor(h);
      self->state.peers[node] = h;
    },
    [self](peer_down_atom, const std::string& node) {
      if (!from_elsewhere(self))
        peer_gone(self, node);
    },
    [self](peer_load_atom, const std::string& node, const std::string& address,
           const sealed<msg::NodeLoad>& load) {
      if (from_elsewhere(self) || self->state.peers.count(node) == 0)
        return;
      self->state.loads[node] = {address, load};
    },
    [self](peer_load_atom, const std::string& node,
           const std::string& address) {
      // Right after its peer_up: where it is, its load still unknown.
      if (from_elsewhere(self) || self->state.peers.count(node) == 0)
        return;
      self->state.loads[node].first = address;
    },
    [self](const sealed<msg::PeerHoldings>& m)
      -> caf::result<sealed<msg::PeerHoldingsReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::PeerHoldingsReply>>(
        [&] { return holdings(self, m.root()); });
    },
  };
}

} // namespace

peer_tier_actor spawn_peer_tier(caf::actor_system& sys, peer_tier_config cfg,
                                tiers::model_geometry geometry, store_actor ssd,
                                caf::actor serve) {
  return sys.spawn(peer_tier, cfg, std::move(geometry), std::move(ssd),
                   std::move(serve));
}

} // namespace kvtier::actors
