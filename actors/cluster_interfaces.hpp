// The typed interfaces of the cluster's actors in actors/: the node actor
// (actors/node_actor.hpp), which meets peers and answers them, the serve
// actor (actors/serve_actor.hpp), which answers peers' fetches, and the
// feed follower (actors/feed_follower_actor.hpp), which follows peers'
// event feeds. Beside actors/interfaces.hpp (the tiers' and the facade's),
// whose peer atoms they use; one handler per line with a comment above it.
//
// The serve actor and the follower are reached through the node actor:
// peers' requests are delegated to the serve actor, and the follower is one
// of the node's listeners (it hears every peer up, down and load).
#pragma once

#include "actors/interfaces.hpp"

#include <caf/meta/type_name.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <set>
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

/// The node actor's local orders (runtime/cluster/node.hpp sends them; a
/// peer sending one is counted as bad input and ignored): start meeting
/// peers, the heartbeat timer, leave, attach delegates or the replay agent.
using node_start_atom = caf::atom_constant<caf::atom("kvclstart")>;
using node_tick_atom = caf::atom_constant<caf::atom("kvcltick")>;
using node_leave_atom = caf::atom_constant<caf::atom("kvclleave")>;
using node_attach_atom = caf::atom_constant<caf::atom("kvclattach")>;

/// A node of a cluster (actors/node_actor.hpp): what its peers and its own
/// process may ask of it. Peers reach it through CAF's middleman as a
/// dynamically typed actor (the wire carries the sealed messages of
/// messages/membership.capnp and the others below, nothing else); a
/// message outside this list is counted as bad input and refused.
using node_actor = caf::typed_actor<
  // A peer introduces itself: accepted (with the up members it may not
  // know) or refused, naming why.
  KVTIER_CALL(ClusterHello),
  // A peer is alive (its seq, its up members, its load).
  caf::reacts_to<sealed<msg::ClusterHeartbeat>>,
  // A peer leaves: it is marked left at once.
  KVTIER_CALL(ClusterLeave),
  // The membership view and the refusal counters (any sender).
  KVTIER_CALL(ListMembers),
  // Routing, read only (any sender): to the facade.
  KVTIER_CALL(RouteRequest),
  // A replay tool's steps (any sender): to the replay agent.
  KVTIER_CALL(ReplayStep), KVTIER_CALL(ReplayFinish),
  // Admin requests: to the facade for local senders, for remote ones only
  // with cluster.remote-admin.
  KVTIER_CALL(FlushState), KVTIER_CALL(CloseService), KVTIER_CALL(CloseSession),
  KVTIER_CALL(DemoteIdle), KVTIER_CALL(StopIdleDemotion),
  KVTIER_CALL(RelievePressure), KVTIER_CALL(ReclaimAtBoundary),
  KVTIER_CALL(SetSsdLimit),
  // A peer's fetch of this node's state: to the serve actor.
  KVTIER_CALL(FetchEntry), KVTIER_CALL(FetchChunk), KVTIER_CALL(CancelTransfer),
  // A peer's subscription to this node's event feed: to the feed.
  KVTIER_CALL(SubscribeFeed),
  // Local: published as (node id, HOST:PORT); meet these seeds.
  caf::reacts_to<node_start_atom, std::string, std::string,
                 std::set<std::string>>,
  // Local: the heartbeat timer (heartbeats out, silent peers down,
  // reconnections due).
  caf::reacts_to<node_tick_atom>,
  // Local: refuse new peers, tell the up ones within the timeout (ms);
  // the number that acknowledged.
  caf::replies_to<node_leave_atom, uint64_t>::with<uint64_t>,
  // Local: the feed, serve, facade and admission actors peers' requests
  // go to (node_delegates).
  caf::reacts_to<node_attach_atom, caf::actor, caf::actor, caf::actor,
                 caf::actor>,
  // Local: the replay agent.
  caf::reacts_to<node_attach_atom, caf::actor>>;

} // namespace kvtier::actors
