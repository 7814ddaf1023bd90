// Eviction policies over prefix-respecting blocks, and the block-level
// cache that runs them (docs/eviction.md). A node is one block *and its
// whole prefix* (a key of a prefix-chained block list): its parent is the
// block before it. The cached nodes form a forest closed under parents, and
// only its leaves are evictable: a block a cached descendant needs never
// goes first (a shared interior prefix serves many leaves; a leaf serves
// one).
//
// An `eviction_policy` only orders the evictable leaves; the owner (the
// `block_cache` below in simulation; later the RAM and SSD tiers) says what
// entered, what served a request and what left. Three policies:
//   lru         least recently touched leaf. With a request's blocks
//               touched tail-first this is the LRU of tests/traces/README.md.
//   gdsf-radix  GreedyDual-Size-Frequency over leaves with an inflation
//               clock: rank L + value, value = min(count, cap) × a cost
//               growing with the block's position (gdsf_options); counts of
//               evicted blocks come back from a bounded ghost list; a new
//               block extending a chain's tip inherits the tip's count.
//               A block seen for the first time ranks at the clock. A
//               second order forecasts each leaf's next use from its
//               reuse intervals (a new turn takes its session's cadence)
//               and evicts the farthest, overdue leaves first. It keeps
//               LRU's order beside both and evicts by the predictor whose
//               key-only shadow cache scored more hits recently, if it
//               beats LRU's by an edge (set dueling), else by LRU's.
//   belady      the offline ceiling: the leaf whose next use is farthest
//               (each access says its next use); prefix-respecting.
// Every operation is O(log n) in the cached nodes (ordered sets, hash maps);
// gdsf-radix holds six such orders (three of them its shadows') and four
// ghost lists.
//
// Single-owner, not thread-safe, no I/O and no clocks: time is the owner's
// request counter.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace kvtier::tiers {

/// "Never used again", as a next use.
inline constexpr uint64_t never_used = UINT64_MAX;

/// One access to a node, as the owner describes it.
struct block_ref {
  /// The node: a block and its whole prefix.
  uint64_t key = 0;
  /// The block before it, when it has one (it is cached: the forest is
  /// closed under parents).
  std::optional<uint64_t> parent;
  /// Blocks before it.
  uint32_t depth = 0;
  /// Tokens it holds (a last block may be partial).
  uint32_t tokens = 0;
  /// The owner's recency order: larger is more recent, unique per access.
  uint64_t stamp = 0;
  /// Offline knowledge (belady only): the request that uses it next.
  uint64_t next_use = never_used;
  /// The deepest block of this request that was already cached (what the
  /// request extends), when there is one.
  std::optional<uint64_t> anchor;
};

/// Orders the evictable leaves of the cached forest. A request's new blocks
/// are inserted head-first, one after the other. Refusals are values:
/// `on_insert` of a cached key or `erase` of a node with cached children
/// return false and change nothing.
class eviction_policy {
public:
  virtual ~eviction_policy();

  /// "lru", "gdsf-radix" or "belady".
  virtual std::string name() const = 0;

  /// A node entered the cache (its parent, if any, is cached). False when
  /// the key is cached already.
  virtual bool on_insert(const block_ref& b) = 0;

  /// A cached node served a request or was stored again. False when the
  /// key is not cached.
  virtual bool on_hit(const block_ref& b) = 0;

  /// The leaf to evict next; nullopt when nothing is cached.
  virtual std::optional<uint64_t> victim() const = 0;

  /// The node left the cache (evicted by `victim`, or dropped by the
  /// owner). False, and nothing changes, when it is not cached or still
  /// has cached children.
  virtual bool erase(uint64_t key) = 0;

  /// The owner is done with a request: its accesses and evictions.
  virtual void settle() {}

  /// Whether the key is cached.
  virtual bool contains(uint64_t key) const = 0;

  /// Cached nodes.
  virtual size_t size() const = 0;
};

/// The knobs of gdsf-radix (docs/eviction.md "Ingredients, measured").
struct gdsf_options {
  /// Largest count that raises a priority: L + min(count, cap).
  uint32_t frequency_cap = 16;
  /// A new block extending a chain's tip (a cached block past the root
  /// with at most one cached child) starts with the tip's count.
  bool inherit_session = true;
  /// Evicted blocks whose counts are remembered (a ghost list), as a
  /// multiple of the cache's capacity in blocks, at most `ghost_limit`.
  double ghost_factor = 32.0;
  uint64_t ghost_limit = uint64_t{1} << 20;
  /// Weight of a block's position (recompute cost) in its value:
  /// value = min(count, cap) × (1 + cost_weight × tokens before / 65536).
  double cost_weight = 1.0;
  /// Evict by GDSF's order only while a key-only shadow running it scores
  /// more hits than one running LRU (else by LRU's order).
  bool duel = true;
  /// The scores' memory: decayed by 1 / (window × capacity) per access.
  double duel_window = 64.0;
  /// A predictor evicts only while its shadow scores more than LRU's by
  /// this share of LRU's score (where the orders are close, LRU decides).
  double duel_edge = 0.05;
  /// The predictors dueling LRU: GDSF's frequency order, and the reuse
  /// interval order (a leaf's next use forecast from its past intervals).
  bool frequency = true;
  bool reuse = true;
  /// A third predictor: LRU-2, a leaf's touch before its last (a block
  /// touched once goes first).
  bool second_touch = true;
  /// reuse: the interval assumed for a block never seen twice, as a
  /// multiple of the capacity in blocks; a leaf whose forecast is missed
  /// by `slack` intervals goes first.
  double unknown_interval = 16.0;
  double slack = 2.0;
  /// gdsf: the weight of a block's value while it has never been seen
  /// before (count 1, no ghost, nothing inherited).
  double fresh_weight = 0.0;
};

std::unique_ptr<eviction_policy> make_lru();

/// gdsf-radix for a cache of `capacity_blocks` (sizes the ghost list).
std::unique_ptr<eviction_policy> make_gdsf_radix(uint64_t capacity_blocks,
                                                 const gdsf_options& opts = {});

std::unique_ptr<eviction_policy> make_belady();

/// What a cache run counted, as tests/traces/README.md defines it.
struct block_counts {
  uint64_t requests = 0;
  uint64_t referenced_blocks = 0;
  uint64_t hit_blocks = 0;
  uint64_t input_tokens = 0;
  /// Sum over requests of min(hit blocks × block size, input tokens).
  uint64_t hit_tokens = 0;
  uint64_t evictions = 0;
  double token_ratio() const;
};

/// A cache of at most `capacity_blocks` blocks of `block_size` tokens run
/// by one policy. Per request: the longest cached prefix of its blocks hits,
/// then every block is stored (touched tail-first, so a request's head is
/// its most recent part), then leaves are evicted until the cache fits.
class block_cache {
public:
  /// `capacity_blocks` and `block_size` must be at least 1.
  block_cache(std::unique_ptr<eviction_policy> policy, uint64_t capacity_blocks,
              uint32_t block_size);

  /// One request: `blocks` prefix-chained, `next_uses[i]` the index of the
  /// next request using blocks[i] (empty when unknown: online policies).
  /// Returns the blocks hit.
  uint64_t request(std::span<const uint64_t> blocks, uint64_t input_tokens,
                   std::span<const uint64_t> next_uses = {});

  const block_counts& counts() const {
    return counts_;
  }
  const eviction_policy& policy() const {
    return *policy_;
  }

private:
  std::unique_ptr<eviction_policy> policy_;
  uint64_t capacity_;
  uint32_t block_size_;
  uint64_t now_ = 0;
  block_counts counts_;
};

} // namespace kvtier::tiers
