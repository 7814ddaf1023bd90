#define BOOST_TEST_MODULE tiers_prefix_index
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/geometry.hpp"
#include "tiers/prefix_index.hpp"

#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

using namespace kvtier;
using namespace kvtier::tiers;
namespace bdata = boost::unit_test::data;

namespace {

using index_t = prefix_index<std::string>;

const uint64_t trims = 0; // floor of a fully trimmable entry

token_seq seq(std::initializer_list<token> t) {
  return token_seq(t);
}

struct answer {
  std::string handle;
  uint64_t length = 0;
  bool needs_trim = false;
  bool operator==(const answer&) const = default;
};

std::string show(const std::optional<answer>& a) {
  if (!a)
    return "none";
  return a->handle + "@" + std::to_string(a->length)
         + (a->needs_trim ? " trimmed" : "");
}

std::optional<answer> lookup(const index_t& ix, std::string_view ns,
                             const token_seq& p) {
  auto m = ix.longest_usable(ns, p);
  if (!m)
    return std::nullopt;
  return answer{ix.handle(m->ref), m->length, m->needs_trim};
}

} // namespace

BOOST_AUTO_TEST_CASE(exact_entry_serves_a_longer_prompt) {
  index_t ix;
  ix.insert("a", seq({1, 2, 3}), "abc", trims);
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 4})) == answer{"abc", 3, false}));
  BOOST_TEST(!lookup(ix, "b", seq({1, 2, 3, 4})), "namespaces never mix");
  BOOST_TEST(!lookup(ix, "a", seq({2, 2, 3, 4})));
}

BOOST_AUTO_TEST_CASE(one_token_is_always_left_to_forward) {
  index_t ix;
  ix.insert("a", seq({1, 2, 3}), "abc", trims);
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3})) == answer{"abc", 2, true}));
  ix.insert("a", seq({1, 2, 3}), "abc-exact", 3);
  BOOST_TEST(!lookup(ix, "a", seq({1, 2, 3})), "exact-only cannot trim to 2");
  BOOST_TEST(!lookup(ix, "a", seq({1})), "p = 0 is never usable");
  BOOST_TEST(!lookup(ix, "a", token_seq{}));
}

BOOST_AUTO_TEST_CASE(trimmed_donor_below_a_divergence_point) {
  index_t ix;
  ix.insert("a", seq({1, 2, 3, 4, 5}), "long", trims);
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"long", 3, true}));
  ix.insert("a", seq({1, 2, 3, 4, 5}), "long-floor4", 4);
  BOOST_TEST(!lookup(ix, "a", seq({1, 2, 3, 9})), "floor 4 > p 3");
  BOOST_TEST(
    (lookup(ix, "a", seq({1, 2, 3, 4, 9})) == answer{"long-floor4", 4, true}));
}

BOOST_AUTO_TEST_CASE(untrimmable_divergent_entry_is_no_candidate) {
  index_t ix;
  ix.insert("a", seq({1, 2}), "short", trims);
  ix.insert("a", seq({1, 2, 3, 4, 5}), "ssm", 5); // exact-only
  BOOST_TEST(
    (lookup(ix, "a", seq({1, 2, 3, 4, 9})) == answer{"short", 2, false}));
  BOOST_TEST(
    (lookup(ix, "a", seq({1, 2, 3, 4, 5, 6})) == answer{"ssm", 5, false}));
}

BOOST_AUTO_TEST_CASE(ties_go_to_no_trim_then_most_recent) {
  index_t ix;
  ix.insert("a", seq({1, 2, 3, 7}), "x", trims);
  ix.insert("a", seq({1, 2, 3, 8}), "y", trims);
  // Both trim to 3; y is newer.
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"y", 3, true}));
  ix.touch(ix.find("a", seq({1, 2, 3, 7})));
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"x", 3, true}));
  ix.insert("a", seq({1, 2, 3}), "exact", 3);
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"exact", 3, false}));
}

BOOST_AUTO_TEST_CASE(most_recent_that_trims_far_enough_wins) {
  index_t ix;
  ix.insert("a", seq({1, 2, 3, 7, 7}), "old-trims", 0);
  ix.insert("a", seq({1, 2, 3, 8, 8}), "mid-trims", 2);
  ix.insert("a", seq({1, 2, 3, 6, 6}), "new-floor4", 4);
  // The newest trimmable entry cannot reach 3: the next newest serves.
  BOOST_TEST(
    (lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"mid-trims", 3, true}));
  BOOST_TEST((lookup(ix, "a", seq({1, 9})) == answer{"old-trims", 1, true}));
}

BOOST_AUTO_TEST_CASE(replace_erase_and_structure) {
  index_t ix;
  auto r = ix.insert("a", seq({1, 2, 3}), "one", trims);
  BOOST_TEST(!r.replaced);
  r = ix.insert("a", seq({1, 2, 3}), "two", 3);
  BOOST_TEST(r.replaced.value() == "one");
  BOOST_TEST(ix.size() == 1u);
  ix.insert("a", seq({1, 2}), "p", trims);
  ix.insert("a", seq({1, 2, 3, 4, 5}), "q", trims);
  ix.insert("a", seq({1, 5}), "r", trims);
  BOOST_TEST(ix.token_count() == 6u, "1 2 | 3 | 4 5 | 5");
  auto q = ix.find("a", seq({1, 2, 3, 4, 5}));
  BOOST_TEST(ix.key(q) == seq({1, 2, 3, 4, 5}));
  BOOST_TEST(ix.ns(q) == "a");
  auto anc = ix.ancestors(q);
  BOOST_REQUIRE(anc.size() == 2u);
  BOOST_TEST(ix.handle(anc[0]) == "two");
  BOOST_TEST(ix.handle(anc[1]) == "p");
  BOOST_TEST(ix.descendants("a", seq({1})).size() == 4u);
  BOOST_TEST(ix.descendants("a", seq({1, 2})).size() == 2u);
  BOOST_TEST(ix.descendants("a", seq({1, 2, 3, 4})).size() == 1u);
  BOOST_TEST(ix.erase("a", seq({1, 2, 3})).value() == "two");
  BOOST_TEST(!ix.erase("a", seq({1, 2, 3})));
  BOOST_TEST(ix.key(q) == seq({1, 2, 3, 4, 5}), "refs survive merges");
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"q", 3, true}));
  ix.erase(ix.find("a", seq({1, 2})));
  ix.erase(ix.find("a", seq({1, 5})));
  BOOST_TEST(ix.node_count() == 2u, "root and one leaf remain");
  ix.erase(q);
  BOOST_TEST(ix.size() == 0u);
  BOOST_TEST(ix.node_count() == 0u);
  BOOST_TEST(ix.token_count() == 0u);
}

BOOST_AUTO_TEST_CASE(small_handles_live_in_the_node) {
  // A handle of at most 8 bytes that copies as bytes is kept in the node;
  // it is handed back whole by lookups, replacements, erases and set_handle.
  struct pair32 {
    uint32_t id = 0;
    uint32_t serial = 0;
  };
  static_assert(prefix_index<pair32>::in_node);
  static_assert(prefix_index<char>::in_node);
  static_assert(!prefix_index<std::string>::in_node);
  prefix_index<pair32> ix;
  auto a = ix.insert("a", seq({1, 2, 3}), pair32{7, 0xdeadbeef}, trims);
  ix.insert("a", seq({1, 2, 4}), pair32{8, 1}, trims);
  BOOST_TEST(ix.handle(a.ref).id == 7u);
  BOOST_TEST(ix.handle(a.ref).serial == 0xdeadbeefu);
  auto m = ix.longest_usable("a", seq({1, 2, 3, 9}));
  BOOST_REQUIRE(m);
  BOOST_TEST(ix.handle(m->ref).id == 7u);
  ix.set_handle(a.ref, pair32{9, 2});
  auto r = ix.insert("a", seq({1, 2, 3}), pair32{10, 3}, trims);
  BOOST_REQUIRE(r.replaced);
  BOOST_TEST(r.replaced->id == 9u, "the replaced handle, as set last");
  BOOST_TEST(r.replaced->serial == 2u);
  auto gone = ix.erase("a", seq({1, 2, 4}));
  BOOST_REQUIRE(gone);
  BOOST_TEST(gone->id == 8u);
  BOOST_TEST(gone->serial == 1u);
  BOOST_TEST(ix.handle(ix.find("a", seq({1, 2, 3}))).id == 10u);
}

BOOST_AUTO_TEST_CASE(stamps_follow_the_owners_clock_and_stay_unique) {
  // An owner asking for stamps of at least its clock reads the time of the
  // last use back; stamps still rise with every insert and touch, so the
  // most recently used wins ties whatever the clock says.
  index_t ix;
  auto x = ix.insert("a", seq({1, 2, 3, 7}), "x", trims, 1000 << 4).ref;
  auto y = ix.insert("a", seq({1, 2, 3, 8}), "y", trims, 1000 << 4).ref;
  BOOST_TEST(ix.stamp(x) >> 4 == 1000u);
  BOOST_TEST(ix.stamp(y) >> 4 == 1000u);
  BOOST_TEST(ix.stamp(y) > ix.stamp(x));
  ix.touch(x, 2000 << 4);
  BOOST_TEST(ix.stamp(x) >> 4 == 2000u);
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"x", 3, true}));
  ix.touch(y, 5); // a clock behind: still the newest stamp
  BOOST_TEST(ix.stamp(y) > ix.stamp(x));
  BOOST_TEST((lookup(ix, "a", seq({1, 2, 3, 9})) == answer{"y", 3, true}));
  ix.touch(x); // no clock: the next stamp
  BOOST_TEST(ix.stamp(x) == ix.stamp(y) + 1);
}

BOOST_AUTO_TEST_CASE(prefixes_walk_the_key_whether_or_not_it_is_held) {
  index_t ix;
  ix.insert("a", seq({1, 2}), "p", trims);
  ix.insert("a", seq({1, 2, 3, 4}), "q", trims);
  ix.insert("a", seq({1, 5}), "r", trims);
  ix.insert("b", seq({1, 2}), "other ns", trims);
  auto names = [&](std::string_view ns, token_seq key) {
    std::vector<std::string> out;
    for (auto ref : ix.prefixes(ns, key))
      out.push_back(ix.handle(ref));
    return out;
  };
  using v = std::vector<std::string>;
  BOOST_TEST((names("a", seq({1, 2, 3, 4})) == v{"p", "q"}));
  BOOST_TEST((names("a", seq({1, 2, 3, 4, 9})) == v{"p", "q"}), "not held");
  BOOST_TEST((names("a", seq({1, 2, 3})) == v{"p"}), "ends mid-edge");
  BOOST_TEST((names("a", seq({1, 5})) == v{"r"}));
  BOOST_TEST(names("a", seq({1})).empty());
  BOOST_TEST(names("a", seq({7, 2})).empty());
  BOOST_TEST(names("c", seq({1, 2})).empty());
}

BOOST_AUTO_TEST_CASE(entries_lists_every_entry_of_every_namespace_once) {
  // What the event feed walks for a snapshot: interior entries, leaves,
  // entries that end mid-edge of another's run, other namespaces; an
  // erased entry and the nodes that only split edges are not listed.
  prefix_tree t;
  BOOST_TEST(t.entries().empty());
  std::set<std::pair<std::string, token_seq>> want;
  auto add = [&](std::string ns, token_seq key) {
    t.insert(ns, key, 0, key.size());
    want.insert({ns, key});
  };
  add("a", seq({1, 2}));
  add("a", seq({1, 2, 3, 4}));
  add("a", seq({1, 5}));
  add("b", seq({1, 2}));
  add("b", seq({9}));
  auto gone = t.insert("a", seq({1, 2, 3}), 0, 3).ref;
  t.erase(gone);
  std::set<std::pair<std::string, token_seq>> got;
  auto refs = t.entries();
  for (auto ref : refs)
    got.insert({t.ns(ref), t.key(ref)});
  BOOST_TEST(refs.size() == want.size());
  BOOST_TEST((got == want));
}

BOOST_AUTO_TEST_CASE(trim_floor_matches_can_trim_to) {
  for (auto name : {"tiny-dense", "tiny-window", "tiny-hybrid"}) {
    runtime::oracle_engine eng(*model_geometry::preset(name));
    for (size_t n : {1, 5, 15, 16, 17, 40}) {
      token_seq t(n);
      std::iota(t.begin(), t.end(), 0u);
      auto e = eng.prefill("ns", t);
      if (n > 3)
        for (auto& l : e.layers)
          l.min_offset = 3;
      auto f = trim_floor(e);
      for (uint64_t k = 1; k < n; ++k)
        BOOST_TEST(e.can_trim_to(k) == (k >= f),
                   name << " n=" << n << " k=" << k);
    }
  }
}

namespace {

/// The naive reference: every entry scanned for each lookup.
struct naive_index {
  struct item {
    std::string ns;
    token_seq key;
    std::string handle;
    uint64_t floor;
    uint64_t stamp;
  };
  std::vector<item> items;
  uint64_t clock = 0;

  item* find(const std::string& ns, const token_seq& k) {
    for (auto& i : items)
      if (i.ns == ns && i.key == k)
        return &i;
    return nullptr;
  }

  std::optional<answer> lookup(const std::string& ns, const token_seq& p) {
    const item* best = nullptr;
    answer out;
    for (auto& i : items) {
      if (i.ns != ns || p.empty())
        continue;
      uint64_t q = std::min(common_prefix(i.key, p), p.size() - 1);
      bool exact = q == i.key.size();
      if (q == 0 || (!exact && q < i.floor))
        continue;
      bool better = !best || q > out.length
                    || (q == out.length && exact && out.needs_trim)
                    || (q == out.length && exact == !out.needs_trim
                        && i.stamp > best->stamp);
      if (better) {
        best = &i;
        out = answer{i.handle, q, !exact};
      }
    }
    if (!best)
      return std::nullopt;
    return out;
  }
};

} // namespace

// Short keys over 3 tokens collide most; long binary keys make deep chains
// of splits and merges; 16 tokens fill the sorted child arrays; 300 tokens
// make nodes wide enough for hash tables that grow, shrink and go back to
// sorted arrays.
BOOST_DATA_TEST_CASE(random_operations_match_a_linear_scan,
                     bdata::make({3, 2, 16, 300}) ^ bdata::make({9, 24, 6, 3}),
                     alphabet, max_len) {
  std::mt19937_64 rng(7 + alphabet);
  auto pick = [&](uint64_t n) { return rng() % n; };
  index_t ix;
  naive_index ref;
  auto random_key = [&] {
    token_seq k(1 + pick(max_len));
    for (auto& t : k)
      t = static_cast<token>(pick(alphabet));
    return k;
  };
  size_t checked = 0;
  // Refs taken at insert, by handle: each must keep naming its entry, its
  // key rebuilt from the tree's edges, through every later split and merge.
  std::map<std::string, entry_ref> refs;
  size_t keys_checked = 0;
  for (int step = 0; step < 20000; ++step) {
    std::string ns = pick(8) == 0 ? "b" : "a";
    auto k = random_key();
    auto op = pick(10);
    if (op < 4) {
      auto floor = pick(3) == 0 ? k.size() : pick(k.size());
      auto h = std::to_string(step);
      auto r = ix.insert(ns, k, h, floor);
      if (auto i = ref.find(ns, k)) {
        BOOST_REQUIRE(refs.at(i->handle) == r.ref);
        refs.erase(i->handle);
        *i = {ns, k, h, floor, ++ref.clock};
      } else {
        ref.items.push_back({ns, k, h, floor, ++ref.clock});
      }
      refs[h] = r.ref;
      std::multiset<std::string> got, want;
      for (auto a : ix.ancestors(r.ref))
        got.insert(ix.handle(a));
      for (auto& i : ref.items)
        if (i.ns == ns && i.key.size() < k.size()
            && common_prefix(i.key, k) == i.key.size())
          want.insert(i.handle);
      BOOST_REQUIRE(got == want);
      BOOST_REQUIRE(ix.key(r.ref) == k);
    } else if (op < 6) {
      auto got = ix.erase(ns, k);
      auto i = ref.find(ns, k);
      BOOST_REQUIRE(got.has_value() == (i != nullptr));
      if (i) {
        BOOST_REQUIRE(*got == i->handle);
        refs.erase(i->handle);
        ref.items.erase(ref.items.begin() + (i - ref.items.data()));
      }
    } else {
      auto got = lookup(ix, ns, k);
      auto want = ref.lookup(ns, k);
      BOOST_REQUIRE_MESSAGE(got == want, "step " << step << ": index "
                                                 << show(got) << ", scan "
                                                 << show(want));
      if (got && op == 9) { // serve it: the owner touches the donor
        ix.touch(ix.longest_usable(ns, k)->ref);
        for (auto& i : ref.items)
          if (i.handle == got->handle)
            i.stamp = ++ref.clock;
      }
      ++checked;
    }
    if (op == 8) {
      std::multiset<std::string> got, want;
      for (auto d : ix.descendants(ns, k))
        got.insert(ix.handle(d));
      for (auto& i : ref.items)
        if (i.ns == ns && i.key.size() > k.size()
            && common_prefix(i.key, k) == k.size())
          want.insert(i.handle);
      BOOST_REQUIRE(got == want);
    }
    BOOST_REQUIRE(ix.size() == ref.items.size());
    // Every entry now and then; a few at random after every step.
    bool all = step % 1000 == 999;
    BOOST_REQUIRE(refs.size() == ref.items.size());
    for (size_t n = 0; n < (all ? ref.items.size() : 4) && !ref.items.empty();
         ++n) {
      auto& i = all ? ref.items[n] : ref.items[pick(ref.items.size())];
      auto r = refs.at(i.handle);
      BOOST_REQUIRE_MESSAGE(ix.key(r) == i.key, "step " << step);
      BOOST_REQUIRE(ix.ns(r) == i.ns);
      BOOST_REQUIRE(ix.length(r) == i.key.size());
      BOOST_REQUIRE(ix.handle(r) == i.handle);
      ++keys_checked;
    }
  }
  BOOST_TEST(checked > 5000u);
  BOOST_TEST(keys_checked > 50000u);
}

namespace {

enum class order { random, sorted, reverse };

std::ostream& operator<<(std::ostream& os, order o) {
  return os << (o == order::random   ? "random"
                : o == order::sorted ? "sorted"
                                     : "reverse");
}

} // namespace

// One node with thousands of children (conversations on one system
// prompt), put in random, sorted and reverse order of their first tokens
// and erased in random order, oldest first and newest first: after every
// step, prompts that leave the tree at or above the wide node (served by
// the most recent entry below that trims that far, from its summaries) and
// prompts that go down one child get the scan's answer.
BOOST_DATA_TEST_CASE(wide_nodes_keep_their_summaries_under_any_order,
                     bdata::make({order::random, order::sorted,
                                  order::reverse}),
                     how) {
  constexpr token children = 3000;
  std::mt19937_64 rng(11);
  const token_seq system{5, 6, 7};
  std::vector<token> firsts(children);
  std::iota(firsts.begin(), firsts.end(), token{100});
  if (how == order::random)
    std::shuffle(firsts.begin(), firsts.end(), rng);
  if (how == order::reverse)
    std::reverse(firsts.begin(), firsts.end());
  index_t ix;
  naive_index ref;
  auto key_of = [&](token first) {
    auto k = system;
    k.push_back(first);
    for (size_t n = 1 + first % 3; n > 0; --n)
      k.push_back(static_cast<token>(1 + rng() % 4));
    return k;
  };
  std::vector<token_seq> keys;
  size_t checked = 0;
  auto check = [&](size_t step) {
    // Off the tree at the wide node, at depth 3 and (through a stored
    // child) deeper; and an exact system-prompt entry's prompt.
    std::vector<token_seq> prompts{
      {5, 6, 7, 9}, {5, 6, 7, 99, 1}, {5, 6, 9, 9}, {5, 9, 9}};
    if (!keys.empty()) {
      auto k = keys[rng() % keys.size()];
      prompts.push_back(k);
      k.push_back(42);
      prompts.push_back(k);
    }
    for (auto& p : prompts) {
      auto got = lookup(ix, "a", p);
      auto want = ref.lookup("a", p);
      BOOST_REQUIRE_MESSAGE(got == want, how << " step " << step << ": index "
                                             << show(got) << ", scan "
                                             << show(want));
      ++checked;
    }
  };
  // Floors: most trim to the system prompt; a few only to the child's
  // first token, a few exact only, and a rare few further (each such
  // floor shared by few: erasing one changes the least floor).
  auto floor_of = [&](const token_seq& k) -> uint64_t {
    auto r = rng() % 16;
    return r == 0 ? k.size() : r == 1 ? 4 : r == 2 ? rng() % 3 : 3;
  };
  size_t step = 0;
  for (auto f : firsts) {
    auto k = key_of(f);
    auto fl = floor_of(k);
    auto h = std::to_string(f);
    ix.insert("a", k, h, fl);
    ref.items.push_back({"a", k, h, fl, ++ref.clock});
    keys.push_back(k);
    if (rng() % 4 == 0) { // a served entry is touched
      auto r = ix.find("a", keys[rng() % keys.size()]);
      ix.touch(r);
      for (auto& i : ref.items)
        if (i.handle == ix.handle(r))
          i.stamp = ++ref.clock;
    }
    check(step++);
  }
  BOOST_TEST(ix.size() == size_t{children});
  BOOST_TEST(ix.memory_bytes() > size_t{children} * 16u);
  // Erase in another random order, oldest first, or newest first (each
  // erase takes the most recent entry: the wide node's summary of it).
  if (how == order::random)
    std::shuffle(keys.begin(), keys.end(), rng);
  if (how == order::reverse)
    std::reverse(keys.begin(), keys.end());
  while (!keys.empty()) {
    auto k = keys.front();
    keys.erase(keys.begin());
    if (rng() % 8 == 0) { // served meanwhile
      auto r = ix.find("a", keys.empty() ? k : keys[rng() % keys.size()]);
      ix.touch(r);
      for (auto& i : ref.items)
        if (i.handle == ix.handle(r))
          i.stamp = ++ref.clock;
    }
    auto got = ix.erase("a", k);
    auto i = ref.find("a", k);
    BOOST_REQUIRE(got && i && *got == i->handle);
    ref.items.erase(ref.items.begin() + (i - ref.items.data()));
    check(step++);
    BOOST_REQUIRE(ix.size() == ref.items.size());
  }
  BOOST_TEST(ix.node_count() == 0u, "every node went with its entries");
  BOOST_TEST(checked > 2u * children);
}
