// The serving side of peer fetches (docs/cluster.md, "Fetching state from
// a peer"): the actor a node actor hands its peers' FetchEntry, FetchChunk
// and CancelTransfer to (node_delegates::serve). It answers a FetchEntry
// with the longest usable prefix of the prompt this node holds, strictly
// longer than betterThan: from the RAM actor (its export handler: no hit
// counted, recency touched at most) or else from the SSD actor (FindPrefix,
// then RestoreEntry), whichever is longer, as a flat RestoreEntryReply
// offered in a `msg::transfer_table` (byte cap `cluster.serve-max-bytes`,
// idle expiry `cluster.serve-idle-ms`) and on a `msg::bulk_server` lane on
// `cluster.listen-address`; the reply is the TransferHeader (lane port,
// host and token) or `none`. FetchChunk and CancelTransfer go to the table.
//
// Input from a peer is checked field by field before anything is asked of
// a tier: the namespace's size, the prompt's length (1 ..
// admission.position-limit), betterThan below it; a bad request is refused
// with `ec::invalid_argument` and counted, an offer over the cap with
// `ec::queue_full`. Every request to a local tier carries half of
// `cluster.fetch-deadline-ms`; a tier that fails or is late counts as
// holding nothing.
//
// Owner: spawn_service (runtime/service/spawn.hpp) when `cluster.enabled`;
// the actor owns its table and lane (the lane's threads end with it).
#pragma once

#include "actors/interfaces.hpp"
#include "messages/transfer_table.hpp"

#include <caf/actor_system.hpp>

#include <string>

namespace kvtier::cluster {

using actors::sealed;

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

/// What a serve actor needs.
struct serve_config {
  msg::transfer_limits limits;
  /// Where the bulk lane listens; empty: no lane (chunks only).
  std::string lane_address = "127.0.0.1";
  /// Each request to the RAM or SSD actor may take this long.
  uint64_t tier_deadline_ms = 2000;
  /// The longest prompt a peer may send (admission.position-limit).
  uint64_t max_prompt_tokens = 1 << 20;
};

/// Spawns the serve actor over `ram` and `ssd` (may be null). Fails with
/// `io_error` when the lane cannot listen.
caf::expected<serve_actor> spawn_serve(caf::actor_system& sys, serve_config cfg,
                                       actors::ram_tier_actor ram,
                                       actors::ssd_tier_actor ssd);

} // namespace kvtier::cluster
