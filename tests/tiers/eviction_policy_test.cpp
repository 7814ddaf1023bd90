// The eviction policies over prefix-respecting blocks
// (tiers/eviction_policy.hpp): only leaves go, the cache never exceeds its
// capacity, the worked example of docs/eviction.md, each predictor's
// order (reuse intervals, fresh blocks, LRU-2), and the foresight
// ceiling never below LRU on random prefix trees.
#define BOOST_TEST_MODULE tiers_eviction_policy
#include <boost/test/unit_test.hpp>

#include "tiers/eviction_policy.hpp"

#include <functional>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

using namespace kvtier::tiers;

namespace {

/// Forwards to a policy and checks, on every eviction, that the node has no
/// cached child and that every cached node's parent is cached.
class checked final : public eviction_policy {
public:
  explicit checked(std::unique_ptr<eviction_policy> p)
    : p_(std::move(p)) {}

  std::string name() const override {
    return p_->name();
  }
  bool on_insert(const block_ref& b) override {
    if (!p_->on_insert(b))
      return false;
    parent_[b.key] = b.parent;
    if (b.parent) {
      BOOST_TEST(parent_.count(*b.parent) == 1u); // closed under parents
      ++children_[*b.parent];
    }
    return true;
  }
  bool on_hit(const block_ref& b) override {
    return p_->on_hit(b);
  }
  std::optional<uint64_t> victim() const override {
    return p_->victim();
  }
  bool erase(uint64_t key) override {
    bool leaf = children_[key] == 0;
    bool done = p_->erase(key);
    BOOST_TEST(done == leaf); // a node with a cached child is refused
    if (done) {
      ++evicted;
      if (auto p = parent_[key])
        --children_[*p];
      parent_.erase(key);
      children_.erase(key);
    }
    return done;
  }
  void settle() override {
    p_->settle();
  }
  bool contains(uint64_t key) const override {
    return p_->contains(key);
  }
  size_t size() const override {
    return p_->size();
  }

  uint64_t evicted = 0;

private:
  std::unique_ptr<eviction_policy> p_;
  std::unordered_map<uint64_t, std::optional<uint64_t>> parent_;
  std::unordered_map<uint64_t, uint32_t> children_;
};

/// Random prefix-chained requests: `sessions` conversations that grow turn
/// by turn under a few shared system prompts, with one-off requests between.
std::vector<std::vector<uint64_t>> random_requests(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint64_t>> sessions(40);
  uint64_t next = 1000;
  for (auto& s : sessions)
    s = {rng() % 3}; // one of three system prompts (keys 0, 1, 2)
  std::vector<std::vector<uint64_t>> out;
  for (size_t i = 0; i < n; ++i) {
    auto& s = sessions[rng() % sessions.size()];
    bool one_off = rng() % 4 == 0;
    auto r = one_off ? std::vector<uint64_t>{s.front()} : s;
    for (size_t k = 1 + rng() % 6; k > 0; --k)
      r.push_back(next++);
    if (!one_off)
      s = r;
    if (s.size() > 60)
      s.resize(1); // the conversation ends; a new one starts there
    out.push_back(std::move(r));
  }
  return out;
}

/// An access to `key` under `parent` at recency `stamp`, used at `stamp`.
block_ref ref(uint64_t key, std::optional<uint64_t> parent, uint64_t stamp) {
  block_ref b;
  b.key = key;
  b.parent = parent;
  b.depth = parent ? 1 : 0;
  b.tokens = 1;
  b.stamp = stamp;
  b.next_use = 100 - stamp; // the later inserted, the sooner used
  return b;
}

using maker = std::function<std::unique_ptr<eviction_policy>(uint64_t)>;

const std::vector<maker> all_policies = {
  [](uint64_t) { return make_lru(); },
  [](uint64_t cap) { return make_gdsf_radix(cap); },
  [](uint64_t cap) {
    gdsf_options o; // GDSF alone
    o.duel = false;
    o.reuse = false;
    return make_gdsf_radix(cap, o);
  },
  [](uint64_t cap) {
    gdsf_options o; // the reuse-interval order alone
    o.duel = false;
    o.frequency = false;
    return make_gdsf_radix(cap, o);
  },
  [](uint64_t) { return make_belady(); }};

/// Next uses of each request's blocks (belady's foresight).
std::vector<std::vector<uint64_t>>
next_uses(const std::vector<std::vector<uint64_t>>& rs) {
  std::vector<std::vector<uint64_t>> out(rs.size());
  std::unordered_map<uint64_t, uint64_t> later;
  for (size_t i = rs.size(); i-- > 0;) {
    for (auto b : rs[i]) {
      auto it = later.find(b);
      out[i].push_back(it == later.end() ? never_used : it->second);
    }
    for (auto b : rs[i])
      later[b] = i;
  }
  return out;
}

uint64_t hits(std::unique_ptr<eviction_policy> p, uint64_t capacity,
              const std::vector<std::vector<uint64_t>>& rs) {
  auto future = next_uses(rs);
  block_cache c(std::move(p), capacity, 1);
  for (size_t i = 0; i < rs.size(); ++i)
    c.request(rs[i], rs[i].size(), future[i]);
  return c.counts().hit_blocks;
}

} // namespace

BOOST_AUTO_TEST_CASE(only_leaves_are_evictable) {
  for (auto& make : all_policies) {
    auto p = make(8);
    BOOST_TEST_CONTEXT(p->name()) {
      auto root = ref(1, std::nullopt, 1);
      auto a = ref(2, 1, 2);
      auto b = ref(3, 1, 3);
      auto c = ref(4, 2, 4);
      BOOST_TEST(p->on_insert(root));
      BOOST_TEST(p->on_insert(a));
      BOOST_TEST(p->on_insert(b));
      BOOST_TEST(p->on_insert(c));
      BOOST_TEST(!p->on_insert(c)); // cached already
      BOOST_TEST(!p->erase(1));     // two cached children
      BOOST_TEST(!p->erase(2));     // its child 4 is cached
      BOOST_TEST(!p->erase(99));    // not cached
      BOOST_TEST(p->size() == 4u);
      std::set<uint64_t> gone;
      while (auto v = p->victim()) {
        BOOST_TEST(*v != 1u); // the root goes last
        if (*v == 1u)
          break;
        BOOST_TEST(p->erase(*v));
        gone.insert(*v);
        if (gone.size() == 3)
          break;
      }
      BOOST_TEST(gone == (std::set<uint64_t>{2, 3, 4}));
      BOOST_TEST(p->victim().value_or(0) == 1u);
      BOOST_TEST(p->erase(1));
      BOOST_TEST(!p->victim());
      BOOST_TEST(p->size() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(caches_stay_within_capacity_and_prefix_closed) {
  auto rs = random_requests(7, 3000);
  auto future = next_uses(rs);
  for (uint64_t cap : {1u, 5u, 40u, 300u}) {
    for (auto& make : all_policies) {
      auto owned = std::make_unique<checked>(make(cap));
      auto* check = owned.get();
      block_cache c(std::move(owned), cap, 16);
      BOOST_TEST_CONTEXT(c.policy().name() << " at " << cap) {
        for (size_t i = 0; i < rs.size(); ++i) {
          c.request(rs[i], rs[i].size() * 16, future[i]);
          BOOST_REQUIRE(c.policy().size() <= cap);
        }
        BOOST_TEST(check->evicted == c.counts().evictions);
        BOOST_TEST(c.counts().evictions > 0u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_worked_example_keeps_the_session_lru_drops) {
  // docs/eviction.md "A worked example": 5 blocks; a shared prompt S (0),
  // a session A1 A2 (1, 2) that comes back for A3 (3), a one-off B1 (4),
  // then a long one-off D1..D4 (5..8), then session A's next turn.
  std::vector<std::vector<uint64_t>> rs = {
    {0, 1, 2}, {0, 4}, {0, 1, 2, 3}, {0, 5, 6, 7, 8}, {0, 1, 2, 3, 9}};
  gdsf_options plain; // GDSF alone: the duel's shadows have no history yet
  plain.duel = false;
  plain.reuse = false;
  struct run {
    std::unique_ptr<eviction_policy> p;
    std::vector<uint64_t> evicted;
  };
  for (auto* which : {"lru", "gdsf"}) {
    auto owned =
      std::string{which} == "lru" ? make_lru() : make_gdsf_radix(5, plain);
    auto* p = owned.get();
    block_cache c(std::move(owned), 5, 512);
    for (size_t i = 0; i < 3; ++i)
      c.request(rs[i], rs[i].size() * 512);
    BOOST_TEST(c.policy().size() == 5u);
    // Request 4 brings 4 new blocks: 9 cached, 4 must go.
    c.request(rs[3], rs[3].size() * 512);
    std::set<uint64_t> kept;
    for (uint64_t k = 0; k <= 8; ++k)
      if (p->contains(k))
        kept.insert(k);
    auto hit = c.request(rs[4], rs[4].size() * 512);
    BOOST_TEST_CONTEXT(which) {
      if (std::string{which} == "lru") {
        BOOST_TEST(kept == (std::set<uint64_t>{0, 5, 6, 7, 8}));
        BOOST_TEST(hit == 1u);
      } else {
        BOOST_TEST(kept == (std::set<uint64_t>{0, 1, 2, 3, 5}));
        BOOST_TEST(hit == 4u);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(ghosts_bring_back_counts_of_evicted_blocks) {
  gdsf_options o;
  o.duel = false;
  o.reuse = false;
  o.cost_weight = 0;
  o.inherit_session = false;
  auto p = make_gdsf_radix(2, o);
  block_cache c(std::move(p), 2, 1);
  // Block 1 is used, evicted by two others, used again: its count comes
  // back from the ghost list (2), so a new one-off (5) goes before it.
  c.request(std::vector<uint64_t>{1}, 1);
  c.request(std::vector<uint64_t>{2}, 1);
  c.request(std::vector<uint64_t>{3}, 1);
  BOOST_TEST(!c.policy().contains(1));
  c.request(std::vector<uint64_t>{1}, 1); // evicts 2; 1 counts 2 now
  c.request(std::vector<uint64_t>{5}, 1); // 3 goes: the oldest count-1 leaf
  c.request(std::vector<uint64_t>{6}, 1); // 5 goes, not 1
  BOOST_TEST(c.policy().contains(1));
  BOOST_TEST(c.policy().contains(6));
}

BOOST_AUTO_TEST_CASE(reuse_keeps_the_block_due_next_until_it_is_overdue) {
  gdsf_options o; // the reuse-interval order alone
  o.duel = false;
  o.frequency = false;
  block_cache c(make_gdsf_radix(2, o), 2, 1);
  block_cache l(make_lru(), 2, 1);
  auto both = [&](uint64_t key) {
    std::vector<uint64_t> r{key};
    c.request(r, 1);
    l.request(r, 1);
  };
  // One-block requests advance the stamps by 2. Block 1 comes back after
  // 2 (its interval); 7 and 8 were never seen before: their next use is
  // put 16 capacities out, so 8 goes at its own request, where LRU drops 1.
  both(1);
  both(1);
  both(7);
  both(8);
  BOOST_TEST(c.policy().contains(1));
  BOOST_TEST(!l.policy().contains(1));
  both(1); // stamp 9: interval (2 + 6) / 2 = 4, overdue past 9 + 2 × 4
  for (uint64_t k : {20u, 21u, 22u, 23u})
    both(k);
  BOOST_TEST(c.policy().contains(1)); // stamp 17: not overdue yet
  both(24);
  BOOST_TEST(!c.policy().contains(1)); // stamp 19: overdue, it went first
  BOOST_TEST(c.policy().contains(7));
}

BOOST_AUTO_TEST_CASE(fresh_blocks_go_before_blocks_seen_twice) {
  // Block 1 is seen twice (count 2), then one-offs stream through a cache
  // of 2. A fresh block's value weighs `fresh_weight`: at 0 (the default)
  // it ranks at the clock and goes first, so 1 stays; at 1 (plain GDSF)
  // the clock rises with each eviction until the one-offs outrank 1.
  for (double weight : {0.0, 1.0}) {
    gdsf_options o; // GDSF alone
    o.duel = false;
    o.reuse = false;
    o.cost_weight = 0;
    o.fresh_weight = weight;
    block_cache c(make_gdsf_radix(2, o), 2, 1);
    for (uint64_t k : {1u, 1u, 2u, 3u, 4u, 5u, 6u})
      c.request(std::vector<uint64_t>{k}, 1);
    BOOST_TEST_CONTEXT("fresh weight " << weight) {
      BOOST_TEST(c.policy().contains(1) == (weight == 0.0));
      BOOST_TEST(c.policy().contains(6));
    }
  }
}

BOOST_AUTO_TEST_CASE(belady_is_never_below_lru_on_random_trees) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto rs = random_requests(seed, 2000);
    for (uint64_t cap : {10u, 50u, 200u, 800u}) {
      auto lru = hits(make_lru(), cap, rs);
      auto ceiling = hits(make_belady(), cap, rs);
      auto policy = hits(make_gdsf_radix(cap), cap, rs);
      BOOST_TEST_CONTEXT("seed " << seed << " capacity " << cap) {
        BOOST_TEST(ceiling >= lru);
        BOOST_TEST(ceiling >= policy);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(lru2_drops_blocks_touched_once_first_and_remembers) {
  // LRU-2 alone in a cache of 2: block 1 touched twice stays while blocks
  // touched once come and go. Block 2 is evicted, comes back and, with the
  // ghost list, counts as touched before: it then outlasts the new 4.
  // Without ghosts it looks new again and goes before 4 does.
  for (double ghosts : {32.0, 0.0}) {
    gdsf_options o;
    o.duel = false;
    o.frequency = false;
    o.reuse = false;
    o.ghost_factor = ghosts;
    block_cache c(make_gdsf_radix(2, o), 2, 1);
    auto at = [&](uint64_t k) { c.request(std::vector<uint64_t>{k}, 1); };
    BOOST_TEST_CONTEXT("ghost factor " << ghosts) {
      BOOST_TEST(c.policy().name() == "lru-2");
      for (uint64_t k : {1u, 1u, 2u, 3u})
        at(k);
      BOOST_TEST(c.policy().contains(1)); // LRU would have dropped it
      BOOST_TEST(!c.policy().contains(2));
      at(2);
      BOOST_TEST(!c.policy().contains(3));
      at(4);
      BOOST_TEST(c.policy().contains(1));
      BOOST_TEST(c.policy().contains(2) == (ghosts > 0));
      BOOST_TEST(c.policy().contains(4) == (ghosts == 0));
    }
  }
}
