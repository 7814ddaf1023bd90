// State crossing real processes (#12 "What it must show"): `kvtier node`
// processes on loopback ephemeral ports (node_writer: the node command
// plus oracle prefills published at start and one more per SIGUSR1) and an
// embedded service ("b") in this process that joins them. What b serves
// from a peer is checked byte for byte with the oracle; a holder killed
// mid-transfer leaves b nothing partial and the request completes from b's
// own state; a stopped holder goes down (its entries leave b's directory)
// and comes back with a resync; a gap in a holder's event feed makes b
// resync from a snapshot. (A peer with another model identity is refused:
// tests/cluster/nodes_test.cpp.)
#define BOOST_TEST_MODULE cluster_peer_nodes
#include "tests/cluster/node_process.hpp"
#include "tests/runtime/service_fixture.hpp"

#include <csignal>
#include <future>

using namespace kvtier;
using namespace kvtier::test;
using cluster::peer_state;
using runtime::state_source;

namespace {

/// node_writer's entry i: tokens 1000*i+1 .. 1000*i+n in namespace "ns".
tiers::token_seq entry_tokens(uint64_t i, size_t n = 64) {
  return testing::service_fixture::seq(n,
                                       static_cast<tiers::token>(1000 * i + 1));
}

struct fixture : testing::service_fixture {
  temp_dir dir;

  fixture() {
    join_test_cluster(opts, "b"); // as node_process's nodes
  }

  /// A node_writer holding `entries` entries of `tokens` tokens.
  std::unique_ptr<node_process> writer(const std::string& id, uint64_t entries,
                                       size_t tokens = 64,
                                       std::string model = "tiny-dense",
                                       uint64_t ram_cap = 64ull << 20) {
    node_settings s;
    s.node_id = id;
    s.program = KVTIER_NODE_WRITER;
    s.model = std::move(model);
    s.ram_cap_bytes = ram_cap;
    s.extra_args = {"--entries", std::to_string(entries), "--tokens",
                    std::to_string(tokens)};
    return std::make_unique<node_process>(dir.path, s);
  }

  std::vector<std::string> up_here() {
    auto v = svc->cluster()->members(2000ms);
    return v ? v->in_state(peer_state::up) : std::vector<std::string>{};
  }

  /// Entries b's peer directory knows.
  uint64_t known() {
    auto r = svc->report();
    return r ? r->peer.entries : 0;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_prefix_published_on_a_is_served_on_b_byte_exact,
                        fixture) {
  auto a = writer("a", 3);
  node_settings cs;
  cs.node_id = "c";
  cs.joins = {a->address()};
  node_process c{dir.path, cs};
  opts.cluster_peers = {a->address()};
  start();
  // Three nodes: b meets a, and c through a's member list.
  BOOST_TEST(wait_for(
    [&] {
      return up_here() == std::vector<std::string>{"a", "c"};
    },
    5000ms));
  BOOST_TEST(wait_for([&] { return known() == 3; }, 5000ms),
             "b's directory knows " << known() << " entries of a");
  // Entry 1 and more tokens: served from the peer, byte-exact (get checks
  // with the oracle), then installed here as a local donor.
  auto prompt = cat(entry_tokens(1), {7, 8, 9});
  auto r = get("ns", prompt, 10);
  BOOST_CHECK(r.source == state_source::peer);
  BOOST_TEST(r.usable_tokens == 64u);
  auto again = get("ns", prompt, 11);
  BOOST_CHECK(again.source == state_source::ram);
  BOOST_TEST(again.usable_tokens == 64u);
  // A shorter prompt sharing 40 tokens of entry 2 uses it trimmed.
  auto part = entry_tokens(2, 40);
  auto trimmed = get("ns", cat(part, {5}), 12);
  BOOST_CHECK(trimmed.source == state_source::peer);
  BOOST_TEST(trimmed.usable_tokens == 40u);
  // Another namespace shares nothing.
  auto other = get("other", prompt, 13);
  BOOST_CHECK(other.source == state_source::none);
  auto rep = report();
  BOOST_TEST(rep.peer.fetched == 2u);
  BOOST_TEST(a->stop() == 0, a->log());
  BOOST_TEST(c.stop() == 0, c.log());
}

BOOST_FIXTURE_TEST_CASE(a_holder_killed_mid_transfer_leaves_nothing_partial,
                        fixture) {
  // One entry of 999 tokens of a 70B model: 312 MiB to move.
  const uint64_t big = 1ull << 30;
  auto a = writer("a", 1, 999, "llama-3.1-70b", big);
  opts.model = "llama-3.1-70b";
  opts.ram_cap_bytes = big;
  opts.kv_budget_bytes = big;
  opts.ssd_cap_bytes = big;
  opts.cluster_peers = {a->address()};
  start();
  BOOST_TEST(wait_for([&] { return known() == 1; }, 10000ms));
  // b holds the first 100 tokens itself: its own, shorter candidate.
  auto whole = entry_tokens(0, 999);
  auto mine = tiers::token_seq(whole.begin(), whole.begin() + 100);
  put("ns", mine, 1);
  auto prompt = cat(whole, {3});
  auto pending = std::async(
    std::launch::async, [&] { return svc->acquire(request(2, prompt), "ns"); });
  // Killed while b's fetch holds bytes in flight.
  bool caught = wait_for(
    [&] {
      auto r = svc->report();
      return r && r->peer.in_flight_bytes > 0;
    },
    10000ms);
  BOOST_TEST(caught, "b never had a fetch in flight");
  a->kill9();
  auto started = std::chrono::steady_clock::now();
  BOOST_REQUIRE(pending.wait_for(60s) == std::future_status::ready);
  auto r = pending.get();
  BOOST_REQUIRE_MESSAGE(r, testing::why(r));
  BOOST_TEST_MESSAGE("answered "
                     << std::chrono::duration_cast<ms>(
                          std::chrono::steady_clock::now() - started)
                          .count()
                     << " ms after the kill from " << to_string(r->source));
  // Nothing partial: b's own 100 tokens (byte-exact), not the peer's.
  BOOST_CHECK(r->source == state_source::ram);
  BOOST_TEST(r->usable_tokens == 100u);
  BOOST_CHECK(
    testing::ok(oracle->verify_served(r->state, "ns", prompt, false)));
  auto peek = svc->peek_prefix_len(prompt, "ns");
  BOOST_REQUIRE(peek);
  BOOST_TEST(*peek == 100u, "RAM holds " << *peek << " tokens of the prompt");
  auto rep = report();
  BOOST_TEST(rep.peer.fetched == 0u);
  // The holder went mid-fetch (its connection broke), nothing else.
  BOOST_TEST(rep.peer.failed_unreachable >= 1u);
  BOOST_TEST(rep.peer.failed_timeout + rep.peer.failed_corrupt
               + rep.peer.over_cap
             == 0u);
  BOOST_TEST(rep.peer.in_flight_bytes == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_stopped_node_goes_down_and_rejoins_with_a_resync,
                        fixture) {
  auto a = writer("a", 2);
  opts.cluster_peers = {a->address()};
  start();
  BOOST_TEST(wait_for([&] { return known() == 2; }, 5000ms));
  auto prompt = cat(entry_tokens(0), {4});
  // Stopped: down within down-after-ms (plus a heartbeat and margin), and
  // everything it held leaves b's directory.
  a->pause();
  auto paused = std::chrono::steady_clock::now();
  BOOST_TEST(wait_for([&] { return up_here().empty(); }, 3000ms));
  auto took =
    std::chrono::duration_cast<ms>(std::chrono::steady_clock::now() - paused);
  // How soon is a figure, not a check (a loaded machine delays the
  // heartbeats' timers): printed.
  BOOST_TEST_MESSAGE("down after " << took.count() << " ms (down-after-ms "
                                   << test_timing::down_after_ms << ")");
  BOOST_TEST(known() == 0u);
  auto none = get("ns", prompt, 1);
  BOOST_CHECK(none.source == state_source::none);
  // Back: up again, a resync from a snapshot fills the directory again.
  a->resume();
  BOOST_TEST(wait_for(
    [&] { return up_here() == std::vector<std::string>{"a"}; }, 5000ms));
  BOOST_TEST(wait_for([&] { return known() == 2; }, 5000ms));
  auto rep = report();
  BOOST_TEST(rep.peer.feed_snapshots >= 2u);
  auto r = get("ns", prompt, 2);
  BOOST_CHECK(r.source == state_source::peer);
  BOOST_TEST(r.usable_tokens == 64u);
  BOOST_TEST(a->stop() == 0, a->log());
}

BOOST_FIXTURE_TEST_CASE(a_gap_in_a_feed_makes_b_resync, fixture) {
  auto a = writer("a", 1);
  opts.cluster_peers = {a->address()};
  start();
  BOOST_TEST(wait_for([&] { return known() == 1; }, 5000ms));
  auto before = report().peer;
  // a skips a sequence number, then publishes entry 1.
  a->signal(SIGUSR1);
  BOOST_TEST(wait_for([&] { return known() == 2; }, 5000ms), a->log());
  auto after = report().peer;
  BOOST_TEST_MESSAGE("snapshots " << after.feed_snapshots << " gaps "
                                  << after.feed_gap_resyncs << " entries "
                                  << after.entries);
  BOOST_TEST(after.feed_gap_resyncs == before.feed_gap_resyncs + 1);
  BOOST_TEST(after.feed_snapshots == before.feed_snapshots + 1);
  auto r = get("ns", cat(entry_tokens(1), {2}), 1);
  BOOST_CHECK(r.source == state_source::peer);
  BOOST_TEST(r.usable_tokens == 64u);
  auto code = a->stop();
  BOOST_TEST(code == 0, "exit " << code << ": " << a->log());
}
