#include "messages/small_pool.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <new>
#include <vector>

namespace kvtier {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool pooled = false; // ASan checks every block on its own
#else
constexpr bool pooled = true;
#endif

constexpr size_t grain = 8;
constexpr size_t slab_bytes = size_t{64} << 10;
constexpr size_t classes = small_pool_max / grain;

/// A freed block, linked through its own first word.
struct free_block {
  free_block* next;
};

struct size_class {
  std::mutex m;
  free_block* free = nullptr;
  std::byte* bump = nullptr; // the rest of the newest slab
  std::byte* end = nullptr;
  uint64_t blocks = 0;
  std::vector<void*> slabs; // every slab, so each stays reachable
};

struct pool {
  std::array<size_class, classes> by_size;
};

pool& the_pool() {
  // Never destroyed: a body may outlive every static (freed at exit).
  static auto* p = new pool;
  return *p;
}

size_t class_of(size_t bytes) noexcept {
  return (bytes + grain - 1) / grain - 1;
}

} // namespace

void* small_allocate(size_t bytes) {
  if (!pooled || bytes == 0 || bytes > small_pool_max)
    return ::operator new(bytes);
  auto& c = the_pool().by_size[class_of(bytes)];
  auto size = (class_of(bytes) + 1) * grain;
  std::lock_guard<std::mutex> guard(c.m);
  if (auto* f = c.free) {
    c.free = f->next;
    ++c.blocks;
    return f;
  }
  if (c.bump == nullptr || c.end - c.bump < static_cast<ptrdiff_t>(size)) {
    // Either may throw; nothing has changed yet. The list of slabs grows
    // geometrically (reserving one more each time copied it per slab).
    if (c.slabs.size() == c.slabs.capacity())
      c.slabs.reserve(std::max<size_t>(16, 2 * c.slabs.capacity()));
    auto* slab = static_cast<std::byte*>(::operator new(slab_bytes));
    c.slabs.push_back(slab);
    c.bump = slab;
    c.end = slab + slab_bytes;
  }
  auto* out = c.bump;
  c.bump += size;
  ++c.blocks;
  return out;
}

void small_free(void* p, size_t bytes) noexcept {
  if (p == nullptr)
    return;
  if (!pooled || bytes == 0 || bytes > small_pool_max) {
    ::operator delete(p);
    return;
  }
  auto& c = the_pool().by_size[class_of(bytes)];
  std::lock_guard<std::mutex> guard(c.m);
  KVTIER_ASSERT(c.blocks > 0);
  --c.blocks;
  c.free = new (p) free_block{c.free};
}

bool small_pool_enabled() noexcept {
  return pooled;
}

small_pool_stats small_pool_now() noexcept {
  small_pool_stats out;
  for (auto& c : the_pool().by_size) {
    std::lock_guard<std::mutex> guard(c.m);
    out.blocks += c.blocks;
    out.slab_bytes += c.slabs.size() * slab_bytes;
  }
  return out;
}

} // namespace kvtier
