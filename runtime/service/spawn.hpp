// Spawning and wiring of kvtier's actors (docs/actors.md): one `spawn_R`
// per actor role, and `spawn_service`, which builds the whole map from
// `service_options` in dependency order (SSD first: the RAM tier spills to
// it and the checkpoints learn their files from its index; the sessions
// actor after RAM, whose pins it takes back; the facade last). The one link
// against that order, the SSD actor's SsdEvictEvents to the RAM actor, is a
// one-time attach message `spawn_ram_tier` sends. Used by the embedded API
// (runtime/service/service.cpp) and by tests that want single actors. Called
// from one thread while starting; the handles it returns may be used from
// anywhere.
#pragma once

#include "actors/cache_service.hpp"
#include "actors/feed_actor.hpp"
#include "actors/put_observer.hpp"
#include "runtime/config.hpp"
#include "runtime/service.hpp"
#include "tiers/checkpoints.hpp"
#include "tiers/latency.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace kvtier::tiers::ssd {
class file_system;
}

namespace kvtier::runtime {

/// Builds the I/O engine and SSD tier in `opts.ssd_dir` (on `fs`, or the
/// POSIX file system when null) for the running model (its directory
/// `<dir>/<fingerprint>/`), runs the tier's `open` (lock, MODEL check,
/// header-only scan), and spawns the SSD actor over them. Errors: the
/// model's (`invalid_config`), the lock's (`locked`, naming the holder),
/// the MODEL check's (`incompatible_format`), the scan's, or the engine's.
/// `saved` receives the checkpoint files the scan found before serving, by
/// their headers (for the checkpoints actor; the SSD actor sends those it
/// finds later, `found_checkpoints`).
caf::expected<actors::ssd_tier_actor>
spawn_ssd_tier(caf::actor_system& sys, const service_options& opts,
               tiers::ssd::file_system* fs,
               std::vector<tiers::checkpoint_file>* saved = nullptr);

/// The RAM tier actor, spilling to `store` (may be null), and attached to
/// it as the actor it tells of every entry it stops holding
/// (SsdEvictEvent).
actors::ram_tier_actor
spawn_ram_tier(caf::actor_system& sys, const service_options& opts,
               actors::store_actor store,
               std::shared_ptr<actors::put_observer_slot> observer);

/// The sessions actor, taking pins back from `ram` (each unpin answered
/// within `deadline_ms`).
actors::sessions_actor spawn_sessions(caf::actor_system& sys,
                                      actors::ram_tier_actor ram,
                                      uint64_t deadline_ms);

/// The admission actor over the configured model geometry and limits.
caf::expected<actors::admission_actor>
spawn_admission(caf::actor_system& sys, const service_options& opts);

/// The checkpoints actor; `saved` are the checkpoint files found at start.
/// Attached to `store` (may be null) as the actor it tells of every
/// checkpoint it stops holding (SsdEvictEvent).
actors::checkpoints_actor
spawn_checkpoints(caf::actor_system& sys, const service_options& opts,
                  actors::store_actor store,
                  std::vector<tiers::checkpoint_file> saved);

/// The event feed (actors/feed_actor.hpp): ring `opts.cluster_feed_ring`
/// events and `opts.cluster_feed_ring_bytes`, named `opts.cluster_node_id`
/// (the node renames it once it knows its id), with `subscribers` from its
/// first event on, publishing its memory in `memory` (may be null).
actors::feed_actor
spawn_feed(caf::actor_system& sys, const service_options& opts,
           std::vector<caf::actor> subscribers = {},
           std::shared_ptr<actors::feed_memory> memory = nullptr);

/// A local feed subscriber calling `f` for every event (on its own actor
/// thread); what `f` throws is counted in `*errors` (may be null). Not yet
/// subscribed: pass it to `spawn_feed` or send the feed `feed_local_atom`.
caf::actor
spawn_feed_listener(caf::actor_system& sys,
                    std::function<void(const actors::feed_event&)> f,
                    std::shared_ptr<std::atomic<uint64_t>> errors = nullptr);

/// The actors a cluster node needs (runtime/cluster/node.hpp): each null
/// until its part exists.
struct cluster_handles {
  /// The event feed peers subscribe to (node_delegates::feed).
  caf::actor feed;
  /// What serves this node's state to peers (node_delegates::serve).
  caf::actor serve;
  /// Told of every peer up and down (the feed follower, the peer tier).
  std::vector<caf::actor> listeners;
  /// The peer tier (also the last of `tiers.cold`), null without a cluster.
  actors::peer_tier_actor peer;
};

/// Every actor of one service.
struct service_handles {
  actors::cache_service_actor facade;
  actors::service_actors tiers;
  /// The event feed (always spawned, with or without a cluster).
  actors::feed_actor feed;
  /// The memory the feed holds, for the report's `process` part.
  std::shared_ptr<actors::feed_memory> feed_memory =
    std::make_shared<actors::feed_memory>();
  /// The put observer's feed subscriber.
  caf::actor put_observer;
  cluster_handles cluster;
  /// The latency histograms the facade (restores, remote fetches) and the
  /// embedded API (acquire, publish) fill, read by `service::latency`.
  std::shared_ptr<tiers::latency_book> latency =
    std::make_shared<tiers::latency_book>();
};

/// The routing cost model of `o`'s route.* options.
tiers::route_costs route_costs_of(const service_options& o);

/// Spawns the whole actor map for `opts` (no SSD actor when
/// `opts.ssd_dir` is empty). The event feed always, attached to the RAM and
/// SSD actors before they serve, with the put observer (`observer`, may be
/// null) as its first subscriber; with `opts.cluster_enabled` also the
/// feed follower (actors/feed_follower_actor.hpp) as a cluster listener,
/// and the feed as `cluster.feed`.
///
/// Wiring: every store (the SSD actor, then each of `stores`, spawned in
/// order) is a cold tier of the facade's lookups and a member of its
/// lifecycle loops (`wire_store`); the first is the spill target of the
/// RAM and checkpoints actors, attached to them before any spill order.
caf::expected<service_handles>
spawn_service(caf::actor_system& sys, const service_options& opts,
              tiers::ssd::file_system* fs,
              std::shared_ptr<actors::put_observer_slot> observer,
              const std::vector<store_plan>& stores = {});

/// Adds `store` to `t`: a cold tier whose state says it came from `tag`,
/// a member of the lifecycle loops named `name`, and the spill target
/// when `t` has none yet.
void wire_store(actors::service_actors& t, actors::store_actor store,
                std::string name, msg::Tier tag);

} // namespace kvtier::runtime
