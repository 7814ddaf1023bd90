// The peer tier end to end: two embedded services with `cluster.enabled`
// in one process, each with its own actor system, meeting over the
// loopback middleman. A publishes (oracle prefills); the test tells B's
// peer tier what A holds (a directory_batch, as the feed follower would);
// B's acquires are served from Tier::PEER byte-exact, or fall back to
// B's own state or fresh state when the holder lost the entry, sends
// corrupt bytes, goes away mid-fetch, or the fetch is over its byte cap;
// identical fetches coalesce into one transfer; B's SSD wins only when
// strictly longer. Real time (two middlemen); each wait is bounded.
#define BOOST_TEST_MODULE actors_peer_tier
#include "actors/interfaces.hpp"
#include "actors/serve_actor.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/net/address.hpp"
#include "runtime/tools/client.hpp"
#include "tests/cluster/member.hpp"
#include "tests/messages/fixtures.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tiers/entry_message.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>
#include <map>
#include <thread>

using namespace kvtier;
using namespace std::chrono_literals;
using testing::eventually;
using testing::ok;
using testing::why;
using tiers::token_seq;

namespace {

/// A cluster member with room on SSD and a short fetch deadline; fetched
/// entries stay in RAM only unless a test says otherwise.
struct member : test::cluster_member {
  explicit member(const std::string& id)
    : cluster_member(id) {
    opts.ssd_cap_bytes = 64ull << 20;
    opts.write_behind_cap_bytes = 16ull << 20;
    opts.position_limit = 16384;
    opts.cluster_fetch_deadline_ms = 1500;
    opts.cluster_fetched_to_ssd = false;
  }

  void put(const std::string& ns, const token_seq& tokens, uint64_t id = 1) {
    auto e = oracle->prefill(ns, tokens);
    auto r = svc->publish({id, tokens, 16, std::nullopt}, std::move(e));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_REQUIRE(r->kept);
  }
};

/// A FindPrefix of `prompt` in `ns`.
msg::sealed<msg::FindPrefix> find_request(const std::string& ns,
                                          const token_seq& prompt) {
  msg::draft<msg::FindPrefix> d;
  d.root().setNs(ns);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  return std::move(d).seal();
}

/// A's and B's services, B joined to A and its peer tier seeing A up.
struct fixture {
  member a{"a"};
  member b{"b"};

  fixture() {
    a.start();
  }

  /// Starts B and waits until its peer tier sees A up and the feed
  /// follower's first snapshot of A arrived (A holds one entry of its own
  /// for that), so a snapshot cannot replace what a test announces later.
  void start_b() {
    a.put("warm", seq(16));
    b.opts.cluster_peers = {a.svc->cluster()->address()};
    b.start();
    BOOST_REQUIRE(eventually([&] {
      auto r = b.report();
      return r.peer.peers_up == 1 && r.peer.entries >= 1;
    }));
  }

  static token_seq seq(size_t n, tiers::token first = 1) {
    return testing::service_fixture::seq(n, first);
  }

  /// Tells B's peer tier that A holds (ns, tokens) in RAM.
  void announce(const std::string& ns, const token_seq& tokens,
                bool trimmable = true, bool wait = true) {
    actors::directory_batch batch;
    batch.node = "a";
    actors::directory_item it;
    it.ns = ns;
    it.key = tokens;
    it.tier = 0;
    it.bytes = tokens.size() * 256;
    it.trimmable = trimmable;
    batch.items.push_back(it);
    // As an actor of this process: the peer tier ignores anonymous batches.
    caf::send_as(b.svc->peer_tier(), b.svc->peer_tier(), std::move(batch));
    // Applied (or told already by the feed follower, of A's own put).
    if (wait)
      BOOST_REQUIRE(eventually([&] { return found_on_b(ns, tokens); }));
    else
      BOOST_REQUIRE(eventually([&] { return b.report().peer.entries >= 2; }));
  }

  /// Whether B's peer tier offers all of `tokens` for a prompt extending
  /// them (FindPrefix: the directory only).
  bool found_on_b(const std::string& ns, token_seq tokens) {
    auto n = tokens.size();
    tokens.push_back(777777);
    caf::scoped_actor self{b.svc->system()};
    auto peer = caf::actor_cast<actors::peer_tier_actor>(b.svc->peer_tier());
    uint64_t usable = 0;
    self->request(peer, std::chrono::seconds(5), find_request(ns, tokens))
      .receive(
        [&](const msg::sealed<msg::FindPrefixReply>& r) {
          usable = r.root().getUsableTokens();
        },
        [](const caf::error&) {});
    return usable == n;
  }

  /// B's acquire of `prompt`, byte-exact against B's oracle when served.
  runtime::acquired_state get_b(const std::string& ns, const token_seq& prompt,
                                uint64_t id = 7) {
    auto r = b.svc->acquire({id, prompt, 16, std::nullopt}, ns);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (r->source != runtime::state_source::none) {
      BOOST_CHECK(ok(b.oracle->verify_served(r->state, ns, prompt, false)));
      BOOST_CHECK_EQUAL(r->state.size(), r->usable_tokens);
    }
    return std::move(*r);
  }

  void fault_a(uint32_t mode, uint32_t n) {
    caf::send_as(a.svc->state_server(), a.svc->state_server(),
                 actors::serve_fault_atom::value, mode, n);
  }
};

token_seq cat(token_seq x, const token_seq& y) {
  x.insert(x.end(), y.begin(), y.end());
  return x;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(peer_tier, fixture)

BOOST_AUTO_TEST_CASE(prefix_published_on_a_is_served_on_b_byte_exact) {
  start_b();
  auto key = seq(512);
  a.put("n", key);
  announce("n", key);
  auto prompt = cat(key, seq(8, 5000));
  auto got = get_b("n", prompt);
  BOOST_CHECK(got.source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(got.usable_tokens, 512u);
  auto rb = b.report();
  BOOST_CHECK_EQUAL(rb.peer.fetched, 1u);
  BOOST_CHECK_EQUAL(rb.peer.lane_fetches, 1u);
  BOOST_CHECK_EQUAL(rb.peer.in_flight_bytes, 0u);
  BOOST_CHECK_GT(rb.peer.bytes, 512u * 256);
  BOOST_CHECK_EQUAL(a.report().peer.served, 1u);
  // Installed in B's RAM: the next acquire is local.
  auto again = get_b("n", prompt, 8);
  BOOST_CHECK(again.source == runtime::state_source::ram);
  BOOST_CHECK_EQUAL(again.usable_tokens, 512u);
}

BOOST_AUTO_TEST_CASE(the_peer_tier_serves_its_own_node_only) {
  // A peer learns the peer tier's handle as the sender of its requests; it
  // must not steer it: a remote FindPrefix is refused, a remote peer_down
  // changes nothing, and both are counted.
  start_b();
  auto port = b.svc->system().middleman().publish(
    caf::actor_cast<caf::actor>(b.svc->peer_tier()), 0, "127.0.0.1");
  BOOST_REQUIRE_MESSAGE(port, (port ? "" : to_string(port.error())));
  auto remote = a.svc->system().middleman().remote_actor("127.0.0.1", *port);
  BOOST_REQUIRE_MESSAGE(remote, (remote ? "" : to_string(remote.error())));
  caf::scoped_actor self{a.svc->system()};
  caf::error refused;
  self
    ->request(*remote, std::chrono::seconds(5),
              find_request("warm", cat(seq(16), {9})))
    .receive([](const msg::sealed<msg::FindPrefixReply>&) {},
             [&](const caf::error& e) { refused = e; });
  BOOST_CHECK_MESSAGE(test::code_of(refused) == ec::not_permitted,
                      to_string(refused));
  self->send(*remote, actors::peer_down_atom::value, std::string{"a"});
  BOOST_REQUIRE(
    eventually([&] { return b.report().peer.refused_remote == 2; }));
  auto r = b.report();
  BOOST_CHECK_EQUAL(r.peer.peers_up, 1u);
  BOOST_CHECK_GE(r.peer.entries, 1u);
  BOOST_CHECK(found_on_b("warm", seq(16)));
}

BOOST_AUTO_TEST_CASE(the_bulk_lane_listens_on_loopback_only) {
  // The lane is plain TCP: off loopback, transfers go as chunks through
  // the (TLS) middleman.
  BOOST_CHECK_EQUAL(net::plaintext_address_for("127.0.0.1"), "127.0.0.1");
  BOOST_CHECK_EQUAL(net::plaintext_address_for("::1"), "::1");
  BOOST_CHECK_EQUAL(net::plaintext_address_for("localhost"), "127.0.0.1");
  BOOST_CHECK_EQUAL(net::plaintext_address_for("0.0.0.0"), "");
  BOOST_CHECK_EQUAL(net::plaintext_address_for("10.1.2.3"), "");
}

BOOST_AUTO_TEST_CASE(without_a_lane_the_entry_is_pulled_in_chunks) {
  start_b();
  auto key = seq(1024);
  a.put("n", key);
  announce("n", key);
  fault_a(2, 1);
  auto prompt = cat(key, seq(8, 5000));
  auto got = get_b("n", prompt);
  BOOST_CHECK(got.source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(got.usable_tokens, 1024u);
  auto rb = b.report();
  BOOST_CHECK_EQUAL(rb.peer.chunk_fetches, 1u);
  BOOST_CHECK_EQUAL(rb.peer.lane_fetches, 0u);
  BOOST_CHECK_EQUAL(rb.peer.fetched, 1u);
}

BOOST_AUTO_TEST_CASE(a_fetched_entry_is_written_to_the_local_ssd) {
  b.opts.cluster_fetched_to_ssd = true;
  start_b();
  a.put("n", seq(512));
  announce("n", seq(512));
  auto prompt = cat(seq(512), seq(4, 9000));
  BOOST_CHECK(get_b("n", prompt).source == runtime::state_source::peer);
  BOOST_REQUIRE(
    eventually([&] { return b.report().peer.written_to_ssd == 1; }));
  // Out of B's RAM, and A gone: B's own SSD serves it.
  BOOST_REQUIRE(b.svc->flush());
  BOOST_REQUIRE(b.svc->boundary());
  a.svc.reset();
  auto local = get_b("n", prompt, 9);
  BOOST_CHECK(local.source == runtime::state_source::ssd);
  BOOST_CHECK_EQUAL(local.usable_tokens, 512u);
}

BOOST_AUTO_TEST_CASE(a_longer_trimmable_entry_serves_a_shorter_prompt) {
  start_b();
  auto key = seq(600);
  a.put("n", key);
  announce("n", key, true);
  auto prompt = cat(seq(300), seq(10, 9000)); // diverges after 300 tokens
  auto got = get_b("n", prompt);
  BOOST_CHECK(got.source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(got.usable_tokens, 300u);
}

BOOST_AUTO_TEST_CASE(peer_wins_only_when_strictly_longer_than_the_ssd) {
  b.opts.cluster_fetched_to_ssd = false;
  start_b();
  // B's own SSD holds 200 tokens of the prompt (out of its RAM).
  auto prompt = cat(seq(700), seq(4, 9000));
  b.put("n", seq(200));
  BOOST_REQUIRE(b.svc->flush());
  BOOST_REQUIRE(b.svc->boundary());
  a.put("n", seq(512));
  announce("n", seq(512));
  auto got = get_b("n", prompt);
  BOOST_CHECK(got.source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(got.usable_tokens, 512u);
  // Now B's SSD holds 600: longer than the peer's 512, so the SSD serves.
  b.put("n", seq(600), 2);
  BOOST_REQUIRE(b.svc->flush());
  BOOST_REQUIRE(b.svc->boundary());
  auto fetched = b.report().peer.fetches;
  auto local = get_b("n", prompt, 9);
  BOOST_CHECK(local.source == runtime::state_source::ssd);
  BOOST_CHECK_EQUAL(local.usable_tokens, 600u);
  BOOST_CHECK_EQUAL(b.report().peer.fetches, fetched);
}

BOOST_AUTO_TEST_CASE(a_holder_without_the_entry_falls_back_to_fresh) {
  start_b();
  announce("n", seq(512)); // A never held it
  auto got = get_b("n", cat(seq(512), seq(4, 9000)));
  BOOST_CHECK(got.source == runtime::state_source::none);
  auto rb = b.report();
  BOOST_CHECK_EQUAL(rb.peer.failed_none, 1u);
  BOOST_CHECK_EQUAL(rb.peer.fetched, 0u);
  BOOST_CHECK_EQUAL(a.report().peer.served_none, 1u);
}

BOOST_AUTO_TEST_CASE(corrupt_bytes_are_refused_counted_and_never_installed) {
  start_b();
  b.put("n", seq(100)); // B's own RAM candidate: the fallback
  a.put("n", seq(512));
  announce("n", seq(512));
  fault_a(0, 1);
  auto prompt = cat(seq(512), seq(4, 9000));
  auto got = get_b("n", prompt);
  BOOST_CHECK(got.source == runtime::state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, 100u);
  BOOST_CHECK_EQUAL(b.report().peer.failed_corrupt, 1u);
  BOOST_CHECK_EQUAL(b.report().peer.fetched, 0u);
  // Nothing partial in B's RAM: the next acquire fetches again, intact.
  auto again = get_b("n", prompt, 8);
  BOOST_CHECK(again.source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(again.usable_tokens, 512u);
}

BOOST_AUTO_TEST_CASE(identical_concurrent_fetches_share_one_transfer) {
  start_b();
  a.put("n", seq(512));
  announce("n", seq(512));
  fault_a(1, 300); // A answers the first FetchEntry 300 ms late
  auto prompt = cat(seq(512), seq(4, 9000));
  auto f1 = b.svc->acquire_async({7, prompt, 16, std::nullopt}, "n");
  BOOST_REQUIRE(eventually([&] { return b.report().peer.fetches == 1; }));
  auto f2 = b.svc->acquire_async({8, prompt, 16, std::nullopt}, "n");
  for (auto* f : {&f1, &f2}) {
    auto r = f->get();
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_CHECK(r->source == runtime::state_source::peer);
    BOOST_CHECK(ok(b.oracle->verify_served(r->state, "n", prompt, false)));
  }
  auto rb = b.report();
  BOOST_CHECK_EQUAL(rb.peer.fetches, 1u);
  BOOST_CHECK_EQUAL(rb.peer.coalesced, 1u);
  BOOST_CHECK_EQUAL(a.report().peer.served, 1u);
}

BOOST_AUTO_TEST_CASE(a_fetch_over_fetch_max_bytes_is_no_candidate) {
  b.opts.cluster_fetch_max_bytes = 64 * 1024; // below 512 tokens x 256 B
  start_b();
  a.put("n", seq(512));
  announce("n", seq(512), true, false);
  auto got = get_b("n", cat(seq(512), seq(4, 9000)));
  BOOST_CHECK(got.source == runtime::state_source::none);
  auto rb = b.report();
  BOOST_CHECK_GE(rb.peer.over_cap, 1u);
  BOOST_CHECK_EQUAL(rb.peer.fetches, 0u);
}

BOOST_AUTO_TEST_CASE(holder_gone_mid_fetch_completes_from_local_state) {
  start_b();
  b.put("n", seq(100));
  a.put("n", seq(2048));
  announce("n", seq(2048));
  fault_a(1, 20000); // A holds its answer back: the fetch is in flight
  auto prompt = cat(seq(2048), seq(4, 9000));
  auto started = std::chrono::steady_clock::now();
  auto f = b.svc->acquire_async({7, prompt, 16, std::nullopt}, "n");
  BOOST_REQUIRE(eventually([&] { return b.report().peer.fetches == 1; }));
  a.svc.reset(); // A leaves mid-fetch
  BOOST_REQUIRE(f.wait_for(60s) == std::future_status::ready);
  auto r = f.get();
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_CHECK(r->source == runtime::state_source::ram);
  BOOST_CHECK_EQUAL(r->usable_tokens, 100u);
  BOOST_CHECK(ok(b.oracle->verify_served(r->state, "n", prompt, false)));
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - started,
                 std::chrono::milliseconds{b.opts.storage_deadline_ms});
  auto rb = b.report();
  BOOST_CHECK_EQUAL(rb.peer.fetched, 0u);
  BOOST_CHECK_EQUAL(rb.peer.failed_unreachable + rb.peer.failed_timeout, 1u);
  // Nothing partial in RAM: the longest B holds is still its own 100.
  auto again = get_b("n", prompt, 9);
  BOOST_CHECK_EQUAL(again.usable_tokens, 100u);
}

BOOST_AUTO_TEST_CASE(route_sends_a_prompt_to_the_node_holding_its_prefix) {
  // The polls below route again and again: no load figure may build up.
  b.opts.route_load_weight = 0;
  start_b();
  auto key = seq(512);
  a.put("n", key); // B's directory learns of it from A's feed
  BOOST_REQUIRE(eventually([&] { return found_on_b("n", key); }));
  auto prompt = cat(key, seq(8, 5000));
  // A's address and load come with its heartbeats.
  caf::expected<runtime::route_decision> r = caf::error{};
  BOOST_REQUIRE(eventually([&] {
    r = b.svc->route(prompt, "n");
    return r && r->options.size() == 2 && !r->options[1].address.empty();
  }));
  BOOST_CHECK_EQUAL(r->chosen.node_id, "a");
  BOOST_CHECK(r->chosen.source == runtime::state_source::ram);
  BOOST_CHECK_EQUAL(r->chosen.usable_tokens, 512u);
  BOOST_CHECK_EQUAL(r->options[1].address, a.svc->cluster()->address());
  // The asking node first: it would fetch A's copy, which costs more.
  BOOST_CHECK_EQUAL(r->options[0].node_id, "b");
  BOOST_CHECK(r->options[0].source == runtime::state_source::peer);
  BOOST_CHECK_EQUAL(r->options[0].usable_tokens, 512u);
  BOOST_CHECK_GT(r->options[0].cost, r->options[1].cost);
  // A itself says the same from its own RAM.
  auto ra = a.svc->route(prompt, "n");
  BOOST_REQUIRE_MESSAGE(ra, why(ra));
  BOOST_CHECK_EQUAL(ra->chosen.node_id, "a");
  BOOST_CHECK_EQUAL(ra->options[0].node_id, "a");
  // Routing moved nothing.
  BOOST_CHECK_EQUAL(b.report().peer.fetches, 0u);
  BOOST_CHECK_EQUAL(a.report().peer.served, 0u);
}

BOOST_AUTO_TEST_CASE(a_route_names_a_peers_address_before_its_first_heartbeat) {
  // A beats only every 20 s: B knows where A is from the moment A is up,
  // not from A's first heartbeat, and says so in a route (no load yet).
  a.opts.cluster_heartbeat_ms = 20000;
  a.opts.cluster_down_after_ms = 60000;
  a.start();
  b.opts.route_load_weight = 0;
  start_b();
  auto r = b.svc->route(seq(100, 7000), "n");
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_REQUIRE_EQUAL(r->options.size(), 2u);
  for (auto& o : r->options)
    if (o.node_id == "a")
      BOOST_CHECK_EQUAL(o.address, a.svc->cluster()->address());
}

BOOST_AUTO_TEST_CASE(route_spreads_prompts_nobody_holds_by_recent_load) {
  start_b();
  std::map<std::string, int> chosen;
  for (tiers::token i = 0; i < 6; ++i) {
    auto r = b.svc->route(seq(100, 10000 + i * 1000), "fresh");
    BOOST_REQUIRE_MESSAGE(r, why(r));
    ++chosen[r->chosen.node_id];
  }
  BOOST_CHECK_EQUAL(chosen["a"], 3);
  BOOST_CHECK_EQUAL(chosen["b"], 3);
}

BOOST_AUTO_TEST_CASE(route_avoids_a_node_without_admission_headroom) {
  // The polls below route again and again: no load figure may build up.
  b.opts.route_load_weight = 0;
  start_b();
  auto key = seq(512);
  a.put("n", key);
  BOOST_REQUIRE(eventually([&] { return found_on_b("n", key); }));
  // A admits a request that leaves less than one more request's bytes.
  auto g = runtime::running_geometry(a.opts);
  BOOST_REQUIRE(g);
  uint64_t n = 1;
  while (g->projected_bytes(n + 1, 16) <= a.opts.kv_budget_bytes)
    ++n;
  runtime::state_request big{42, seq(n, 20000), 16, std::nullopt};
  auto adm = a.svc->admit(big);
  BOOST_REQUIRE_MESSAGE(adm, why(adm));
  BOOST_REQUIRE(adm->admitted);
  auto prompt = cat(key, seq(8, 5000));
  caf::expected<runtime::route_decision> r = caf::error{};
  BOOST_REQUIRE(eventually([&] {
    r = b.svc->route(prompt, "n");
    return r && r->options.size() == 2 && r->options[1].full;
  }));
  // A holds the prefix but cannot start the request: B fetches it.
  BOOST_CHECK_EQUAL(r->chosen.node_id, "b");
  BOOST_CHECK(r->chosen.source == runtime::state_source::peer);
  BOOST_REQUIRE(a.svc->release(big, true));
  BOOST_REQUIRE(eventually([&] {
    r = b.svc->route(prompt, "n");
    return r && !r->options[1].full;
  }));
  BOOST_CHECK_EQUAL(r->chosen.node_id, "a");
}

BOOST_AUTO_TEST_CASE(a_remote_client_asks_a_node_actor_for_a_route) {
  start_b();
  auto key = seq(512);
  a.put("n", key);
  BOOST_REQUIRE(eventually([&] { return found_on_b("n", key); }));
  cluster::client_config cfg;
  caf::actor_system sys{cfg};
  auto node = cluster::connect_node(sys, b.svc->cluster()->address(), 5000ms);
  BOOST_REQUIRE_MESSAGE(node, why(node));
  auto r =
    cluster::query_route(sys, *node, cat(key, seq(8, 5000)), "n", 5000ms);
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_CHECK_EQUAL(r->chosen.node_id, "a");
  BOOST_CHECK_EQUAL(r->chosen.usable_tokens, 512u);
  // Bad input is an error naming it, and the node still answers.
  auto bad = cluster::query_route(sys, *node, {}, "n", 5000ms);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(bad.error() == ec::invalid_argument);
  BOOST_CHECK(cluster::query_route(sys, *node, key, "n", 5000ms));
}

BOOST_AUTO_TEST_SUITE_END()
