// The RAM tier's per-item records (tiers/ram_tier.hpp), kept compact: the
// tier's memory per stored token is mostly this plus the index
// (docs/ram-tier.md "Memory per stored token"), so a record holds only
// what most items need, and the rarely-used fields (leases, pins, an
// object's key and tensors) sit behind one pointer that is null for most
// items.
//
// Records live in a slab of fixed-size chunks, named by 32-bit ids (what
// the tier's prefix index maps a key to): a chunk never moves, so a
// record's address is stable while it lives; an erased record's id is
// reused by a later `make`, which hands out a fresh record (the tier
// gives each stored item a new serial, so a reused id never stands for
// the old item). The LRU and leaving lists are intrusive: each record
// links to its neighbours by id, a list is a head, a tail and a size.
//
// Owned by one ram_tier; not thread-safe; no I/O.
#pragma once

#include "messages/assert.hpp"
#include "tiers/prefix_tree.hpp"
#include "tiers/ram_types.hpp"
#include "tiers/state.hpp"
#include "tiers/stored_state.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// The rarely-used part of a record (null for most items).
struct ram_record_extras {
  std::vector<uint64_t> leases; // interests holding it
  std::vector<uint64_t> pins;   // protections (empty: unprotected)
  std::string object_key;       // an object's key
  std::vector<attachment> object;

  /// Whether nothing is held here (the record may drop it).
  bool empty() const noexcept {
    return leases.empty() && pins.empty() && object_key.empty()
           && object.empty();
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
  uint64_t last_used = 0;
  uint64_t serial = 0;
  entry_ref ref{};
  std::unique_ptr<ram_record_extras> more;
  id prev = none; // on the LRU or the leaving list
  id next = none;
  uint32_t file_tokens = 0; // of the SSD file behind `durable`
  bool is_object : 1 = false;
  bool durable : 1 = false;
  bool writing : 1 = false;        // the owner has a write of it out
  bool leaving : 1 = false;        // on the leaving list: write pending
  bool announced_gone : 1 = false; // its leaving was reported
  /// How it will be reported when it leaves the index.
  ram_change_kind gone_as = ram_change_kind::evicted;

  const std::vector<uint64_t>& leases() const noexcept {
    return more ? more->leases : no_ids();
  }
  const std::vector<uint64_t>& pins() const noexcept {
    return more ? more->pins : no_ids();
  }
  /// The extras, made on first use.
  ram_record_extras& extras() {
    if (!more)
      more = std::make_unique<ram_record_extras>();
    return *more;
  }
  /// Drops the extras once they hold nothing (an object keeps them).
  void shrink() noexcept {
    if (more && !is_object && more->empty())
      more.reset();
  }

private:
  static const std::vector<uint64_t>& no_ids() noexcept {
    static const std::vector<uint64_t> none_held;
    return none_held;
  }
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

  /// A fresh record (default fields, on no list), reusing a freed id.
  id make();

  /// Frees `r` (taken off its list first): its state and extras go now.
  void free(id r);

  ram_record& operator[](id r) noexcept {
    return (*chunks_[r / chunk_size])[r % chunk_size];
  }
  const ram_record& operator[](id r) const noexcept {
    return (*chunks_[r / chunk_size])[r % chunk_size];
  }

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

  /// Heap bytes of the slab itself (chunks and the free list).
  uint64_t memory_bytes() const noexcept {
    return chunks_.size() * sizeof(ram_record) * chunk_size
           + chunks_.capacity() * sizeof(chunks_[0])
           + free_.capacity() * sizeof(id);
  }

private:
  static constexpr id chunk_size = 1024;
  using chunk = std::array<ram_record, chunk_size>;
  std::vector<std::unique_ptr<chunk>> chunks_;
  std::vector<id> free_;
  id made_ = 0; // ids handed out at least once: [0, made_)
  size_t live_ = 0;
};

} // namespace kvtier::tiers
