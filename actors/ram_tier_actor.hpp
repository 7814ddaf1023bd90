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
// Objects are never written to SSD (the entry file format stores prefix
// entries): an evicted object is dropped. After CloseService (which clears
// everything without spilling) nothing is stored any more: a publish or an
// install that arrives late (a restore still running at close) is answered
// droppedClosed, an object put is not kept, so a closed service holds no
// buffer.
#pragma once

#include "actors/interfaces.hpp"
#include "actors/put_observer.hpp"
#include "tiers/ram_tier.hpp"

#include <memory>

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
};

using ram_tier_pointer = ram_tier_actor::stateful_pointer<ram_tier_state>;

/// The behaviour: a RAM tier of `cap_bytes` spilling to `ssd` (may be null).
ram_tier_actor::behavior_type
ram_tier(ram_tier_pointer self, uint64_t cap_bytes, ssd_tier_actor ssd,
         std::shared_ptr<put_observer_slot> observer);

} // namespace kvtier::actors
