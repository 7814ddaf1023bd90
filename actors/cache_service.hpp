// The cache_service facade (docs/actors.md): the one actor the
// embedded API talks to. It owns no data: every call becomes requests to
// the tier actors that own the data (RAM, SSD, admission, sessions,
// checkpoints) and a reply assembled from theirs. Calls that one tier
// answers alone are delegated (the tier replies to the caller directly,
// saving a hop).
//
// Lookup order (acquire): the request's checkpoint, when checkpoints are
// possible at all; else RAM and every cold tier (`service_actors::cold`,
// the SSD first) are asked at once, each under the tier deadline, and the
// strictly-longer rule runs tier by tier: a cold tier's candidate is used
// only when strictly longer than RAM's and every earlier cold tier's.
// These requests (and the winner's restore) are urgent (high priority,
// with a `caf::duration` timeout, see `urgent_timeout`): they pass the
// spill orders and completions queued in a tier's mailbox. The lookup's
// requests carry no CAF timeout (one clock entry each, woken per request):
// the facade's own deadline answers any still waiting with a timeout,
// which frees its handler. Once RAM
// answered with a usable prefix, the cold tiers' finds are waited for at
// most `cold_wait_ms` more: a tier that has not answered by then is no
// candidate for this acquire (the RAM hit is served; counted `coldLate`),
// so a cold tier busy with a write backlog never holds a RAM hit up for
// long. A RAM miss waits for them until the tier deadline. The
// winner's entry is restored (the SSD coalesces it with reads in flight),
// served, and installed into RAM as durable. A failed or late restore falls
// back to the candidate it beat (the previous record holder), at last to
// RAM's or fresh state, never to an error. A cold tier that does not answer
// by the deadline is no candidate for that request; a cold tier actor that
// goes down (the facade monitors each) is dropped from the list for good
// (logged once, counted as deadTiers in the report).
//
// Model identity: the facade holds the running geometry. A publish or a
// checkpoint whose layers (count, kinds, bytes per token, windows, state
// sizes; read from the layer descriptors, no payload decoded) do not match
// it is refused with `ec::invalid_argument` naming the layer and the field;
// a restored entry or checkpoint of another shape is never served (a miss).
//
// Sessions: a publish naming a session asks RAM to pin the new entry in
// the same step as the put, then (when kept) tells the sessions actor,
// before the engine gets its answer; close_session goes to the sessions
// actor, which takes the pin back in RAM.
//
// Lifecycle: flush, close, stats and the report are one loop each over
// `service_actors::lifecycle` (every tier and role, `lifecycle_actor`;
// actors/cache_service_lifecycle.cpp), by stage: the gate (admission), the
// holders (RAM, sessions, checkpoints, the peer tier), the stores (the SSD
// tier and any store added beside it). Flush asks the gate and holders
// first (RAM and checkpoints queue their snapshot orders at their store),
// then the stores; the result is durable only when every member says so.
// `close` closes the gate at once (queued admits fail `ec::closed`, so do
// later admits and fits) and flushes; then it clears the holders even when
// the flush was not durable (each refuses to store anything after), and
// last closes the stores, which release the writes still queued or failed
// (counted as `abandoned`: the result is then not durable) and the
// prefetch results they held, refuse later writes, and answer once no
// write runs: when close answers, the service holds no buffer (what the
// engine was lent stays the engine's). The result is remembered: later
// closes get it again (alreadyClosed), concurrent ones share it. After
// close, calls that would change or lend state fail with `ec::closed`;
// publish answers droppedClosed. Idle demotion runs on a timer of the
// facade while `idle_ms` > 0 and a store exists (on by default:
// `service.idle-demotion-ms`), every `idle_period(idle_ms)` (never more
// often than `min_idle_period`), until StopIdleDemotion.
//
// Admin stays local: FlushState, CloseService, CloseSession, DemoteIdle,
// StopIdleDemotion, RelievePressure, ReclaimAtBoundary and SetSsdLimit
// from a sender in another process fail `ec::not_permitted` (the facade is
// never published; peers' admin requests come through the node actor,
// which asks the facade itself when `cluster.remote-admin` allows them).
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/geometry.hpp"
#include "tiers/latency.hpp"
#include "tiers/report_parts.hpp"
#include "tiers/routing.hpp"

#include <caf/actor_clock.hpp>
#include <caf/duration.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvtier::actors {

/// One cold tier of the facade's lookups.
struct cold_tier_ref {
  cold_tier_actor actor;
  /// What a state served from it says it came from (`ssd`, `peer`).
  msg::Tier tag = msg::Tier::SSD;
  /// Its name in logs and errors ("ssd", "peer node-b").
  std::string name;
};

/// When a tier takes its turn in the facade's lifecycle loops.
enum class tier_stage : uint8_t {
  /// Closed first, at once, beside the flush (admission: queued admits
  /// fail `closed` while the flush runs).
  gate,
  /// Flushed first (it hands its writes to the store), cleared at close
  /// after the flush: RAM, sessions, checkpoints, the peer tier.
  holder,
  /// Flushed after every holder (their orders are in its mailbox first),
  /// closed last: its close result (writes released unwritten) is part of
  /// the service's.
  store,
};

/// One member of the facade's lifecycle loops: flush, close, stats and
/// report go to each (`lifecycle_actor`).
struct lifecycle_ref {
  lifecycle_actor actor;
  /// Its name in the report's silentTiers and in errors ("ram", "ssd").
  std::string name;
  tier_stage stage = tier_stage::holder;
};

/// The actors the facade orchestrates. `lifecycle` lists every tier and
/// role the facade flushes, closes, asks for stats and for the report, in
/// the order it asks them; `cold` the cold tiers acquire and prefetch
/// consult, in order (spawn_service puts each store there, the SSD first;
/// a peer tier comes after them). `store` is the spill target the RAM and
/// checkpoints actors hold (null: none; idle demotion needs one); `ssd`
/// the SSD actor for the SSD's own calls (saved prefixes, its live limit),
/// null without an SSD tier. Without a `sessions` actor, publishes pin
/// nothing (no one could take the pins back).
struct service_actors {
  ram_tier_actor ram;
  store_actor store;
  ssd_tier_actor ssd;
  admission_actor admission;
  checkpoints_actor checkpoints;
  sessions_actor sessions;
  std::vector<cold_tier_ref> cold;
  std::vector<lifecycle_ref> lifecycle;
  /// Every store in wiring order (the SSD actor first when configured):
  /// the local lookup's stores, and what stops with the service.
  std::vector<store_actor> stores;
  /// The peer tier (also in `cold`), null without a cluster: routing asks
  /// it what each peer holds.
  peer_tier_actor peer;
};

/// A prefetch lease the facade handed out: the cold tier whose read it
/// holds and that tier's own lease (tiers number leases independently).
struct lease_ref {
  cold_tier_actor tier;
  uint64_t tier_lease = 0;
};

/// What the first close answered, kept as plain values (a message would
/// hold a buffer, and a closed service holds none); every later close is
/// answered with it again.
struct close_record {
  bool durable = false;
  uint64_t pending = 0, dropped = 0, failed = 0, entries = 0,
           longest_durable_prefix = 0, abandoned = 0;
  std::vector<caf::error> errors;
};

struct cache_service_state {
  static inline const char* name = "cache-service";

  using close_promise =
    caf::typed_response_promise<sealed<msg::CloseServiceReply>>;

  service_actors tiers;
  /// The running model's shape: projects a request's bytes for WouldKeep
  /// and is checked at every door (configuration, not data).
  tiers::model_geometry geometry;
  /// Whether any checkpoint can exist (interval set, or files at start).
  bool checkpoints_possible = false;
  uint64_t idle_ms = 0;
  bool idle_running = false;
  /// The storage deadline (`service.storage-deadline-ms`): each request to
  /// a tier may take half of it, so a call of two steps (flush, then the
  /// SSD's close) still answers within it.
  uint64_t deadline_ms = 10000;
  /// Whether the service has an object cache (`ram-tier.objects`).
  bool objects = true;
  bool closing = false;
  /// Cold tier actors seen going down (each dropped from `tiers.cold`).
  uint64_t dead_tiers = 0;
  /// Prefetch leases in force, by the facade's lease id (RAM holds the
  /// installed donor under that id).
  std::unordered_map<uint64_t, lease_ref> leases;
  uint64_t next_lease = 1;
  std::optional<close_record> closed;
  std::vector<close_promise> close_waiters;
  /// Routing (tiers/routing.hpp): the cost model, this router's recent
  /// decisions, and this node as its peers know it (node_name_atom; empty
  /// without a cluster).
  tiers::route_costs route;
  tiers::route_load routed;
  std::string node_id;
  std::string address;
  /// Restores (from the SSD) and remote fetches (from a peer) of acquires,
  /// timed from the request to the tier until the entry is served.
  std::shared_ptr<tiers::latency_book> latency;
  /// How long an acquire that RAM answered with a usable prefix waits for
  /// the cold tiers' finds (`service.cold-wait-ms`; 0: the tier deadline).
  uint64_t cold_wait_ms = 0;
  /// Acquires served without a cold tier's answer that came too late for
  /// that wait (`coldLate` in the report).
  uint64_t cold_late = 0;
  /// Acquires' lookups waiting on the clock, each queue oldest first (all
  /// of a queue wait the same time, so its oldest is due first); a lookup
  /// decided in time is dropped when reached. `cold_waits`: RAM hits
  /// waiting for the cold tiers (`cold_wait_ms`); `deadlines`: lookups
  /// waiting for their tiers' finds (the tier deadline). One timer serves
  /// both (`lookup_timer`, its id, 0: none armed; `lookup_timer_due`):
  /// a delayed message per acquire for the cold wait woke CAF's clock
  /// thread on every RAM hit and came back to the facade as a message
  /// later; so did a CAF timeout per request. A lookup stays in
  /// `deadlines` until each of its requests was answered: at the deadline
  /// the facade answers those still waiting with a timeout itself, which
  /// frees their handlers (a stalled tier leaves none behind).
  using lookup_queue =
    std::deque<std::pair<caf::actor_clock::time_point, std::weak_ptr<void>>>;
  lookup_queue cold_waits;
  lookup_queue deadlines;
  uint64_t lookup_timer = 0;
  uint64_t next_lookup_timer = 1;
  caf::actor_clock::time_point lookup_timer_due;
  /// The prompt tokens of the acquires answered (the report's "tokens"
  /// part, their one home): served by where the state came from, and
  /// computed (no state covered them).
  tiers::report::tokens tokens;
};

using cache_service_pointer =
  cache_service_actor::stateful_pointer<cache_service_state>;

/// The idle-demotion timer's shortest period: a tiny `idle_ms` cannot make
/// it spin.
inline constexpr std::chrono::milliseconds min_idle_period{1000};

/// The idle-demotion timer's period for `idle_ms`: a quarter of it (an
/// entry leaves RAM within 1.25 x idle_ms of its last use), but at least
/// `min_idle_period` (then within idle_ms + 1 s).
std::chrono::milliseconds idle_period(uint64_t idle_ms);

/// The behaviour. `idle_ms` > 0 starts the idle-demotion timer (when
/// there is an SSD tier); `objects` false: object calls are refused
/// (`ec::unsupported`); `deadline_ms` is the storage deadline;
/// `cold_wait_ms` how long a RAM hit waits for the cold tiers; `route` the
/// routing cost model (route.* options); `latency` where restores and
/// remote fetches are timed (a book of its own when null; CAF's spawn
/// takes every argument, so pass a null one).
cache_service_actor::behavior_type
cache_service(cache_service_pointer self, service_actors tiers,
              tiers::model_geometry geometry, bool checkpoints_possible,
              uint64_t idle_ms, bool objects, uint64_t deadline_ms,
              uint64_t cold_wait_ms, tiers::route_costs route,
              std::shared_ptr<tiers::latency_book> latency);

/// How long one request of the facade to a tier may take.
inline std::chrono::milliseconds tier_timeout(cache_service_pointer self) {
  return std::chrono::milliseconds{
    std::max<uint64_t>(self->state.deadline_ms / 2, 1)};
}

/// The same as a `caf::duration`, for a request that must keep its
/// priority: CAF 0.17.6's `request<P>` overload taking a `std::chrono`
/// timeout sends at normal priority whatever P says.
inline caf::duration urgent_timeout(cache_service_pointer self) {
  return caf::duration{tier_timeout(self)};
}

/// `err`, or for a request that timed out `ec::timeout` naming `what`.
caf::error timed_out(cache_service_pointer self, const caf::error& err,
                     const std::string& what);

} // namespace kvtier::actors
