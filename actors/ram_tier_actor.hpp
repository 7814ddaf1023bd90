// The RAM tier actor: sole owner of a `tiers::ram_tier` (DESIGN.md section
// 3). It lends views, stores published and restored state, and turns every
// entry that leaves RAM needing a write into a SpillEntry order to the SSD
// actor, whose reply (durable or not) it records with `mark_durable`. It
// never waits on storage: demotion and pressure relief finish through
// replies, with a response promise to the facade.
//
// Protection is by pin only: a PublishState with `protect` set pins the new
// entry in the same step as the put (the facade sets it for a publish
// naming a session) and replies with the pin; the sessions actor takes
// pins back with UnprotectEntry. The RAM actor knows no sessions.
//
// Durable marks rest on the SSD actor's own word to this actor: a spill
// reply (durable, alreadyDurable), or, for an entry installed as restored
// from SSD, a FindPrefix this actor asks before it answers the install (a
// file still serves the whole entry; index only, no I/O). The SSD actor
// sends an SsdEvictEvent for every file it stops holding after any such
// word about that file, over the same FIFO, so `mark_not_durable` always
// comes after the mark it clears: no entry stays marked durable once its
// file is gone, and a boundary or a demotion never drops it as "on SSD".
//
// Policy beyond the tier's own: without an SSD actor, spill orders are
// dropped (there is nowhere to write) and idle demotion does nothing.
// Objects (actors/ram_tier_objects.hpp) are spilled when evicted and
// snapshotted at a flush like entries, found again on SSD by exact key,
// and never resurrected once replaced; built with `objects` false the
// actor refuses every object message (`ec::unsupported`). After
// CloseService (which clears
// everything without spilling) nothing is stored any more: a publish or an
// install that arrives late (a restore still running at close) is answered
// droppedClosed, an object put is not kept, so a closed service holds no
// buffer.
#pragma once

#include "actors/interfaces.hpp"
#include "actors/put_observer.hpp"
#include "tiers/ram_tier.hpp"

#include <caf/typed_response_promise.hpp>

#include <memory>
#include <unordered_map>

namespace kvtier::actors {

struct ram_tier_state {
  static inline const char* name = "ram-tier";

  std::unique_ptr<tiers::ram_tier> tier;
  /// The cold tier; null when there is none.
  ssd_tier_actor ssd;
  std::shared_ptr<put_observer_slot> observer;
  uint64_t next_order = 1;
  /// After CloseService: nothing is stored any more.
  bool closed = false;
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

/// The behaviour: a RAM tier of `cap_bytes` spilling to `ssd` (may be
/// null), with an object cache when `objects` is set.
ram_tier_actor::behavior_type
ram_tier(ram_tier_pointer self, uint64_t cap_bytes, ssd_tier_actor ssd,
         std::shared_ptr<put_observer_slot> observer, bool objects = true);

} // namespace kvtier::actors
