#include "messages/buffer.hpp"

#include "messages/assert.hpp"
#include "messages/block_hash.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace kvtier {

namespace {

std::atomic<uint64_t> next_id{1};
std::atomic<uint64_t> live_count_{0};
std::atomic<uint64_t> live_bytes_{0};

} // namespace

buffer::buffer(std::byte* data, size_t size, std::function<void()> release)
  : data_(data)
  , size_(size)
  , id_(next_id.fetch_add(1, std::memory_order_relaxed))
  , release_(std::move(release)) {
  live_count_.fetch_add(1, std::memory_order_relaxed);
  live_bytes_.fetch_add(size, std::memory_order_relaxed);
}

buffer::~buffer() {
  live_count_.fetch_sub(1, std::memory_order_relaxed);
  live_bytes_.fetch_sub(size_, std::memory_order_relaxed);
  delete hashes_.load(std::memory_order_acquire);
  if (release_)
    release_();
}

block_hash_cache& buffer::block_hashes() const {
  auto* c = hashes_.load(std::memory_order_acquire);
  if (c)
    return *c;
  auto* made = new block_hash_cache;
  if (hashes_.compare_exchange_strong(c, made, std::memory_order_acq_rel))
    return *made;
  delete made; // another thread made it first: `c` is theirs
  return *c;
}

buffer_ref buffer::adopt(const std::byte* data, size_t size,
                         std::function<void()> release) {
  return buffer_ref{
    new buffer(const_cast<std::byte*>(data), size, std::move(release))};
}

buffer_ref buffer::copy_of(std::span<const std::byte> bytes) {
  buffer_builder b(bytes.size(), alignof(std::max_align_t));
  if (!bytes.empty())
    std::memcpy(b.data(), bytes.data(), bytes.size());
  return std::move(b).freeze();
}

uint64_t buffer::live_count() noexcept {
  return live_count_.load(std::memory_order_relaxed);
}

uint64_t buffer::live_bytes() noexcept {
  return live_bytes_.load(std::memory_order_relaxed);
}

namespace {

/// Released mappings kept for reuse, oldest first.
struct populated_pool {
  struct kept {
    std::byte* data;
    size_t mapped;
  };
  std::mutex mtx;
  std::deque<kept> free;
  size_t bytes = 0;
  populated_pool_stats stats;

  static populated_pool& get() {
    static populated_pool p;
    return p;
  }

  /// The smallest kept mapping of at least `size` bytes that wastes at
  /// most about as much again, taken out of the pool; nullptr: none.
  std::byte* take(size_t size, size_t& mapped) {
    std::lock_guard<std::mutex> guard{mtx};
    auto best = free.end();
    for (auto i = free.begin(); i != free.end(); ++i)
      if (i->mapped >= size && i->mapped <= 2 * size + (size_t{4} << 20)
          && (best == free.end() || i->mapped < best->mapped))
        best = i;
    if (best == free.end())
      return nullptr;
    auto* data = best->data;
    mapped = best->mapped;
    bytes -= mapped;
    free.erase(best);
    ++stats.reused;
    return data;
  }
};

} // namespace

std::byte* allocate_populated(size_t size, size_t& mapped, populated_fill fill,
                              populate_when when) {
  auto populate =
    when == populate_when::now ? (size + 4095) / 4096 * 4096 : size_t{0};
  if (fill == populated_fill::any)
    if (auto* data = populated_pool::get().take(size, mapped)) {
      // Pages the last user left unpopulated (it needed fewer) now.
      if (populate > 0)
        ::madvise(data, populate, MADV_POPULATE_WRITE);
      return data;
    }
  constexpr size_t huge = size_t{2} << 20;
  // One huge page more, so the start can be aligned to one.
  mapped = (size + huge - 1) / huge * huge + huge;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
  auto base = reinterpret_cast<uintptr_t>(p);
  auto aligned = (base + huge - 1) / huge * huge;
  // The unaligned head goes back at once; the tail stays mapped (unused
  // pages of it are never touched, so they cost nothing).
  if (aligned > base)
    ::munmap(p, aligned - base);
  mapped -= aligned - base;
  auto* data = reinterpret_cast<std::byte*>(aligned);
  ::madvise(data, mapped, MADV_HUGEPAGE);
  if (populate > 0)
    ::madvise(data, populate, MADV_POPULATE_WRITE);
  return data;
}

void prefault(std::span<std::byte> bytes) noexcept {
  constexpr uintptr_t page = 4096;
  auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  auto end = begin + bytes.size();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

void release_populated(std::byte* data, size_t mapped) noexcept {
  auto& pool = populated_pool::get();
  std::vector<populated_pool::kept> gone;
  {
    std::lock_guard<std::mutex> guard{pool.mtx};
    if (mapped > populated_pool_max_bytes) {
      gone.push_back({data, mapped});
    } else {
      while (!pool.free.empty()
             && (pool.bytes + mapped > populated_pool_max_bytes
                 || pool.free.size() >= populated_pool_max_count)) {
        gone.push_back(pool.free.front());
        pool.bytes -= pool.free.front().mapped;
        pool.free.pop_front();
      }
      pool.free.push_back({data, mapped});
      pool.bytes += mapped;
      ++pool.stats.kept;
    }
    pool.stats.unmapped += gone.size();
  }
  for (auto& k : gone)
    ::munmap(k.data, k.mapped);
}

populated_pool_stats populated_pool_now() {
  auto& pool = populated_pool::get();
  std::lock_guard<std::mutex> guard{pool.mtx};
  auto s = pool.stats;
  s.bytes = pool.bytes;
  s.count = pool.free.size();
  return s;
}

buffer_builder::buffer_builder(size_t size, size_t alignment,
                               populate_when when) {
  KVTIER_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0);
  // Round the allocation up so O_DIRECT reads may fill whole blocks.
  auto padded =
    (std::max<size_t>(size, 1) + alignment - 1) / alignment * alignment;
  if (padded >= populated_threshold && alignment <= 4096) {
    size_t mapped = 0;
    if (auto* mem =
          allocate_populated(padded, mapped, populated_fill::any, when)) {
      buf_.reset(new buffer(mem, size,
                            [mem, mapped] { release_populated(mem, mapped); }));
      return;
    }
  }
  auto al = std::align_val_t{alignment};
  auto* mem = static_cast<std::byte*>(::operator new(padded, al));
  buf_.reset(new buffer(mem, size, [mem, al] { ::operator delete(mem, al); }));
}

buffer_ref buffer_builder::freeze() && {
  KVTIER_ASSERT(buf_ != nullptr);
  return buffer_ref{buf_.release()};
}

view view::sub(uint64_t off, uint64_t len) const {
  off = std::min(off, length);
  len = std::min(len, length - off);
  return view{buf, offset + off, len};
}

uint64_t total_length(const std::vector<view>& segments) noexcept {
  uint64_t n = 0;
  for (auto& s : segments)
    n += s.length;
  return n;
}

std::vector<std::byte> flatten(const std::vector<view>& segments) {
  std::vector<std::byte> out;
  out.reserve(total_length(segments));
  for (auto& s : segments) {
    auto b = s.bytes();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

} // namespace kvtier
