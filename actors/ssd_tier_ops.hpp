// Internal to the SSD tier actor's sources (actors/ssd_tier_*.cpp): the
// flush protocol (one run that every flush joins, rounds that wait for
// failed writes' retries, one answer naming each distinct failure),
// called from the handlers in ssd_tier_actor.cpp on the actor's thread.
#pragma once

#include "actors/ssd_tier_actor.hpp"

namespace kvtier::actors::ssd_ops {

inline tiers::ssd::ssd_tier& tier(ssd_tier_pointer self) {
  return *self->state.parts->tier;
}

/// Counts a failed write `id` in the flush run `run` (its error's text
/// names a group in the answer).
void note_failure(ssd_tier_state::flush_run& run, uint64_t id,
                  const caf::error& err);

/// One round of the running flush (`flush_round_atom` and `flush`).
void flush_round(ssd_tier_pointer self);

/// Starts a flush run, or joins the one running.
caf::result<sealed<msg::FlushStateReply>> flush(ssd_tier_pointer self);

} // namespace kvtier::actors::ssd_ops
