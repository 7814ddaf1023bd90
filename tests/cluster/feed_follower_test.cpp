// The feed follower: its sequence logic as a plain class (in order,
// duplicate, overlap, gap -> resync from a snapshot, late join, restart of
// the peer, forget), and two actor systems in this process over the
// loopback middleman: node B's follower subscribes to node A's feed through
// A's node actor when A comes up, and the directory batches it hands its
// target (a probe here, the peer tier later), applied to a
// tiers::peer_directory, equal what A's feed holds; a gap forced with the
// feed's skip hook makes it resync from a snapshot.
#define BOOST_TEST_MODULE cluster_feed_follower
#include "tests/cluster/node_process.hpp"

#include "actors/feed_actor.hpp"
#include "actors/feed_follower_actor.hpp"
#include "runtime/service/spawn.hpp"
#include "tiers/peer_directory.hpp"

#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <map>
#include <mutex>

using namespace kvtier;
using namespace kvtier::test;
using actors::directory_batch;
using actors::directory_item;
using actors::feed_event;
using actors::feed_sequence;
using actors::follow_verdict;

namespace {

feed_event ev(uint64_t seq, msg::FeedKind k, std::vector<uint32_t> key) {
  feed_event e;
  e.seq = seq;
  e.kind = k;
  bool ssd = k == msg::FeedKind::DURABLE || k == msg::FeedKind::REMOVED;
  e.tier = ssd ? msg::FeedTier::SSD : msg::FeedTier::RAM;
  e.ns = "ns";
  e.key = std::move(key);
  e.bytes = 10;
  e.trimmable = true;
  return e;
}

std::vector<feed_event> run(uint64_t first, uint64_t n) {
  std::vector<feed_event> out;
  for (uint64_t s = first; s < first + n; ++s)
    out.push_back(ev(s, msg::FeedKind::PUT, {static_cast<uint32_t>(s)}));
  return out;
}

/// A follower of "a" synced by a snapshot at `seq` of incarnation 5.
feed_sequence synced(uint64_t seq) {
  feed_sequence f;
  BOOST_CHECK(f.subscribe_from("a").from_seq == 0); // never followed
  f.subscribing("a");
  auto s = f.on_snapshot("a", 5, seq, {});
  BOOST_CHECK(s.verdict == follow_verdict::apply);
  BOOST_CHECK(s.batch.replace);
  return f;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_next_seq_in_order_is_applied_duplicates_ignored) {
  auto f = synced(3);
  BOOST_TEST(f.subscribe_from("a").from_seq == 4u);
  BOOST_TEST(f.subscribe_from("a").incarnation == 5u);
  auto s = f.on_batch("a", 5, 4, run(4, 2));
  BOOST_TEST((s.verdict == follow_verdict::apply));
  BOOST_TEST(!s.batch.replace);
  BOOST_TEST(s.batch.items.size() == 2u);
  BOOST_TEST(f.last("a") == 5u);
  // The same batch again, or an older one: ignored.
  BOOST_TEST(
    (f.on_batch("a", 5, 4, run(4, 2)).verdict == follow_verdict::ignore));
  BOOST_TEST(
    (f.on_batch("a", 5, 2, run(2, 1)).verdict == follow_verdict::ignore));
  // Overlapping: only what is new.
  s = f.on_batch("a", 5, 5, run(5, 2));
  BOOST_TEST((s.verdict == follow_verdict::apply));
  BOOST_REQUIRE(s.batch.items.size() == 1u);
  BOOST_TEST((s.batch.items[0].key == std::vector<uint32_t>{6}));
  BOOST_TEST(f.counts().events == 3u);
  BOOST_TEST(f.counts().ignored == 2u);
}

BOOST_AUTO_TEST_CASE(a_gap_asks_for_a_resync_from_a_snapshot) {
  auto f = synced(3);
  BOOST_TEST(
    (f.on_batch("a", 5, 6, run(6, 1)).verdict == follow_verdict::resync));
  BOOST_TEST(f.counts().gaps == 1u);
  BOOST_TEST(f.subscribe_from("a").from_seq == 0u); // a snapshot
  f.subscribing("a");
  // Batches while the subscription is out are left to its reply.
  BOOST_TEST(
    (f.on_batch("a", 5, 7, run(7, 1)).verdict == follow_verdict::ignore));
  auto s = f.on_snapshot("a", 5, 7, {directory_item{"ns", {1}, 0, 10, true}});
  BOOST_TEST((s.verdict == follow_verdict::apply));
  BOOST_TEST(s.batch.replace);
  BOOST_TEST(s.batch.items.size() == 1u);
  BOOST_TEST(
    (f.on_batch("a", 5, 8, run(8, 1)).verdict == follow_verdict::apply));
}

BOOST_AUTO_TEST_CASE(a_late_join_or_a_forgotten_node_starts_from_a_snapshot) {
  feed_sequence f;
  BOOST_TEST((f.on_batch("a", 5, 1, run(1, 1)).verdict
              == follow_verdict::ignore)); // not followed
  f = synced(9);
  f.forget("a"); // it went down
  BOOST_TEST(!f.follows("a"));
  BOOST_TEST(f.subscribe_from("a").from_seq == 0u);
  // A late reply to the forgotten subscription changes nothing.
  BOOST_TEST((f.on_snapshot("a", 5, 9, {}).verdict == follow_verdict::ignore));
}

BOOST_AUTO_TEST_CASE(a_restarted_peer_is_resynced) {
  auto f = synced(3);
  // Seq 4 of another incarnation: the peer restarted (its seq 4 is not
  // ours to continue).
  BOOST_TEST(
    (f.on_batch("a", 6, 4, run(4, 1)).verdict == follow_verdict::resync));
  BOOST_TEST(f.counts().restarts == 1u);
  BOOST_TEST(f.subscribe_from("a").from_seq == 0u);
  f.subscribing("a");
  BOOST_TEST((f.on_snapshot("a", 6, 1, {}).verdict == follow_verdict::apply));
  BOOST_TEST(f.subscribe_from("a").incarnation == 6u);
}

BOOST_AUTO_TEST_CASE(a_following_reply_continues_only_its_own_incarnation) {
  auto f = synced(3);
  f.subscribing("a"); // a rejoin from 4
  auto s = f.on_following("a", 5, 4, run(4, 2));
  BOOST_TEST((s.verdict == follow_verdict::apply));
  BOOST_TEST(s.batch.items.size() == 2u);
  f.subscribing("a");
  BOOST_TEST(
    (f.on_following("a", 8, 6, run(6, 1)).verdict == follow_verdict::resync));
}

namespace {

/// Collects what the follower hands on.
struct probe_log {
  std::mutex mtx;
  std::vector<directory_batch> batches;
};

caf::behavior probe(caf::event_based_actor*, std::shared_ptr<probe_log> log) {
  return {
    [log](directory_batch& b) {
      std::lock_guard<std::mutex> guard{log->mtx};
      log->batches.push_back(std::move(b));
    },
  };
}

runtime::service_options node_opts(const std::string& id) {
  runtime::service_options o;
  o.cluster_enabled = true;
  o.cluster_node_id = id;
  o.cluster_heartbeat_ms = 100;
  o.cluster_down_after_ms = 1000;
  o.cluster_reconnect_backoff_ms = 100;
  o.cluster_reconnect_backoff_max_ms = 400;
  return o;
}

actors::feed_change change(msg::FeedKind k, std::vector<uint32_t> key,
                           uint64_t bytes) {
  actors::feed_change c;
  c.kind = static_cast<uint8_t>(k);
  bool ssd = k == msg::FeedKind::DURABLE || k == msg::FeedKind::REMOVED;
  c.tier = ssd ? 1 : 0;
  c.ns = "ns";
  c.key = std::move(key);
  c.bytes = bytes;
  c.trimmable = true;
  return c;
}

using holding = std::tuple<std::string, std::vector<uint32_t>, uint8_t>;

/// What A's feed holds, by its own snapshot.
std::map<holding, uint64_t> held_by(caf::actor_system& sys,
                                    const caf::actor& feed) {
  std::map<holding, uint64_t> out;
  auto add = [&](msg::FeedSnapshot::Reader s) {
    auto items = actors::read_snapshot(s);
    BOOST_REQUIRE(items);
    for (auto& it : *items)
      out[{it.ns, it.key, it.tier}] = it.bytes;
  };
  caf::scoped_actor self{sys};
  msg::draft<msg::SubscribeFeed> d;
  uint32_t parts = 1;
  self->request(feed, std::chrono::seconds(5), std::move(d).seal())
    .receive(
      [&](const msg::sealed<msg::SubscribeFeedReply>& r) {
        parts = std::max<uint32_t>(1, r.root().getSnapshot().getParts());
        add(r.root().getSnapshot());
      },
      [&](caf::error& err) { BOOST_FAIL(describe(err)); });
  for (uint32_t i = 1; i < parts; ++i) // pushed before the reply
    self->receive(
      [&](const msg::sealed<msg::FeedSnapshot>& m) { add(m.root()); },
      caf::after(std::chrono::seconds(5)) >>
        [&] { BOOST_FAIL("a snapshot part did not come"); });
  return out;
}

struct two_nodes {
  client_config cfg_a, cfg_b;
  caf::actor_system sys_a{cfg_a}, sys_b{cfg_b};
  std::shared_ptr<probe_log> log = std::make_shared<probe_log>();
  actors::feed_actor feed;
  std::unique_ptr<cluster::node> a, b;
  caf::actor follower;
  /// Everything the probe got, applied in order.
  tiers::peer_directory dir;
  std::map<holding, uint64_t> model;
  size_t applied = 0;
  size_t replaces = 0;
  caf::actor pr;

  /// An actor system waits for its actors when it goes: stop them.
  ~two_nodes() {
    b.reset();
    a.reset();
    // From an actor of this process: the follower and the feed ignore
    // anonymous exit messages (each system is a node of its own).
    caf::scoped_actor stopper_a{sys_a}, stopper_b{sys_b};
    for (auto* h : {&follower, &pr})
      if (*h)
        stopper_b->send_exit(*h, caf::exit_reason::user_shutdown);
    if (feed)
      stopper_a->send_exit(feed, caf::exit_reason::user_shutdown);
  }

  /// `part_bytes`: A's feed sends snapshots in parts that small.
  void start_a(size_t part_bytes = actors::feed_limits::snapshot_part_bytes) {
    auto o = node_opts("A");
    actors::feed_config fc;
    fc.node = o.cluster_node_id;
    fc.ring = static_cast<size_t>(o.cluster_feed_ring);
    fc.snapshot_part_bytes = part_bytes;
    feed = sys_a.spawn(actors::feed, std::move(fc));
    auto n = cluster::node::start(sys_a, o, "fp-1");
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(n),
                          (n ? std::string{} : describe(n.error())));
    a = std::move(*n);
    a->attach({caf::actor_cast<caf::actor>(feed), {}, {}, {}});
  }

  void start_b() {
    pr = sys_b.spawn(probe, log);
    follower = caf::actor_cast<caf::actor>(actors::spawn_feed_follower(
      sys_b, caf::actor_cast<actors::directory_sink_actor>(pr), 1000ms));
    auto n = cluster::node::start(sys_b, node_opts("B"), "fp-1", {a->address()},
                                  {follower});
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(n),
                          (n ? std::string{} : describe(n.error())));
    b = std::move(*n);
  }

  void tell(msg::FeedKind k, std::vector<uint32_t> key, uint64_t bytes = 64) {
    // As an actor of this process (the feed itself): anonymous changes
    // are not trusted.
    caf::send_as(feed, feed, change(k, std::move(key), bytes));
  }

  /// Applies the batches that arrived since the last call.
  void apply() {
    std::vector<directory_batch> fresh;
    {
      std::lock_guard<std::mutex> guard{log->mtx};
      fresh.assign(log->batches.begin() + applied, log->batches.end());
      applied = log->batches.size();
    }
    for (auto& batch : fresh) {
      BOOST_TEST(batch.node == "A");
      if (batch.replace) {
        ++replaces;
        dir.drop(batch.node);
        model.clear();
      }
      for (auto& it : batch.items) {
        auto t = static_cast<tiers::peer_tier>(it.tier);
        if (it.present) {
          dir.put(batch.node, it.ns, it.key, t, it.bytes, it.trimmable);
          model[{it.ns, it.key, it.tier}] = it.bytes;
        } else {
          dir.remove(batch.node, it.ns, it.key, t);
          model.erase({it.ns, it.key, it.tier});
        }
      }
    }
  }

  /// Whether B's view (the directory and the model) is A's table.
  bool in_sync() {
    apply();
    auto want = held_by(sys_a, caf::actor_cast<caf::actor>(feed));
    return model == want && dir.holdings("A") == want.size();
  }

  actors::follow_counts counts() {
    actors::follow_counts out;
    caf::scoped_actor self{sys_b};
    self
      ->request(follower, std::chrono::seconds(5),
                actors::follower_stats_atom::value)
      .receive([&](const actors::follow_counts& c) { out = c; },
               [&](caf::error& err) { BOOST_FAIL(describe(err)); });
    return out;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_peers_events_and_snapshot_reach_the_directory) {
  two_nodes t;
  t.start_a();
  // Before B exists: B joins late and starts from a snapshot.
  t.tell(msg::FeedKind::PUT, {1, 2, 3});
  t.tell(msg::FeedKind::DURABLE, {1, 2, 3}, 70);
  t.tell(msg::FeedKind::PUT, {9, 9});
  t.start_b();
  BOOST_TEST(wait_for([&] { return t.in_sync() && t.replaces == 1; }, 5000ms));
  BOOST_TEST(t.model.size() == 3u);
  // Then events, pushed in batches.
  t.tell(msg::FeedKind::EVICT, {9, 9});
  t.tell(msg::FeedKind::PUT, {1, 2, 3, 4});
  t.tell(msg::FeedKind::SUPERSEDED, {1, 2, 3});
  t.tell(msg::FeedKind::REMOVED, {1, 2, 3});
  t.tell(msg::FeedKind::PUT, {7});
  BOOST_TEST(wait_for(
    [&] {
      return t.in_sync() && t.model.count({"ns", {7}, 0}) == 1;
    },
    5000ms));
  BOOST_TEST(t.replaces == 1u); // no resync was needed
  BOOST_TEST(t.model.size() == 2u);
  std::vector<uint32_t> prompt{1, 2, 3, 4, 5};
  auto c = t.dir.longest_usable("ns", prompt);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->length == 4u);
  BOOST_TEST(c->holders.at(0).node == "A");
  // A forced gap: the follower resyncs from a snapshot.
  {
    // From an actor of this process: the feed ignores anonymous test hooks.
    caf::scoped_actor local{t.sys_a};
    local->send(t.feed, actors::feed_skip_atom::value, uint64_t{3});
  }
  t.tell(msg::FeedKind::PUT, {8});
  BOOST_TEST(wait_for(
    [&] {
      return t.in_sync() && t.model.count({"ns", {8}, 0}) == 1;
    },
    5000ms));
  BOOST_TEST(t.replaces == 2u);
  auto n = t.counts();
  BOOST_TEST(n.gaps == 1u);
  BOOST_TEST(n.snapshots == 2u);
  BOOST_TEST(n.refused == 0u);
  // And it follows on after the resync.
  t.tell(msg::FeedKind::EVICT, {8});
  BOOST_TEST(wait_for(
    [&] {
      return t.in_sync() && t.model.count({"ns", {8}, 0}) == 0;
    },
    5000ms));
  BOOST_TEST(t.replaces == 2u);
}

BOOST_AUTO_TEST_CASE(a_snapshot_in_many_parts_reaches_the_directory_whole) {
  // A's feed cuts its snapshot into parts of 256 bytes (two or three
  // entries each): B's follower gathers every part over the middleman and
  // applies them as one snapshot (one replace), nothing refused.
  two_nodes t;
  t.start_a(256);
  for (uint32_t i = 0; i < 60; ++i)
    t.tell(msg::FeedKind::PUT, {i, i + 1, i + 2, i + 3, i + 4, i + 5});
  t.tell(msg::FeedKind::DURABLE, {7, 8, 9, 10, 11, 12}, 70);
  t.start_b();
  BOOST_TEST(wait_for([&] { return t.in_sync() && t.replaces == 1; }, 5000ms));
  BOOST_TEST(t.model.size() == 61u);
  auto n = t.counts();
  BOOST_TEST(n.snapshots == 1u);
  BOOST_TEST(n.refused == 0u);
  // And events follow on after it.
  t.tell(msg::FeedKind::EVICT, {0, 1, 2, 3, 4, 5});
  BOOST_TEST(wait_for(
    [&] {
      return t.in_sync() && t.model.count({"ns", {0, 1, 2, 3, 4, 5}, 0}) == 0;
    },
    5000ms));
  BOOST_TEST(t.replaces == 1u);
}
