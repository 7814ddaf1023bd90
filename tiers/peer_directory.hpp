// The peer directory: what every peer node holds, from their event feeds
// (tiers/feed_event.hpp), so a lookup can tell the longest usable prefix
// of a prompt that any peer holds, and which nodes hold it, best tier
// first. Owned by one actor (the peer tier); not thread-safe; no I/O.
//
// Index: per namespace, one compressed radix tree (tiers/prefix_index.hpp,
// the local tiers' index) over entry keys; each key carries the set of
// (node, tier, bytes, trimmable) holding it. Its trim floor is 0 when any
// holder's copy is trimmable, else the key's length, so `longest_usable`
// finds the longest prefix some holder can serve in one pass over the
// prompt, O(len(prompt)) whatever the number of entries; the holders it
// returns are those that can serve exactly that length (a non-trimmable
// copy only at its exact length). Among holders: RAM before SSD, then by
// node name.
//
// Feeding: `apply(event)` takes one node's next event and refuses (changes
// nothing, says why) a duplicate (seq already applied) or a gap (seq
// beyond the next one): the follower then resyncs with a snapshot, and
// `apply(snapshot)` replaces everything that node held. `drop(node)`
// forgets a node (it went down). A node's first event must follow a
// snapshot (a node never seen is a gap unless its event has seq 1).
#pragma once

#include "tiers/feed_event.hpp"
#include "tiers/prefix_index.hpp"

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

class peer_directory {
public:
  /// One node's copy of an entry.
  struct holder {
    std::string node;
    feed_tier tier = feed_tier::ram;
    uint64_t tokens = 0; // the entry's length (may exceed the usable one)
    uint64_t bytes = 0;
    bool trimmable = true;

    bool operator==(const holder&) const = default;
  };

  /// The answer of `lookup`.
  struct match {
    uint64_t length = 0;         // usable prefix tokens
    token_seq key;               // the entry served (trimmed to length)
    std::vector<holder> holders; // who can serve it, best tier first
  };

  enum class applied : uint8_t {
    ok,        // applied; the node's seq is now the event's
    duplicate, // seq at or below the node's: nothing changed
    gap,       // seq beyond the next: nothing changed, resync
  };

  /// Applies one node's next event (see the policy above).
  applied apply(const feed_event& e);

  /// Replaces everything `s.node` held with the snapshot; the node's seq
  /// becomes `s.seq`.
  void apply(const feed_snapshot& s);

  /// Forgets everything `node` held (and its seq).
  void drop(const std::string& node);

  /// The longest usable prefix of `prompt` in `ns` any peer holds
  /// (at most len(prompt) - 1 tokens, as locally), or nullopt.
  std::optional<match> lookup(std::string_view ns,
                              std::span<const token> prompt) const;

  /// The last seq applied for `node` (0: none, or unknown node).
  uint64_t seq(const std::string& node) const;

  /// Keys indexed, and holdings over all keys.
  size_t keys() const noexcept {
    return index_.size();
  }
  size_t holdings() const noexcept;

private:
  using holders_t = std::vector<holder>;

  void hold(const std::string& node, const feed_holding& h);
  void release(const std::string& node, feed_tier tier, const std::string& ns,
               const token_seq& tokens);
  /// Re-files the key's trim floor after its holders changed (erases the
  /// key when none is left).
  void refile(entry_ref ref, std::string_view ns, const token_seq& tokens);

  prefix_index<holders_t> index_;
  struct node_state {
    uint64_t seq = 0;
    /// What it holds: (ns, tokens) -> tiers, for drop and snapshots.
    std::map<std::pair<std::string, token_seq>, std::set<feed_tier>> held;
  };
  std::unordered_map<std::string, node_state> nodes_;
};

} // namespace kvtier::tiers
