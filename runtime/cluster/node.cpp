#include "runtime/cluster/node.hpp"

#include "runtime/net/address.hpp"
#include "runtime/net/port_guard.hpp"
#include "runtime/options.hpp"

#include "actors/node_actor.hpp"
#include "messages/caller_actor.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_cast.hpp>
#include <caf/function_view.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <algorithm>

namespace kvtier::cluster {

namespace {

template <class Root>
using sealed = msg::sealed<Root>;

/// The local orders of the node actor (actors/cluster_interfaces.hpp).
using actors::node_attach_atom;
using actors::node_leave_atom;
using actors::node_start_atom;

using actors::read_identity;

members_view view_of(const sealed<msg::ListMembersReply>& reply) {
  members_view out;
  auto r = reply.root();
  out.self = read_identity(r.getSelf());
  for (auto m : r.getMembers()) {
    member_view mv;
    mv.node_id = m.getNodeId();
    mv.address = m.getAddress();
    std::string s = m.getState();
    mv.state = s == "up"     ? peer_state::up
               : s == "left" ? peer_state::left
                             : peer_state::down;
    out.members.push_back(std::move(mv));
  }
  out.refused.model_identity = r.getRefusedIdentity();
  out.refused.node_id = r.getRefusedNodeId();
  out.refused.protocol = r.getRefusedProtocol();
  out.refused.malformed = r.getBadMessages();
  out.leaving = r.getLeaving();
  out.refused_oversized = r.getRefusedOversized();
  out.refused_undecodable = r.getRefusedUndecodable();
  out.refused_admin = r.getRefusedAdmin();
  out.refused_handshake = r.getRefusedHandshake();
  out.oversized_frames = r.getOversizedFrames();
  out.garbage_frames = r.getGarbageFrames();
  out.refused_connections = r.getRefusedConnections();
  out.failed_handshakes = r.getFailedHandshakes();
  return out;
}

} // namespace

caf::expected<members_view> ask_members(caf::actor_system& sys,
                                        const actors::node_actor& a,
                                        millis timeout) {
  kvtier::caller_actor self{sys};
  caf::expected<members_view> out = make_error(ec::timeout, "no answer");
  msg::draft<msg::ListMembers> d;
  self->request(a, caf::duration{timeout}, std::move(d).seal())
    .receive([&](const sealed<msg::ListMembersReply>& r) { out = view_of(r); },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

std::vector<std::string> members_view::in_state(peer_state s) const {
  std::vector<std::string> out;
  for (auto& m : members)
    if (m.state == s)
      out.push_back(m.node_id);
  std::sort(out.begin(), out.end());
  return out;
}

identity identity_of(const runtime::service_options& o,
                     const std::string& fingerprint) {
  identity id;
  id.node_id = o.cluster_node_id;
  id.fingerprint = fingerprint;
  return id;
}

timing timing_of(const runtime::service_options& o) {
  timing t;
  t.heartbeat = millis{o.cluster_heartbeat_ms};
  t.down_after = millis{o.cluster_down_after_ms};
  t.reconnect.base = millis{o.cluster_reconnect_backoff_ms};
  t.reconnect.cap = millis{o.cluster_reconnect_backoff_max_ms};
  return t;
}

node_policy policy_of(const runtime::service_options& o) {
  node_policy p;
  p.any_address = o.cluster_tls;
  p.remote_admin = o.cluster_remote_admin;
  return p;
}

actors::node_actor spawn_node_actor(caf::actor_system& sys, identity self,
                                    timing t, std::shared_ptr<hook_slot> hooks,
                                    node_policy policy,
                                    std::shared_ptr<msg::wire_guard> guard) {
  actors::node_setup setup;
  setup.self = std::move(self);
  setup.times = t;
  setup.hooks = std::move(hooks);
  setup.policy = policy;
  setup.guard = std::move(guard);
  // Where the node actor connects to its peers: the middleman, or over TLS
  // its OpenSSL manager (`connect_atom` answered with the published actor).
  setup.connector = caf::actor_cast<caf::actor>(
    sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                              : sys.middleman().actor_handle());
  return sys.spawn(actors::node, std::move(setup));
}

caf::expected<std::unique_ptr<node>>
node::start(caf::actor_system& sys, const runtime::service_options& o,
            const std::string& fingerprint,
            const std::vector<std::string>& extra_peers,
            std::vector<caf::actor> listeners) {
  if (!sys.has_middleman())
    return make_error(ec::invalid_config,
                      "cluster: the actor system has no middleman (load "
                      "caf::io::middleman before it starts)");
  auto peers = o.cluster_peers;
  peers.insert(peers.end(), extra_peers.begin(), extra_peers.end());
  if (auto err = net::check_node_addresses(o.cluster_listen_address, peers,
                                           o.cluster_tls))
    return err;
  std::set<std::string> seeds{peers.begin(), peers.end()};
  auto tls = runtime::tls_files_of(o);
  if (o.cluster_tls) {
    if (auto err = net::check_tls_files(tls))
      return err;
    if (!sys.has_openssl_manager() || !net::tls_configured(sys.config(), tls))
      return make_error(ec::invalid_config,
                        "cluster.tls: the actor system has no OpenSSL module "
                        "configured with cluster.tls-certificate, "
                        "cluster.tls-key and cluster.tls-ca (call "
                        "net::configure_tls on its config before it "
                        "starts)");
  } else if (sys.has_openssl_manager()) {
    return make_error(ec::invalid_config,
                      "the actor system loads CAF's OpenSSL module but "
                      "cluster.tls is false: set cluster.tls = true");
  }
  std::unique_ptr<node> n{new node};
  n->sys_ = &sys;
  n->hooks_ = std::make_shared<hook_slot>();
  n->hooks_->listeners = std::move(listeners);
  n->down_after_ = millis{o.cluster_down_after_ms};
  n->tls_ = o.cluster_tls;
  n->guard_ =
    std::make_unique<msg::guard_scope>(sys, o.cluster_max_message_bytes);
  n->actor_ = spawn_node_actor(sys, identity_of(o, fingerprint), timing_of(o),
                               n->hooks_, policy_of(o), n->guard_->shared());
  net::port_limits limits;
  limits.max_unproven =
    static_cast<uint32_t>(o.cluster_max_unproven_connections);
  limits.handshakes_per_s = static_cast<double>(o.cluster_handshakes_per_s);
  limits.burst = static_cast<uint32_t>(o.cluster_handshakes_per_s);
  limits.penalty_base = millis{o.cluster_failed_handshake_penalty_ms};
  limits.penalty_max = millis{o.cluster_handshake_timeout_ms};
  limits.handshake_deadline = millis{o.cluster_handshake_timeout_ms};
  // Published untyped (no signatures), as before the node actor was typed:
  // peers and tools reach it as a dynamically typed actor.
  auto port = net::publish_guarded(sys, caf::actor_cast<caf::actor>(n->actor_),
                                   static_cast<uint16_t>(o.cluster_port),
                                   o.cluster_listen_address, o.cluster_tls,
                                   n->guard_->shared(), limits);
  // The node actor takes control messages from actors of this process only
  // (an anonymous message may be a peer's).
  kvtier::caller_actor local{sys};
  if (!port) {
    local->send_exit(n->actor_, caf::exit_reason::user_shutdown);
    return make_error(ec::io_error,
                      "cluster.port = " + std::to_string(o.cluster_port)
                        + ": cannot listen on " + o.cluster_listen_address + ":"
                        + std::to_string(o.cluster_port) + ": "
                        + sys.render(port.error()));
  }
  n->port_ = *port;
  n->started_ = std::chrono::steady_clock::now();
  n->address_ = o.cluster_listen_address + ":" + std::to_string(*port);
  n->node_id_ = o.cluster_node_id.empty() ? n->address_ : o.cluster_node_id;
  local->send(n->actor_, node_start_atom::value, n->node_id_, n->address_,
              seeds);
  return n;
}

node::~node() {
  if (!left_)
    leave(down_after_);
  if (tls_) {
    // (caf/openssl/unpublish.hpp does not compile in 0.17.6: ask the
    // OpenSSL manager's middleman actor directly.)
    {
      auto f = caf::make_function_view(sys_->openssl_manager().actor_handle());
      static_cast<void>(f(caf::unpublish_atom_v,
                          caf::actor_cast<caf::actor_addr>(actor_), port_));
    }
    forget_thread_logger(*sys_); // the view's scoped actor set it

  } else {
    sys_->middleman().unpublish(actor_, port_);
  }
  kvtier::caller_actor local{*sys_};
  local->send_exit(actor_, caf::exit_reason::user_shutdown);
}

void node::attach(node_delegates d) {
  kvtier::caller_actor local{*sys_};
  local->send(actor_, node_attach_atom::value, std::move(d.feed),
              std::move(d.serve), std::move(d.admin), std::move(d.load));
}

void node::attach_agent(caf::actor agent) {
  kvtier::caller_actor local{*sys_};
  local->send(actor_, node_attach_atom::value, std::move(agent));
}

void node::set_hooks(peer_hooks h) {
  std::lock_guard<std::mutex> guard{hooks_->mtx};
  hooks_->hooks = std::move(h);
}

caf::expected<members_view> node::members(millis timeout) {
  return ask_members(*sys_, actor_, timeout);
}

caf::expected<size_t> node::leave(millis timeout) {
  left_ = true;
  kvtier::caller_actor self{*sys_};
  caf::expected<size_t> out = make_error(ec::timeout, "leave unanswered");
  self
    ->request(actor_, caf::duration{timeout + millis{500}},
              node_leave_atom::value, static_cast<uint64_t>(timeout.count()))
    .receive([&](uint64_t acked) { out = static_cast<size_t>(acked); },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

} // namespace kvtier::cluster
