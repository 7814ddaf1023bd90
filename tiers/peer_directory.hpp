// peer_directory: what the other nodes of a cluster hold, as one
// longest-usable-prefix index per namespace (the local tiers' own
// prefix_index), fed by their event feeds: a prefix key maps to the nodes
// and tiers holding it, with the bytes a fetch would move.
//
// The rules are the local ones (docs/state-model.md "Entries"): an entry of
// length L serves prompt P at p = min(lcp, len(P) - 1) when p == L, or when it
// is trimmable and p >= 1. A peer announces whether an entry trims, not its
// exact floor, so a trimmable entry is taken as trimmable to any length;
// the fetch itself answers the length it can really serve (never more
// state than verified, only perhaps less than announced).
//
// `put` and `remove` apply one event of one node; `drop` forgets a node (it
// went down, or a resync is about to replace what it holds); a snapshot is
// `drop` followed by its puts. Lookups cost what the local index's do:
// O(len(P)), independent of the number of entries and nodes. `drop` walks
// the namespaces' entries once (rare: a peer going down or resyncing).
//
// For routing (tiers/routing.hpp) each node's holdings are also indexed
// per tier on their own, so `per_node` answers every node's longest usable
// prefix in RAM and on SSD in O(nodes x len(P)); these indexes share no
// edges with the combined one (the directory's tokens are held twice).
//
// Owned by exactly one actor (the peer tier); not thread-safe; no I/O.
#pragma once

#include "tiers/prefix_index.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// Where a peer keeps an entry; lower is cheaper to fetch from.
enum class peer_tier : uint8_t { ram = 0, ssd = 1 };

const char* to_string(peer_tier t);

/// One node's copy of an entry.
struct peer_holding {
  std::string node;
  peer_tier tier = peer_tier::ram;
  /// Bytes a fetch would transfer.
  uint64_t bytes = 0;
  /// Whether this copy serves shorter prefixes (the entry is taken as
  /// trimmable only while every holder says so).
  bool trimmable = false;

  friend bool operator==(const peer_holding&, const peer_holding&) = default;
};

class peer_directory {
public:
  /// The answer of `longest_usable`.
  struct candidate {
    /// Usable prefix length p.
    uint64_t length = 0;
    /// The entry is longer than p (the holder trims it).
    bool needs_trim = false;
    /// The entry's whole length (a holder is asked with the prompt, as
    /// FetchEntry does, so the key itself is not rebuilt).
    uint64_t entry_length = 0;
    /// Every holder, cheapest tier first, then by node name.
    std::vector<peer_holding> holders;
  };

  /// Node `node` holds (ns, key) in `tier` (again: the bytes are updated).
  /// An empty key or node is ignored (returns false).
  bool put(const std::string& node, std::string_view ns,
           std::span<const token> key, peer_tier tier, uint64_t bytes,
           bool trimmable);

  /// Node `node` no longer holds (ns, key) in `tier`; false when it did
  /// not (a duplicate or reordered event changes nothing).
  bool remove(const std::string& node, std::string_view ns,
              std::span<const token> key, peer_tier tier);

  /// Forgets everything `node` holds; returns how many holdings went.
  size_t drop(const std::string& node);

  /// The best remote donor for `prompt` in `ns`, or nullopt.
  std::optional<candidate> longest_usable(std::string_view ns,
                                          std::span<const token> prompt) const;

  /// One node's longest usable prefixes of a prompt (per_node).
  struct node_prefixes {
    std::string node;
    uint64_t ram_tokens = 0;
    uint64_t ssd_tokens = 0;
  };

  /// Every node holding anything, by name, with its longest usable prefix
  /// of `prompt` in `ns` per tier (0: none).
  std::vector<node_prefixes> per_node(std::string_view ns,
                                      std::span<const token> prompt) const;

  /// Distinct (ns, key) entries held by any node.
  size_t entries() const noexcept {
    return index_.size();
  }

  /// Holdings of `node` (entries x tiers).
  size_t holdings(const std::string& node) const;

  /// Distinct tokens on the index's edges (memory).
  uint64_t token_count() const noexcept {
    return index_.token_count();
  }

private:
  /// One node's holdings, one index per tier (the value is unused).
  struct node_index {
    prefix_index<char> ram;
    prefix_index<char> ssd;
    prefix_index<char>& of(peer_tier t) {
      return t == peer_tier::ram ? ram : ssd;
    }
  };

  prefix_index<std::vector<peer_holding>> index_;
  std::map<std::string, node_index, std::less<>> by_node_;
  std::set<std::string, std::less<>> namespaces_;
  std::map<std::string, size_t, std::less<>> per_node_;
};

} // namespace kvtier::tiers
