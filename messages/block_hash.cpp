#include "messages/block_hash.hpp"

#include "messages/assert.hpp"

// The streaming state as a plain struct (the same package gives header
// and library).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <atomic>

namespace kvtier {

namespace detail {
uint64_t xxh3_avx2(const void* data, size_t n) noexcept; // _avx2.cpp
} // namespace detail

namespace {

std::atomic<uint64_t> computed_{0};
std::atomic<uint64_t> reused_{0};

XXH3_state_t* state_of(void* p) {
  return static_cast<XXH3_state_t*>(p);
}

uint64_t xxh3_library(const void* data, size_t n) noexcept {
  return XXH3_64bits(data, n);
}

using hash_fn = uint64_t (*)(const void*, size_t) noexcept;

/// The library's XXH3 is built for SSE2; the same function built for AVX2
/// (block_hash_avx2.cpp) where the CPU has it. Both give the same hashes.
hash_fn pick() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2"))
    return detail::xxh3_avx2;
#endif
  return xxh3_library;
}

const hash_fn xxh3 = pick();

} // namespace

uint64_t block_hash(std::span<const std::byte> bytes) noexcept {
  return xxh3(bytes.data(), bytes.size());
}

block_hash_stats block_hashes_now() noexcept {
  return {computed_.load(std::memory_order_relaxed),
          reused_.load(std::memory_order_relaxed)};
}

std::vector<uint64_t> hashes_of(const view& v, uint64_t first, uint64_t count) {
  std::vector<uint64_t> out;
  auto blocks = blocks_of(v.length);
  if (!v.buf || first >= blocks)
    return out;
  auto end = count >= blocks - first ? blocks : first + count;
  auto whole = v.length / lane_block;
  out.reserve(end - first);
  block_hash_cache* cache =
    first < whole ? &v.buf->block_hashes() : nullptr; // any whole block?
  if (cache) {
    std::lock_guard<std::mutex> guard{cache->mtx};
    auto run = cache->runs.find(v.offset);
    // Whole blocks only: the run may be longer than `v` (`v` a prefix).
    auto cached = std::min<uint64_t>(
      std::min(end, whole), run == cache->runs.end() ? 0 : run->second.size());
    for (auto b = first; b < cached; ++b)
      out.push_back(run->second[b]);
  }
  auto known = first + out.size();
  reused_.fetch_add(out.size(), std::memory_order_relaxed);
  auto bytes = v.bytes();
  for (auto b = known; b < end; ++b) {
    auto at = b * lane_block;
    out.push_back(
      block_hash(bytes.subspan(at, std::min(lane_block, v.length - at))));
  }
  computed_.fetch_add(end - known, std::memory_order_relaxed);
  if (cache && known < std::min(end, whole)) {
    std::lock_guard<std::mutex> guard{cache->mtx};
    auto& run = cache->runs[v.offset];
    for (auto b = known; b < std::min(end, whole); ++b)
      if (run.size() == b)
        run.push_back(out[b - first]);
  }
  return out;
}

void remember_hashes(const buffer& buf, uint64_t offset,
                     std::vector<uint64_t> whole_blocks) {
  if (whole_blocks.empty())
    return;
  auto& cache = buf.block_hashes();
  std::lock_guard<std::mutex> guard{cache.mtx};
  auto& run = cache.runs[offset];
  if (run.size() < whole_blocks.size())
    run = std::move(whole_blocks);
}

lane_checksum::lane_checksum(std::span<const uint64_t> piece_lengths)
  : state_(XXH3_createState()) {
  KVTIER_ASSERT(state_ != nullptr);
  XXH3_64bits_reset(state_of(state_));
  uint64_t n = piece_lengths.size();
  XXH3_64bits_update(state_of(state_), &n, sizeof n);
  XXH3_64bits_update(state_of(state_), piece_lengths.data(),
                     piece_lengths.size_bytes());
}

lane_checksum::~lane_checksum() {
  XXH3_freeState(state_of(state_));
}

void lane_checksum::add(uint64_t block_hash) noexcept {
  XXH3_64bits_update(state_of(state_), &block_hash, sizeof block_hash);
}

uint64_t lane_checksum::digest() const noexcept {
  return XXH3_64bits_digest(state_of(state_));
}

uint64_t lane_checksum_of(const std::vector<view>& pieces) {
  std::vector<uint64_t> lengths;
  for (auto& p : pieces)
    lengths.push_back(p.length);
  lane_checksum sum{lengths};
  for (auto& p : pieces)
    for (uint64_t at = 0; at < p.length; at += lane_block)
      sum.add(
        block_hash(p.bytes().subspan(at, std::min(lane_block, p.length - at))));
  return sum.digest();
}

landing_checksum::landing_checksum(const std::byte* base,
                                   std::span<const uint64_t> piece_lengths)
  : base_(base)
  , lengths_(piece_lengths.begin(), piece_lengths.end())
  , sum_(piece_lengths) {
  uint64_t at = 0;
  size_t blocks = 0;
  for (auto n : lengths_) {
    starts_.push_back(at);
    first_hash_.push_back(blocks);
    at += n;
    blocks += blocks_of(n);
  }
  hashes_.reserve(blocks);
}

void landing_checksum::landed(uint64_t n) noexcept {
  landed_ += n;
  while (piece_ < lengths_.size()) {
    auto len = lengths_[piece_];
    if (in_piece_ == len) {
      ++piece_;
      in_piece_ = 0;
      continue;
    }
    auto block = std::min(lane_block, len - in_piece_);
    auto at = starts_[piece_] + in_piece_;
    if (at + block > landed_)
      return;
    auto h = block_hash({base_ + at, block});
    hashes_.push_back(h);
    sum_.add(h);
    in_piece_ += block;
  }
}

std::vector<uint64_t> landing_checksum::whole_blocks(size_t i) const {
  auto from = first_hash_[i];
  auto n =
    std::min<uint64_t>(lengths_[i] / lane_block,
                       hashes_.size() > from ? hashes_.size() - from : 0);
  return {hashes_.begin() + from, hashes_.begin() + from + n};
}

} // namespace kvtier
