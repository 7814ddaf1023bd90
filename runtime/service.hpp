// The embedded API: the C++ handle an inference engine links against, one
// call per method of the KV-cache service contract (docs/api.md) plus
// `demote_idle` and `relieve_pressure`. Each call has a blocking form, a
// future-returning form (`*_async`) and a callback form (`*_async` with a
// `callback` last, which the futures are built on: for an engine whose own
// event loop waits, e.g. Python's asyncio); each sends one Cap'n Proto
// request to the cache_service facade actor and converts its reply
// (docs/api.md).
//
// Owner and threads: a `service` boots (or joins) a CAF actor system and
// spawns the actor map of docs/actors.md; any number of engine threads may
// call any method at once. Blocking calls wait on the calling thread;
// futures complete and callbacks run on an actor thread. Destroying the service
// closes it (as `close()`, if it was not closed), leaves its cluster (when
// `cluster.enabled`: the service loads CAF's middleman and publishes a
// node actor, docs/cluster.md), and then stops its actors.
//
// Ownership: what `acquire` returns is the caller's (its views keep the
// donor's buffers alive); what `publish`/`checkpoint` take is the cache's
// once the call returns, the caller's when it fails. Failures are
// `caf::expected` errors with a kvtier `ec` code; "no hit" and "not kept"
// are answers, not errors. Every call after `close()` fails with
// `ec::closed` (also an `admit_queued` still waiting when close began),
// except `close()` itself (idempotent), `publish` (answers dropped_closed),
// `release`, `keeps`, `close_session`, a lease's `release`, `report()`,
// `stats()` and `saved_prefixes()`. When `close()` returns the service
// holds no buffer; what `acquire` lent the engine stays valid.
#pragma once

#include "config.hpp"
#include "service_types.hpp"

#include <caf/actor_system.hpp>

#include <functional>
#include <future>
#include <memory>

namespace kvtier::tiers::ssd {
class file_system;
}

namespace kvtier::cluster {
class node;
}

namespace kvtier::runtime {

/// A store added beside the built-in tiers (docs/actors.md "Adding a
/// tier"): an actor that implements `actors::store_actor`
/// (actors/interfaces.hpp: a cold tier's reads, the lifecycle, spills).
/// The service consults it on every acquire and prefetch after the SSD
/// tier, flushes, closes and reports it, and, when there is no SSD tier,
/// spills RAM's evictions and checkpoints to it.
struct store_plan {
  /// Its name in the report, /metrics and logs (lower_snake_case).
  std::string name;
  /// Spawns it in the service's actor system (once, at start); an error
  /// fails the start.
  std::function<caf::expected<caf::actor>(caf::actor_system&)> spawn;
};

/// Parts a service may be given instead of building them (tests, replay).
struct service_parts {
  service_parts() = default;
  /// Only a file system (the rest as by default).
  service_parts(tiers::ssd::file_system* file_system)
    : fs(file_system) {}

  /// The SSD tier's file system (in-memory, faulty); the POSIX one when
  /// null. Must outlive the service.
  tiers::ssd::file_system* fs = nullptr;
  /// Stores to add beside the built-in tiers, in lookup order.
  std::vector<store_plan> stores;
};

class service;

/// The callback form of a call: each `*_async` call (and `admit_queued`)
/// has one beside its future form, which is built on it. It runs exactly
/// once with the answer, on an actor thread (on the calling thread when
/// the service did not start); it must be quick, must not throw, and must
/// not wait on the service.
template <class T>
using callback = std::function<void(caf::expected<T>)>;

/// `prefetch`'s release: ends the interest once (explicitly or when
/// destroyed). Move-only.
class prefetch_lease {
public:
  prefetch_lease() = default;
  prefetch_lease(prefetch_lease&&) noexcept;
  prefetch_lease& operator=(prefetch_lease&&) noexcept;
  ~prefetch_lease();

  /// What the prefetch started (lease 0: nothing to read).
  const prefetch_info& info() const noexcept {
    return info_;
  }

  /// Ends the interest; false when already released or empty.
  bool release();

private:
  friend class service;
  prefetch_lease(service* owner, prefetch_info info);
  service* owner_ = nullptr;
  prefetch_info info_;
};

/// `subscribe_events`' handle: the subscription ends (explicitly or when
/// destroyed); no call of the function starts after that. Move-only.
class event_subscription {
public:
  event_subscription() = default;
  event_subscription(event_subscription&&) noexcept;
  event_subscription& operator=(event_subscription&&) noexcept;
  ~event_subscription();

  /// Whether it is subscribed.
  explicit operator bool() const noexcept;

  /// Ends it; false when already ended or empty.
  bool end();

private:
  friend class service;
  struct state;
  explicit event_subscription(std::shared_ptr<state> s);
  std::shared_ptr<state> state_;
};

/// Exact tensor objects (encoder outputs) by exact key under the RAM
/// tier's budget and LRU; evicted ones are spilled to SSD and found there
/// again by `get` (also after a restart); a put replaces every older copy.
class object_cache {
public:
  /// Stores `tensors` under `key`; false when larger than the whole cap.
  caf::expected<bool> put(const std::string& key,
                          std::vector<tiers::attachment> tensors);
  /// The object under `key`, as views; nullopt when absent.
  caf::expected<std::optional<std::vector<tiers::attachment>>>
  get(const std::string& key);
  /// The callback forms of `put` and `get`.
  void put_async(const std::string& key, std::vector<tiers::attachment> tensors,
                 callback<bool> done);
  void get_async(const std::string& key,
                 callback<std::optional<std::vector<tiers::attachment>>> done);

private:
  friend class service;
  explicit object_cache(service* owner)
    : owner_(owner) {}
  service* owner_;
};

class service {
public:
  using put_observer =
    std::function<void(const tiers::token_seq& tokens, const std::string& ns)>;
  template <class T>
  using result = caf::expected<T>;
  template <class T>
  using future = std::future<caf::expected<T>>;
  template <class T>
  using callback = runtime::callback<T>;

  /// Boots its own actor system (scheduler settings of conf/kvtier.conf).
  explicit service(service_options opts, service_parts parts = {});
  /// Boots an actor system from `cfg` (which must outlive the service).
  explicit service(kvtier_config& cfg, service_parts parts = {});
  /// Spawns its actors in `sys` (which must outlive the service).
  service(caf::actor_system& sys, service_options opts,
          service_parts parts = {});
  ~service();

  service(const service&) = delete;
  service& operator=(const service&) = delete;

  /// Whether start-up (e.g. the SSD scan) succeeded; calls fail otherwise.
  caf::error start_error() const;

  /// Resumed generation, else longest usable prefix in `ns`, else fresh.
  result<acquired_state> acquire(const state_request& r, const std::string& ns);
  future<acquired_state> acquire_async(const state_request& r,
                                       const std::string& ns);
  void acquire_async(const state_request& r, const std::string& ns,
                     callback<acquired_state> done);

  /// Longest usable prefix in RAM; takes nothing, changes no LRU order.
  result<uint64_t> peek_prefix_len(const tiers::token_seq& prompt,
                                   const std::string& ns);
  future<uint64_t> peek_prefix_len_async(const tiers::token_seq& prompt,
                                         const std::string& ns);
  void peek_prefix_len_async(const tiers::token_seq& prompt,
                             const std::string& ns, callback<uint64_t> done);

  /// The node of the cluster that should serve `prompt` (this one without
  /// a cluster): the lowest expected cost given what each node holds in
  /// each tier and its load (docs/cluster.md "Routing"). Reads only; each
  /// answer counts toward the chosen node's recent load.
  result<route_decision> route(const tiers::token_seq& prompt,
                               const std::string& ns,
                               uint32_t max_new_tokens = 0);
  future<route_decision> route_async(const tiers::token_seq& prompt,
                                     const std::string& ns,
                                     uint32_t max_new_tokens = 0);
  void route_async(const tiers::token_seq& prompt, const std::string& ns,
                   uint32_t max_new_tokens, callback<route_decision> done);

  /// Offers `state` (covering `state.tokens` in `state.ns`) for reuse. On
  /// success `state` is emptied (the cache owns it); on failure untouched.
  result<publish_result> publish(const state_request& r, tiers::entry&& state);
  future<publish_result> publish_async(const state_request& r,
                                       tiers::entry state);
  void publish_async(const state_request& r, tiers::entry state,
                     callback<publish_result> done);

  /// Whether state `r` would publish could be kept.
  result<bool> keeps(const state_request& r);
  future<bool> keeps_async(const state_request& r);
  void keeps_async(const state_request& r, callback<bool> done);

  /// Holds `r`'s projected KV bytes (true) or says wait (false).
  result<admit_decision> admit(const state_request& r);
  future<admit_decision> admit_async(const state_request& r);
  void admit_async(const state_request& r, callback<admit_decision> done);
  /// Awaitable admit: completes once admitted, in arrival order.
  future<admit_decision> admit_queued(const state_request& r);
  void admit_queued(const state_request& r, callback<admit_decision> done);

  /// Whether `admit` would admit now; holds nothing.
  result<admit_decision> fits(const state_request& r);
  future<admit_decision> fits_async(const state_request& r);
  void fits_async(const state_request& r, callback<admit_decision> done);

  /// `r` is done: budget back; when `completed`, the checkpoints
  /// `r.attempt` owns are removed (answered once the removal is durable:
  /// a restart never resumes them), else kept.
  result<release_result> release(const state_request& r, bool completed);
  future<release_result> release_async(const state_request& r, bool completed);
  void release_async(const state_request& r, bool completed,
                     callback<release_result> done);

  /// Saves a resumable point of `r`'s generation (the cache owns it), as
  /// `r.attempt`: disposed (false) from an attempt older than the one
  /// that owns the request's checkpoint. On success `state` is emptied
  /// (the cache owns it); on failure untouched.
  result<bool> checkpoint(const state_request& r, tiers::entry&& state);
  future<bool> checkpoint_async(const state_request& r, tiers::entry state);
  void checkpoint_async(const state_request& r, tiers::entry state,
                        callback<bool> done);

  /// Drops `session`'s affinity; reusable state stays.
  result<uint32_t> close_session(const std::string& session);
  future<uint32_t> close_session_async(const std::string& session);
  void close_session_async(const std::string& session, callback<uint32_t> done);

  /// Starts cold reads for `prompt`; completes when they are done.
  result<prefetch_lease> prefetch(const tiers::token_seq& prompt,
                                  const std::string& ns,
                                  std::optional<std::string> session = {});
  future<prefetch_lease>
  prefetch_async(const tiers::token_seq& prompt, const std::string& ns,
                 std::optional<std::string> session = {});
  void prefetch_async(const tiers::token_seq& prompt, const std::string& ns,
                      std::optional<std::string> session,
                      callback<prefetch_lease> done);

  /// Makes every kept prefix and checkpoint durable as far as possible.
  result<durability_result> flush();
  future<durability_result> flush_async();
  void flush_async(callback<durability_result> done);

  /// After every request drained: flush, then clear. Idempotent.
  result<durability_result> close();
  future<durability_result> close_async();
  void close_async(callback<durability_result> done);

  /// An execution boundary: give optional snapshots back. No I/O.
  result<reclaim_result> boundary(uint64_t want_bytes = UINT64_MAX);
  future<reclaim_result> boundary_async(uint64_t want_bytes = UINT64_MAX);
  void boundary_async(uint64_t want_bytes, callback<reclaim_result> done);

  /// Entries unused for `idle_ms` made durable, then out of RAM.
  result<uint64_t> demote_idle(uint64_t idle_ms);
  future<uint64_t> demote_idle_async(uint64_t idle_ms);
  void demote_idle_async(uint64_t idle_ms, callback<uint64_t> done);

  /// Stops the idle-demotion timer; false when it was not running.
  result<bool> stop_idle_demotion();
  future<bool> stop_idle_demotion_async();
  void stop_idle_demotion_async(callback<bool> done);

  /// Releases LRU entries (finishing their writes) until `check()` holds.
  result<reclaim_result> relieve_pressure(std::function<bool()> check);
  future<reclaim_result> relieve_pressure_async(std::function<bool()> check);

  /// Pending persistence.
  result<persistence_stats> stats();
  future<persistence_stats> stats_async();
  void stats_async(callback<persistence_stats> done);

  /// The latency histograms (no message: read where they are kept).
  latency_report latency() const;

  /// Where the HTTP endpoint listens (HOST:PORT) when `http.enabled`,
  /// else empty (runtime/http/endpoint.hpp, docs/operations.md).
  std::string http_address() const;

  /// Every counter.
  result<service_report> report();
  future<service_report> report_async();
  void report_async(callback<service_report> done);

  /// Token prefixes on SSD, from headers only.
  result<std::vector<saved_prefix>> saved_prefixes();
  future<std::vector<saved_prefix>> saved_prefixes_async();
  void saved_prefixes_async(callback<std::vector<saved_prefix>> done);

  /// The SSD tier's byte cap from now on (`ssd-tier.cap-bytes` at start):
  /// the owner's live limit, e.g. its share of one budget several services
  /// on one root split. Lowering it removes least recently used files at
  /// once. `unsupported` without an SSD tier; `closed` after close.
  result<ssd_limit_result> set_ssd_limit(uint64_t bytes);
  future<ssd_limit_result> set_ssd_limit_async(uint64_t bytes);
  void set_ssd_limit_async(uint64_t bytes, callback<ssd_limit_result> done);

  /// Observes every stored prefix: a subscriber of the event feed, so it
  /// runs on an actor thread after the put (possibly after `publish`
  /// returned), in the feed's order; must be quick; an observer that throws
  /// is contained (`observer_errors`). Null removes it.
  void set_put_observer(put_observer f);

  /// Calls `f` for every change of what the service holds from now on
  /// (put, evict, demote, durable, superseded, removed; docs/api.md), in
  /// seq order, on an actor thread (keep it quick; what it throws is
  /// contained). Subscribed when this returns. `f` must not call back into
  /// the service blocking. Fails with the service's start error, or
  /// `timeout` when the feed did not answer within the API timeout.
  result<event_subscription>
  subscribe_events(std::function<void(const feed_event&)> f);

  /// Exact tensor objects (encoder outputs) under the RAM cap, spilled to
  /// and restored from SSD like prefixes; null when the service has no
  /// object cache (`ram-tier.objects=false`).
  object_cache* objects() noexcept;

  /// Checkpoint interval in tokens; nullopt: the service keeps none.
  std::optional<uint64_t> checkpoint_every_tokens() const noexcept;

  const service_options& options() const noexcept;

  /// The cluster node (membership, peer hooks, the published node actor;
  /// runtime/cluster/node.hpp) when `cluster.enabled`, else null. The
  /// service owns it; destroying the service closes it first, then leaves.
  cluster::node* cluster() noexcept;

  /// The peer tier actor (actors/peer_tier_actor.hpp) when
  /// `cluster.enabled`, else null: the feed follower (and a test) send it
  /// `actors::directory_batch` messages of what peers hold.
  caf::actor peer_tier() const noexcept;

  /// The actor serving this node's state to peers (actors/serve_actor.hpp)
  /// when `cluster.enabled`, else null.
  caf::actor state_server() const noexcept;

  caf::actor_system& system() noexcept;

  /// The event feed actor (actors/feed_actor.hpp: SubscribeFeed, its
  /// stats and test hook); what `subscribe_events` subscribes to.
  caf::actor event_feed() const noexcept;

  struct impl;

private:
  friend class prefetch_lease;
  friend class object_cache;
  bool end_prefetch(uint64_t lease);

  std::unique_ptr<impl> impl_;
  object_cache objects_{this};
};

} // namespace kvtier::runtime
