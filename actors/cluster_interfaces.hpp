// The typed interfaces of the cluster's actors in actors/: the serve actor
// (actors/serve_actor.hpp), which answers peers' fetches, and the feed
// follower (actors/feed_follower_actor.hpp), which follows peers' event
// feeds. Beside actors/interfaces.hpp (the tiers' and the facade's), whose
// peer atoms they use; one handler per line with a comment above it.
//
// Both are reached through the node actor (runtime/cluster/node.hpp):
// peers' requests are delegated to the serve actor, and the follower is one
// of the node's listeners (it hears every peer up, down and load).
#pragma once

#include "actors/interfaces.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace kvtier::actors {

/// The table's expiry tick (the serve actor sends it to itself).
using serve_tick_atom = caf::atom_constant<caf::atom("kvtsrvtick")>;

/// Test only, with (mode, n): mode 0, the next `n` offers announce a
/// checksum their bytes do not have (a receiver must refuse them); mode 1,
/// the next offer is answered `n` ms late (a holder that goes away
/// mid-fetch, identical fetches that overlap); mode 2, the next `n` offers
/// name no lane (the receiver pulls chunks through the middleman).
using serve_fault_atom = caf::atom_constant<caf::atom("kvtsrvflt")>;

using serve_actor = caf::typed_actor<
  // A peer asks for its longest usable prefix: a transfer, or none.
  KVTIER_CALL(FetchEntry),
  // One chunk of an offered transfer (the chunked path, no lane).
  KVTIER_CALL(FetchChunk),
  // The peer is done or gives up: the offer's bytes go.
  KVTIER_CALL(CancelTransfer),
  // The serving counters (ReadReportReply::peer's serve and lane fields).
  KVTIER_CALL(ReadReport),
  // Expires offers nobody pulled for serve-idle-ms.
  caf::reacts_to<serve_tick_atom>,
  // Test only (local senders): corrupt or delay offers.
  caf::reacts_to<serve_fault_atom, uint32_t, uint32_t>>;

/// The follower's counters.
struct follow_counts {
  uint64_t events = 0;    // applied
  uint64_t ignored = 0;   // batches ignored
  uint64_t gaps = 0;      // gaps seen
  uint64_t restarts = 0;  // another incarnation seen
  uint64_t snapshots = 0; // applied
  uint64_t refused = 0;   // malformed, or from the wrong sender
  uint64_t failed = 0;    // subscriptions that failed or timed out

  friend bool operator==(const follow_counts&, const follow_counts&) = default;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, follow_counts& x) {
  return f(caf::meta::type_name("kvtier::actors::follow_counts"), x.events,
           x.ignored, x.gaps, x.restarts, x.snapshots, x.refused, x.failed);
}

/// Asks a follower for its counters (tests, reports).
using follower_stats_atom = caf::atom_constant<caf::atom("kvflwstats")>;

/// Where a feed follower hands what it learns (the peer tier, or a test's
/// probe).
using directory_sink_actor = caf::typed_actor<
  // What one peer holds changed (a batch applied, or a snapshot).
  caf::reacts_to<directory_batch>>;

using feed_follower_actor = caf::typed_actor<
  // A peer is up behind this node actor: subscribe to its feed.
  caf::reacts_to<peer_up_atom, std::string, caf::actor>,
  // A peer is down: forget what was followed of it.
  caf::reacts_to<peer_down_atom, std::string>,
  // A peer's heartbeat load (every listener hears it; routing is the peer
  // tier's business): ignored.
  caf::reacts_to<peer_load_atom, std::string, std::string,
                 sealed<msg::NodeLoad>>,
  // A peer's address as it comes up: ignored likewise.
  caf::reacts_to<peer_load_atom, std::string, std::string>,
  // A batch a followed peer's feed pushed.
  caf::reacts_to<sealed<msg::FeedBatch>>,
  // A snapshot part a peer's feed pushed beside its reply.
  caf::reacts_to<sealed<msg::FeedSnapshot>>,
  // The follower's counters (tests).
  caf::replies_to<follower_stats_atom>::with<follow_counts>>;

} // namespace kvtier::actors
