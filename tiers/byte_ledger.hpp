// byte_ledger: counts the bytes a tier really holds when entries share
// buffers. Each buffer (by its process-unique id) is counted once, however
// many entries hold views of it; it stops counting when its last holder in
// the tier lets go. An extension that reuses a donor's segments therefore
// costs only its new buffers, and evicting the donor while the extension
// lives frees only the buffers nobody else in the tier holds.
//
// Owned by one tier; not thread-safe; no I/O. A buffer counts with its
// whole size (a view keeps the whole buffer alive, so that is what is held).
#pragma once

#include "messages/buffer.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

class byte_ledger {
public:
  /// Bytes `hold(bufs)` would add now: buffers not held yet.
  uint64_t cost(const std::vector<buffer_ref>& bufs) const;

  /// One more holder for each buffer of `bufs` (distinct ids expected);
  /// returns the bytes newly counted.
  uint64_t hold(const std::vector<buffer_ref>& bufs);

  /// One holder fewer for each buffer id; returns the bytes no longer held
  /// (and, when `gone` is given, appends the ids no longer held). Ids must
  /// have been held.
  uint64_t release(const std::vector<uint64_t>& ids,
                   std::vector<uint64_t>* gone = nullptr);

  /// Holders of buffer `id` (0: not held).
  uint64_t holders(uint64_t id) const;

  /// Bytes held (each buffer once).
  uint64_t bytes() const noexcept {
    return bytes_;
  }

  /// Distinct buffers held.
  size_t buffers() const noexcept {
    return slots_.size();
  }

  void clear() noexcept {
    slots_.clear();
    bytes_ = 0;
  }

private:
  struct slot {
    uint64_t holders = 0;
    uint64_t size = 0;
  };
  std::unordered_map<uint64_t, slot> slots_;
  uint64_t bytes_ = 0;
};

/// Total size of `bufs` (distinct buffers, as `collect_buffers` gives them).
uint64_t distinct_bytes(const std::vector<buffer_ref>& bufs) noexcept;

} // namespace kvtier::tiers
