// Immutable, reference-counted byte buffers and zero-copy views of them: the
// way tensor bytes travel beside messages in-process (never across a node:
// there they become Cap'n Proto `Data`).
//
// A buffer is written exactly once, through a `buffer_builder` that owns it
// alone; `freeze()` turns it into a shared, immutable `buffer_ref`. A `view`
// holds a `buffer_ref`, so any view keeps its bytes alive after whoever made
// the buffer (a donor entry, a message, a file read) is gone. Buffers are
// thread-safe to share (the count is atomic; the bytes never change).
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
};

using buffer_ref = std::shared_ptr<const buffer>;

/// Zeroed, page-aligned memory of at least `size` bytes, every page
/// populated up front (huge pages where the kernel grants them), for large
/// buffers written whole at once (a transfer's flat bytes, a lane read):
/// one call instead of a page fault per 4 KiB. nullptr when the mapping
/// fails (the caller allocates as usual); `release_populated` frees it.
std::byte* allocate_populated(size_t size, size_t& mapped);
void release_populated(std::byte* data, size_t mapped) noexcept;

/// Buffers at least this large come from `allocate_populated`.
inline constexpr size_t populated_threshold = size_t{2} << 20;

/// Sole owner of a buffer while it is being written.
class buffer_builder {
public:
  /// Allocates `size` uninitialized bytes aligned to `alignment`.
  explicit buffer_builder(size_t size,
                          size_t alignment = buffer::default_alignment);

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
