// An embedded service with `cluster.enabled` (service_options) next to a
// `kvtier node` process: it meets the node, its peer hooks fire "up" and
// "down", it leaves when destroyed (the node marks it left at once) after
// flushing its entries to its SSD tier, which serves them byte-exact after
// a restart. And the node actor facing a peer that sends bad input: every
// malformed, oversized or unexpected message is refused and counted, and
// the node goes on. (The messages of messages/membership.capnp cross a real
// middleman connection here and in every process test.)
#define BOOST_TEST_MODULE cluster_embedded
#include "tests/cluster/node_process.hpp"
#include "tests/runtime/service_fixture.hpp"

#include <caf/scoped_actor.hpp>

#include <future>
#include <mutex>

using namespace kvtier;
using namespace kvtier::test;
using cluster::peer_state;

namespace {

struct fixture : testing::service_fixture {
  temp_dir dir;
  client_config ccfg;
  caf::actor_system client{ccfg};

  fixture() {
    join_test_cluster(opts, "emb"); // as node_process's nodes
  }

  std::vector<std::string> up_at(cluster::node& n) {
    auto v = n.members(2000ms);
    return v ? v->in_state(peer_state::up) : std::vector<std::string>{};
  }

  peer_state state_at(const node_process& p, const std::string& id) {
    if (auto v = members_of(client, p.address()))
      for (auto& m : v->members)
        if (m.node_id == id)
          return m.state;
    return peer_state::down;
  }
};

template <class Root>
msg::sealed<Root> hello(const std::string& id, const std::string& fp,
                        uint32_t protocol) {
  msg::draft<Root> d;
  auto f = d.root().initFrom();
  f.setNodeId(id);
  f.setFingerprint(fp);
  f.setProtocol(protocol);
  f.setAddress("127.0.0.1:9");
  return std::move(d).seal();
}

} // namespace

BOOST_FIXTURE_TEST_CASE(
  an_embedded_service_joins_fires_hooks_and_leaves_flushed, fixture) {
  start();
  auto* n = svc->cluster();
  BOOST_REQUIRE(n);
  std::mutex mtx;
  std::vector<std::string> events;
  n->set_hooks({[&](const std::string& id, const actors::node_actor& h) {
                  std::lock_guard<std::mutex> guard{mtx};
                  events.push_back("up " + id + (h ? "" : " (no handle)"));
                },
                [&](const std::string& id) {
                  std::lock_guard<std::mutex> guard{mtx};
                  events.push_back("down " + id);
                }});
  auto events_now = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    return events;
  };
  node_settings s;
  s.node_id = "a";
  s.joins = {n->address()};
  auto a = std::make_unique<node_process>(dir.path, s);
  BOOST_TEST(wait_for(
    [&] { return up_at(*n) == std::vector<std::string>{"a"}; }, 5000ms));
  BOOST_TEST(
    wait_for([&] { return state_at(*a, "emb") == peer_state::up; }, 5000ms));
  BOOST_TEST((events_now() == std::vector<std::string>{"up a"}));
  // The node goes: "down a".
  BOOST_TEST(a->stop() == 0, a->log());
  BOOST_TEST(wait_for([&] { return events_now().size() == 2; }, 2000ms));
  BOOST_TEST((events_now() == std::vector<std::string>{"up a", "down a"}));
  // It comes back on its port: the embedded node reconnects, "up a" again.
  a->restart();
  BOOST_TEST(wait_for([&] { return events_now().size() == 3; }, 5000ms));
  BOOST_TEST(
    (events_now() == std::vector<std::string>{"up a", "down a", "up a"}));
  // Entries published here, then the service goes: flushed, then left.
  auto one = seq(64), two = seq(96, 1000);
  put("ns", one, 1);
  put("ns", two, 2);
  n->set_hooks({});
  svc.reset();
  BOOST_TEST(state_at(*a, "emb") == peer_state::left);
  // Its SSD tier holds them: a restart without the cluster serves them.
  opts.cluster_enabled = false;
  start();
  auto r1 = get("ns", cat(one, {7}), 3);
  BOOST_CHECK(r1.source == runtime::state_source::ssd);
  BOOST_TEST(r1.usable_tokens == one.size());
  auto r2 = get("ns", cat(two, {7}), 4);
  BOOST_CHECK(r2.source == runtime::state_source::ssd);
  BOOST_TEST(r2.usable_tokens == two.size());
}

BOOST_FIXTURE_TEST_CASE(bad_input_from_a_peer_is_refused_and_counted, fixture) {
  start();
  auto* n = svc->cluster();
  BOOST_REQUIRE(n);
  auto remote = client.middleman().remote_actor("127.0.0.1", n->port());
  BOOST_REQUIRE(remote);
  auto fp = runtime::running_model(opts)->fingerprint();
  caf::scoped_actor self{client};
  auto ask_hello = [&](msg::sealed<msg::ClusterHello> m) {
    std::string kind = "no answer";
    self->request(*remote, 2s, std::move(m))
      .receive(
        [&](const msg::sealed<msg::ClusterHelloReply>& r) {
          kind = r.root().getAccepted() ? "accepted"
                                        : std::string{r.root().getKind()};
        },
        [&](caf::error& err) { kind = "error " + describe(err); });
    return kind;
  };
  BOOST_TEST(
    ask_hello(hello<msg::ClusterHello>("x", fp, cluster::protocol_version + 1))
    == "protocol version");
  BOOST_TEST(ask_hello(hello<msg::ClusterHello>(std::string(4096, 'x'), fp,
                                                cluster::protocol_version))
             == "malformed");
  BOOST_TEST(ask_hello(hello<msg::ClusterHello>("x", "other-0123",
                                                cluster::protocol_version))
             == "model identity");
  BOOST_TEST(
    ask_hello(hello<msg::ClusterHello>("emb", fp, cluster::protocol_version))
    == "node id");
  {
    msg::draft<msg::ClusterHeartbeat> d; // no node id
    self->send(*remote, std::move(d).seal());
  }
  {
    msg::draft<msg::ClusterHeartbeat> d; // more members than allowed
    d.root().setNodeId("x");
    auto list = d.root().initMembers(cluster::max_listed_members + 1);
    for (auto m : list) {
      m.setNodeId("y");
      m.setAddress("127.0.0.1:9");
    }
    self->send(*remote, std::move(d).seal());
  }
  {
    // A message the node actor does not take: an error back, counted.
    msg::draft<msg::PeekPrefix> d;
    d.root().setNs("ns");
    bool refused = false;
    self->request(*remote, 2s, std::move(d).seal())
      .receive([&](const msg::sealed<msg::PeekPrefixReply>&) {},
               [&](caf::error&) { refused = true; });
    BOOST_TEST(refused);
  }
  BOOST_TEST(wait_for(
    [&] {
      auto v = n->members();
      return v && v->refused.malformed == 4;
    },
    2000ms));
  auto v = n->members();
  BOOST_REQUIRE(v);
  BOOST_TEST(v->refused.protocol == 1u);
  BOOST_TEST(v->refused.model_identity == 1u);
  BOOST_TEST(v->refused.node_id == 1u);
  BOOST_TEST(v->members.empty()); // nobody was let in
  // And the node goes on: a well-formed peer is accepted.
  BOOST_TEST(
    ask_hello(hello<msg::ClusterHello>("good", fp, cluster::protocol_version))
    == "accepted");
}

BOOST_AUTO_TEST_CASE(a_non_loopback_listen_address_is_refused_at_start) {
  runtime::service_options o;
  o.cluster_enabled = true;
  o.cluster_listen_address = "0.0.0.0";
  auto err = o.validate();
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err).find("cluster.listen-address") != std::string::npos,
             describe(err));
  o.cluster_listen_address = "127.0.0.1";
  o.cluster_peers = {"10.1.2.3:7400"};
  err = o.validate();
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err).find("cluster.peers") != std::string::npos,
             describe(err));
}

BOOST_AUTO_TEST_CASE(a_callers_actor_system_without_the_middleman_is_refused) {
  testing::service_fixture f;
  f.opts.cluster_enabled = true;
  runtime::kvtier_config cfg; // no middleman loaded
  caf::actor_system sys{cfg};
  runtime::service svc{sys, f.opts, runtime::service_parts{f.fs}};
  auto err = svc.start_error();
  BOOST_REQUIRE(err);
  BOOST_TEST(static_cast<ec>(err.code()) == ec::invalid_config);
  BOOST_TEST(describe(err).find("middleman") != std::string::npos,
             describe(err));
  BOOST_TEST(svc.cluster() == nullptr);
}

BOOST_FIXTURE_TEST_CASE(
  a_service_that_asks_its_own_cluster_is_destroyed_within_its_deadline,
  fixture) {
  // The client helpers called from the service's own actor system: asking
  // a peer and asking itself; then the service must go within 30 s (it
  // never returned before: the actor system waited on a blocked actor).
  start();
  auto* n = svc->cluster();
  BOOST_REQUIRE(n);
  node_settings s;
  s.node_id = "a";
  s.joins = {n->address()};
  node_process a{dir.path, s};
  BOOST_REQUIRE(wait_for(
    [&] { return up_at(*n) == std::vector<std::string>{"a"}; }, 5000ms));
  auto peer = cluster::query_members(svc->system(), a.address(), 5000ms);
  BOOST_TEST(static_cast<bool>(peer), (peer ? "" : describe(peer.error())));
  if (peer)
    BOOST_TEST(peer->in_state(peer_state::up)
               == std::vector<std::string>{"emb"});
  auto self = cluster::query_members(svc->system(), n->address(), 5000ms);
  BOOST_TEST(static_cast<bool>(self), (self ? "" : describe(self.error())));
  if (self)
    BOOST_TEST(self->in_state(peer_state::up) == std::vector<std::string>{"a"});
  auto remote = cluster::connect_node(svc->system(), a.address(), 5000ms);
  BOOST_REQUIRE(remote);
  auto routed =
    cluster::query_route(svc->system(), *remote, seq(16), "ns", 5000ms);
  BOOST_TEST(static_cast<bool>(routed),
             (routed ? "" : describe(routed.error())));
  auto gone = std::async(std::launch::async, [&] { svc.reset(); });
  if (gone.wait_for(30s) != std::future_status::ready) {
    BOOST_ERROR("the service was not destroyed within 30 s");
    std::_Exit(1); // the destructor hangs: nothing else can be tested here
  }
  BOOST_TEST(a.stop() == 0, a.log());
}
