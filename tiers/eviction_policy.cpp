#include "tiers/eviction_policy.hpp"

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

eviction_policy::~eviction_policy() = default;

namespace {

/// A leaf's place in the eviction order: smallest first.
using rank = std::tuple<uint64_t, uint64_t, uint64_t>; // primary, tie, key

/// The cached forest and its leaves ordered by a policy's rank; a policy
/// says how an access ranks a node (`ranked`).
class leaf_order : public eviction_policy {
public:
  bool on_insert(const block_ref& b) override {
    auto [it, fresh] = nodes_.try_emplace(b.key);
    if (!fresh)
      return false;
    auto& n = it->second;
    inserted(n, b); // sees the parent's children before this one
    n.parent = b.parent;
    if (b.parent) {
      if (auto p = nodes_.find(*b.parent); p != nodes_.end()) {
        if (p->second.children++ == 0)
          drop_leaf(p->first, p->second);
      } else {
        n.parent.reset(); // an owner's slip: treat it as a root
      }
    }
    add_leaf(b.key, n);
    return true;
  }

  bool on_hit(const block_ref& b) override {
    auto it = nodes_.find(b.key);
    if (it == nodes_.end())
      return false;
    auto& n = it->second;
    if (n.children == 0)
      drop_leaf(b.key, n);
    hit(n, b);
    if (n.children == 0)
      add_leaf(b.key, n);
    return true;
  }

  std::optional<uint64_t> victim() const override {
    if (leaves_.empty())
      return std::nullopt;
    return std::get<2>(*leaves_.begin());
  }

  bool erase(uint64_t key) override {
    auto it = nodes_.find(key);
    if (it == nodes_.end() || it->second.children > 0)
      return false;
    auto& n = it->second;
    drop_leaf(key, n);
    left(key, n);
    if (n.parent) {
      auto p = nodes_.find(*n.parent);
      if (--p->second.children == 0)
        add_leaf(p->first, p->second);
    }
    nodes_.erase(it);
    return true;
  }

  bool contains(uint64_t key) const override {
    return nodes_.count(key) > 0;
  }

  size_t size() const override {
    return nodes_.size();
  }

protected:
  struct node {
    std::optional<uint64_t> parent;
    uint32_t children = 0;
    uint32_t count = 0;   // requests that touched it (gdsf)
    uint64_t primary = 0; // its rank: (primary, tie, key)
    uint64_t tie = 0;
    uint64_t last = 0;     // its last touch (reuse)
    uint64_t interval = 0; // its estimated reuse interval (reuse; 0: none)
    uint64_t expiry = 0;   // its second rank (reuse: when it is overdue)
    uint64_t before = 0;   // its touch before the last (second; 0: none)
  };

  /// Sets the rank of a node just inserted.
  virtual void inserted(node& n, const block_ref& b) = 0;
  /// Sets the rank of a node that served again.
  virtual void hit(node& n, const block_ref& b) = 0;
  /// The node leaves the cache.
  virtual void left(uint64_t, const node&) {}

  const node* find(uint64_t key) const {
    auto it = nodes_.find(key);
    return it == nodes_.end() ? nullptr : &it->second;
  }

  /// A second order over the leaves, by `node::expiry` (off unless a
  /// policy asks for it): its first leaf, when there is one.
  void keep_expiry_order() {
    by_expiry_.emplace();
  }
  std::optional<std::pair<uint64_t, uint64_t>> first_to_expire() const {
    if (!by_expiry_ || by_expiry_->empty())
      return std::nullopt;
    return *by_expiry_->begin();
  }

private:
  static rank rank_of(uint64_t key, const node& n) {
    return {n.primary, n.tie, key};
  }
  void add_leaf(uint64_t key, const node& n) {
    leaves_.insert(rank_of(key, n));
    if (by_expiry_)
      by_expiry_->emplace(n.expiry, key);
  }
  void drop_leaf(uint64_t key, const node& n) {
    leaves_.erase(rank_of(key, n));
    if (by_expiry_)
      by_expiry_->erase({n.expiry, key});
  }

  std::unordered_map<uint64_t, node> nodes_;
  std::set<rank> leaves_;
  std::optional<std::set<std::pair<uint64_t, uint64_t>>> by_expiry_;
};

class lru final : public leaf_order {
public:
  std::string name() const override {
    return "lru";
  }

private:
  void inserted(node& n, const block_ref& b) override {
    n.primary = b.stamp;
  }
  void hit(node& n, const block_ref& b) override {
    n.primary = b.stamp;
  }
};

class belady final : public leaf_order {
public:
  std::string name() const override {
    return "belady";
  }

private:
  // Farthest next use first; among equal ones the deepest (a parent is
  // never used later than its child, so the first rank is a leaf's).
  void inserted(node& n, const block_ref& b) override {
    hit(n, b);
  }
  void hit(node& n, const block_ref& b) override {
    n.primary = never_used - b.next_use;
    n.tie = UINT32_MAX - b.depth;
  }
};

/// What is remembered of an evicted block.
struct ghost {
  uint32_t count = 0;    // requests that touched it
  uint64_t interval = 0; // its estimated reuse interval (0: none)
  uint64_t last = 0;     // its last touch
};

/// The most recent `capacity` evicted blocks, what is known of them.
class ghost_list {
public:
  explicit ghost_list(uint64_t capacity)
    : capacity_(capacity) {}

  void remember(uint64_t key, const ghost& g) {
    if (capacity_ == 0)
      return;
    auto& e = entries_[key];
    e = {g, ++seq_};
    order_.emplace_back(key, seq_);
    while (order_.size() > capacity_) {
      auto [k, s] = order_.front();
      order_.pop_front();
      if (auto it = entries_.find(k);
          it != entries_.end() && it->second.second == s)
        entries_.erase(it);
    }
  }

  /// What is remembered of `key` (nullopt: nothing), forgotten now.
  std::optional<ghost> take(uint64_t key) {
    auto it = entries_.find(key);
    if (it == entries_.end())
      return std::nullopt;
    auto g = it->second.first;
    entries_.erase(it); // its entry in order_ goes stale
    return g;
  }

private:
  uint64_t capacity_;
  uint64_t seq_ = 0;
  std::unordered_map<uint64_t, std::pair<ghost, uint64_t>> entries_;
  std::deque<std::pair<uint64_t, uint64_t>> order_;
};

uint64_t ghost_capacity(uint64_t capacity_blocks, const gdsf_options& o) {
  return std::min<uint64_t>(
    o.ghost_limit, static_cast<uint64_t>(double(capacity_blocks)
                                         * std::max(0.0, o.ghost_factor)));
}

/// GreedyDual-Size-Frequency over leaves: rank L + value, value growing
/// with the (capped) count and the block's position, L the rank of the
/// last eviction (an inflation clock: what is not touched ages out).
class gdsf final : public leaf_order {
public:
  gdsf(uint64_t capacity_blocks, const gdsf_options& opts)
    : opts_(opts)
    , ghosts_(ghost_capacity(capacity_blocks, opts)) {}

  std::string name() const override {
    return "gdsf";
  }

private:
  void inserted(node& n, const block_ref& b) override {
    auto g = ghosts_.take(b.key);
    n.count = (g ? g->count : 0) + 1;
    if (opts_.inherit_session) {
      if (b.anchor && b.parent == b.anchor) {
        // The first new block: does the request extend a chain's tip (a
        // block past the root with at most one cached child)?
        auto* a = find(*b.anchor);
        chain_count_ = a && a->parent && a->children <= 1 ? a->count : 0;
      } else if (!b.parent) {
        chain_count_ = 0; // nothing hit: a new chain
      }                   // else: the next new block of the same request
      n.count = std::max(n.count, chain_count_);
    }
    rank(n, b, n.count == 1 && !g ? opts_.fresh_weight : 1.0);
  }
  void hit(node& n, const block_ref& b) override {
    ++n.count;
    rank(n, b);
  }
  void left(uint64_t key, const node& n) override {
    clock_ = std::max(clock_, n.primary);
    ghosts_.remember(key, {n.count, 0, 0});
  }
  void rank(node& n, const block_ref& b, double weight = 1.0) {
    // Prefill cost grows with the block's position (attention over all
    // tokens before it): 1 + cost_weight × position / 64 Ki tokens.
    double position = double(b.depth) * double(b.tokens ? b.tokens : 1);
    double value = double(std::min(n.count, opts_.frequency_cap))
                   * (1.0 + opts_.cost_weight * position / 65536.0) * weight;
    n.primary = clock_ + static_cast<uint64_t>(value * 256.0);
    n.tie = b.stamp;
  }

  gdsf_options opts_;
  ghost_list ghosts_;
  uint64_t clock_ = 0; // L: the rank of the last eviction
  uint32_t chain_count_ = 0;
};

/// Reuse-interval prediction, Belady's rule on a forecast: a leaf's next
/// use is predicted at its last touch plus its estimated reuse interval
/// (the mean of the last two, in the owner's stamps: blocks referenced),
/// and the leaf predicted farthest goes first. A block with no interval
/// yet is predicted `unknown` stamps out; a new block extending a chain's
/// tip takes the tip's interval (a session's cadence); an evicted block's
/// interval and last touch come back from the ghost list. A leaf whose
/// forecast was missed by `slack` intervals is overdue and goes before
/// everything (a second order, by when that happens).
class reuse final : public leaf_order {
public:
  reuse(uint64_t capacity_blocks, const gdsf_options& opts)
    : opts_(opts)
    , unknown_(std::max<uint64_t>(
        1,
        static_cast<uint64_t>(opts.unknown_interval * double(capacity_blocks))))
    , ghosts_(ghost_capacity(capacity_blocks, opts)) {
    keep_expiry_order();
  }

  std::string name() const override {
    return "reuse";
  }

  std::optional<uint64_t> victim() const override {
    if (auto e = first_to_expire(); e && e->first < now_)
      return e->second;
    return leaf_order::victim();
  }

private:
  void inserted(node& n, const block_ref& b) override {
    now_ = std::max(now_, b.stamp);
    n.interval = 0;
    if (auto g = ghosts_.take(b.key))
      n.interval = blend(g->interval, b.stamp - std::min(b.stamp, g->last));
    if (opts_.inherit_session) {
      if (b.anchor && b.parent == b.anchor) {
        auto* a = find(*b.anchor);
        chain_interval_ = a && a->parent && a->children <= 1 ? a->interval : 0;
      } else if (!b.parent) {
        chain_interval_ = 0;
      }
      if (n.interval == 0)
        n.interval = chain_interval_;
    }
    n.last = b.stamp;
    rank(n, b);
  }
  void hit(node& n, const block_ref& b) override {
    now_ = std::max(now_, b.stamp);
    n.interval = blend(n.interval, b.stamp - std::min(b.stamp, n.last));
    n.last = b.stamp;
    rank(n, b);
  }
  void left(uint64_t key, const node& n) override {
    ghosts_.remember(key, {0, n.interval, n.last});
  }
  static uint64_t blend(uint64_t interval, uint64_t gap) {
    return interval ? (interval + gap) / 2 : gap;
  }
  void rank(node& n, const block_ref& b) {
    uint64_t iv = n.interval ? n.interval : unknown_;
    uint64_t next = n.last + iv;
    n.primary = UINT64_MAX - next;
    n.tie = UINT32_MAX - b.depth;
    n.expiry = n.last + static_cast<uint64_t>(opts_.slack * double(iv));
  }

  gdsf_options opts_;
  uint64_t unknown_;
  ghost_list ghosts_;
  uint64_t now_ = 0;
  uint64_t chain_interval_ = 0;
};

/// LRU-2 over leaves: a leaf touched by one request only goes first (the
/// least recently touched of those first), then the leaf whose touch
/// before its last is the oldest. An evicted block's last touch comes back
/// from the ghost list as its touch before, so a block that returns is
/// not treated as new. Scan resistant like GDSF's fresh class, without
/// counts: what came back twice recently stays.
class second_touch final : public leaf_order {
public:
  second_touch(uint64_t capacity_blocks, const gdsf_options& opts)
    : ghosts_(ghost_capacity(capacity_blocks, opts)) {}

  std::string name() const override {
    return "lru-2";
  }

private:
  void inserted(node& n, const block_ref& b) override {
    auto g = ghosts_.take(b.key);
    n.before = g ? g->last : 0;
    touched(n, b);
  }
  void hit(node& n, const block_ref& b) override {
    n.before = n.last;
    touched(n, b);
  }
  void left(uint64_t key, const node& n) override {
    ghosts_.remember(key, {0, 0, n.last});
  }
  static void touched(node& n, const block_ref& b) {
    n.last = b.stamp;
    n.primary = n.before; // 0, the first class, while touched once
    n.tie = b.stamp;
  }

  ghost_list ghosts_;
};

/// A key-only cache that runs a policy beside the real one, to score it:
/// a block counts as a hit when it and its whole prefix were cached.
class shadow {
public:
  shadow(std::unique_ptr<eviction_policy> p, uint64_t capacity)
    : policy_(std::move(p))
    , capacity_(capacity) {}

  /// Whether the access hit (its parent did, and it is cached); either way
  /// the block is cached afterwards.
  bool access(const block_ref& b) {
    bool prefix = !b.parent || (last_hit_ && *last_hit_ == *b.parent);
    if (policy_->on_hit(b)) {
      if (prefix)
        last_hit_ = b.key;
      return prefix;
    }
    block_ref r = b;
    if (r.parent && !policy_->contains(*r.parent))
      r.parent.reset(); // evicted under us: a root of its own
    policy_->on_insert(r);
    return false;
  }

  void settle() {
    while (policy_->size() > capacity_) {
      auto v = policy_->victim();
      if (!v || !policy_->erase(*v))
        break;
    }
    last_hit_.reset();
  }

private:
  std::unique_ptr<eviction_policy> policy_;
  uint64_t capacity_;
  std::optional<uint64_t> last_hit_;
};

/// gdsf-radix: the cache keeps LRU's order over its leaves beside the
/// orders of its predictors (GDSF's frequency, reuse intervals) and evicts
/// by the one whose key-only shadow cache of the same capacity scored the
/// most hits recently (set dueling): it gains where a predictor pays and
/// falls back to LRU where recency does.
class gdsf_radix final : public eviction_policy {
public:
  gdsf_radix(uint64_t capacity_blocks, const gdsf_options& opts)
    : duel_(opts.duel)
    , decay_(1.0
             - 1.0 / std::max(1.0, opts.duel_window * double(capacity_blocks)))
    , edge_(opts.duel_edge) {
    auto make = [&](int which) -> std::unique_ptr<eviction_policy> {
      switch (which) {
        case 0: return std::make_unique<lru>();
        case 1: return std::make_unique<gdsf>(capacity_blocks, opts);
        case 2: return std::make_unique<reuse>(capacity_blocks, opts);
        default: return std::make_unique<second_touch>(capacity_blocks, opts);
      }
    };
    // The forecast last: without the duel the last predictor evicts.
    for (int which : {0, 3, 1, 2}) {
      if ((which == 1 && !opts.frequency) || (which == 2 && !opts.reuse)
          || (which == 3 && !opts.second_touch))
        continue;
      candidate c{make(which), {}, 0};
      if (duel_)
        c.twin.emplace(make(which), capacity_blocks);
      candidates_.push_back(std::move(c));
    }
  }

  std::string name() const override {
    return duel_ ? "gdsf-radix" : candidates_[best()].order->name();
  }

  bool on_insert(const block_ref& b) override {
    if (!candidates_[0].order->on_insert(b))
      return false;
    for (size_t i = 1; i < candidates_.size(); ++i)
      candidates_[i].order->on_insert(b);
    score(b);
    return true;
  }

  bool on_hit(const block_ref& b) override {
    if (!candidates_[0].order->on_hit(b))
      return false;
    for (size_t i = 1; i < candidates_.size(); ++i)
      candidates_[i].order->on_hit(b);
    score(b);
    return true;
  }

  std::optional<uint64_t> victim() const override {
    return candidates_[best()].order->victim();
  }

  bool erase(uint64_t key) override {
    if (!candidates_[0].order->erase(key))
      return false;
    for (size_t i = 1; i < candidates_.size(); ++i)
      candidates_[i].order->erase(key);
    return true;
  }

  void settle() override {
    if (duel_)
      for (auto& c : candidates_)
        c.twin->settle();
  }

  bool contains(uint64_t key) const override {
    return candidates_[0].order->contains(key);
  }

  size_t size() const override {
    return candidates_[0].order->size();
  }

private:
  struct candidate {
    std::unique_ptr<eviction_policy> order;
    std::optional<shadow> twin;
    double score = 0;
  };

  /// The order evicting now: without the duel the last predictor (LRU
  /// when there is none); with it the best scorer among the predictors
  /// that beat LRU's score by the edge, else LRU.
  size_t best() const {
    if (!duel_)
      return candidates_.size() - 1;
    size_t b = 0;
    double bar = candidates_[0].score * (1.0 + edge_);
    for (size_t i = 1; i < candidates_.size(); ++i)
      if (candidates_[i].score > bar
          && (b == 0 || candidates_[i].score > candidates_[b].score))
        b = i;
    return b;
  }

  void score(const block_ref& b) {
    if (!duel_)
      return;
    for (auto& c : candidates_)
      c.score = c.score * decay_ + (c.twin->access(b) ? 1 : 0);
  }

  bool duel_;
  double decay_;
  double edge_;
  std::vector<candidate> candidates_; // LRU first
};

} // namespace

std::unique_ptr<eviction_policy> make_lru() {
  return std::make_unique<lru>();
}

std::unique_ptr<eviction_policy> make_gdsf_radix(uint64_t capacity_blocks,
                                                 const gdsf_options& opts) {
  return std::make_unique<gdsf_radix>(capacity_blocks, opts);
}

std::unique_ptr<eviction_policy> make_belady() {
  return std::make_unique<belady>();
}

double block_counts::token_ratio() const {
  return input_tokens ? double(hit_tokens) / double(input_tokens) : 0;
}

block_cache::block_cache(std::unique_ptr<eviction_policy> policy,
                         uint64_t capacity_blocks, uint32_t block_size)
  : policy_(std::move(policy))
  , capacity_(std::max<uint64_t>(capacity_blocks, 1))
  , block_size_(std::max<uint32_t>(block_size, 1)) {}

uint64_t block_cache::request(std::span<const uint64_t> blocks,
                              uint64_t input_tokens,
                              std::span<const uint64_t> next_uses) {
  size_t n = blocks.size();
  size_t hit = 0;
  while (hit < n && policy_->contains(blocks[hit]))
    ++hit;
  ++counts_.requests;
  counts_.referenced_blocks += n;
  counts_.hit_blocks += hit;
  counts_.input_tokens += input_tokens;
  counts_.hit_tokens += std::min<uint64_t>(hit * block_size_, input_tokens);
  // Stamps fall along the request: its head is its most recent part.
  uint64_t base = now_;
  now_ += n + 1;
  std::optional<uint64_t> anchor;
  if (hit > 0)
    anchor = blocks[hit - 1];
  for (size_t i = 0; i < n; ++i) {
    block_ref b;
    b.key = blocks[i];
    if (i > 0)
      b.parent = blocks[i - 1];
    b.depth = static_cast<uint32_t>(i);
    uint64_t before = i * uint64_t{block_size_};
    b.tokens = static_cast<uint32_t>(std::min<uint64_t>(
      block_size_, input_tokens - std::min(input_tokens, before)));
    b.stamp = base + (n - i);
    if (i < next_uses.size())
      b.next_use = next_uses[i];
    b.anchor = anchor;
    if (!policy_->on_hit(b))
      policy_->on_insert(b);
  }
  while (policy_->size() > capacity_) {
    auto v = policy_->victim();
    if (!v || !policy_->erase(*v))
      break;
    ++counts_.evictions;
  }
  policy_->settle();
  return hit;
}

} // namespace kvtier::tiers
