// The untyped core of `prefix_index` (tiers/prefix_index.hpp): a compressed
// radix tree per namespace over token sequences, whose entries carry a
// caller-chosen 64-bit value, a trim floor and a recency stamp. Use
// `prefix_index<Handle>`; this class exists so the tree is compiled once.
//
// Owned by one tier (the RAM tier, the SSD tier's index); not thread-safe,
// no I/O, no clocks. Entry refs stay valid until that entry is erased (or the
// tree is cleared), whatever else is inserted or erased meanwhile.
//
// Policy: an entry of length L with floor f is usable at p tokens when
// p == L, or f <= p < L (trimmed). f == L means exact-only. Each node keeps,
// over the trimmable entries strictly below it, the minimum floor (with how
// many entries share it) and the most recently stamped one, so a divergence
// point answers "is anything below me trimmable to depth d" in O(1). A node
// with more than 32 children holds them in a hash table whose summary tree
// keeps those aggregates current in O(log fan-out) per insert or erase
// (prefix_tree.cpp, `child_set`).
#pragma once

#include "tiers/state.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::tiers {

/// Names one entry of a prefix tree; null when default-constructed.
class entry_ref {
public:
  entry_ref() = default;

  explicit operator bool() const noexcept {
    return node_ != nullptr;
  }

  friend bool operator==(entry_ref, entry_ref) = default;

private:
  friend class prefix_tree;
  explicit entry_ref(void* n)
    : node_(n) {}
  void* node_ = nullptr;
};

/// The answer of a longest-usable-prefix lookup.
struct usable_match {
  /// The donor.
  entry_ref ref;
  /// Usable prefix length p (>= 1, < len(prompt)).
  uint64_t length = 0;
  /// True when the donor is longer than p and must be trimmed.
  bool needs_trim = false;
};

class prefix_tree {
public:
  prefix_tree();
  ~prefix_tree();
  prefix_tree(prefix_tree&&) noexcept;
  prefix_tree& operator=(prefix_tree&&) noexcept;
  prefix_tree(const prefix_tree&) = delete;
  prefix_tree& operator=(const prefix_tree&) = delete;

  struct insert_result {
    entry_ref ref;
    /// The value of the entry this insert replaced (same ns and key).
    std::optional<uint64_t> replaced;
  };

  /// Inserts (or replaces) the entry `key` in `ns`, makes it the most
  /// recently used. `floor` is clamped to [0, len(key)]. `key` must not be
  /// empty and shorter than 2^32 tokens. `at`: the least stamp it may get
  /// (see `touch`).
  insert_result insert(std::string_view ns, std::span<const token> key,
                       uint64_t value, uint64_t floor, uint64_t at = 0);

  /// Removes `ref` (must be live); returns its value.
  uint64_t erase(entry_ref ref);

  /// The entry keyed exactly (ns, key), or null.
  entry_ref find(std::string_view ns, std::span<const token> key) const;

  /// The usable-prefix rule (docs/state-model.md "Entries") over every entry of
  /// `ns`: the largest usable p; ties go to an entry needing no trim, then to
  /// the highest stamp. O(len(prompt)) (see prefix_index.hpp for the one
  /// exception).
  std::optional<usable_match> longest_usable(std::string_view ns,
                                             std::span<const token> pr) const;

  /// Makes `ref` the most recently used: a fresh stamp, above every
  /// other and at least `at` (an owner passing stamps that grow with its
  /// clock can read the time of last use back from `stamp`).
  void touch(entry_ref ref, uint64_t at = 0);

  /// Entries whose keys are strict prefixes of `ref`'s, nearest first.
  std::vector<entry_ref> ancestors(entry_ref ref) const;

  /// Entries whose keys are prefixes of `key` (itself included), shortest
  /// first. O(len(key)).
  std::vector<entry_ref> prefixes(std::string_view ns,
                                  std::span<const token> key) const;

  /// Entries whose keys have `key` as a strict prefix, in no set order.
  std::vector<entry_ref> descendants(std::string_view ns,
                                     std::span<const token> key) const;

  /// Every entry of every namespace, in no set order. O(nodes).
  std::vector<entry_ref> entries() const;

  /// The entry's key, rebuilt from the tree (O(length)).
  token_seq key(entry_ref ref) const;
  /// The entry's namespace.
  const std::string& ns(entry_ref ref) const;
  uint64_t length(entry_ref ref) const;
  uint64_t floor(entry_ref ref) const;
  uint64_t stamp(entry_ref ref) const;
  uint64_t value(entry_ref ref) const;
  /// Changes the entry's value in place.
  void set_value(entry_ref ref, uint64_t v);

  /// Number of entries.
  size_t size() const noexcept {
    return entries_;
  }
  /// Number of nodes (roots included).
  size_t node_count() const noexcept {
    return nodes_;
  }
  /// Tokens held on edges: distinct (ns, prefix) positions in the tree.
  uint64_t token_count() const noexcept {
    return tokens_;
  }
  /// Heap bytes the tree holds (nodes, edge runs, child arrays and tables
  /// with their summary trees, roots),
  /// counted from sizes and capacities, not from the allocator; walks
  /// every node (O(nodes)), so call it for reports, not per request.
  uint64_t memory_bytes() const;
  /// What the allocator holds for the tree, estimated in O(1) from its
  /// node and token counts (a node, its edge run and its slot in its
  /// parent's children, each with the allocator's own overhead): what the
  /// RAM tier charges its bookkeeping budget. Close to `memory_bytes` plus
  /// the allocator's per-allocation bytes; bench_memory prints both.
  uint64_t approx_bytes() const noexcept;

  /// Removes everything.
  void clear();

  struct node;
  struct root_node;

private:
  node* walk_to(std::string_view ns, std::span<const token> key) const;
  node* make_path(std::string_view ns, std::span<const token> key);
  node* split(node* c, uint32_t at);
  void add_up(node* e);
  void remove_up(node* e, uint32_t floor);
  void unlink(node* e);
  void merge_into_child(node* n);
  /// A fresh stamp above every other, at least `at`.
  uint64_t next_stamp(uint64_t at) noexcept;

  std::map<std::string, std::unique_ptr<root_node>, std::less<>> roots_;
  size_t entries_ = 0;
  size_t nodes_ = 0;
  uint64_t tokens_ = 0;
  uint64_t clock_ = 0;
};

} // namespace kvtier::tiers
