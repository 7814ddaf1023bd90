// What a node's event feed says about the prefixes it holds, as plain
// values (DESIGN.md section 3, "event feed"): one event per change, with a
// per-node sequence number that starts at 1 and has no gaps, and a
// snapshot of everything the node holds, valid at one sequence number.
// The wire form is Cap'n Proto (messages/cluster.capnp); this is what a
// follower hands to the peer directory (tiers/peer_directory.hpp). Plain
// values, no actor code; copy freely.
//
// Only prefix entries are announced (by their key kind): checkpoints and
// objects never appear. What each kind means for what the node holds in
// `tier`:
//   put        the entry is now held in `tier` (RAM: stored; SSD: a file)
//   durable    an entry RAM holds got its SSD file: the SSD holds it too
//   demote     it left RAM, its SSD file stays: now held on SSD only
//   evict      it left `tier` over its cap
//   superseded it left `tier` because a longer trimmable entry covers it
//   removed    it left `tier` for any other reason (erased, corrupt, close)
#pragma once

#include "tiers/state.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// Where a node holds an entry; lower is better (cheaper to fetch).
enum class feed_tier : uint8_t { ram = 0, ssd = 1 };

enum class feed_kind : uint8_t {
  put,
  durable,
  demote,
  evict,
  superseded,
  removed,
};

/// One held entry: its key, where, its byte length (what a fetch moves)
/// and whether shorter prefixes of it are usable (a non-trimmable entry is
/// usable only at its exact length, as locally).
struct feed_holding {
  feed_tier tier = feed_tier::ram;
  std::string ns;
  token_seq tokens;
  uint64_t bytes = 0;
  bool trimmable = true;

  bool operator==(const feed_holding&) const = default;
};

/// One change on one node.
struct feed_event {
  std::string node;
  uint64_t seq = 0;
  feed_kind kind = feed_kind::put;
  feed_holding entry;
};

/// Everything one node holds, valid just after event `seq` (the next event
/// a follower applies is seq + 1).
struct feed_snapshot {
  std::string node;
  uint64_t seq = 0;
  std::vector<feed_holding> entries;
};

} // namespace kvtier::tiers
