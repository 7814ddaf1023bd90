// The SSD index's eviction order (`ssd-tier.policy`, docs/eviction.md "In
// the SSD tier"): ascending (priority, rank, last use) over the indexed
// files, as `over_cap` and `victim` walk it. Under lru the order is the
// one the tier always had (least recently used first, a scanned file below
// every file used since); under gdsf a file restored often outlasts files
// written once; under both a lower priority goes first and a held file
// (a delta parent) is skipped.
#define BOOST_TEST_MODULE ssd_order
#include "tiers/ssd/ssd_index.hpp"

#include <boost/test/unit_test.hpp>

using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

using names = std::vector<std::string>;

/// A prefix file of `n` kv tokens from `from` in "ns", 1000 bytes long.
ssd_file file(std::string name, token from, size_t n,
              uint8_t priority = default_priority) {
  auto h = std::make_shared<entry_header>();
  h->ns = "ns";
  h->token_count = n;
  for (size_t i = 0; i < n; ++i)
    h->tokens.push_back(from + static_cast<token>(i));
  h->layers.push_back({layer_kind::kv, 4, 0, n, 0, {}});
  h->priority = priority;
  return ssd_file{std::move(name), std::move(h), 1000};
}

/// Every file, first to go first.
names order(const ssd_index& ix) {
  return ix.over_cap(0, {});
}

const auto nothing_held = [](const std::string&) { return false; };

} // namespace

BOOST_AUTO_TEST_CASE(lru_evicts_the_least_recently_used_file_first) {
  ssd_index ix;
  ix.insert(file("a", 0, 10));
  ix.insert(file("b", 100, 10));
  ix.insert(file("c", 200, 10));
  ix.touch("a");
  BOOST_TEST(order(ix) == (names{"b", "c", "a"}),
             boost::test_tools::per_element());
  // Just enough to go under the cap: 3000 bytes held, 1500 allowed.
  BOOST_TEST(ix.over_cap(1500, {}) == (names{"b", "c"}),
             boost::test_tools::per_element());
  BOOST_TEST(ix.over_cap(1500, "b") == (names{"c", "a"}),
             boost::test_tools::per_element());
  BOOST_TEST(ix.over_cap(3000, {}).empty());
  BOOST_TEST(*ix.victim(1500, {}, nothing_held) == "b");
  BOOST_TEST(!ix.victim(3000, {}, nothing_held));
}

BOOST_AUTO_TEST_CASE(a_held_file_and_the_kept_one_are_skipped) {
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index ix{p};
    ix.insert(file("a", 0, 10));
    ix.insert(file("b", 100, 10));
    ix.insert(file("c", 200, 10));
    auto held = [](const std::string& n) { return n == "a"; };
    BOOST_TEST(*ix.victim(0, {}, held) == "b");
    BOOST_TEST(*ix.victim(0, "b", held) == "c");
    BOOST_TEST(ix.over_cap(0, "b", held) == (names{"c"}),
               boost::test_tools::per_element());
    BOOST_TEST(
      !ix.victim(0, "c", [](const std::string& n) { return n != "c"; }));
  }
}

BOOST_AUTO_TEST_CASE(every_lower_priority_leaves_before_a_higher_one) {
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index ix{p};
    ix.insert(file("old", 0, 10));
    ix.insert(file("high", 100, 10, 100));
    ix.insert(file("low", 200, 10, 0));
    ix.insert(file("new", 300, 10));
    ix.touch("low"); // however often used
    ix.touch("low");
    BOOST_TEST(order(ix) == (names{"low", "old", "new", "high"}),
               boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(gdsf_keeps_a_file_restored_often_over_files_seen_once) {
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index ix{p};
    ix.insert(file("often", 0, 10));
    for (int i = 0; i < 3; ++i)
      ix.touch("often");
    ix.insert(file("once1", 100, 10));
    ix.insert(file("once2", 200, 10));
    BOOST_TEST(ix.uses("often") == 4u);
    BOOST_TEST(ix.uses("once1") == 1u);
    auto first = *ix.victim(2000, {}, nothing_held);
    if (p == ram_policy::lru)
      BOOST_TEST(first == "often"); // the least recently used
    else
      BOOST_TEST(first == "once1");
  }
}

BOOST_AUTO_TEST_CASE(gdsf_ages_what_is_not_used_again) {
  ssd_index ix{ram_policy::gdsf};
  ix.insert(file("old", 0, 10));
  ix.touch("old"); // count 2: worth 2
  // Each one-off is evicted as it is pushed out; the clock climbs by 1 a
  // victim until new one-offs rank with the old favourite.
  token next = 1000;
  for (int i = 0; i < 4; ++i) {
    ix.insert(file("x" + std::to_string(i), next, 10));
    next += 100;
    auto v = *ix.victim(1000, {}, nothing_held);
    ix.erase(v, true);
  }
  BOOST_TEST(!ix.file(std::string{"old"}));
}

BOOST_AUTO_TEST_CASE(gdsf_remembers_an_evicted_file_and_its_ancestors) {
  ssd_index ix{ram_policy::gdsf};
  ix.insert(file("turn1", 0, 10));
  ix.touch("turn1");
  ix.touch("turn1");
  // The conversation's next turn (a kv file: it supersedes the first)
  // carries on its uses.
  ix.insert(file("turn2", 0, 20));
  BOOST_TEST(ix.uses("turn2") == 4u);
  ix.erase("turn1"); // superseded: no ghost
  // Evicted, then written again: its count comes back from the ghosts.
  ix.erase("turn2", true);
  ix.insert(file("turn2", 0, 20));
  BOOST_TEST(ix.uses("turn2") == 5u);
  // A file erased otherwise leaves no ghost.
  ix.insert(file("other", 500, 10));
  ix.touch("other");
  ix.erase("other");
  ix.insert(file("other", 500, 10));
  BOOST_TEST(ix.uses("other") == 1u);
}

BOOST_AUTO_TEST_CASE(the_scan_rebuilds_the_order_below_files_used_since) {
  // The start-up scan inserts each file it finds as the coldest, then
  // makes each coldest again from the newest mtime to the oldest; a file a
  // restore used meanwhile keeps its place above them.
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index ix{p};
    ix.insert(file("m2", 0, 10), true);
    ix.insert(file("used", 100, 10), true);
    ix.insert(file("m1", 200, 10), true);
    ix.insert(file("m3", 300, 10), true);
    ix.insert(file("low", 400, 10, 0), true);
    ix.touch("used");
    ix.insert(file("written", 500, 100)); // a write during the scan
    for (auto* n : {"m3", "m2", "m1", "low"})
      ix.make_coldest(n);
    // lru: the written file and the used one in their order of use;
    // gdsf: ranked by uses × cost, both above the scanned files.
    auto want = p == ram_policy::lru
                  ? names{"low", "m1", "m2", "m3", "used", "written"}
                  : names{"low", "m1", "m2", "m3", "written", "used"};
    BOOST_TEST(order(ix) == want, boost::test_tools::per_element());
    // A scanned file used again leaves the bottom.
    ix.touch("m1");
    BOOST_TEST(order(ix)[1] == "m2");
  }
}

BOOST_AUTO_TEST_CASE(ids_are_reused_and_listings_follow_the_order) {
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index ix{p};
    for (int round = 0; round < 3; ++round) {
      for (token i = 0; i < 50; ++i)
        ix.insert(file("f" + std::to_string(i), 1000 * i, 10));
      for (token i = 0; i < 50; i += 2)
        ix.touch("f" + std::to_string(i));
      auto o = order(ix);
      BOOST_TEST(o.size() == 50u);
      BOOST_TEST(ix.saved().size() == 50u);
      BOOST_TEST(ix.saved().front().tokens.front() == 1000u * 1);
      for (token i = 0; i < 50; ++i)
        ix.erase("f" + std::to_string(i), i % 3 == 0);
      BOOST_TEST(ix.size() == 0u);
      BOOST_TEST(ix.bytes() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_estimate_counts_the_ranking) {
  ssd_index lru{ram_policy::lru}, gdsf{ram_policy::gdsf};
  auto lru0 = lru.approx_bytes(), gdsf0 = gdsf.approx_bytes();
  for (token i = 0; i < 100; ++i) {
    lru.insert(file("f" + std::to_string(i), 1000 * i, 10));
    gdsf.insert(file("f" + std::to_string(i), 1000 * i, 10));
  }
  // gdsf's heap place (16 bytes a file) beside the slot both keep.
  BOOST_TEST((gdsf.approx_bytes() - gdsf0) - (lru.approx_bytes() - lru0)
             == 100u * 16);
  // An evicted file's ghost is counted while gdsf remembers it; lru keeps
  // none.
  for (auto p : {ram_policy::lru, ram_policy::gdsf}) {
    ssd_index evicting{p}, erasing{p};
    for (token i = 0; i < 100; ++i) {
      evicting.insert(file("f" + std::to_string(i), 1000 * i, 10));
      erasing.insert(file("f" + std::to_string(i), 1000 * i, 10));
    }
    evicting.erase("f0", true);
    erasing.erase("f0");
    auto ghost = p == ram_policy::gdsf ? entry_ranking::ghost_bytes : 0;
    BOOST_TEST(evicting.approx_bytes() == erasing.approx_bytes() + ghost);
  }
}
