#include "actors/node_actor.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "messages/log.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_cast.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <kj/exception.h>

#include <algorithm>
#include <string_view>

namespace kvtier::actors {

using namespace tiers;

namespace {

void write_identity(msg::NodeIdentity::Builder b, const identity& id) {
  b.setNodeId(id.node_id);
  b.setFingerprint(id.fingerprint);
  b.setProtocol(id.protocol);
  b.setAddress(id.address);
}

/// Reads a peer's text field; over `limit` bytes it is cut to `limit + 1`
/// (so a judge still sees it is too long) without copying the rest.
std::string text_of(capnp::Text::Reader t, size_t limit) {
  return std::string{t.begin(), std::min<size_t>(t.size(), limit + 1)};
}

/// One line of the log (messages/log.hpp) naming this node: peers coming
/// and going at info, refusals and unreachable peers at warn.
void log(node_self self, const std::string& text,
         log::level l = log::level::warn) {
  if (log::enabled(l))
    log::write(l,
               "kvtier node " + self->state.view.self().node_id + ": " + text);
}

void count_bad(node_self self, const std::string& what) {
  self->state.view.count_bad();
  log(self, "bad input from a peer: " + what);
}

sealed<msg::ClusterHello> hello_of(const identity& self) {
  msg::draft<msg::ClusterHello> d;
  write_identity(d.root().initFrom(), self);
  return std::move(d).seal();
}

sealed<msg::ClusterLeave> leave_of(const identity& self) {
  msg::draft<msg::ClusterLeave> d;
  d.root().setNodeId(self.node_id);
  return std::move(d).seal();
}

template <class Builder>
void write_up_members(Builder&& list_init, const membership& v,
                      const std::string& except) {
  std::vector<const member*> ups;
  for (auto* m : v.up_members())
    if (m->node_id != except)
      ups.push_back(m);
  if (ups.size() > max_listed_members)
    ups.resize(max_listed_members);
  auto list = list_init(ups.size());
  for (size_t i = 0; i < ups.size(); ++i) {
    list[i].setNodeId(ups[i]->node_id);
    list[i].setAddress(ups[i]->address);
  }
}

/// Learns the addresses of members a peer listed. False when the list is
/// too long (bad input).
bool learn(node_self self, capnp::List<msg::MemberAddress>::Reader members) {
  if (members.size() > max_listed_members)
    return false;
  auto now = self->clock().now();
  auto& v = self->state.view;
  for (auto m : members) {
    auto id = text_of(m.getNodeId(), max_node_id_bytes);
    auto address = text_of(m.getAddress(), max_address_bytes);
    auto hp = parse_address(address);
    if (!hp || !allowed(hp->host, self->state.policy.any_address)
        || id == v.self().node_id || id.size() > max_node_id_bytes)
      continue;
    if (auto known = v.find(id); known && known->state == peer_state::up)
      continue;
    v.add_address(address, now);
  }
  return true;
}

/// The hooks and listeners as they are now: copied, so that they run
/// outside the lock (a hook may replace the hooks).
hook_slot::view current_hooks(node_self self) {
  auto& slot = *self->state.hooks;
  std::lock_guard<std::mutex> guard{slot.mtx};
  return {slot.hooks, slot.listeners};
}

/// Sends `xs` to the dynamically typed `to` as this actor (a typed actor's
/// own `send` takes typed receivers only; the listeners check who sends).
template <class... Ts>
void tell(node_self self, const caf::actor& to, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), to, std::forward<Ts>(xs)...);
}

void fire_up(node_self self, const std::string& id, const std::string& address,
             const node_actor& h) {
  auto now = current_hooks(self);
  // The listeners' interfaces take the peer's node actor untyped.
  auto untyped = caf::actor_cast<caf::actor>(h);
  for (auto& l : now.listeners) {
    tell(self, l, peer_up_atom::value, id, untyped);
    // Its address now (routes name it), its load with its heartbeats.
    tell(self, l, peer_load_atom::value, id, address);
  }
  if (now.hooks.up)
    now.hooks.up(id, h);
}

/// A NodeLoad of the four figures: admission's part of a report, or a
/// peer's heartbeat load.
sealed<msg::NodeLoad> load_of(uint64_t held_bytes, uint64_t budget_bytes,
                              uint64_t holders, uint64_t waiting) {
  msg::draft<msg::NodeLoad> d;
  d.root().setHeldBytes(held_bytes);
  d.root().setBudgetBytes(budget_bytes);
  d.root().setHolders(holders);
  d.root().setWaiting(waiting);
  return std::move(d).seal();
}

/// A peer's heartbeat carried its load: the listeners (the peer tier) keep
/// it for routing.
void fire_load(node_self self, const std::string& id,
               const std::string& address, msg::NodeLoad::Reader load) {
  auto m = load_of(load.getHeldBytes(), load.getBudgetBytes(),
                   load.getHolders(), load.getWaiting());
  for (auto& l : current_hooks(self).listeners)
    tell(self, l, peer_load_atom::value, id, address, m);
}

/// Asks the admission actor for this node's load; the next heartbeat
/// carries the answer (an old one, or none, when it is slow).
void refresh_load(node_self self) {
  auto& st = self->state;
  if (!st.delegates.load)
    return;
  self
    ->request(st.delegates.load, caf::duration{st.view.times().heartbeat},
              msg::draft<msg::ReadReport>{}.seal())
    .then(
      [self](const sealed<msg::ReadReportReply>& r) {
        auto a = read_part<tiers::report::admission>(r.root());
        self->state.load =
          load_of(a.held_bytes, a.budget_bytes, a.holders, a.waiting);
      },
      [](const caf::error&) {});
}

void fire_down(node_self self, const std::string& id) {
  auto now = current_hooks(self);
  for (auto& l : now.listeners)
    tell(self, l, peer_down_atom::value, id);
  if (now.hooks.down)
    now.hooks.down(id);
}

/// Records `them` as up behind `h` (monitored); fires "up" on a change.
void peer_up(node_self self, const identity& them, const node_actor& h) {
  auto& st = self->state;
  bool changed = st.view.mark_up(them, self->clock().now());
  auto& slot = st.handles[them.node_id];
  if (slot != h) {
    if (slot)
      self->demonitor(slot.address());
    slot = h;
    self->monitor(h);
  }
  if (changed) {
    log(self, "peer " + them.node_id + " at " + them.address + " is up",
        log::level::info);
    fire_up(self, them.node_id, them.address, h);
  }
}

/// `id` is down (already marked in the view when `marked`).
void peer_down(node_self self, const std::string& id, const char* why) {
  auto& st = self->state;
  if (auto i = st.handles.find(id); i != st.handles.end()) {
    self->demonitor(i->second.address());
    st.handles.erase(i);
  }
  // A peer that said it leaves is news; one gone silent is a warning.
  bool leaving = std::string_view{why}.find("leaves") != std::string_view::npos;
  log(self, "peer " + id + " is down (" + why + ")",
      leaving ? log::level::info : log::level::warn);
  fire_down(self, id);
}

void attempt_failed(node_self self, const std::string& address,
                    const caf::error& err) {
  auto& v = self->state.view;
  // A connection that closed in CAF's handshake: over TLS the certificate
  // check failed on one side (or the peer speaks plaintext); without TLS
  // the peer likely speaks TLS. Counted on every attempt.
  bool handshake = err == caf::sec::disconnect_during_handshake;
  if (handshake)
    ++self->state.refused_handshake;
  std::string why;
  if (handshake)
    why = self->system().has_openssl_manager()
            ? " (TLS handshake failed: its certificate is not signed by "
              "cluster.tls-ca, ours is not signed by its CA, or it speaks "
              "plaintext)"
            : " (it closed the connection in the handshake: does it "
              "speak TLS?)";
  auto line = "cannot reach " + address + ": " + reason(err) + why;
  // One line per streak of failures (its first), not one per attempt, and
  // one more whenever the reason changes (a port not yet open, then a
  // refused certificate: the operator needs the second).
  auto& logged = self->state.failure_logged[address];
  if (v.failures(address) == 0 || logged != line) {
    log(self, line + " (retrying with backoff)");
    logged = std::move(line);
  }
  v.attempt_done(address, false, self->clock().now());
}

void say_hello(node_self self, const std::string& address,
               const node_actor& h) {
  auto timeout = caf::duration{self->state.view.times().down_after};
  self->request(h, timeout, hello_of(self->state.view.self()))
    .then(
      [=](const sealed<msg::ClusterHelloReply>& r) {
        auto& v = self->state.view;
        auto now = self->clock().now();
        try {
          auto root = r.root();
          auto them = read_identity(root.getFrom());
          if (!root.getAccepted()) {
            auto kind = text_of(root.getKind(), 32);
            auto reason = text_of(root.getReason(), 1024);
            // Our own judgement counts the refusal on this side too.
            v.judge(them);
            log(self, "refused by the peer at " + address + ": " + reason);
            // A leaving peer may come back; any other refusal stands.
            v.attempt_done(address, false, now,
                           kind != to_string(refusal::leaving));
            return;
          }
          auto d = v.judge(them);
          if (!d.accepted()) {
            log(self, "refusing peer at " + address + ": " + d.text);
            // (It answers; the answer is dropped: counted as unexpected.)
            tell(self, caf::actor_cast<caf::actor>(h), leave_of(v.self()));
            v.attempt_done(address, false, now, true);
            return;
          }
          if (!learn(self, root.getMembers()))
            count_bad(self, "hello reply lists too many members");
          peer_up(self, them, h);
          // An alias of the peer's own address (e.g. localhost:P for
          // 127.0.0.1:P) is not tried again while the peer is up there.
          v.attempt_done(address, true, now, them.address != address);
        } catch (const kj::Exception& e) {
          count_bad(self,
                    std::string{"hello reply: "} + e.getDescription().cStr());
          v.attempt_done(address, false, now);
        }
      },
      [=](caf::error& err) { attempt_failed(self, address, err); });
}

void connect(node_self self, const std::string& address) {
  auto hp = parse_address(address);
  if (!hp || !self->state.connector) {
    self->state.view.attempt_done(address, false, self->clock().now(), true);
    return;
  }
  auto timeout = caf::duration{self->state.view.times().down_after};
  self
    ->request(self->state.connector, timeout, caf::connect_atom_v, hp->host,
              hp->port)
    .then(
      [=](const caf::node_id&, caf::strong_actor_ptr serv,
          const std::set<std::string>&) {
        if (!serv) {
          attempt_failed(self, address,
                         make_error(ec::not_found, "no actor published"));
          return;
        }
        say_hello(self, address, caf::actor_cast<node_actor>(serv));
      },
      [=](caf::error& err) { attempt_failed(self, address, err); });
}

void tick(node_self self) {
  auto& st = self->state;
  if (st.leaving)
    return;
  auto now = self->clock().now();
  auto& v = st.view;
  msg::draft<msg::ClusterHeartbeat> d;
  d.root().setNodeId(v.self().node_id);
  d.root().setSeq(++st.seq);
  write_up_members([&](size_t n) { return d.root().initMembers(n); }, v, {});
  if (st.load)
    d.root().setLoad(st.load->root());
  auto hb = std::move(d).seal();
  refresh_load(self);
  for (auto* m : v.up_members())
    if (auto i = st.handles.find(m->node_id); i != st.handles.end())
      self->send(i->second, hb);
  for (auto& id : v.expire(now))
    peer_down(self, id, "silent");
  for (auto& address : v.due(now))
    connect(self, address);
  self->delayed_send(self, v.times().heartbeat, node_tick_atom::value);
}

sealed<msg::ClusterHelloReply> refusal_reply(const identity& self, refusal r,
                                             const std::string& text) {
  msg::draft<msg::ClusterHelloReply> d;
  d.root().setAccepted(false);
  d.root().setKind(to_string(r));
  d.root().setReason(text);
  write_identity(d.root().initFrom(), self);
  return std::move(d).seal();
}

/// Hands a peer's request to the local actor that serves it (`to`), which
/// answers the peer directly; without one the request fails `not_found`.
template <class Reply, class Root>
caf::result<sealed<Reply>> forward(node_self self, const caf::actor& to,
                                   const sealed<Root>& m, const char* what) {
  if (!to)
    return make_error(ec::not_found,
                      std::string{"this node serves no "} + what);
  self->delegate(to, m);
  return caf::delegated<sealed<Reply>>{};
}

/// An admin request: passed to the facade for a local sender, or a remote
/// one with `cluster.remote-admin`; else refused and counted. The facade
/// is asked by the node actor itself (so it sees a local sender) within
/// the policy's admin deadline.
template <class Root, class Reply>
caf::result<sealed<Reply>> admin(node_self self, const sealed<Root>& m,
                                 const char* what) {
  auto& st = self->state;
  if (actors::from_other_process(self) && !st.policy.remote_admin) {
    ++st.refused_admin;
    auto& from = self->current_sender();
    log(self, std::string{"refused a remote admin request ("} + what + ") from "
                + (from ? "node " + to_string(from->node())
                        : std::string{"an anonymous sender"})
                + ": cluster.remote-admin is false");
    return make_error(ec::not_permitted,
                      std::string{what}
                        + " from a remote sender: this node does not allow "
                          "remote admin (cluster.remote-admin = false)");
  }
  if (!st.delegates.admin)
    return make_error(ec::not_found, "this node serves no admin requests");
  auto rp = self->make_response_promise<sealed<Reply>>();
  self->request(st.delegates.admin, caf::duration{st.policy.admin_deadline}, m)
    .then([rp](const sealed<Reply>& r) mutable { rp.deliver(r); },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// The leave order: refuse new peers, tell every up one, count the
/// acknowledgements that come within `timeout_ms`.
caf::result<uint64_t> leave_all(node_self self, uint64_t timeout_ms) {
  if (actors::from_other_process(self)) {
    count_bad(self, "leave order from a peer");
    return caf::sec::unexpected_message;
  }
  auto& st = self->state;
  st.leaving = true;
  auto handles = st.handles;
  auto now = self->clock().now();
  for (auto& [id, h] : handles)
    if (st.view.mark_down(id, now, true))
      peer_down(self, id, "this node leaves");
  if (handles.empty())
    return uint64_t{0};
  log(self, "leaving: telling " + std::to_string(handles.size()) + " peer(s)",
      log::level::info);
  auto rp = self->make_response_promise<uint64_t>();
  auto pending = std::make_shared<size_t>(handles.size());
  auto acked = std::make_shared<uint64_t>(0);
  auto leave = leave_of(st.view.self());
  for (auto& [id, h] : handles)
    self->request(h, caf::duration{tiers::millis{timeout_ms}}, leave)
      .then(
        [=](const sealed<msg::ClusterLeaveReply>&) mutable {
          ++*acked;
          if (--*pending == 0)
            rp.deliver(*acked);
        },
        [=](caf::error&) mutable {
          if (--*pending == 0)
            rp.deliver(*acked);
        });
  return rp;
}

/// A peer's hello: judged; accepted peers are up behind the sender.
sealed<msg::ClusterHelloReply>
answer_hello(node_self self, const sealed<msg::ClusterHello>& m) {
  auto& st = self->state;
  auto& v = st.view;
  try {
    auto them = read_identity(m.root().getFrom());
    if (st.leaving || !st.started)
      return refusal_reply(v.self(), refusal::leaving,
                           "node " + v.self().node_id
                             + (st.leaving ? " is leaving" : " is starting"));
    auto d = v.judge(them);
    if (!d.accepted()) {
      log(self, "refused peer at " + them.address + ": " + d.text);
      return refusal_reply(v.self(), d.reason, d.text);
    }
    auto h = caf::actor_cast<node_actor>(self->current_sender());
    if (!h) {
      count_bad(self, "hello without a sender");
      return refusal_reply(v.self(), refusal::malformed, "no sender");
    }
    peer_up(self, them, h);
    msg::draft<msg::ClusterHelloReply> d2;
    d2.root().setAccepted(true);
    write_identity(d2.root().initFrom(), v.self());
    write_up_members([&](size_t n) { return d2.root().initMembers(n); }, v,
                     them.node_id);
    return std::move(d2).seal();
  } catch (const kj::Exception& e) {
    count_bad(self, std::string{"hello: "} + e.getDescription().cStr());
    return refusal_reply(v.self(), refusal::malformed, "malformed hello");
  }
}

/// A peer's heartbeat: it is alive, learn its members, keep its load; an
/// unknown or down sender is greeted again.
void heard(node_self self, const sealed<msg::ClusterHeartbeat>& m) {
  auto& v = self->state.view;
  try {
    auto id = text_of(m.root().getNodeId(), max_node_id_bytes);
    if (id.empty() || id.size() > max_node_id_bytes)
      return count_bad(self, "heartbeat with a bad node id");
    if (!learn(self, m.root().getMembers()))
      return count_bad(self, "heartbeat lists too many members");
    auto now = self->clock().now();
    if (!v.heard(id, now)) {
      if (auto known = v.find(id))
        v.retry_now(known->address, now); // it is back: say hello
    } else if (m.root().hasLoad()) {
      if (auto known = v.find(id))
        fire_load(self, id, known->address, m.root().getLoad());
    }
  } catch (const kj::Exception& e) {
    count_bad(self, std::string{"heartbeat: "} + e.getDescription().cStr());
  }
}

/// A peer leaves: marked left at once.
sealed<msg::ClusterLeaveReply>
answer_leave(node_self self, const sealed<msg::ClusterLeave>& m) {
  auto& st = self->state;
  msg::draft<msg::ClusterLeaveReply> d;
  try {
    auto id = text_of(m.root().getNodeId(), max_node_id_bytes);
    auto known = st.view.find(id) != nullptr;
    d.root().setKnown(known);
    if (st.view.mark_down(id, self->clock().now(), true))
      peer_down(self, id, "it leaves");
  } catch (const kj::Exception& e) {
    count_bad(self, std::string{"leave: "} + e.getDescription().cStr());
  }
  return std::move(d).seal();
}

/// The membership view and every refusal counter.
sealed<msg::ListMembersReply> list_members(node_self self) {
  auto& st = self->state;
  auto& v = st.view;
  msg::draft<msg::ListMembersReply> d;
  auto r = d.root();
  write_identity(r.initSelf(), v.self());
  auto list = r.initMembers(v.members().size());
  size_t i = 0;
  for (auto& [id, m] : v.members()) {
    list[i].setNodeId(id);
    list[i].setAddress(m.address);
    list[i].setState(to_string(m.state));
    ++i;
  }
  r.setRefusedIdentity(v.refused().model_identity);
  r.setRefusedNodeId(v.refused().node_id);
  r.setRefusedProtocol(v.refused().protocol);
  r.setBadMessages(v.refused().malformed);
  r.setLeaving(st.leaving);
  auto& g = st.guard ? *st.guard : msg::guard_of(nullptr);
  r.setRefusedOversized(g.oversized.load());
  r.setRefusedUndecodable(g.undecodable.load());
  r.setRefusedAdmin(st.refused_admin);
  r.setRefusedHandshake(st.refused_handshake);
  r.setOversizedFrames(g.oversized_frames.load());
  r.setGarbageFrames(g.garbage_frames.load());
  r.setRefusedConnections(g.refused_connections.load());
  r.setFailedHandshakes(g.failed_handshakes.load());
  return std::move(d).seal();
}

} // namespace

identity read_identity(msg::NodeIdentity::Reader r) {
  identity id;
  id.node_id = text_of(r.getNodeId(), max_node_id_bytes);
  id.fingerprint = text_of(r.getFingerprint(), max_fingerprint_bytes);
  id.protocol = r.getProtocol();
  id.address = text_of(r.getAddress(), max_address_bytes);
  return id;
}

node_actor::behavior_type node(node_self self, node_setup setup) {
  auto& st = self->state;
  st.view = membership{std::move(setup.self), setup.times};
  st.hooks =
    setup.hooks ? std::move(setup.hooks) : std::make_shared<hook_slot>();
  st.policy = setup.policy;
  st.guard = std::move(setup.guard);
  st.connector = std::move(setup.connector);
  // Published: any client may send it anything.
  actors::guard_signals(
    self, [self](const std::string& what) { count_bad(self, what); });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [id, h] : st.handles)
      if (h.address() == dm.source) {
        auto gone = id;
        st.handles.erase(gone);
        if (st.view.mark_down(gone, self->clock().now()))
          peer_down(self, gone, "connection lost");
        return;
      }
  });
  self->set_default_handler(
    [](caf::scheduled_actor* ptr,
       caf::message_view& x) -> caf::result<caf::message> {
      auto self = static_cast<node_self>(ptr);
      // CAF delivers a message whose content failed to load as an empty
      // one: the wire guard refused it (counted and logged there).
      if (x.content().empty())
        return make_error(ec::malformed_message,
                          "the message was refused before decoding or did "
                          "not decode (messages/wire_guard.hpp)");
      count_bad(self, "unexpected message " + to_string(x.content()));
      return caf::sec::unexpected_message;
    });
  return {
    [self](node_start_atom, const std::string& node_id,
           const std::string& address, const std::set<std::string>& seeds) {
      if (actors::from_other_process(self) || self->state.started)
        return count_bad(self, "start from a peer");
      auto& st = self->state;
      st.started = true;
      st.view.set_self(node_id, address);
      auto now = self->clock().now();
      for (auto& s : seeds)
        st.view.add_address(s, now);
      tick(self);
    },
    [self](node_attach_atom, const caf::actor& feed, const caf::actor& serve,
           const caf::actor& facade, const caf::actor& load) {
      if (actors::from_other_process(self))
        return count_bad(self, "attach from a peer");
      self->state.delegates = node_delegates{feed, serve, facade, load};
    },
    [self](const sealed<msg::RouteRequest>& m) {
      // Reads only: any sender may ask (docs/cluster.md "Routing").
      return forward<msg::RouteRequestReply>(self, self->state.delegates.admin,
                                             m, "routing");
    },
    [self](node_attach_atom, const caf::actor& agent) {
      if (actors::from_other_process(self))
        return count_bad(self, "attach from a peer");
      self->state.agent = agent;
    },
    [self](const sealed<msg::ReplayStep>& m) {
      return forward<msg::ReplayStepReply>(self, self->state.agent, m,
                                           "replay steps");
    },
    [self](const sealed<msg::ReplayFinish>& m) {
      return forward<msg::ReplayFinishReply>(self, self->state.agent, m,
                                             "replay steps");
    },
    [self](const sealed<msg::FlushState>& m) {
      return admin<msg::FlushState, msg::FlushStateReply>(self, m, "flush");
    },
    [self](const sealed<msg::CloseService>& m) {
      return admin<msg::CloseService, msg::CloseServiceReply>(self, m, "close");
    },
    [self](const sealed<msg::CloseSession>& m) {
      return admin<msg::CloseSession, msg::CloseSessionReply>(self, m,
                                                              "close session");
    },
    [self](const sealed<msg::DemoteIdle>& m) {
      return admin<msg::DemoteIdle, msg::DemoteIdleReply>(self, m,
                                                          "demote idle");
    },
    [self](const sealed<msg::StopIdleDemotion>& m) {
      return admin<msg::StopIdleDemotion, msg::StopIdleDemotionReply>(
        self, m, "stop idle demotion");
    },
    [self](const sealed<msg::RelievePressure>& m) {
      return admin<msg::RelievePressure, msg::RelievePressureReply>(
        self, m, "relieve pressure");
    },
    [self](const sealed<msg::ReclaimAtBoundary>& m) {
      return admin<msg::ReclaimAtBoundary, msg::ReclaimAtBoundaryReply>(
        self, m, "reclaim at boundary");
    },
    [self](const sealed<msg::SetSsdLimit>& m) {
      return admin<msg::SetSsdLimit, msg::SetSsdLimitReply>(self, m,
                                                            "set SSD limit");
    },
    [self](const sealed<msg::FetchEntry>& m) {
      return forward<msg::FetchEntryReply>(self, self->state.delegates.serve, m,
                                           "state");
    },
    [self](const sealed<msg::FetchChunk>& m) {
      return forward<msg::FetchChunkReply>(self, self->state.delegates.serve, m,
                                           "state");
    },
    [self](const sealed<msg::CancelTransfer>& m) {
      return forward<msg::CancelTransferReply>(
        self, self->state.delegates.serve, m, "state");
    },
    [self](const sealed<msg::SubscribeFeed>& m) {
      return forward<msg::SubscribeFeedReply>(self, self->state.delegates.feed,
                                              m, "feed");
    },
    [self](node_tick_atom) {
      if (actors::from_other_process(self))
        return count_bad(self, "tick from a peer");
      tick(self);
    },
    [self](node_leave_atom, uint64_t timeout_ms) -> caf::result<uint64_t> {
      return leave_all(self, timeout_ms);
    },
    [self](const sealed<msg::ClusterHello>& m)
      -> sealed<msg::ClusterHelloReply> { return answer_hello(self, m); },
    [self](const sealed<msg::ClusterHeartbeat>& m) { heard(self, m); },
    [self](const sealed<msg::ClusterLeave>& m)
      -> sealed<msg::ClusterLeaveReply> { return answer_leave(self, m); },
    [self](const sealed<msg::ListMembers>&) -> sealed<msg::ListMembersReply> {
      return list_members(self);
    },
  };
}

} // namespace kvtier::actors
