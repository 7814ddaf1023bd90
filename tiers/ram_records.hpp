// The RAM tier's per-item records (tiers/ram_tier.hpp), kept compact: the
// tier's memory per stored token is mostly this plus the index
// (docs/ram-tier.md "Memory per stored token"), so a record is 24 bytes
// (its body, its place in the index, its two list links) and a byte of
// flags, and everything else lives where it costs nothing per item:
// - a prefix entry's serial sits beside its record id in the handle the
//   index keeps in the entry's node (`ram_handle`), and its time of last
//   use is the index's recency stamp (the tier stamps with its clock);
// - the rarely-used fields (leases, pins, the length of a longer SSD file
//   behind it, an object's key, tensors, serial and time of last use) are
//   *extras* in a side table, present only for the items that have some
//   (`ram_flags::has_extras`).
//
// Records live in a slab of fixed-size chunks, named by 32-bit ids (what
// the index's handle names): a chunk never moves, so a record's address
// is stable while it lives; an erased record's id is reused by a later
// `make`, which hands out a fresh record (the tier gives each stored item
// a new serial, so a reused id never stands for the old item). The LRU and
// leaving lists are intrusive: each record links to its neighbours by id,
// a list is a head, a tail and a size.
//
// Owned by one ram_tier; not thread-safe; no I/O.
#pragma once

#include "messages/assert.hpp"
#include "tiers/entry_ranking.hpp"
#include "tiers/prefix_tree.hpp"
#include "tiers/ram_types.hpp"
#include "tiers/state.hpp"
#include "tiers/stored_state.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

/// The rarely-used part of a record (absent for most items).
struct ram_record_extras {
  std::vector<uint64_t> leases; // interests holding it
  std::vector<uint64_t> pins;   // protections (empty: unprotected)
  /// Its priority (0..100) when not the default.
  uint8_t priority = default_priority;
  /// An engine's pin: held until `pin_until` (the tier's clock), each hit
  /// pushing that to now + `pin_ms`; `pinned_bytes` what it counts
  /// against the pin budget. pin_ms 0: none.
  uint64_t pin_ms = 0;
  uint64_t pin_until = 0;
  uint64_t pinned_bytes = 0;
  /// Tokens of the SSD file behind a durable entry when that file is
  /// longer (0: a file of its own length).
  uint32_t file_tokens = 0;
  // An object's (an object is not in the index):
  std::string object_key;
  std::vector<attachment> object;
  uint64_t serial = 0;
  uint64_t last_used = 0;

  /// Whether an entry's extras hold nothing (they may go).
  bool empty() const noexcept {
    return leases.empty() && pins.empty() && file_tokens == 0
           && priority == default_priority && pin_ms == 0;
  }
};

/// One item of the RAM tier.
struct ram_record {
  using id = uint32_t;
  static constexpr id none = UINT32_MAX;

  /// A prefix entry's body (null for an object), shared with lent hits:
  /// its state without tokens, whose only copy is the index's path to
  /// `ref`.
  stored_state state;
  /// Its entry in the index (null for an object, and for an entry whose
  /// key a newer put took over).
  entry_ref ref{};
  id prev = none; // on the LRU or the leaving list
  id next = none;
};

/// A record's flags, a byte beside it in the slab.
struct ram_flags {
  bool is_object : 1 = false;
  bool durable : 1 = false;
  bool writing : 1 = false;        // the owner has a write of it out
  bool leaving : 1 = false;        // on the leaving list: write pending
  bool announced_gone : 1 = false; // its leaving was reported
  bool has_extras : 1 = false;
  /// How it will be reported when it leaves the index (a ram_change_kind).
  uint8_t gone_as : 2 = static_cast<uint8_t>(ram_change_kind::evicted);
};
static_assert(sizeof(ram_flags) == 1);

/// What the index keeps for a prefix entry, in its node.
struct ram_handle {
  ram_record::id record = ram_record::none;
  /// The item's serial (see `put_result::serial`): never 0.
  uint32_t serial = 0;
};

/// An intrusive list of records (see `ram_records`).
struct ram_record_list {
  ram_record::id head = ram_record::none;
  ram_record::id tail = ram_record::none;
  size_t size = 0;

  bool empty() const noexcept {
    return size == 0;
  }
};

/// The slab of records.
class ram_records {
public:
  using id = ram_record::id;

  /// A fresh record (default fields and flags, no extras, on no list),
  /// reusing a freed id.
  id make();

  /// Frees `r` (taken off its list first): its state and extras go now.
  void free(id r);

  ram_record& operator[](id r) noexcept {
    return chunks_[r / chunk_size]->records[r % chunk_size];
  }
  const ram_record& operator[](id r) const noexcept {
    return chunks_[r / chunk_size]->records[r % chunk_size];
  }
  ram_flags& flags(id r) noexcept {
    return chunks_[r / chunk_size]->flags[r % chunk_size];
  }
  const ram_flags& flags(id r) const noexcept {
    return chunks_[r / chunk_size]->flags[r % chunk_size];
  }

  /// `r`'s extras, made on first use.
  ram_record_extras& extras(id r);
  /// `r`'s extras, or null when it has none.
  const ram_record_extras* find_extras(id r) const noexcept;
  ram_record_extras* find_extras(id r) noexcept;
  /// Drops `r`'s extras once they hold nothing (an object keeps them).
  void shrink(id r) noexcept;

  /// Appends `r` (on no list) to the back of `l`.
  void link_back(ram_record_list& l, id r) noexcept;
  /// Takes `r` off `l`, which holds it.
  void unlink(ram_record_list& l, id r) noexcept;

  /// Records alive.
  size_t live() const noexcept {
    return live_;
  }

  /// Frees everything.
  void clear() noexcept;

  /// Heap bytes of the slab itself (chunks and the free list; extras not
  /// counted).
  uint64_t memory_bytes() const noexcept {
    return chunks_.size() * sizeof(chunk) + chunks_.capacity() * sizeof(void*)
           + free_.capacity() * sizeof(id);
  }

private:
  static constexpr id chunk_size = 1024;
  struct chunk {
    std::array<ram_record, chunk_size> records;
    std::array<ram_flags, chunk_size> flags;
  };
  std::vector<std::unique_ptr<chunk>> chunks_;
  std::vector<id> free_;
  std::unordered_map<id, ram_record_extras> extras_;
  id made_ = 0; // ids handed out at least once: [0, made_)
  size_t live_ = 0;
};

} // namespace kvtier::tiers
