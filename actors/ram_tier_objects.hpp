// Internal to the RAM tier actor (ram_tier_actor.cpp and
// ram_tier_objects.cpp): its object cache's handlers, and the spill path
// both share. Not an interface: only the RAM actor's own sources include
// it, and every function runs inside that actor.
//
// Objects (exact tensor objects, e.g. encoder outputs) live in the RAM
// tier's LRU under its cap like prefix entries. With an SSD actor an
// evicted object is spilled (a SpillEntry carrying the object, written as
// an object file: docs/ssd-format.md "Object files"), a flush snapshots
// every object not yet durable, and `GetObject` of an object RAM does not
// hold asks the SSD actor for it by exact key (RestoreEntry, object key;
// identical gets in flight share one read), installs it into RAM (durable
// when the reply says its file is) and answers. A put of a key first tells
// the SSD actor to erase every older copy of it (EraseEntry), so a
// replaced object never comes back; a restore still running when the key
// is put again (or the tier closes) is discarded, never installed.
#pragma once

#include "actors/ram_tier_actor.hpp"

namespace kvtier::actors {

/// Sends the orders that left RAM needing a write to the SSD actor (prefix
/// entries and objects); drops the rest, or everything without an SSD.
void spill_orders(ram_tier_pointer self,
                  std::vector<tiers::spill_order> orders);

namespace ram_objects {

/// PutObject: stores the object (refused `unsupported` with objects off;
/// not kept after close); erases older copies on SSD first.
caf::result<sealed<msg::PutObjectReply>> put(ram_tier_pointer self,
                                             const sealed<msg::PutObject>& m);

/// GetObject: RAM, else the SSD by exact key (restored, installed,
/// answered); missing when neither holds it.
caf::result<sealed<msg::GetObjectReply>> get(ram_tier_pointer self,
                                             const std::string& key);

/// Writes the evicted object `o` (needing a write) to SSD.
void spill(ram_tier_pointer self, tiers::spill_order& o);

/// Orders a snapshot write of every object not yet durable (a flush).
void snapshot(ram_tier_pointer self);

/// The SSD file of object `key` went: its durable mark is cleared.
void file_gone(ram_tier_pointer self, const std::string& key);

/// The tier closed: gets waiting for a restore fail `closed`; the late
/// results are discarded.
void close(ram_tier_pointer self);

} // namespace ram_objects

} // namespace kvtier::actors
