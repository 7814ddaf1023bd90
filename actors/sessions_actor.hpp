// The sessions actor: sole owner of `tiers::sessions`, the table of open
// sessions and their newest entries (docs/actors.md
// "Sessions"). It never touches RAM state itself: the protection is a pin
// on the RAM tier's entry, set by the put that published it (the facade
// asks RAM for it), and this actor takes pins back with UnprotectEntry.
//
// Order of events. The facade sends SessionPutEvent once RAM kept and
// pinned a session's entry, before it answers the engine, so a later
// CloseSession from the same facade arrives after it. A newer put's event
// unprotects the previous newest entry asynchronously: until RAM has the
// order, that entry is merely protected a little longer. CloseSession
// replies only after RAM took the pin back, so once close_session returns
// the entry is evictable like any other. A pin whose entry left RAM
// (evicted, superseded) is gone with it; taking it back is a no-op.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/sessions.hpp"

#include <chrono>

namespace kvtier::actors {

struct sessions_state {
  static inline const char* name = "sessions";

  tiers::sessions table;
  /// Where the pins are; null only in tests that need no RAM tier.
  ram_tier_actor ram;
  /// How long RAM may take to answer an unpin (the storage deadline).
  std::chrono::milliseconds deadline{10000};
};

using sessions_pointer = sessions_actor::stateful_pointer<sessions_state>;

/// The behaviour, taking pins back from `ram`.
sessions_actor::behavior_type
sessions(sessions_pointer self, ram_tier_actor ram, uint64_t deadline_ms);

} // namespace kvtier::actors
