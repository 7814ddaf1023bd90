// The event feed of a real RAM + SSD service (in-memory file system): a
// workload produces every kind (put, superseded, durable and evict under a
// small RAM cap, demote, removed when the SSD cap is lowered), numbered
// from 1 without holes; a snapshot taken afterwards equals what RAM and SSD
// really hold (ListSavedPrefixes, the RAM report); `subscribe_events` sees
// evictions and stops at `end`; SSD files found at start are the feed's
// first events (durable). The actors run on CAF's scheduler, so the test
// thread waits for events with a bounded poll (`eventually`).
#define BOOST_TEST_MODULE runtime_feed_events
#include "tests/runtime/service_fixture.hpp"

#include "actors/feed_actor.hpp"

#include <caf/scoped_actor.hpp>

#include <mutex>
#include <set>

using namespace kvtier;
using runtime::feed_event;
using runtime::feed_kind;

namespace {

struct fixture : testing::service_fixture {
  std::mutex mtx;
  std::vector<feed_event> events;
  runtime::event_subscription sub;

  void follow() {
    auto s = svc->subscribe_events([this](const feed_event& e) {
      std::lock_guard<std::mutex> guard{mtx};
      events.push_back(e);
    });
    BOOST_REQUIRE_MESSAGE(s, testing::why(s));
    sub = std::move(*s);
  }

  std::vector<feed_event> seen() {
    std::lock_guard<std::mutex> guard{mtx};
    return events;
  }

  bool saw(feed_kind k, const tiers::token_seq& tokens) {
    for (auto& e : seen())
      if (e.kind == k && e.tokens == tokens)
        return true;
    return false;
  }

  using key = std::pair<std::string, tiers::token_seq>;

  /// The feed's snapshot: (RAM keys, SSD keys).
  std::pair<std::set<key>, std::set<key>> snapshot() {
    std::pair<std::set<key>, std::set<key>> out;
    caf::scoped_actor self{svc->system()};
    msg::draft<msg::SubscribeFeed> d; // from 0: a snapshot
    self
      ->request(svc->event_feed(), std::chrono::seconds(10),
                std::move(d).seal())
      .receive(
        [&](const msg::sealed<msg::SubscribeFeedReply>& r) {
          BOOST_REQUIRE(r.root().isSnapshot());
          for (auto h : r.root().getSnapshot().getEntries()) {
            key k{h.getNs().cStr(), {}};
            for (auto t : h.getKey())
              k.second.push_back(t);
            if (h.getInRam())
              out.first.insert(k);
            if (h.getInSsd())
              out.second.insert(k);
          }
        },
        [&](caf::error& err) { BOOST_FAIL(describe(err)); });
    return out;
  }

  std::set<key> on_ssd() {
    std::set<key> out;
    auto s = svc->saved_prefixes();
    BOOST_REQUIRE(s);
    for (auto& p : *s)
      out.insert({p.ns, p.tokens});
    return out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_real_workload_produces_every_kind_in_order, fixture) {
  start();
  follow();
  auto a = seq(100), b = seq(200); // b extends a: supersedes it
  put("ns", a);
  put("ns", b);
  BOOST_TEST(testing::eventually(
    [&] { return saw(feed_kind::put, b) && saw(feed_kind::superseded, a); }));
  // 4096 tokens fit the cap: three more of 1500 evict b (written first).
  auto c = seq(1500, 10000), d = seq(1500, 20000), e = seq(1500, 30000);
  put("ns", c);
  put("ns", d);
  put("ns", e);
  BOOST_TEST(testing::eventually(
    [&] { return saw(feed_kind::durable, b) && saw(feed_kind::evict, b); }));
  // Idle demotion: what is left leaves RAM once durable.
  auto n = svc->demote_idle(0);
  BOOST_REQUIRE(n);
  BOOST_TEST(*n >= 1u);
  BOOST_TEST(testing::eventually([&] { return saw(feed_kind::demote, e); }));
  // A lower SSD cap removes files.
  auto lim = svc->set_ssd_limit(512ull << 10);
  BOOST_REQUIRE(lim);
  BOOST_TEST(lim->evicted >= 1u);
  BOOST_TEST(testing::eventually([&] {
    for (auto& ev : seen())
      if (ev.kind == feed_kind::removed)
        return true;
    return false;
  }));
  // Numbered from 1 without holes, each with the bytes of its layers.
  auto all = seen();
  for (size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].seq == i + 1);
    BOOST_TEST(all[i].bytes == all[i].tokens.size() * 256u);
    BOOST_TEST(all[i].trimmable);
  }
  // The snapshot is what the tiers hold.
  BOOST_TEST(testing::eventually([&] {
    auto [ram, ssd] = snapshot();
    return ssd == on_ssd() && ram.size() == report().ram.entries;
  }));
  auto [ram, ssd] = snapshot();
  BOOST_TEST(ssd.size() == on_ssd().size());
  BOOST_TEST(ram.size() == report().ram.entries);
}

BOOST_FIXTURE_TEST_CASE(subscribe_events_sees_evictions_and_stops_at_end,
                        fixture) {
  opts.ssd_dir.clear(); // no cold tier: evicted entries are dropped
  start();
  follow();
  put("ns", seq(3000, 1));
  put("ns", seq(3000, 10000)); // the first no longer fits
  BOOST_TEST(
    testing::eventually([&] { return saw(feed_kind::evict, seq(3000, 1)); }));
  BOOST_TEST(sub.end());
  BOOST_TEST(!sub.end());
  auto before = seen().size();
  put("ns", seq(3000, 20000));
  // Nothing more reaches the ended subscription; a new one does see it.
  follow();
  put("ns", seq(10, 50000));
  BOOST_TEST(
    testing::eventually([&] { return saw(feed_kind::put, seq(10, 50000)); }));
  for (auto& ev : seen())
    BOOST_TEST(ev.tokens != seq(3000, 20000));
  BOOST_TEST(seen().size() == before + 1); // the later put only
}

BOOST_FIXTURE_TEST_CASE(files_found_at_start_are_the_first_events, fixture) {
  start();
  put("ns", seq(64));
  put("ns", seq(32, 500));
  BOOST_REQUIRE(svc->flush());
  start(); // a restart over the same files
  // The SSD actor tells the feed of them once attached, asynchronously: a
  // snapshot taken sooner lacks them, and their events follow it.
  BOOST_TEST(
    testing::eventually([&] { return snapshot().second.size() == 2; }));
  auto [ram, ssd] = snapshot();
  BOOST_TEST(ram.empty());
  BOOST_TEST(ssd == on_ssd());
  BOOST_TEST(ssd.size() == 2u);
}
