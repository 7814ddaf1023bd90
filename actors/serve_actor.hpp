// The serving side of peer fetches (docs/cluster.md, "Fetching state from
// a peer"): the actor a node actor hands its peers' FetchEntry, FetchChunk
// and CancelTransfer to (node_delegates::serve). It answers a FetchEntry
// with the longest usable prefix of the prompt this node holds, strictly
// longer than betterThan, found by the local lookup (actors/local_lookup.hpp:
// RAM's export, else the node's stores, strictly longer wins), as a flat
// RestoreEntryReply offered in a `msg::transfer_table` (byte cap
// `cluster.serve-max-bytes`, idle expiry `cluster.serve-idle-ms`) and on a
// `msg::bulk_server` lane on `cluster.listen-address`; the reply is the
// TransferHeader (lane port, host and token) or `none`. FetchChunk and
// CancelTransfer go to the table.
//
// Input from a peer is checked field by field before anything is asked of
// a tier: the namespace's size, the prompt's length (1 ..
// admission.position-limit), betterThan below it; a bad request is refused
// with `ec::invalid_argument` and counted, an offer over the cap with
// `ec::queue_full`. Every request to a local tier carries half of
// `cluster.fetch-deadline-ms`; a tier that fails or is late counts as
// holding nothing.
//
// Owner: spawn_service (runtime/service/spawn.hpp) when `cluster.enabled`,
// which starts the lane; the actor owns its table and lane (the lane's
// threads end with it).
#pragma once

#include "actors/cluster_interfaces.hpp"
#include "actors/local_lookup.hpp"
#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <string>

namespace kvtier::actors {

/// What a serve actor needs. The service fills every field from its
/// options (runtime/service/spawn.cpp); the defaults here are for tests,
/// and those an option also has equal the shipped default (checked by
/// tests/runtime/options_test.cpp).
struct serve_config {
  /// `cluster.serve-max-bytes` and `cluster.serve-idle-ms`.
  msg::transfer_limits limits;
  /// Where the bulk lane listens; empty: no lane (chunks only). The
  /// service: `net::plaintext_address_for(cluster.listen-address)`.
  std::string lane_address = "127.0.0.1";
  /// Each request to a local tier may take this long (the service: half
  /// the peer fetch deadline, `cluster.fetch-deadline-ms`).
  uint64_t tier_deadline_ms = 2000;
  /// The longest prompt a peer may send (admission.position-limit).
  uint64_t max_prompt_tokens = 131072;
};

/// Spawns the serve actor over `tiers` (RAM and the node's stores, asked
/// by the local lookup), offering transfers on `lane` (null: none, chunks
/// only), which the caller started on `cfg.lane_address`
/// (runtime/service/spawn.cpp: the lane's socket is the runtime's; the
/// actor owns it from here, its threads end with it).
serve_actor spawn_serve(caf::actor_system& sys, serve_config cfg,
                        local_tiers tiers,
                        std::shared_ptr<msg::bulk_server> lane);

} // namespace kvtier::actors
