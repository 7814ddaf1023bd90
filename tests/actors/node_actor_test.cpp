// The typed node actor (actors/node_actor.hpp) message by message on CAF's
// deterministic scheduler, without a middleman: a stand-in peer says hello
// (accepted; refused for another fingerprint or protocol), a silent peer
// goes down once the test clock passes down-after (hooks and listeners
// hear both, the listeners from the node itself), and an admin request from
// a sender of another process (here an anonymous one, as a peer's anon_send
// arrives) is refused and counted while a local one reaches the facade.
#define BOOST_TEST_MODULE actors_node_actor
#include "tests/caf_bridge.hpp"

#include "actors/node_actor.hpp"

#include <set>

using namespace kvtier;
using namespace std::chrono_literals;
using actors::sealed;

namespace {

/// What the stand-in peer and facade saw.
struct seen {
  std::vector<std::string> hello_replies; // "accepted" or the refusal kind
  size_t heartbeats = 0;
  size_t flushes = 0;
  std::vector<std::string> hooks; // "up ID" / "down ID"
  /// What the listener heard, and whether each came from the node.
  std::vector<std::string> heard;
};

/// A peer's node actor: records the hello replies and heartbeats it gets.
caf::behavior fake_peer(caf::event_based_actor*, std::shared_ptr<seen> s) {
  return {
    [s](const sealed<msg::ClusterHelloReply>& r) {
      s->hello_replies.push_back(r.root().getAccepted()
                                   ? std::string{"accepted"}
                                   : std::string{r.root().getKind()});
    },
    [s](const sealed<msg::ClusterHeartbeat>&) { ++s->heartbeats; },
  };
}

/// A listener (the peer tier, the feed follower): records each peer up,
/// address and down, with whether the node actor sent it (they check).
caf::behavior fake_listener(caf::event_based_actor* self,
                            std::shared_ptr<seen> s, caf::actor_addr node) {
  auto from_node = [=] {
    return self->current_sender() == node ? "" : " (not from the node)";
  };
  return {
    [=](actors::peer_up_atom, const std::string& id, const caf::actor& h) {
      s->heard.push_back("up " + id + (h ? "" : " (no handle)") + from_node());
    },
    [=](actors::peer_load_atom, const std::string& id,
        const std::string& address) {
      s->heard.push_back("at " + id + " " + address + from_node());
    },
    [=](actors::peer_down_atom, const std::string& id) {
      s->heard.push_back("down " + id + from_node());
    },
  };
}

/// The facade: answers FlushState, counting it.
caf::behavior fake_facade(caf::event_based_actor*, std::shared_ptr<seen> s) {
  return {
    [s](const sealed<msg::FlushState>&) {
      ++s->flushes;
      return msg::draft<msg::FlushStateReply>{}.seal();
    },
  };
}

sealed<msg::ClusterHello> hello(const std::string& id,
                                const std::string& fingerprint,
                                uint32_t protocol = tiers::protocol_version) {
  msg::draft<msg::ClusterHello> d;
  auto f = d.root().initFrom();
  f.setNodeId(id);
  f.setFingerprint(fingerprint);
  f.setProtocol(protocol);
  f.setAddress("127.0.0.1:7001");
  return std::move(d).seal();
}

template <class Root>
sealed<Root> empty() {
  return msg::draft<Root>{}.seal();
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  std::shared_ptr<seen> s = std::make_shared<seen>();
  tiers::timing times;
  actors::node_actor node;
  caf::actor peer = sys.spawn(fake_peer, s);
  caf::actor facade = sys.spawn(fake_facade, s);

  fixture() {
    actors::node_setup setup;
    setup.self = tiers::identity{"n1", "fp-a", tiers::protocol_version, ""};
    setup.times = times;
    setup.hooks = std::make_shared<actors::hook_slot>();
    setup.hooks->hooks.up = [s = s](const std::string& id,
                                    const actors::node_actor& h) {
      s->hooks.push_back("up " + id + (h ? "" : " (no handle)"));
    };
    setup.hooks->hooks.down = [s = s](const std::string& id) {
      s->hooks.push_back("down " + id);
    };
    auto hooks = setup.hooks;
    node = sys.spawn(actors::node, std::move(setup));
    {
      std::lock_guard<std::mutex> guard{hooks->mtx};
      hooks->listeners.push_back(
        sys.spawn(fake_listener, s, caf::actor_cast<caf::actor_addr>(node)));
    }
    self->send(node, actors::node_start_atom::value, std::string{"n1"},
               std::string{"127.0.0.1:7000"}, std::set<std::string>{});
    self->send(node, actors::node_attach_atom::value, caf::actor{},
               caf::actor{}, facade, caf::actor{});
    sched.run();
  }

  ~fixture() {
    self->send_exit(node, caf::exit_reason::user_shutdown);
    sched.run();
  }

  /// The stand-in peer says `m` to the node, which takes it.
  void say_hello(sealed<msg::ClusterHello> m) {
    caf::send_as(peer, node, std::move(m));
    expect((sealed<msg::ClusterHello>), from(peer).to(node));
  }

  /// The node's ListMembers answer, asked by a local sender.
  sealed<msg::ListMembersReply> members() {
    self->send(node, empty<msg::ListMembers>());
    sched.run();
    std::optional<sealed<msg::ListMembersReply>> out;
    BOOST_REQUIRE(self->has_next_message());
    self->receive([&](const sealed<msg::ListMembersReply>& r) { out = r; });
    BOOST_REQUIRE(out);
    return *out;
  }

  /// `id`'s state in the node's view ("" when unknown).
  std::string state_of(const std::string& id) {
    auto r = members();
    for (auto m : r.root().getMembers())
      if (std::string{m.getNodeId()} == id)
        return m.getState();
    return "";
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(node_actor, fixture)

BOOST_AUTO_TEST_CASE(a_hello_of_the_same_identity_is_accepted) {
  say_hello(hello("p", "fp-a"));
  expect((sealed<msg::ClusterHelloReply>), from(node).to(peer));
  BOOST_TEST((s->hello_replies == std::vector<std::string>{"accepted"}));
  BOOST_TEST(state_of("p") == "up");
  BOOST_TEST((s->hooks == std::vector<std::string>{"up p"}));
  BOOST_TEST(
    (s->heard == std::vector<std::string>{"up p", "at p 127.0.0.1:7001"}));
}

BOOST_AUTO_TEST_CASE(a_hello_of_another_fingerprint_is_refused_and_counted) {
  say_hello(hello("p", "fp-b"));
  expect((sealed<msg::ClusterHelloReply>), from(node).to(peer));
  BOOST_TEST((s->hello_replies == std::vector<std::string>{"model identity"}));
  auto r = members();
  BOOST_TEST(r.root().getMembers().size() == 0u);
  BOOST_TEST(r.root().getRefusedIdentity() == 1u);
  BOOST_TEST(s->hooks.empty());
}

BOOST_AUTO_TEST_CASE(a_hello_of_another_protocol_is_refused_and_counted) {
  say_hello(hello("p", "fp-a", tiers::protocol_version + 1));
  expect((sealed<msg::ClusterHelloReply>), from(node).to(peer));
  BOOST_TEST(
    (s->hello_replies == std::vector<std::string>{"protocol version"}));
  auto r = members();
  BOOST_TEST(r.root().getMembers().size() == 0u);
  BOOST_TEST(r.root().getRefusedProtocol() == 1u);
  BOOST_TEST(r.root().getRefusedIdentity() == 0u);
}

BOOST_AUTO_TEST_CASE(a_silent_peer_is_down_after_down_after) {
  say_hello(hello("p", "fp-a"));
  sched.run();
  BOOST_REQUIRE(state_of("p") == "up");
  // Within down-after it stays up (and hears the node's heartbeats).
  sched.advance_time(times.down_after - times.heartbeat);
  sched.run();
  BOOST_TEST(state_of("p") == "up");
  BOOST_TEST(s->heartbeats >= 1u);
  // Silent for longer than down-after: the next tick marks it down.
  sched.advance_time(2 * times.heartbeat);
  sched.run();
  sched.advance_time(times.heartbeat);
  sched.run();
  BOOST_TEST(state_of("p") == "down");
  BOOST_TEST((s->hooks == std::vector<std::string>{"up p", "down p"}));
  BOOST_TEST(
    (s->heard
     == std::vector<std::string>{"up p", "at p 127.0.0.1:7001", "down p"}));
}

BOOST_AUTO_TEST_CASE(a_remote_admin_request_is_refused_without_remote_admin) {
  // An anonymous sender is not of this process: refused, counted, and the
  // facade never hears of it.
  caf::anon_send(node, empty<msg::FlushState>());
  sched.run();
  BOOST_TEST(s->flushes == 0u);
  BOOST_TEST(members().root().getRefusedAdmin() == 1u);
  // A local sender's request reaches the facade and its answer comes back.
  self->send(node, empty<msg::FlushState>());
  sched.run();
  BOOST_TEST(s->flushes == 1u);
  bool answered = false;
  BOOST_REQUIRE(self->has_next_message());
  self->receive([&](const sealed<msg::FlushStateReply>&) { answered = true; });
  BOOST_TEST(answered);
  BOOST_TEST(members().root().getRefusedAdmin() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
