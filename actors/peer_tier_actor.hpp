// The peer tier (docs/cluster.md, "Peers as a cold tier"): a cold tier
// over what the other nodes of a cluster hold. It owns a
// `tiers::peer_directory` (fed by `directory_batch` messages of the feed
// follower) and the node actor of every peer that is up (peer_up /
// peer_down from the node actor; each handle is monitored, and a peer that
// goes down leaves the directory at once).
//
// FindPrefix answers from the directory only: the longest usable prefix
// longer than betterThan among holders that are up, its key being the
// prompt's first usable+1 tokens (a holder is asked with the prompt, so the
// key names the question, not the holder's entry). RestoreEntry and
// PrefetchPrefix fetch: FetchEntry to the cheapest up holder (then the next
// one on failure, while the deadline allows), then the flat bytes over the
// holder's bulk lane, read by a `msg::bulk_jobs` thread (never on an actor
// thread; the result comes back as a message), or chunk by chunk through
// the middleman when the header names no lane. Nothing is handed up before
// the whole message verified (length, XXH3-64, decode under reader limits)
// and its entry has the asked shape: the namespace, exactly the usable
// tokens of the prompt, the running model's layers and byte sizes.
//
// Policy: identical fetches (same first holder, namespace and tokens)
// coalesce into one transfer; bytes of transfers running are bounded by
// `cluster.fetch-max-bytes` (a candidate over it is no candidate, counted);
// every fetch by `cluster.fetch-deadline-ms`. A fetch that fails, times out
// or loses its holder answers `failed` (RestoreEntry) or an error
// (PrefetchPrefix) with `peer_unreachable`, `timeout`, `corrupt_data` or
// `not_found`, so the facade falls back to the candidate it beat or fresh
// state. With `cluster.fetched-to-ssd` a fetched entry is also written to
// the local SSD at once (a SpillEntry snapshot order; the facade installs
// the RAM copy as non-durable, so its later eviction may write it again,
// which the SSD answers alreadyDurable).
//
// Owner: spawn_service (runtime/service/spawn.hpp) when `cluster.enabled`.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/geometry.hpp"

#include <caf/actor_system.hpp>

namespace kvtier::actors {

/// What the peer tier needs. The service fills every field from its
/// options (runtime/service/spawn.cpp); the defaults here are for tests,
/// and those an option also has equal the shipped default (checked by
/// tests/runtime/options_test.cpp).
struct peer_tier_config {
  /// Bytes of transfers running at once (cluster.fetch-max-bytes).
  uint64_t fetch_max_bytes = uint64_t{1} << 30;
  /// The longest one fetch may take, all holders tried
  /// (cluster.fetch-deadline-ms).
  uint64_t fetch_deadline_ms = 4000;
  /// Write each fetched entry to the local SSD at once.
  bool fetched_to_ssd = true;
  /// Chunk requests in flight on the chunked path.
  uint32_t chunk_window = 4;
  /// The longest prompt accepted (admission.position-limit).
  uint64_t max_prompt_tokens = 131072;
  /// Each request to the local SSD may take this long
  /// (service.storage-deadline-ms).
  uint64_t ssd_deadline_ms = 10000;
};

/// Spawns the peer tier for the running model `geometry`; `ssd` (the local
/// store, may be null) takes fetched entries when `cfg.fetched_to_ssd`; `serve`
/// (may be null) adds the serving counters to its report.
peer_tier_actor spawn_peer_tier(caf::actor_system& sys, peer_tier_config cfg,
                                tiers::model_geometry geometry, store_actor ssd,
                                caf::actor serve);

} // namespace kvtier::actors
