// peer_directory (tiers/peer_directory.hpp): the usable-prefix rules over
// several nodes' holdings, cheapest tier first; duplicate and reordered
// events change nothing; a dropped node leaves no trace; and a random run
// of puts, removes and drops over four nodes agrees with a brute-force
// model at every lookup.
#define BOOST_TEST_MODULE tiers_peer_directory
#include <boost/test/unit_test.hpp>

#include "tiers/peer_directory.hpp"

#include <map>
#include <random>
#include <tuple>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

token_seq seq(std::initializer_list<token> t) {
  return token_seq(t);
}

} // namespace

BOOST_AUTO_TEST_CASE(the_longest_usable_prefix_names_its_holders) {
  peer_directory d;
  BOOST_TEST(d.put("b", "ns", seq({1, 2, 3, 4}), peer_tier::ssd, 400, true));
  BOOST_TEST(d.put("a", "ns", seq({1, 2, 3, 4}), peer_tier::ram, 400, true));
  BOOST_TEST(d.put("c", "ns", seq({1, 2}), peer_tier::ram, 200, true));
  auto m = d.longest_usable("ns", seq({1, 2, 3, 4, 5}));
  BOOST_REQUIRE(m);
  BOOST_TEST(m->length == 4u);
  BOOST_TEST(!m->needs_trim);
  BOOST_TEST(m->entry_length == 4u);
  BOOST_REQUIRE(m->holders.size() == 2u);
  BOOST_TEST(m->holders[0].node == "a"); // RAM before SSD
  BOOST_TEST(m->holders[1].node == "b");
  // One token is always left to compute: a prompt equal to the key trims.
  m = d.longest_usable("ns", seq({1, 2, 3, 4}));
  BOOST_REQUIRE(m);
  BOOST_TEST(m->length == 3u);
  BOOST_TEST(m->needs_trim);
  // Another namespace sees nothing.
  BOOST_TEST(!d.longest_usable("other", seq({1, 2, 3, 4, 5})));
  BOOST_TEST(d.entries() == 2u);
  BOOST_TEST(d.holdings("a") == 1u);
}

BOOST_AUTO_TEST_CASE(an_untrimmable_entry_serves_only_its_whole_length) {
  peer_directory d;
  d.put("a", "ns", seq({1, 2, 3, 4}), peer_tier::ram, 1, false);
  d.put("a", "ns", seq({1, 2}), peer_tier::ram, 1, true);
  auto m = d.longest_usable("ns", seq({1, 2, 3, 9}));
  BOOST_REQUIRE(m);
  BOOST_TEST(m->length == 2u); // not the recurrent 4-token entry trimmed
  // A trimmable copy elsewhere does not make it trimmable while one
  // holder says it cannot trim.
  d.put("b", "ns", seq({1, 2, 3, 4}), peer_tier::ram, 1, true);
  BOOST_TEST(d.longest_usable("ns", seq({1, 2, 3, 9}))->length == 2u);
  d.remove("a", "ns", seq({1, 2, 3, 4}), peer_tier::ram);
  BOOST_TEST(d.longest_usable("ns", seq({1, 2, 3, 9}))->length == 3u);
}

BOOST_AUTO_TEST_CASE(duplicate_and_stray_events_change_nothing) {
  peer_directory d;
  d.put("a", "ns", seq({5, 6}), peer_tier::ram, 10, true);
  d.put("a", "ns", seq({5, 6}), peer_tier::ram, 12, true); // again
  BOOST_TEST(d.holdings("a") == 1u);
  BOOST_TEST(d.longest_usable("ns", seq({5, 6, 7}))->holders[0].bytes == 12u);
  BOOST_TEST(!d.remove("a", "ns", seq({5, 6}), peer_tier::ssd)); // not there
  BOOST_TEST(!d.remove("b", "ns", seq({5, 6}), peer_tier::ram));
  BOOST_TEST(!d.remove("a", "ns", seq({9}), peer_tier::ram));
  BOOST_TEST(d.remove("a", "ns", seq({5, 6}), peer_tier::ram));
  BOOST_TEST(!d.remove("a", "ns", seq({5, 6}), peer_tier::ram)); // twice
  BOOST_TEST(d.entries() == 0u);
  BOOST_TEST(d.holdings("a") == 0u);
  BOOST_TEST(!d.put("", "ns", seq({1}), peer_tier::ram, 1, true));
  BOOST_TEST(!d.put("a", "ns", {}, peer_tier::ram, 1, true));
}

BOOST_AUTO_TEST_CASE(a_dropped_node_leaves_no_trace) {
  peer_directory d;
  d.put("a", "x", seq({1, 2, 3}), peer_tier::ram, 1, true);
  d.put("a", "y", seq({1, 2, 3}), peer_tier::ssd, 1, true);
  d.put("b", "x", seq({1, 2, 3}), peer_tier::ssd, 1, true);
  d.put("a", "x", seq({1, 2, 3, 4, 5}), peer_tier::ram, 1, true);
  BOOST_TEST(d.drop("a") == 3u);
  BOOST_TEST(d.holdings("a") == 0u);
  BOOST_TEST(!d.longest_usable("y", seq({1, 2, 3, 4})));
  auto m = d.longest_usable("x", seq({1, 2, 3, 4, 5, 6}));
  BOOST_REQUIRE(m);
  BOOST_TEST(m->length == 3u);
  BOOST_REQUIRE(m->holders.size() == 1u);
  BOOST_TEST(m->holders[0].node == "b");
  BOOST_TEST(d.drop("a") == 0u);
}

BOOST_AUTO_TEST_CASE(random_events_agree_with_a_brute_force_model) {
  // The model: (node, tier, ns, key) -> trimmable. A lookup's length is
  // the best p over every held key; the holders are those of one key of
  // that length (any such key when several tie; compared by length and by
  // holder set of the key the directory names).
  using holding = std::tuple<std::string, peer_tier, std::string, token_seq>;
  std::map<holding, bool> model;
  peer_directory d;
  std::mt19937 rng{2026};
  const char* nodes[] = {"n1", "n2", "n3", "n4"};
  const char* spaces[] = {"ns", "other"};
  auto random_key = [&] {
    token_seq k(1 + rng() % 6);
    for (auto& t : k)
      t = static_cast<token>(rng() % 3); // few tokens: many shared prefixes
    return k;
  };
  size_t lookups = 0;
  for (int step = 0; step < 20000; ++step) {
    std::string node = nodes[rng() % 4];
    std::string ns = spaces[rng() % 2];
    auto tier = rng() % 2 ? peer_tier::ram : peer_tier::ssd;
    auto what = rng() % 100;
    if (what < 50) {
      auto k = random_key();
      bool trim = rng() % 4 != 0;
      d.put(node, ns, k, tier, k.size(), trim);
      model[{node, tier, ns, k}] = trim;
    } else if (what < 85) {
      auto k = random_key();
      bool had = model.erase({node, tier, ns, k}) > 0;
      BOOST_REQUIRE_EQUAL(d.remove(node, ns, k, tier), had);
    } else if (what < 87) {
      size_t had = 0;
      for (auto i = model.begin(); i != model.end();)
        if (std::get<0>(i->first) == node) {
          i = model.erase(i);
          ++had;
        } else {
          ++i;
        }
      BOOST_REQUIRE_EQUAL(d.drop(node), had);
    } else {
      ++lookups;
      auto prompt = random_key();
      prompt.push_back(static_cast<token>(rng() % 3));
      // Brute force: per key, all holders trimmable?
      std::map<token_seq, std::vector<peer_holding>> keys;
      for (auto& [h, trim] : model)
        if (std::get<2>(h) == ns)
          keys[std::get<3>(h)].push_back(
            {std::get<0>(h), std::get<1>(h), std::get<3>(h).size(), trim});
      uint64_t best = 0;
      for (auto& [k, hs] : keys) {
        uint64_t lcp = 0;
        while (lcp < k.size() && lcp < prompt.size() && k[lcp] == prompt[lcp])
          ++lcp;
        uint64_t p = std::min<uint64_t>(lcp, prompt.size() - 1);
        bool trim = std::all_of(hs.begin(), hs.end(),
                                [](auto& h) { return h.trimmable; });
        if (p >= 1 && (p == k.size() || trim))
          best = std::max(best, p);
      }
      auto m = d.longest_usable(ns, prompt);
      BOOST_REQUIRE_EQUAL(m ? m->length : 0, best);
      if (m) {
        // Some key of that length serving that prefix has those holders.
        bool found = false;
        for (auto& [k, hs] : keys) {
          if (k.size() != m->entry_length || hs.size() != m->holders.size())
            continue;
          uint64_t lcp = 0;
          while (lcp < k.size() && lcp < prompt.size() && k[lcp] == prompt[lcp])
            ++lcp;
          found = found || lcp >= m->length;
        }
        BOOST_REQUIRE(found);
        for (size_t i = 1; i < m->holders.size(); ++i)
          BOOST_REQUIRE(m->holders[i - 1].tier <= m->holders[i].tier);
      }
    }
    size_t per = 0;
    for (auto& [h, trim] : model)
      per += std::get<0>(h) == node;
    BOOST_REQUIRE_EQUAL(d.holdings(node), per);
  }
  BOOST_TEST(lookups > 2000u);
}

BOOST_AUTO_TEST_CASE(per_node_names_every_nodes_longest_prefix_per_tier) {
  peer_directory d;
  d.put("a", "ns", seq({1, 2, 3, 4}), peer_tier::ram, 400, true);
  d.put("a", "ns", seq({1, 2, 3, 4, 5, 6}), peer_tier::ssd, 600, false);
  d.put("b", "ns", seq({1, 2}), peer_tier::ram, 200, true);
  d.put("c", "ns", seq({9, 9}), peer_tier::ram, 200, true);
  auto p = d.per_node("ns", seq({1, 2, 3, 4, 5, 6, 7}));
  BOOST_REQUIRE(p.size() == 3u);
  BOOST_TEST(p[0].node == "a");
  BOOST_TEST(p[0].ram_tokens == 4u);
  BOOST_TEST(p[0].ssd_tokens == 6u);
  BOOST_TEST(p[1].node == "b");
  BOOST_TEST(p[1].ram_tokens == 2u);
  BOOST_TEST(p[2].ram_tokens == 0u);
  // The untrimmable SSD copy serves no shorter prompt; the RAM one trims.
  p = d.per_node("ns", seq({1, 2, 3, 4, 5, 8}));
  BOOST_TEST(p[0].ram_tokens == 4u);
  BOOST_TEST(p[0].ssd_tokens == 0u);
  // Removing and dropping leave no trace.
  BOOST_TEST(d.remove("a", "ns", seq({1, 2, 3, 4}), peer_tier::ram));
  p = d.per_node("ns", seq({1, 2, 3, 4, 5, 6, 7}));
  BOOST_TEST(p[0].ram_tokens == 0u);
  BOOST_TEST(p[0].ssd_tokens == 6u);
  d.drop("a");
  p = d.per_node("ns", seq({1, 2, 3, 4, 5, 6, 7}));
  BOOST_REQUIRE(p.size() == 2u);
  BOOST_TEST(p[0].node == "b");
  BOOST_TEST(d.per_node("other", seq({1, 2, 3})).size() == 2u);
}
