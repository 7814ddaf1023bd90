// The peer directory against a brute-force model: random feed events for
// several nodes (puts, durable marks, demotions, evictions, supersessions,
// removals, snapshots, drops), and after each step the longest usable
// prefix and its holders compared for random prompts; plus the feed rules
// (duplicate, gap, late join through a snapshot).
#define BOOST_TEST_MODULE tiers_peer_directory
#include <boost/test/unit_test.hpp>

#include "tiers/peer_directory.hpp"

#include <map>
#include <random>
#include <set>
#include <tuple>

using namespace kvtier::tiers;

namespace {

using holder = peer_directory::holder;

feed_holding held(feed_tier tier, std::string ns, token_seq tokens,
                  bool trimmable = true, uint64_t bytes = 0) {
  auto n = tokens.size();
  return {tier, std::move(ns), std::move(tokens), bytes ? bytes : 100 * n,
          trimmable};
}

feed_event event(std::string node, uint64_t seq, feed_kind kind,
                 feed_holding h) {
  return {std::move(node), seq, kind, std::move(h)};
}

/// What every node holds, kept the obvious way.
struct model {
  // (node, tier, ns, tokens) -> holding
  std::map<std::tuple<std::string, feed_tier, std::string, token_seq>,
           feed_holding>
    held;
  std::map<std::string, uint64_t> seqs;

  void hold(const std::string& node, const feed_holding& h) {
    held[{node, h.tier, h.ns, h.tokens}] = h;
  }
  void release(const std::string& node, feed_tier t, const feed_holding& h) {
    held.erase({node, t, h.ns, h.tokens});
  }
  void apply(const feed_event& e) {
    seqs[e.node] = e.seq;
    auto ssd = e.entry;
    ssd.tier = feed_tier::ssd;
    switch (e.kind) {
      case feed_kind::put: hold(e.node, e.entry); break;
      case feed_kind::durable: hold(e.node, ssd); break;
      case feed_kind::demote:
        release(e.node, feed_tier::ram, e.entry);
        hold(e.node, ssd);
        break;
      default: release(e.node, e.entry.tier, e.entry); break;
    }
  }
  void drop(const std::string& node) {
    std::erase_if(held,
                  [&](auto& kv) { return std::get<0>(kv.first) == node; });
    seqs.erase(node);
  }
  /// Usable length of `h` for `prompt` (0: none), the local rule.
  static uint64_t usable(const feed_holding& h, const token_seq& prompt) {
    if (prompt.size() < 2)
      return 0;
    uint64_t lcp = 0;
    while (lcp < h.tokens.size() && lcp < prompt.size()
           && h.tokens[lcp] == prompt[lcp])
      ++lcp;
    uint64_t p = std::min<uint64_t>(lcp, prompt.size() - 1);
    if (p == 0)
      return 0;
    if (p == h.tokens.size() || h.trimmable)
      return p;
    return 0;
  }
  uint64_t best(const std::string& ns, const token_seq& prompt) const {
    uint64_t out = 0;
    for (auto& [k, h] : held)
      if (h.ns == ns)
        out = std::max(out, usable(h, prompt));
    return out;
  }
  /// Holders of exactly (ns, key) that can serve `length`.
  std::set<std::tuple<std::string, feed_tier>>
  holders(const std::string& ns, const token_seq& key, uint64_t length,
          const token_seq& prompt) const {
    std::set<std::tuple<std::string, feed_tier>> out;
    for (auto& [k, h] : held)
      if (h.ns == ns && h.tokens == key && usable(h, prompt) == length)
        out.insert({std::get<0>(k), h.tier});
    return out;
  }
};

void compare(const peer_directory& dir, const model& m, const std::string& ns,
             const token_seq& prompt) {
  auto want = m.best(ns, prompt);
  auto got = dir.lookup(ns, prompt);
  if (want == 0) {
    BOOST_CHECK_MESSAGE(!got, "a match where the model has none");
    return;
  }
  BOOST_REQUIRE_MESSAGE(got, "no match where the model has " << want);
  BOOST_CHECK_EQUAL(got->length, want);
  BOOST_REQUIRE(!got->holders.empty());
  std::set<std::tuple<std::string, feed_tier>> returned;
  for (size_t i = 0; i < got->holders.size(); ++i) {
    auto& h = got->holders[i];
    returned.insert({h.node, h.tier});
    BOOST_CHECK_EQUAL(h.tokens, got->key.size());
    // The bytes and trimmability of that node's copy, as announced.
    auto& copy = m.held.at({h.node, h.tier, ns, got->key});
    BOOST_CHECK_EQUAL(h.bytes, copy.bytes);
    BOOST_CHECK_EQUAL(h.trimmable, copy.trimmable);
    if (i > 0) { // best tier first, then by node
      auto& prev = got->holders[i - 1];
      BOOST_CHECK(prev.tier < h.tier
                  || (prev.tier == h.tier && prev.node < h.node));
    }
  }
  BOOST_CHECK(returned == m.holders(ns, got->key, want, prompt));
}

} // namespace

BOOST_AUTO_TEST_SUITE(peer_directory_rules)

BOOST_AUTO_TEST_CASE(a_put_is_found_and_an_evict_forgets_it) {
  peer_directory dir;
  BOOST_CHECK(dir.apply(event("a", 1, feed_kind::put,
                              held(feed_tier::ram, "ns", {1, 2, 3, 4})))
              == peer_directory::applied::ok);
  auto m = dir.lookup("ns", token_seq{1, 2, 3, 4, 5});
  BOOST_REQUIRE(m);
  BOOST_CHECK_EQUAL(m->length, 4u);
  BOOST_REQUIRE_EQUAL(m->holders.size(), 1u);
  BOOST_CHECK_EQUAL(m->holders[0].node, "a");
  BOOST_CHECK_EQUAL(m->holders[0].bytes, 400u);
  BOOST_CHECK(!dir.lookup("other", token_seq{1, 2, 3, 4, 5}));
  dir.apply(
    event("a", 2, feed_kind::evict, held(feed_tier::ram, "ns", {1, 2, 3, 4})));
  BOOST_CHECK(!dir.lookup("ns", token_seq{1, 2, 3, 4, 5}));
  BOOST_CHECK_EQUAL(dir.keys(), 0u);
}

BOOST_AUTO_TEST_CASE(a_non_trimmable_copy_serves_only_its_exact_length) {
  peer_directory dir;
  dir.apply(event("a", 1, feed_kind::put,
                  held(feed_tier::ram, "ns", {1, 2, 3, 4}, false)));
  BOOST_CHECK(!dir.lookup("ns", token_seq{1, 2, 3, 9}));
  dir.apply(event("b", 1, feed_kind::put,
                  held(feed_tier::ssd, "ns", {1, 2, 3, 4}, true)));
  auto m = dir.lookup("ns", token_seq{1, 2, 3, 9});
  BOOST_REQUIRE(m);
  BOOST_CHECK_EQUAL(m->length, 3u);
  BOOST_REQUIRE_EQUAL(m->holders.size(), 1u); // a's copy cannot trim
  BOOST_CHECK_EQUAL(m->holders[0].node, "b");
  // At the exact length both serve, RAM first.
  m = dir.lookup("ns", token_seq{1, 2, 3, 4, 5});
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->holders.size(), 2u);
  BOOST_CHECK_EQUAL(m->holders[0].node, "a");
  BOOST_CHECK(m->holders[0].tier == feed_tier::ram);
}

BOOST_AUTO_TEST_CASE(a_duplicate_changes_nothing_and_a_gap_asks_for_resync) {
  peer_directory dir;
  auto put = event("a", 1, feed_kind::put, held(feed_tier::ram, "ns", {1, 2}));
  BOOST_CHECK(dir.apply(put) == peer_directory::applied::ok);
  auto evict = put;
  evict.kind = feed_kind::evict;
  BOOST_CHECK(dir.apply(evict) == peer_directory::applied::duplicate);
  BOOST_CHECK(dir.lookup("ns", token_seq{1, 2, 3}));
  evict.seq = 3; // 2 was lost
  BOOST_CHECK(dir.apply(evict) == peer_directory::applied::gap);
  BOOST_CHECK(dir.lookup("ns", token_seq{1, 2, 3}));
  BOOST_CHECK_EQUAL(dir.seq("a"), 1u);
  // The resync: a snapshot valid at 3, then 4 follows.
  dir.apply(feed_snapshot{"a", 3, {held(feed_tier::ssd, "ns", {7, 8})}});
  BOOST_CHECK(!dir.lookup("ns", token_seq{1, 2, 3}));
  BOOST_CHECK(dir.lookup("ns", token_seq{7, 8, 9}));
  BOOST_CHECK(
    dir.apply(event("a", 4, feed_kind::put, held(feed_tier::ram, "ns", {1, 2})))
    == peer_directory::applied::ok);
}

BOOST_AUTO_TEST_CASE(a_late_joiner_needs_a_snapshot_first) {
  peer_directory dir;
  // A node first heard of at seq 9: a gap (events 1-8 are unknown).
  BOOST_CHECK(dir.apply(event("late", 9, feed_kind::put,
                              held(feed_tier::ram, "ns", {1, 2})))
              == peer_directory::applied::gap);
  BOOST_CHECK_EQUAL(dir.keys(), 0u);
  dir.apply(feed_snapshot{"late", 8, {held(feed_tier::ram, "ns", {5, 6})}});
  BOOST_CHECK(dir.apply(event("late", 9, feed_kind::put,
                              held(feed_tier::ram, "ns", {1, 2})))
              == peer_directory::applied::ok);
  BOOST_CHECK_EQUAL(dir.keys(), 2u);
}

BOOST_AUTO_TEST_CASE(demote_moves_a_copy_to_ssd_and_drop_forgets_a_node) {
  peer_directory dir;
  auto h = held(feed_tier::ram, "ns", {1, 2, 3});
  dir.apply(event("a", 1, feed_kind::put, h));
  dir.apply(event("b", 1, feed_kind::put, h));
  dir.apply(event("a", 2, feed_kind::demote, h));
  auto m = dir.lookup("ns", token_seq{1, 2, 3, 4});
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->holders.size(), 2u);
  BOOST_CHECK_EQUAL(m->holders[0].node, "b"); // RAM first
  BOOST_CHECK(m->holders[1].tier == feed_tier::ssd);
  dir.drop("b");
  m = dir.lookup("ns", token_seq{1, 2, 3, 4});
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->holders.size(), 1u);
  BOOST_CHECK_EQUAL(m->holders[0].node, "a");
  BOOST_CHECK_EQUAL(dir.seq("b"), 0u);
  dir.drop("a");
  BOOST_CHECK_EQUAL(dir.keys(), 0u);
  BOOST_CHECK_EQUAL(dir.holdings(), 0u);
}

BOOST_AUTO_TEST_CASE(matches_the_model_over_random_feeds) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) {
      return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    };
    const std::string nodes[] = {"a", "b", "c", "d"};
    const std::string spaces[] = {"x", "y"};
    auto tokens = [&](size_t max) {
      token_seq t(1 + pick(max));
      for (auto& x : t)
        x = static_cast<token>(1 + pick(3)); // small alphabet: shared prefixes
      return t;
    };
    peer_directory dir;
    model m;
    for (int step = 0; step < 400; ++step) {
      auto& node = nodes[pick(4)];
      auto next = m.seqs.count(node) ? m.seqs[node] + 1 : 1;
      auto r = pick(100);
      if (r < 3) {
        dir.drop(node);
        m.drop(node);
      } else if (r < 6) {
        feed_snapshot s{node, next + pick(5), {}};
        for (size_t i = pick(6); i > 0; --i)
          s.entries.push_back(held(feed_tier(pick(2)), spaces[pick(2)],
                                   tokens(8), pick(3) != 0, 1 + pick(1000)));
        dir.apply(s);
        m.drop(node);
        for (auto& h : s.entries)
          m.hold(node, h);
        m.seqs[node] = s.seq;
      } else {
        feed_event e{node, next, feed_kind(pick(6)), {}};
        // Releases mostly of what the node holds, sometimes of nothing.
        std::vector<feed_holding> mine;
        for (auto& [k, h] : m.held)
          if (std::get<0>(k) == node)
            mine.push_back(h);
        if (e.kind != feed_kind::put && !mine.empty() && pick(5) != 0)
          e.entry = mine[pick(mine.size())];
        else
          e.entry = held(feed_tier(pick(2)), spaces[pick(2)], tokens(8),
                         pick(3) != 0, 1 + pick(1000));
        if (pick(20) == 0) {
          // A duplicate or a gap: refused, nothing changes.
          e.seq = pick(2) == 0 && next > 1 ? next - 1 : next + 1 + pick(3);
          BOOST_CHECK(dir.apply(e) != peer_directory::applied::ok);
        } else {
          BOOST_REQUIRE(dir.apply(e) == peer_directory::applied::ok);
          m.apply(e);
        }
      }
      BOOST_REQUIRE_EQUAL(dir.holdings(), m.held.size());
      for (int q = 0; q < 8; ++q)
        compare(dir, m, spaces[pick(2)], tokens(10));
      for (auto& n : nodes)
        BOOST_CHECK_EQUAL(dir.seq(n), m.seqs.count(n) ? m.seqs.at(n) : 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
