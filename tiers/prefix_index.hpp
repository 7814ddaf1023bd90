// prefix_index<Handle>: the longest-usable-prefix index shared by the RAM
// tier (handles name in-memory entries) and the SSD tier (handles name
// files). One compressed radix tree per namespace over token sequences;
// every entry carries a handle, a trim floor and a recency stamp.
//
// Owned by exactly one tier (its actor); not thread-safe; no I/O, no clocks.
// Entry refs and handles stay put until their entry is erased.
//
// Rules (docs/state-model.md "Entries"). An entry of length L with trim floor f
// (`trim_floor`: the largest min_offset among its layers, or L when any
// layer cannot trim: recurrent, wrapped ring, object) serves a prompt P at
// p = min(lcp(entry, P), len(P) - 1) tokens when p >= 1 and either p == L
// (exact) or f <= p < L (trimmed). `longest_usable` returns the largest such
// p over the namespace; among equally long candidates one needing no trim
// wins, then the most recently used. Recency is the index's own: a stamp
// from a per-index counter, renewed by `insert` and `touch` (an owner may
// ask for stamps of at least a value of its own clock). The owner
// touches what it serves; `longest_usable` itself changes nothing, so a
// peek is free of side effects.
//
// Cost: lookups walk the prompt once (O(len(P)) token compares plus O(1)
// per tree node on the path), independent of the number of entries; the
// one exception is a tie among trimmed candidates whose most recent member
// cannot trim that far (floor above the match), where a branch-and-bound
// search runs over the subtree, pruned by per-node aggregates. Inserts and
// erases cost O(len(key)) plus O(log fan-out) at each wide node (over 32
// children) on the key's path, whatever the fan-out and the order of the
// keys: a wide node holds its children in a hash table with a summary tree
// beside it, so nothing shifts the siblings and no pass over the children
// is needed to learn what is left below after an erase (a node of at most
// 32 children keeps them in a sorted array).
// Memory: edges hold runs of tokens, so a shared prefix is stored once; a
// handle of at most 8 bytes that copies as bytes (an id, an iterator) is
// kept in the entry's node, any other in a slot beside the tree.
#pragma once

#include "tiers/prefix_tree.hpp"
#include "tiers/state.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvtier::tiers {

/// The least length `e` can be trimmed to: the largest min_offset among its
/// layers when all of them trim (kv, unwrapped ring), else len(e).
/// `e.can_trim_to(n)` holds exactly for floor <= n <= len(e).
uint64_t trim_floor(const entry& e) noexcept;

/// The same for a state of `length` tokens with `layers` (their segments
/// are not read).
uint64_t trim_floor(uint64_t length,
                    std::span<const layer_state> layers) noexcept;

template <class Handle>
class prefix_index {
public:
  /// The answer of `longest_usable`.
  struct match {
    entry_ref ref;
    /// Usable prefix length p.
    uint64_t length = 0;
    /// The donor is longer than p.
    bool needs_trim = false;
  };

  struct insert_result {
    entry_ref ref;
    /// The handle of the entry with the same (ns, key) it replaced.
    std::optional<Handle> replaced;
  };

  /// Inserts or replaces (ns, key) with `h`; the entry becomes the most
  /// recently used. `key` must not be empty.
  /// `at`: the least recency stamp it may get (see `touch`).
  insert_result insert(std::string_view ns, std::span<const token> key,
                       Handle h, uint64_t floor, uint64_t at = 0) {
    auto r = tree_.insert(ns, key, take_slot(std::move(h)), floor, at);
    insert_result out{r.ref, std::nullopt};
    if (r.replaced)
      out.replaced = give_slot(*r.replaced);
    return out;
  }

  /// Removes a live entry; returns its handle.
  Handle erase(entry_ref ref) {
    return give_slot(tree_.erase(ref));
  }

  /// Removes (ns, key) if present.
  std::optional<Handle> erase(std::string_view ns, std::span<const token> key) {
    if (auto r = tree_.find(ns, key))
      return erase(r);
    return std::nullopt;
  }

  /// The entry keyed exactly (ns, key), or a null ref.
  entry_ref find(std::string_view ns, std::span<const token> key) const {
    return tree_.find(ns, key);
  }

  /// The best donor for `prompt` in `ns` (see the rules above), or nullopt.
  std::optional<match> longest_usable(std::string_view ns,
                                      std::span<const token> prompt) const {
    auto m = tree_.longest_usable(ns, prompt);
    if (!m)
      return std::nullopt;
    return match{m->ref, m->length, m->needs_trim};
  }

  /// Makes `ref` the most recently used entry (for tie-breaks), with a
  /// stamp of at least `at` (an owner whose stamps follow its clock reads
  /// the time of last use back from `stamp`).
  void touch(entry_ref ref, uint64_t at = 0) {
    tree_.touch(ref, at);
  }

  /// Entries whose keys are strict prefixes of `ref`'s, nearest first.
  std::vector<entry_ref> ancestors(entry_ref ref) const {
    return tree_.ancestors(ref);
  }

  /// Entries whose keys are prefixes of `key` (itself included), shortest
  /// first; `key` itself need not be an entry.
  std::vector<entry_ref> prefixes(std::string_view ns,
                                  std::span<const token> key) const {
    return tree_.prefixes(ns, key);
  }

  /// Entries whose keys have `key` as a strict prefix.
  std::vector<entry_ref> descendants(std::string_view ns,
                                     std::span<const token> key) const {
    return tree_.descendants(ns, key);
  }

  /// The entry's handle: a copy for a handle kept in the node, else a
  /// reference (see `in_node`).
  decltype(auto) handle(entry_ref ref) {
    if constexpr (in_node)
      return from_value(tree_.value(ref));
    else
      return static_cast<Handle&>(*slots_[tree_.value(ref)]);
  }
  decltype(auto) handle(entry_ref ref) const {
    if constexpr (in_node)
      return from_value(tree_.value(ref));
    else
      return static_cast<const Handle&>(*slots_[tree_.value(ref)]);
  }
  /// Replaces the entry's handle.
  void set_handle(entry_ref ref, Handle h) {
    if constexpr (in_node)
      tree_.set_value(ref, to_value(h));
    else
      *slots_[tree_.value(ref)] = std::move(h);
  }

  /// The entry's key, rebuilt from the tree's edges (O(length)).
  token_seq key(entry_ref ref) const {
    return tree_.key(ref);
  }
  const std::string& ns(entry_ref ref) const {
    return tree_.ns(ref);
  }
  uint64_t length(entry_ref ref) const {
    return tree_.length(ref);
  }
  uint64_t floor(entry_ref ref) const {
    return tree_.floor(ref);
  }
  /// Recency: higher is more recent; unique within this index.
  uint64_t stamp(entry_ref ref) const {
    return tree_.stamp(ref);
  }

  size_t size() const noexcept {
    return tree_.size();
  }
  /// Distinct tokens on the tree's edges.
  uint64_t token_count() const noexcept {
    return tree_.token_count();
  }
  size_t node_count() const noexcept {
    return tree_.node_count();
  }
  /// Heap bytes of the tree and the handle slots (O(nodes) walk).
  uint64_t memory_bytes() const {
    return tree_.memory_bytes() + slots_.capacity() * sizeof(slots_[0])
           + free_.capacity() * sizeof(free_[0]);
  }

  /// The tree's `approx_bytes` and the handle slots, in O(1).
  uint64_t approx_bytes() const noexcept {
    return tree_.approx_bytes() + slots_.capacity() * sizeof(slots_[0])
           + free_.capacity() * sizeof(free_[0]);
  }

  void clear() {
    tree_.clear();
    slots_.clear();
    free_.clear();
  }

  /// A handle of at most 8 bytes that copies as bytes is kept in the
  /// tree's node itself; any other in a slot the node names.
  static constexpr bool in_node =
    sizeof(Handle) <= sizeof(uint64_t) && std::is_trivially_copyable_v<Handle>;

private:
  static uint64_t to_value(const Handle& h) noexcept {
    uint64_t v = 0;
    std::memcpy(&v, &h, sizeof(Handle));
    return v;
  }
  static Handle from_value(uint64_t v) noexcept {
    Handle h;
    // Trivially copyable: its bytes are all there is to it.
    std::memcpy(static_cast<void*>(&h), &v, sizeof(Handle));
    return h;
  }

  uint64_t take_slot(Handle h) {
    if constexpr (in_node)
      return to_value(h);
    if (free_.empty()) {
      slots_.emplace_back(std::move(h));
      return slots_.size() - 1;
    }
    auto s = free_.back();
    free_.pop_back();
    slots_[s].emplace(std::move(h));
    return s;
  }

  Handle give_slot(uint64_t s) {
    if constexpr (in_node)
      return from_value(s);
    Handle h = std::move(*slots_[s]);
    slots_[s].reset();
    free_.push_back(s);
    return h;
  }

  prefix_tree tree_;
  std::vector<std::optional<Handle>> slots_;
  std::vector<uint64_t> free_;
};

} // namespace kvtier::tiers
