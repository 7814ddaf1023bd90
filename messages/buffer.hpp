// Immutable, reference-counted byte buffers and zero-copy views of them: the
// way tensor bytes travel beside messages in-process (never across a node:
// there they become Cap'n Proto `Data`).
//
// A buffer is written exactly once, through a `buffer_builder` that owns it
// alone; `freeze()` turns it into a shared, immutable `buffer_ref`. A `view`
// holds a `buffer_ref`, so any view keeps its bytes alive after whoever made
// the buffer (a donor entry, a message, a file read) is gone. Buffers are
// thread-safe to share (the count is atomic; the bytes never change). The one
// thing that changes is a cache of values derived from the bytes: the hashes
// of its blocks a bulk lane computed (block_hash.hpp), true for as long as
// the buffer lives because the bytes never change.
//
// Every buffer counts itself in process-wide live counters, so tests can show
// that no path leaks one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace kvtier {

struct block_hash_cache; // messages/block_hash.hpp

/// Immutable bytes. Created by `buffer_builder` or `buffer::adopt`.
class buffer {
public:
  /// Allocation alignment of builder buffers: enough for O_DIRECT I/O.
  static constexpr size_t default_alignment = 4096;

  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer();

  /// Wraps memory owned elsewhere; `release` runs when the last ref drops.
  static std::shared_ptr<const buffer> adopt(const std::byte* data, size_t size,
                                             std::function<void()> release);

  /// Copies `bytes` into a new buffer (for tests and small metadata).
  static std::shared_ptr<const buffer>
  copy_of(std::span<const std::byte> bytes);

  const std::byte* data() const noexcept {
    return data_;
  }

  size_t size() const noexcept {
    return size_;
  }

  std::span<const std::byte> bytes() const noexcept {
    return {data_, size_};
  }

  /// Process-unique identity (never reused), for counting shared bytes once.
  uint64_t id() const noexcept {
    return id_;
  }

  /// The hashes of this buffer's blocks known so far (block_hash.hpp;
  /// true as long as the buffer lives: its bytes never change). Made on
  /// first use; thread-safe.
  block_hash_cache& block_hashes() const;

  /// Buffers alive in this process right now, and their bytes.
  static uint64_t live_count() noexcept;
  static uint64_t live_bytes() noexcept;

private:
  friend class buffer_builder;
  buffer(std::byte* data, size_t size, std::function<void()> release);

  std::byte* data_;
  size_t size_;
  uint64_t id_;
  std::function<void()> release_;
  mutable std::atomic<block_hash_cache*> hashes_{nullptr};
};

using buffer_ref = std::shared_ptr<const buffer>;

/// What `allocate_populated` must hand out: zeroed memory (a Cap'n Proto
/// builder's segment), or any memory the caller overwrites whole (a lane
/// read, a chunk collector, an SSD read), which may be a released mapping
/// taken back from the pool as it is.
enum class populated_fill { zeroed, any };

/// Page-aligned memory of at least `size` bytes, every page populated up
/// front (huge pages where the kernel grants them), for large buffers
/// written whole at once: one call instead of a page fault per 4 KiB.
/// Zeroed by the kernel, or for `populated_fill::any` possibly a mapping
/// `release_populated` kept (its old bytes still in it), which spares the
/// kernel zeroing it again: on this machine clearing fresh pages cost about
/// as much as moving the same bytes through a loopback socket. nullptr
/// when the mapping fails (the caller allocates as usual).
///
/// `when == populate_when::later` maps the memory but leaves populating it
/// to the caller (`prefault`) or to the first touch: a reader that fills a
/// large buffer op by op populates the next op's pages while the current
/// one is on the disk, instead of clearing the whole buffer before the
/// first byte is read.
enum class populate_when { now, later };
std::byte* allocate_populated(size_t size, size_t& mapped,
                              populated_fill fill = populated_fill::zeroed,
                              populate_when when = populate_when::now);

/// Populates the whole pages inside `bytes` writable without touching them
/// (MADV_POPULATE_WRITE; the bytes stay as they are, so it may run while
/// another thread writes them). A no-op where the kernel lacks it.
void prefault(std::span<std::byte> bytes) noexcept;

/// Frees memory of `allocate_populated`: keeps it in the process's pool
/// (at most `populated_pool_max_bytes` in `populated_pool_max_count`
/// mappings, the oldest unmapped first) or unmaps it. Thread-safe.
void release_populated(std::byte* data, size_t mapped) noexcept;

/// Bytes of released mappings the pool keeps for reuse at most (resident
/// memory outside every tier's cap, docs/architecture.md "Memory").
inline constexpr size_t populated_pool_max_bytes = size_t{512} << 20;
inline constexpr size_t populated_pool_max_count = 64;

/// What the pool did since the process started.
struct populated_pool_stats {
  uint64_t reused = 0;   // allocations served from the pool
  uint64_t kept = 0;     // releases the pool kept
  uint64_t unmapped = 0; // releases (or kept mappings) given back
  size_t bytes = 0;      // mapped bytes the pool holds now
  size_t count = 0;      // mappings it holds now
};
populated_pool_stats populated_pool_now();

/// Buffers at least this large come from `allocate_populated`.
inline constexpr size_t populated_threshold = size_t{2} << 20;

/// Sole owner of a buffer while it is being written.
class buffer_builder {
public:
  /// Allocates `size` uninitialized bytes aligned to `alignment` (a large
  /// one may hold the old bytes of a released buffer: write them all).
  /// `when` as for `allocate_populated` (large buffers only; a small one
  /// is ordinary heap memory).
  explicit buffer_builder(size_t size,
                          size_t alignment = buffer::default_alignment,
                          populate_when when = populate_when::now);

  std::byte* data() noexcept {
    return buf_->data_;
  }

  size_t size() const noexcept {
    return buf_->size_;
  }

  std::span<std::byte> bytes() noexcept {
    return {buf_->data_, buf_->size_};
  }

  /// Ends writing; the builder is empty afterwards.
  buffer_ref freeze() &&;

private:
  std::unique_ptr<buffer> buf_;
};

/// A zero-copy window [offset, offset + length) of a buffer.
struct view {
  buffer_ref buf;
  uint64_t offset = 0;
  uint64_t length = 0;

  /// The whole of `b`.
  static view of(buffer_ref b) {
    auto n = b ? b->size() : 0;
    return view{std::move(b), 0, n};
  }

  std::span<const std::byte> bytes() const noexcept {
    return {buf->data() + offset, length};
  }

  /// A narrower view of the same bytes (clamped to this view).
  view sub(uint64_t off, uint64_t len) const;
};

/// Concatenated length of `segments`.
uint64_t total_length(const std::vector<view>& segments) noexcept;

/// Copies the concatenation of `segments` (tests and checksums only).
std::vector<std::byte> flatten(const std::vector<view>& segments);

} // namespace kvtier
