// The RAM tier actor: sole owner of a `tiers::ram_tier` (docs/actors.md,
// the actor map). It lends views, stores published and restored state, and
// turns every entry that must reach SSD into a SpillEntry order to the SSD
// actor. It never waits on storage: demotion and pressure relief finish when
// the outcomes of their writes arrive, or at their deadline, through a response
// promise to the caller.
//
// Handoff (issue #11): with an SSD actor the tier is built with a cold tier,
// so an evicted entry that is not durable stays indexed as *leaving*
// (servable, its bytes counted) until its write settles. Every write order
// carries `notify`: the SSD actor answers it at once and sends each outcome
// of the write as a SpillSettled event (failed while it retries, then one
// final one), which this actor hands to `ram_tier::write_settled`: durable,
// a leaving entry leaves (a resident one is marked durable); dropped, given
// up, cancelled or refused, a leaving entry leaves and is counted as
// dropped. One write per entry at a time (`begin_write`): eviction, flush
// and demotion reuse a write already on its way.
//
// Pacing: the orders this actor has out (sent, not settled) stay under
// `write_behind_cap_bytes`, the SSD tier's write-behind cap, so they are
// never dropped there for want of room. A write of an entry that stays
// resident while it waits (a flush snapshot, an idle demotion) is held here
// until it fits (at least one is always out) and sent as earlier ones
// settle, oldest first; a flush answers once its orders are all sent (the
// facade's SSD flush follows them), or with how many are still held after
// `deadline_ms` * 2 / 5. A write of an entry that left the cap (eviction,
// or an evicted entry whose held write was waiting) goes at once: the SSD
// tier's byte cap is what bounds those (it drops the oldest, and such an
// entry leaves RAM). Write-behind orders a snapshot only when it fits and
// nothing is held. A pressure relief takes at most as many victims as fit
// under the cap's room (one at least).
//
// Write-behind: with `write_behind` set, every kept publish is snapshotted
// `write_behind_delay_ms` after its put (when it is still resident, not
// durable and no write of it is out), paced by a token bucket of
// `write_behind_bytes_per_s` (one second of burst) and bounded by
// `write_behind_cap_bytes` of writes this actor has out at once. The clock
// is this actor's timer (`write_behind_atom`); tiers/ stays clock-free.
//
// Protection is by pin only: a PublishState with `protect` set pins the new
// entry in the same step as the put (the facade sets it for a publish
// naming a session) and replies with the pin; the sessions actor takes
// pins back with UnprotectEntry. The RAM actor knows no sessions.
//
// Durable marks rest on the SSD actor's own word to this actor: a
// SpillSettled (durable, alreadyDurable), or, for an entry installed as
// restored from SSD, a FindPrefix this actor asks before it answers the
// install (a file still serves the whole entry; index only, no I/O). The
// SSD actor sends an SsdEvictEvent for every file it stops holding after
// any such word about that file, over the same FIFO, so `mark_not_durable`
// always comes after the mark it clears: no entry stays marked durable once
// its file is gone, and a boundary or a demotion never drops it as "on SSD".
//
// Event feed: once attached (`attach_feed_atom`), every change the tier
// reports (`ram_tier::set_change_observer`: stored, evicted, demoted,
// superseded) is one `feed_change` sent to the feed, inside the handler
// that made it: no reply, no waiting. The put observer is one of the feed's
// subscribers (runtime/service/spawn.cpp), no longer called here.
//
// Policy beyond the tier's own: without an SSD actor nothing is leaving
// (eviction drops: there is nowhere to write) and idle demotion does
// nothing. Objects (actors/ram_tier_objects.hpp) are spilled when evicted
// and snapshotted at a flush, found again on SSD by exact key, and never
// resurrected once replaced; an evicted object leaves RAM at once (it is
// not leaving: its write answers the old way, without notify, and a get
// finds it on SSD once durable). Built with `objects` false the actor
// refuses every object message (`ec::unsupported`). After CloseService
// (which clears everything without spilling) nothing is stored any more:
// a publish or an install that arrives late (a restore still running at
// close) is answered droppedClosed, an object put is not kept, so a closed
// service holds no buffer.
#pragma once

#include "actors/interfaces.hpp"
#include "actors/put_observer.hpp"
#include "tiers/ram_tier.hpp"

#include <caf/typed_response_promise.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

namespace kvtier::actors {

/// How the RAM actor runs. The service fills every field from its options
/// (runtime/service/spawn.cpp); the defaults here are for tests, and those
/// an option also has equal the shipped default (checked by
/// tests/runtime/options_test.cpp).
struct ram_tier_config {
  ram_tier_config() = default;
  /// The cap (and whether objects are kept); everything else as below.
  ram_tier_config(uint64_t cap, bool with_objects = true) // NOLINT
    : cap_bytes(cap)
    , objects(with_objects) {}

  /// `ram-tier.cap-bytes`.
  uint64_t cap_bytes = 2ull << 30;
  /// An object cache (`ram-tier.objects`); false: object calls refused.
  bool objects = true;
  /// `ram-tier.policy`, and the bytes engine pins may hold
  /// (`ram-tier.pin-share` of the cap; 0: no pin granted).
  tiers::ram_policy policy = tiers::ram_policy::lru;
  uint64_t pin_budget_bytes = 0;
  /// The most bookkeeping resident entries may cost
  /// (`ram-tier.bookkeeping-share` of the cap; UINT64_MAX: unbounded).
  uint64_t bookkeeping_budget_bytes = UINT64_MAX;
  /// How long a demotion or a relief waits for its writes, and how long
  /// this actor's requests to the SSD actor may take
  /// (`service.storage-deadline-ms`).
  uint64_t deadline_ms = 10000;
  /// Snapshots kept prefixes in the background (needs an SSD actor, so
  /// off here; the service sets `ssd-tier.write-behind` when it has one).
  bool write_behind = false;
  /// `ssd-tier.write-behind-bytes-per-s`, `ssd-tier.write-behind-delay-ms`.
  uint64_t write_behind_bytes_per_s = 64ull << 20;
  uint64_t write_behind_delay_ms = 1000;
  /// Bytes of writes this actor may have out before write-behind waits
  /// (`ssd-tier.write-behind-cap-bytes`).
  uint64_t write_behind_cap_bytes = 512ull << 20;
};

/// What one SpillSettled said about a write this actor ordered.
struct write_news {
  msg::SpillOutcome outcome = msg::SpillOutcome::FAILED;
  caf::error err;
  /// Durable (or alreadyDurable).
  bool durable = false;
  /// No further news of this write follows.
  bool final = false;
  /// The entry left RAM with this news, and the bytes that went with it
  /// (buffers that died: none while a lent view or a write holds them).
  bool left = false;
  uint64_t freed_bytes = 0;
};

struct ram_tier_state {
  static inline const char* name = "ram-tier";

  std::unique_ptr<tiers::ram_tier> tier;
  /// The cold tier; null when there is none.
  store_actor ssd;
  std::shared_ptr<put_observer_slot> observer;
  /// The event feed told of every change of what RAM holds (null: none).
  feed_actor feed;
  ram_tier_config cfg;
  uint64_t next_order = 1;
  /// After CloseService: nothing is stored any more.
  bool closed = false;

  /// A write this actor ordered whose final outcome has not arrived.
  struct order {
    tiers::ram_key key;
    uint64_t serial = 0;
    uint64_t bytes = 0;
    msg::SpillReason reason = msg::SpillReason::SPILL;
    /// Told of every news of the write (demotion, relief).
    std::vector<std::function<void(const write_news&)>> waiters;
    /// The state to write while the order is held (not sent yet).
    std::optional<tiers::entry> unsent;
  };
  std::unordered_map<uint64_t, order> orders;
  /// Order ids by item serial (a serial names one item; the key is checked).
  std::unordered_multimap<uint64_t, uint64_t> order_of;
  /// Bytes of the orders sent and not settled (what every order waits to
  /// fit under: the SSD tier's write-behind cap).
  uint64_t order_bytes = 0;
  /// Orders held until they fit (flush snapshots, demotions: their items
  /// stay resident meanwhile), oldest first.
  std::set<uint64_t> held;
  /// Flushes waiting until their snapshot orders are all sent: the last
  /// order of each, its promise, and its deadline's wait.
  struct flush_wait {
    uint64_t through = 0;
    caf::typed_response_promise<sealed<msg::FlushStateReply>> rp;
    uint64_t wait = 0;
  };
  std::vector<flush_wait> flush_waits;

  /// Kept publishes waiting for their write-behind snapshot, by due time.
  struct due_snapshot {
    tiers::ram_key key;
    uint64_t serial = 0;
    uint64_t due_ms = 0;
  };
  std::deque<due_snapshot> due;
  bool tick_armed = false;
  /// The token bucket: bytes that may be written now (may run negative by
  /// one entry), and when it was last refilled.
  double budget = 0;
  uint64_t budget_at_ms = 0;
  uint64_t snapshots = 0;
  uint64_t demotions = 0;

  /// Waits with a deadline (demotion, relief): what to do when it fires.
  std::unordered_map<uint64_t, std::function<void()>> waits;
  uint64_t next_wait = 1;
  /// Whether the service has an object cache (`ram-tier.objects`).
  bool objects = true;
  /// An object restore from SSD in flight: who waits for it, and whether
  /// a put of the key made its result stale (then never installed).
  struct object_read {
    bool stale = false;
    std::vector<caf::typed_response_promise<sealed<msg::GetObjectReply>>>
      waiters;
  };
  /// By object key.
  std::unordered_map<std::string, object_read> object_reads;
};

using ram_tier_pointer = ram_tier_actor::stateful_pointer<ram_tier_state>;

/// The behaviour: a RAM tier spilling to `ssd` (may be null).
ram_tier_actor::behavior_type
ram_tier(ram_tier_pointer self, ram_tier_config cfg, store_actor ssd,
         std::shared_ptr<put_observer_slot> observer);

} // namespace kvtier::actors
