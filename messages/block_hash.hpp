// The bulk lane's checksum over blocks (docs/messages.md "The bulk lane's
// checksum"), and the hashes of a buffer's blocks kept with the buffer so
// that a holder serving the same bytes again sends them without hashing.
//
// Definition: the flat message is sent as pieces (carrier::to_pieces: the
// segment table, the envelope's segment, each payload referenced from where
// it lies); each piece is cut into `lane_block` blocks from its own start
// (the last one shorter). The checksum is XXH3-64 over, in order, the piece
// count, each piece's length, and the XXH3-64 of every block of every piece
// (all as 8-byte words in host order: both ends are kvtier). So a flipped
// byte changes its block's hash, a reordered block the sequence, and other
// piece boundaries (a wrong piece table) the lengths and the blocks.
//
// Buffers are immutable once frozen or adopted (buffer.hpp), so a block's
// hash, once known, stays true as long as its buffer lives: each buffer has
// a cache, made on first use, of the hashes of the whole blocks of the runs
// that were walked, keyed by the offset a run starts at (a payload view and
// any prefix of it, a trimmed export, share their run). Only whole blocks are
// cached; the partial last block of a piece is hashed every time (at most
// `lane_block` bytes per piece). Thread-safe: any number of lanes may walk the
// same buffer at once (a block two threads hash at once is hashed twice, and
// agrees).
#pragma once

#include "messages/buffer.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

namespace kvtier {

/// Bytes per checksum block (the last block of a piece may be shorter).
inline constexpr uint64_t lane_block = uint64_t{64} << 10;

/// What a buffer knows of its blocks' hashes (`buffer::block_hashes`).
struct block_hash_cache {
  std::mutex mtx;
  /// By the buffer offset a run starts at: the hashes of its first whole
  /// blocks, in order.
  std::map<uint64_t, std::vector<uint64_t>> runs;
};

/// XXH3-64 of one block.
uint64_t block_hash(std::span<const std::byte> bytes) noexcept;

/// Process-wide counts of block hashes the senders computed and the ones
/// they took from a buffer's cache (tests show the cache is used).
struct block_hash_stats {
  uint64_t computed = 0;
  uint64_t reused = 0;
};
block_hash_stats block_hashes_now() noexcept;

/// The hashes of `v`'s blocks, in order: the whole blocks from `v.buf`'s
/// cache where it knows them, the rest computed (whole ones added to the
/// cache). `first`, `count`: only blocks [first, first + count) of `v`
/// (clamped), for a sender that hashes a slice just before writing it.
std::vector<uint64_t> hashes_of(const view& v, uint64_t first = 0,
                                uint64_t count = UINT64_MAX);

/// Tells `buf`'s cache the hashes of the whole blocks of the run starting
/// at `offset` (a receiver that verified them as they landed). Ignored when
/// the cache knows as many already.
void remember_hashes(const buffer& buf, uint64_t offset,
                     std::vector<uint64_t> whole_blocks);

/// Blocks of a piece of `length` bytes.
inline uint64_t blocks_of(uint64_t length) noexcept {
  return (length + lane_block - 1) / lane_block;
}

/// The running checksum: piece lengths first, then block hashes in order.
class lane_checksum {
public:
  explicit lane_checksum(std::span<const uint64_t> piece_lengths);
  ~lane_checksum();
  lane_checksum(const lane_checksum&) = delete;
  lane_checksum& operator=(const lane_checksum&) = delete;

  void add(uint64_t block_hash) noexcept;
  uint64_t digest() const noexcept;

private:
  void* state_; // XXH3_state_t
};

/// The checksum of `pieces` computed whole (tests, and a reference).
uint64_t lane_checksum_of(const std::vector<view>& pieces);

/// The receiving side: fed the flat bytes as they land, one contiguous run
/// after another, it hashes each block as soon as the bytes completing it
/// arrived (while they are in cache). `piece_lengths` must sum to the
/// bytes to come.
class landing_checksum {
public:
  landing_checksum(const std::byte* base,
                   std::span<const uint64_t> piece_lengths);

  /// The next `n` bytes landed (at base + bytes so far).
  void landed(uint64_t n) noexcept;

  /// The checksum; every byte must have landed.
  uint64_t digest() const noexcept {
    return sum_.digest();
  }

  /// The whole blocks' hashes of piece `i` (to seed a buffer's cache).
  std::vector<uint64_t> whole_blocks(size_t i) const;

  /// Where piece `i` starts in the flat bytes.
  uint64_t piece_start(size_t i) const noexcept {
    return starts_[i];
  }

private:
  const std::byte* base_;
  std::vector<uint64_t> lengths_;
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> hashes_;   // every block's, in order
  std::vector<size_t> first_hash_; // piece -> index of its first block hash
  lane_checksum sum_;
  uint64_t landed_ = 0;
  size_t piece_ = 0;      // the piece the next block is in
  uint64_t in_piece_ = 0; // where that block starts in its piece
};

} // namespace kvtier
