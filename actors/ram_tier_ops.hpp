// Internal to the RAM tier actor's sources (actors/ram_tier_*.cpp): the
// write side (orders to the SSD actor and their outcomes, write-behind,
// demotion, pressure relief, boundary, flush snapshots), called from the
// handlers in ram_tier_actor.cpp on the actor's thread.
#pragma once

#include "actors/ram_tier_actor.hpp"

namespace kvtier::actors::ram_ops {

inline tiers::ram_tier& tier(ram_tier_pointer self) {
  return *self->state.tier;
}

uint64_t now(ram_tier_pointer self);

/// Orders the writes eviction asked for (`needs_spill` leaving items) and
/// drops the rest of `orders` (durable copies, objects, no cold tier).
void spill(ram_tier_pointer self, std::vector<tiers::spill_order> orders);

/// A kept publish: its write-behind snapshot is due after the delay.
void schedule_snapshot(ram_tier_pointer self, const tiers::ram_key& key,
                       uint64_t serial);

/// The write-behind timer fired.
void write_behind_tick(ram_tier_pointer self);

/// One outcome of a write this actor ordered.
void settled(ram_tier_pointer self, msg::SpillSettled::Reader m);

/// A wait reached its deadline.
void wait_fired(ram_tier_pointer self, uint64_t id);

caf::result<sealed<msg::DemoteIdleReply>> demote(ram_tier_pointer self,
                                                 uint64_t idle_ms);

caf::result<sealed<msg::RelievePressureReply>>
relieve(ram_tier_pointer self, uint64_t target, uint64_t deadline_ms);

sealed<msg::ReclaimAtBoundaryReply> reclaim(ram_tier_pointer self,
                                            uint64_t target);

/// Orders a snapshot of every resident entry not durable and without a
/// write out; replies once every one is sent (held orders go as room
/// under the write-behind cap frees; the facade's SSD flush follows
/// them), or at its bound with how many are still held (`pending`).
caf::result<sealed<msg::FlushStateReply>> snapshot(ram_tier_pointer self);

/// This actor's part of `stats()`.
sealed<msg::ReadStatsReply> stats(ram_tier_pointer self);

/// Forgets waiting snapshots (close).
void clear_writes(ram_tier_pointer self);

} // namespace kvtier::actors::ram_ops
