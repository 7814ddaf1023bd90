// XXH3-64 compiled for AVX2 (about twice the SSE2 speed of the shared
// library on this machine), called by block_hash.cpp only when the CPU
// says it has AVX2. Nothing else in this file: every function after the
// pragma may use AVX2 instructions (clang ignores GCC's target pragma:
// its own attribute pragma does the same there).
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))),                  \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
#include <immintrin.h>
#define XXH_INLINE_ALL
#define XXH_VECTOR 2 // XXH_AVX2
#include <xxhash.h>

namespace kvtier::detail {

uint64_t xxh3_avx2(const void* data, size_t n) noexcept {
  return XXH3_64bits(data, n);
}

} // namespace kvtier::detail
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
