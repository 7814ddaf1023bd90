// The serving side of peer fetches (docs/cluster.md, "Fetching state from
// a peer"): the actor a node actor hands its peers' FetchEntry, FetchChunk
// and CancelTransfer to (node_delegates::serve). It answers a FetchEntry
// with the longest usable prefix of the prompt this node holds, strictly
// longer than betterThan, found by the local lookup (actors/local_lookup.hpp:
// RAM's export, else the node's stores, strictly longer wins), as a flat
// RestoreEntryReply
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
#include "actors/local_lookup.hpp"
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

/// What a serve actor needs. The service fills every field from its
/// options (runtime/service/spawn.cpp); the defaults here are for tests,
/// and those an option also has equal the shipped default (checked by
/// tests/runtime/options_test.cpp).
struct serve_config {
  /// `cluster.serve-max-bytes` and `cluster.serve-idle-ms`.
  msg::transfer_limits limits;
  /// Where the bulk lane listens; empty: no lane (chunks only). The
  /// service: `lane_address_for(cluster.listen-address)`.
  std::string lane_address = "127.0.0.1";
  /// Each request to the RAM or SSD actor may take this long (the
  /// service: half the peer fetch deadline, `cluster.fetch-deadline-ms`).
  uint64_t tier_deadline_ms = 2000;
  /// The longest prompt a peer may send (admission.position-limit).
  uint64_t max_prompt_tokens = 131072;
};

/// Where a node listening on `listen_address` runs its bulk lane: there
/// when it is a loopback address; otherwise nowhere (""), because the lane
/// is plain TCP and off loopback only TLS may carry a peer's bytes: its
/// transfers are then pulled as chunks through the TLS middleman.
std::string lane_address_for(const std::string& listen_address);

/// Spawns the serve actor over `tiers` (RAM and the node's stores: the
/// local lookup, actors/local_lookup.hpp). Fails with `io_error` when the
/// lane cannot listen.
caf::expected<serve_actor> spawn_serve(caf::actor_system& sys, serve_config cfg,
                                       actors::local_tiers tiers);

} // namespace kvtier::cluster
