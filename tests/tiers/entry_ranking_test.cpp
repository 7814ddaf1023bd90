#define BOOST_TEST_MODULE tiers_entry_ranking
#include <boost/test/unit_test.hpp>

#include "tests/tiers/reference_ranking.hpp"
#include "tiers/entry_ranking.hpp"

#include <random>
#include <vector>

using namespace kvtier::tiers;
using id = entry_ranking::id;

namespace {

/// Every ranked id in eviction order.
std::vector<id> order(const entry_ranking& r) {
  std::vector<id> out;
  r.first([&](id i) {
    out.push_back(i);
    return false;
  });
  return out;
}

/// Evicts the first item in order and returns it.
id evict(entry_ranking& r) {
  auto v = r.first([](id) { return true; });
  BOOST_REQUIRE(v != entry_ranking::none);
  r.evicted(v);
  return v;
}

} // namespace

BOOST_AUTO_TEST_CASE(policies_parse_by_name) {
  BOOST_TEST((parse_ram_policy("lru") == ram_policy::lru));
  BOOST_TEST((parse_ram_policy("gdsf") == ram_policy::gdsf));
  BOOST_TEST(!parse_ram_policy("LRU"));
  BOOST_TEST(!parse_ram_policy(""));
  BOOST_TEST(to_string(ram_policy::gdsf) == "gdsf");
}

BOOST_AUTO_TEST_CASE(lru_orders_by_last_touch) {
  entry_ranking r{ram_policy::lru};
  for (id i = 0; i < 4; ++i)
    r.insert(i, 100, default_priority);
  r.touch(0);
  r.touch(2);
  BOOST_TEST((order(r) == std::vector<id>{1, 3, 0, 2}));
  r.erase(3);
  BOOST_TEST((order(r) == std::vector<id>{1, 0, 2}));
  BOOST_TEST(!r.contains(3));
  r.touch(3); // not ranked: nothing happens
  BOOST_TEST(r.size() == 3u);
  // An id comes back after erase as a new item.
  r.insert(3, 10, default_priority);
  BOOST_TEST((order(r) == std::vector<id>{1, 0, 2, 3}));
  BOOST_TEST(r.count(3) == 1u);
}

BOOST_AUTO_TEST_CASE(a_lower_priority_leaves_before_any_higher_one) {
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    entry_ranking r{p};
    r.insert(0, 100, 80);
    r.insert(1, 100, 10);
    r.insert(2, 100, default_priority);
    r.insert(3, 100, 10);
    for (int i = 0; i < 20; ++i)
      r.touch(1); // however often used
    BOOST_TEST((order(r) == std::vector<id>{3, 1, 2, 0}), to_string(p));
    r.set_priority(0, 0);
    BOOST_TEST(order(r).front() == 0u);
    r.set_priority(2, 200); // clamped to the maximum
    BOOST_TEST(r.priority(2) == max_priority);
    BOOST_TEST(order(r).back() == 2u);
  }
}

BOOST_AUTO_TEST_CASE(gdsf_keeps_what_serves_often_and_ages_it_out) {
  entry_ranking r{ram_policy::gdsf};
  r.insert(0, 1000, default_priority);
  for (int i = 0; i < 5; ++i)
    r.touch(0); // count 6
  r.insert(1, 1000, default_priority);
  r.insert(2, 1000, default_priority);
  // LRU would take 0 first; GDSF takes the once-used ones.
  BOOST_TEST(evict(r) == 1u);
  BOOST_TEST(evict(r) == 2u);
  // Each eviction lifts the clock to the victim's rank (1 + a bit): after
  // a few rounds of one-offs (one in, one out) the frequent item's old
  // rank (6 + a bit) is the lowest.
  int rounds = 0;
  for (id next = 3; rounds < 20; ++next) {
    r.insert(next, 1000, default_priority);
    ++rounds;
    if (evict(r) == 0u)
      break;
  }
  BOOST_TEST(rounds == 5); // 1.015 a round: the fifth reaches 6.09
}

BOOST_AUTO_TEST_CASE(gdsf_values_a_token_late_in_the_prompt_more) {
  entry_ranking r{ram_policy::gdsf};
  r.insert(0, 65536, default_priority); // value 2: deep positions cost more
  r.insert(1, 16, default_priority);    // value ~1
  BOOST_TEST(evict(r) == 1u);
}

BOOST_AUTO_TEST_CASE(counts_are_inherited_and_remembered_by_key) {
  entry_ranking r{ram_policy::gdsf, 2};
  r.insert(0, 10, default_priority, 111);
  r.touch(0);
  r.touch(0);
  BOOST_TEST(r.count(0) == 3u);
  // A conversation's next turn carries on its previous turn's count.
  r.insert(1, 20, default_priority, 222, r.count(0));
  BOOST_TEST(r.count(1) == 4u);
  // An evicted key's count comes back with the key.
  r.evicted(0);
  r.insert(0, 10, default_priority, 111);
  BOOST_TEST(r.count(0) == 4u);
  // The ghost list is bounded: the oldest keys are forgotten first.
  r.evicted(0);                           // remembers 111
  r.evicted(1);                           // remembers 222
  r.insert(2, 5, default_priority, 333);  // count 1
  r.evicted(2);                           // remembers 333, forgets 111
  r.insert(3, 10, default_priority, 111); // forgotten
  BOOST_TEST(r.count(3) == 1u);
  r.insert(4, 20, default_priority, 222); // still remembered
  BOOST_TEST(r.count(4) == 5u);
  // lru keeps no ghosts.
  entry_ranking l{ram_policy::lru};
  l.insert(0, 10, default_priority, 111);
  l.touch(0);
  l.evicted(0);
  l.insert(0, 10, default_priority, 111);
  BOOST_TEST(l.count(0) == 1u);
}

BOOST_AUTO_TEST_CASE(ranking_keys_name_namespace_and_tokens) {
  std::vector<uint32_t> a{1, 2, 3}, b{1, 2, 4};
  BOOST_TEST(ranking_key("ns", a) == ranking_key("ns", a));
  BOOST_TEST(ranking_key("ns", a) != ranking_key("ns", b));
  BOOST_TEST(ranking_key("ns", a) != ranking_key("other", a));
  BOOST_TEST(ranking_key("", {}) != 0u);
}

BOOST_AUTO_TEST_CASE(random_operations_keep_order_and_membership_consistent) {
  std::mt19937 rng{7};
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    entry_ranking r{p, 64};
    std::vector<bool> in(200, false);
    for (int step = 0; step < 20000; ++step) {
      auto i = static_cast<id>(rng() % in.size());
      switch (rng() % 4) {
        case 0:
          r.insert(i, 1 + rng() % 5000, static_cast<uint8_t>(rng() % 101),
                   1 + rng() % 300);
          in[i] = true;
          break;
        case 1: r.touch(i); break;
        case 2:
          r.evicted(i);
          in[i] = false;
          break;
        default: r.erase(i); in[i] = false;
      }
    }
    auto o = order(r);
    BOOST_TEST(o.size() == r.size());
    size_t ranked = 0;
    for (id i = 0; i < in.size(); ++i) {
      BOOST_TEST(r.contains(i) == in[i]);
      ranked += in[i];
    }
    BOOST_TEST(ranked == r.size());
    // Priorities never go down along the order.
    for (size_t k = 1; k < o.size(); ++k)
      BOOST_TEST(r.priority(o[k - 1]) <= r.priority(o[k]));
  }
}

BOOST_AUTO_TEST_CASE(the_order_is_the_reference_order_item_for_item) {
  // Many random operations on both, with few priorities (so ranks and
  // touches decide) or many, few keys (so ghosts come back): every victim,
  // every `first` that skips items, every count and, now and then, the
  // whole order are the reference's.
  std::mt19937 rng{31};
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    for (uint32_t priorities : {1u, 3u, 101u}) {
      entry_ranking r{p, 32};
      kvtier::tests::reference_ranking ref{p, 32};
      constexpr id ids = 300;
      std::vector<char> skipped(ids);
      for (int step = 0; step < 60000; ++step) {
        auto i = static_cast<id>(rng() % ids);
        auto prio = static_cast<uint8_t>(
          priorities == 1 ? default_priority : (rng() % priorities) * 3);
        switch (rng() % 10) {
          case 0:
          case 1: {
            auto tokens = 1 + rng() % 70000;
            auto key = rng() % 4 == 0 ? 0 : 1 + rng() % 80;
            r.insert(i, tokens, prio, key);
            ref.insert(i, tokens, prio, key);
            break;
          }
          case 2:
          case 3:
          case 4:
            r.touch(i);
            ref.touch(i);
            break;
          case 5: { // evict the first item, as a tier does
            auto v = r.first([](id) { return true; });
            BOOST_REQUIRE(v == ref.first([](id) { return true; }));
            if (v != entry_ranking::none) {
              r.evicted(v);
              ref.evicted(v);
            }
            break;
          }
          case 6: { // the first one not skipped (pinned, leased)
            for (auto& s : skipped)
              s = rng() % 3 == 0;
            auto ok = [&](id x) { return !skipped[x]; };
            auto v = r.first(ok);
            BOOST_REQUIRE(v == ref.first(ok));
            if (v != entry_ranking::none && rng() % 2 == 0) {
              r.evicted(v);
              ref.evicted(v);
            }
            break;
          }
          case 7:
            r.erase(i);
            ref.erase(i);
            break;
          case 8:
            r.set_priority(i, prio);
            ref.set_priority(i, prio);
            break;
          default: BOOST_REQUIRE(r.count(i) == ref.count(i));
        }
        if (step % 997 == 0) {
          std::vector<id> want;
          ref.first([&](id x) {
            want.push_back(x);
            return false;
          });
          BOOST_REQUIRE((order(r) == want));
          BOOST_REQUIRE(r.size() == want.size());
        }
      }
      // Empty it in order.
      while (r.size() > 0) {
        auto v = evict(r);
        BOOST_REQUIRE(v == ref.first([](id) { return true; }));
        ref.evicted(v);
      }
      BOOST_TEST(ref.first([](id) { return true; }) == entry_ranking::none);
    }
  }
}
