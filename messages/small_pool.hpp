// small_pool: a process-wide allocator for many small blocks of known size
// (the RAM tier's stored bodies, tiers/stored_state.hpp), in size classes
// of 8 bytes up to `small_pool_max` bytes, carved from 64 KiB slabs with no
// header per block. The C library's allocator spends 8 bytes of header on
// every block and rounds it to 16: on a 40-byte body that is a fifth of
// it. No allocator at hand does better at this size: GCC 12's
// `std::pmr::synchronized_pool_resource`, Debian's mimalloc 2.0.9 and
// jemalloc 5.3 all place 40-byte blocks 48 bytes apart (measured here).
// Larger requests go to `::operator new`.
//
// Thread-safe: a block may be freed on any thread (the last holder of a
// lent body frees it), one lock per size class. Freed blocks are kept for
// reuse within their class, never given back to the system: the pool's
// footprint is the peak of the blocks alive in each class. The caller
// passes the block's size to `small_free`, as to a sized delete.
//
// Built with AddressSanitizer, every request goes to `::operator new`, so
// each block is checked as any heap block is.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier {

/// The largest request served from the pool (larger ones are ordinary
/// heap blocks).
inline constexpr size_t small_pool_max = 512;

/// `bytes` bytes aligned to 8 (throws std::bad_alloc when memory runs out).
void* small_allocate(size_t bytes);

/// Frees a block of `small_allocate(bytes)`.
void small_free(void* p, size_t bytes) noexcept;

/// What the pool holds now.
struct small_pool_stats {
  uint64_t blocks = 0;     // blocks handed out and not freed
  uint64_t slab_bytes = 0; // bytes of the slabs carved so far
};
small_pool_stats small_pool_now() noexcept;

/// False in a build with AddressSanitizer (every block is a heap block and
/// `small_pool_now` counts none).
bool small_pool_enabled() noexcept;

} // namespace kvtier
