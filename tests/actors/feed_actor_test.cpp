// The event feed message by message on CAF's deterministic scheduler:
// every change is numbered from 1 without holes and pushed once per turn as
// one batch, a change that alters nothing is no event, the ring keeps the
// last N events and a subscription within it replays exactly the missing
// ones, one before it (or naming another incarnation, or across a hole)
// gets a snapshot equal to the feed's table, a dead subscriber is dropped,
// the skip hook leaves a gap, and a local listener calls its function per
// event and contains what it throws. The ring is bounded by bytes too, and
// the feed publishes what its ring and table hold.
// (tests/runtime/feed_events_test.cpp drives the feed from a real RAM + SSD
// service.)
#define BOOST_TEST_MODULE actors_feed
#include "tests/caf_bridge.hpp"

#include "actors/feed_actor.hpp"
#include "messages/error.hpp"

#include <map>
#include <set>

using namespace kvtier;
using actors::feed_change;
using actors::feed_event;
using actors::sealed;
using msg::FeedKind;

namespace {

feed_change change(FeedKind k, const std::string& ns, std::vector<uint32_t> key,
                   uint64_t bytes = 100, bool trim = true) {
  feed_change c;
  c.kind = static_cast<uint8_t>(k);
  bool ssd = k == FeedKind::DURABLE || k == FeedKind::REMOVED;
  c.tier = static_cast<uint8_t>(ssd ? msg::FeedTier::SSD : msg::FeedTier::RAM);
  c.ns = ns;
  c.key = std::move(key);
  c.bytes = bytes;
  c.trimmable = trim;
  return c;
}

sealed<msg::SubscribeFeed> subscribe_msg(uint64_t from, uint64_t inc) {
  msg::draft<msg::SubscribeFeed> d;
  d.root().setFromSeq(from);
  d.root().setIncarnation(inc);
  return std::move(d).seal();
}

struct fixture : testing::kvtier_fixture<> {
  actors::feed_actor feed;
  std::shared_ptr<actors::feed_memory> memory =
    std::make_shared<actors::feed_memory>();

  void spawn_feed(size_t ring = 8,
                  size_t part_bytes = actors::feed_limits::snapshot_part_bytes,
                  uint64_t ring_bytes = uint64_t{16} << 20) {
    actors::feed_config cfg;
    cfg.node = "a";
    cfg.incarnation = 7;
    cfg.ring = ring;
    cfg.ring_bytes = ring_bytes;
    cfg.memory = memory;
    cfg.snapshot_part_bytes = part_bytes;
    feed = sys.spawn(actors::feed, cfg);
    drain();
  }

  /// The next message of self: a batch's events (with its first seq).
  std::pair<uint64_t, std::vector<feed_event>> next_batch() {
    std::pair<uint64_t, std::vector<feed_event>> out;
    BOOST_REQUIRE(self->has_next_message());
    self->receive([&](const sealed<msg::FeedBatch>& b) {
      BOOST_CHECK_EQUAL(std::string{b.root().getNode().cStr()}, "a");
      BOOST_CHECK_EQUAL(b.root().getIncarnation(), 7u);
      out.first = b.root().getFirstSeq();
      auto ev = actors::read_batch(b.root());
      BOOST_REQUIRE(ev);
      out.second = std::move(*ev);
    });
    return out;
  }

  sealed<msg::SubscribeFeedReply> subscribe(uint64_t from, uint64_t inc = 7) {
    self->send(feed, subscribe_msg(from, inc));
    drain();
    sealed<msg::SubscribeFeedReply> out;
    BOOST_REQUIRE(self->has_next_message());
    self->receive([&](const sealed<msg::SubscribeFeedReply>& r) { out = r; });
    return out;
  }

  std::tuple<uint64_t, uint64_t, uint64_t> stats() {
    self->send(feed, actors::feed_stats_atom::value);
    drain();
    std::tuple<uint64_t, uint64_t, uint64_t> out;
    self->receive([&](uint64_t seq, uint64_t subs, uint64_t ring) {
      out = {seq, subs, ring};
    });
    return out;
  }

  void put(const std::string& ns, std::vector<uint32_t> key) {
    self->send(feed, change(FeedKind::PUT, ns, std::move(key)));
  }
};

std::vector<uint64_t> seqs(const std::vector<feed_event>& ev) {
  std::vector<uint64_t> out;
  for (auto& e : ev)
    out.push_back(e.seq);
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(feed_actor_suite, fixture)

BOOST_AUTO_TEST_CASE(changes_are_numbered_from_one_and_pushed_once_per_turn) {
  spawn_feed();
  auto r = subscribe(1);
  BOOST_REQUIRE(r.root().isFollowing());
  BOOST_CHECK_EQUAL(r.root().getFollowing().getFirstSeq(), 1u);
  BOOST_CHECK_EQUAL(r.root().getFollowing().getEvents().size(), 0u);
  put("ns", {1, 2, 3});
  put("ns", {1, 2, 3, 4});
  self->send(feed, change(FeedKind::EVICT, "ns", {1, 2, 3}));
  drain();
  auto [first, ev] = next_batch();
  BOOST_CHECK_EQUAL(first, 1u);
  BOOST_CHECK((seqs(ev) == std::vector<uint64_t>{1, 2, 3}));
  BOOST_CHECK(ev[0].kind == FeedKind::PUT);
  BOOST_CHECK(ev[2].kind == FeedKind::EVICT);
  BOOST_CHECK((ev[1].key == std::vector<uint32_t>{1, 2, 3, 4}));
  BOOST_CHECK(!self->has_next_message()); // one batch for the turn
  // Evicting what RAM does not hold changes nothing: no event, no seq.
  self->send(feed, change(FeedKind::EVICT, "ns", {9}));
  self->send(feed, change(FeedKind::REMOVED, "ns", {1, 2, 3, 4}));
  drain();
  BOOST_CHECK(!self->has_next_message());
  BOOST_CHECK_EQUAL(std::get<0>(stats()), 3u);
  put("other", {5});
  drain();
  auto [first2, ev2] = next_batch();
  BOOST_CHECK_EQUAL(first2, 4u);
  BOOST_CHECK((seqs(ev2) == std::vector<uint64_t>{4}));
}

BOOST_AUTO_TEST_CASE(the_ring_keeps_the_last_events_and_replays_the_missing) {
  spawn_feed(4);
  for (uint32_t i = 1; i <= 6; ++i)
    put("ns", {i});
  drain();
  BOOST_CHECK((stats() == std::tuple<uint64_t, uint64_t, uint64_t>{6, 0, 4}));
  // From 4: the ring holds 3..6, so exactly 4, 5, 6 come back.
  auto r = subscribe(4);
  BOOST_REQUIRE(r.root().isFollowing());
  auto ev = actors::read_batch(r.root().getFollowing());
  BOOST_REQUIRE(ev);
  BOOST_CHECK((seqs(*ev) == std::vector<uint64_t>{4, 5, 6}));
  BOOST_CHECK(((*ev)[0].key == std::vector<uint32_t>{4}));
  // From 2: gone from the ring, a snapshot instead.
  BOOST_CHECK(subscribe(2).root().isSnapshot());
  // From 5 of another incarnation (the subscriber followed an earlier
  // feed of this node): a snapshot.
  BOOST_CHECK(subscribe(5, 99).root().isSnapshot());
  // From 7 (up to date): following, nothing to replay.
  auto now = subscribe(7);
  BOOST_REQUIRE(now.root().isFollowing());
  BOOST_CHECK_EQUAL(now.root().getFollowing().getEvents().size(), 0u);
  // One subscriber however often it subscribed; what follows comes once.
  BOOST_CHECK_EQUAL(std::get<1>(stats()), 1u);
  put("ns", {7});
  drain();
  BOOST_CHECK((seqs(next_batch().second) == std::vector<uint64_t>{7}));
  BOOST_CHECK(!self->has_next_message());
}

BOOST_AUTO_TEST_CASE(the_ring_is_bounded_by_bytes_too) {
  // Room for 3 events of 1000-token keys (each ~4 KB) but a count of 100:
  // the bytes decide. The oldest leave; a subscriber from within the ring
  // replays, one from before it gets a snapshot; the published memory
  // matches the ring.
  std::vector<uint32_t> probe(1000, 0);
  feed_event e;
  e.ns = "ns";
  e.key = probe;
  auto one = actors::ring_bytes_of(e);
  BOOST_CHECK_GT(one, 4000u);
  spawn_feed(100, actors::feed_limits::snapshot_part_bytes, 3 * one + one / 2);
  for (uint32_t i = 1; i <= 6; ++i)
    put("ns", std::vector<uint32_t>(1000, i));
  drain();
  BOOST_CHECK((stats() == std::tuple<uint64_t, uint64_t, uint64_t>{6, 0, 3}));
  BOOST_CHECK_EQUAL(memory->ring_events.load(), 3u);
  BOOST_CHECK_EQUAL(memory->ring_bytes.load(), 3 * one);
  auto r = subscribe(4);
  BOOST_REQUIRE(r.root().isFollowing());
  auto ev = actors::read_batch(r.root().getFollowing());
  BOOST_REQUIRE(ev);
  BOOST_CHECK((seqs(*ev) == std::vector<uint64_t>{4, 5, 6}));
  BOOST_CHECK(subscribe(3).root().isSnapshot());
  // An event alone over the bound is not kept: the ring empties, and a
  // subscriber behind it resyncs from a snapshot.
  put("ns", std::vector<uint32_t>(4000, 9));
  drain();
  BOOST_CHECK((seqs(next_batch().second) == std::vector<uint64_t>{7}));
  BOOST_CHECK_EQUAL(std::get<2>(stats()), 0u);
  BOOST_CHECK_EQUAL(memory->ring_bytes.load(), 0u);
  BOOST_CHECK(subscribe(7).root().isSnapshot());
  // The table: seven entries sharing no prefix, each key's tokens once.
  BOOST_CHECK_EQUAL(memory->table_entries.load(), 7u);
  BOOST_CHECK_GE(memory->table_bytes.load(), (6 * 1000 + 4000) * 4u);
  BOOST_CHECK_LT(memory->table_bytes.load(), (6 * 1000 + 4000) * 4u + 4096);
}

BOOST_AUTO_TEST_CASE(the_table_keeps_a_shared_prefix_once) {
  // A conversation: each turn's key extends the last. The ring holds every
  // key whole; the table holds the 1000-token prefix once.
  spawn_feed();
  std::vector<uint32_t> key;
  for (uint32_t turn = 0; turn < 8; ++turn) {
    for (uint32_t i = 0; i < 1000; ++i)
      key.push_back(turn * 1000 + i);
    put("ns", key);
  }
  drain();
  BOOST_CHECK_EQUAL(memory->table_entries.load(), 8u);
  BOOST_CHECK_LT(memory->table_bytes.load(), 8000 * 4u + 4096);
  BOOST_CHECK_GT(memory->ring_bytes.load(), 36000 * 4u); // 1000 + .. + 8000
  // The snapshot still carries every key whole.
  auto r = subscribe(0);
  BOOST_REQUIRE(r.root().isSnapshot());
  std::set<size_t> lengths;
  for (auto h : r.root().getSnapshot().getEntries())
    lengths.insert(h.getKey().size());
  BOOST_CHECK(
    (lengths
     == std::set<size_t>{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000}));
}

BOOST_AUTO_TEST_CASE(a_large_snapshot_comes_in_parts_that_add_up_to_the_table) {
  // Parts of at most 300 bytes of keys and fields (an entry of 10 tokens
  // counts 106): the reply carries part 0, the other parts are pushed to
  // the subscriber before it, all at the same seq; together they are the
  // table, each entry once. One entry over the budget is a part alone.
  // The table has no set order, so the big entry may split a pair: 11
  // parts (10 pairs and it) or 12.
  spawn_feed(4, 300);
  std::set<std::vector<uint32_t>> want;
  for (uint32_t i = 0; i < 20; ++i) {
    std::vector<uint32_t> key(10, i);
    want.insert(key);
    put("ns", key);
  }
  std::vector<uint32_t> big(200, 99); // 866 bytes alone
  want.insert(big);
  put("ns", big);
  drain();
  self->send(feed, subscribe_msg(0, 7));
  drain();
  std::set<uint32_t> parts_seen;
  std::multiset<std::vector<uint32_t>> got;
  uint32_t parts = 0;
  bool replied = false;
  auto take = [&](msg::FeedSnapshot::Reader s, bool pushed) {
    BOOST_CHECK_EQUAL(std::string{s.getNode().cStr()}, "a");
    size_t bytes = 0;
    for (auto h : s.getEntries())
      bytes += 64 + h.getNs().size() + 4 * h.getKey().size();
    BOOST_CHECK(bytes <= 300 || s.getEntries().size() == 1);
    BOOST_CHECK_EQUAL(s.getSeq(), 21u);
    BOOST_CHECK(parts == 0 || parts == s.getParts());
    parts = s.getParts();
    BOOST_CHECK_EQUAL(s.getPart() == 0, !pushed);
    BOOST_CHECK(parts_seen.insert(s.getPart()).second);
    for (auto h : s.getEntries()) {
      std::vector<uint32_t> k;
      for (auto t : h.getKey())
        k.push_back(t);
      got.insert(k);
    }
  };
  while (self->has_next_message())
    self->receive(
      [&](const sealed<msg::FeedSnapshot>& m) {
        BOOST_CHECK(!replied); // pushed before the reply
        take(m.root(), true);
      },
      [&](const sealed<msg::SubscribeFeedReply>& r) {
        BOOST_REQUIRE(r.root().isSnapshot());
        replied = true;
        take(r.root().getSnapshot(), false);
      });
  BOOST_CHECK(replied);
  BOOST_CHECK(parts == 11u || parts == 12u);
  BOOST_CHECK_EQUAL(parts_seen.size(), parts);
  BOOST_CHECK(got.size() == want.size());
  BOOST_CHECK(
    (std::set<std::vector<uint32_t>>(got.begin(), got.end()) == want));
}

BOOST_AUTO_TEST_CASE(a_snapshot_is_the_table_at_its_seq) {
  spawn_feed(4);
  put("ns", {1});
  self->send(feed, change(FeedKind::DURABLE, "ns", {1}, 80, true));
  put("ns", {1, 2});
  self->send(feed, change(FeedKind::SUPERSEDED, "ns", {1}));
  self->send(feed, change(FeedKind::DURABLE, "ns", {3}, 50, false));
  put("x", {4});
  self->send(feed, change(FeedKind::DEMOTE, "x", {4}));
  drain();
  auto r = subscribe(0);
  BOOST_REQUIRE(r.root().isSnapshot());
  auto s = r.root().getSnapshot();
  BOOST_CHECK_EQUAL(s.getSeq(), 7u);
  BOOST_CHECK_EQUAL(s.getIncarnation(), 7u);
  std::map<std::vector<uint32_t>, std::tuple<bool, bool, uint64_t, uint64_t>>
    got;
  for (auto h : s.getEntries()) {
    BOOST_CHECK_EQUAL(std::string{h.getNs().cStr()}, "ns");
    std::vector<uint32_t> k;
    for (auto t : h.getKey())
      k.push_back(t);
    got[k] = {h.getInRam(), h.getInSsd(), h.getRamBytes(), h.getSsdBytes()};
  }
  using row = std::tuple<bool, bool, uint64_t, uint64_t>;
  BOOST_CHECK(
    (got
     == std::map<std::vector<uint32_t>, row>{{{1}, row{false, true, 0, 80}},
                                             {{1, 2}, row{true, false, 100, 0}},
                                             {{3}, row{false, true, 0, 50}}}));
  // Events from seq + 1 follow.
  put("ns", {5});
  drain();
  BOOST_CHECK_EQUAL(next_batch().first, 8u);
}

BOOST_AUTO_TEST_CASE(a_dead_subscriber_is_dropped) {
  spawn_feed();
  auto seen = std::make_shared<std::vector<uint64_t>>();
  auto listener = sys.spawn(
    actors::feed_listener,
    [seen](const feed_event& e) { seen->push_back(e.seq); }, nullptr);
  self->send(feed, actors::feed_local_atom::value, listener, false);
  drain();
  self->receive([](uint64_t seq) { BOOST_CHECK_EQUAL(seq, 0u); });
  put("ns", {1});
  drain();
  BOOST_CHECK((*seen == std::vector<uint64_t>{1}));
  BOOST_CHECK_EQUAL(std::get<1>(stats()), 1u);
  caf::anon_send_exit(listener, caf::exit_reason::kill);
  drain();
  BOOST_CHECK_EQUAL(std::get<1>(stats()), 0u);
  put("ns", {2}); // goes to nobody, and nothing breaks
  drain();
  BOOST_CHECK_EQUAL(std::get<0>(stats()), 2u);
}

BOOST_AUTO_TEST_CASE(the_skip_hook_leaves_a_gap_a_resubscription_sees) {
  spawn_feed();
  subscribe(1);
  put("ns", {1});
  drain();
  BOOST_CHECK((seqs(next_batch().second) == std::vector<uint64_t>{1}));
  self->send(feed, actors::feed_skip_atom::value, uint64_t{2});
  drain();
  self->receive([](uint64_t seq) { BOOST_CHECK_EQUAL(seq, 3u); });
  put("ns", {2});
  drain();
  auto [first, ev] = next_batch();
  BOOST_CHECK_EQUAL(first, 4u); // 2 and 3 never come: a gap
  BOOST_CHECK((seqs(ev) == std::vector<uint64_t>{4}));
  // The ring has a hole there: from 2 is a snapshot, from 4 replays.
  BOOST_CHECK(subscribe(2).root().isSnapshot());
  BOOST_CHECK(subscribe(4).root().isFollowing());
}

BOOST_AUTO_TEST_CASE(a_local_listener_is_called_per_event_and_contained) {
  spawn_feed();
  auto errors = std::make_shared<std::atomic<uint64_t>>(0);
  auto seen = std::make_shared<std::vector<uint64_t>>();
  auto listener = sys.spawn(
    actors::feed_listener,
    [seen](const feed_event& e) {
      seen->push_back(e.seq);
      if (e.seq == 2)
        throw std::runtime_error("listener failure");
    },
    errors);
  put("ns", {1}); // before the listener: replayed from the ring
  drain();
  self->send(feed, actors::feed_local_atom::value, listener, false);
  drain();
  self->receive([](uint64_t seq) { BOOST_CHECK_EQUAL(seq, 1u); });
  put("ns", {2});
  put("ns", {3});
  drain();
  BOOST_CHECK((*seen == std::vector<uint64_t>{1, 2, 3}));
  BOOST_CHECK_EQUAL(errors->load(), 1u);
}

BOOST_AUTO_TEST_CASE(a_malformed_batch_is_refused_naming_the_fault) {
  msg::draft<msg::FeedBatch> d;
  d.root().setNode("a");
  d.root().setFirstSeq(5);
  auto ev = d.root().initEvents(2);
  ev[0].setSeq(5);
  ev[1].setSeq(7); // a hole inside a batch
  auto b = std::move(d).seal();
  auto r = actors::read_batch(b.root());
  BOOST_REQUIRE(!r);
  BOOST_CHECK(r.error() == ec::malformed_message);
  BOOST_CHECK(describe(r.error()).find("seq 7") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
