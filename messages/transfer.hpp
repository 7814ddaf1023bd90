// Chunked transfer of one sealed message between nodes (docs/messages.md
// "How payloads travel"): the sender lays the message out flat (side payloads
// become inline Data; large ones segments of their own, sent from where
// they lie), announces a `TransferHeader` (total length, chunk size and
// count, XXH3-64 checksum) and serves `FetchChunkReply` messages of a few
// MiB each; the receiver collects the chunks into one aligned buffer,
// verifies length and checksum, and only then decodes the message under
// reader limits. Nothing is installed from bytes that failed verification.
//
// Owned by messages/; the cluster actors (runtime/) own the transfer
// objects. Each object has one owner and is not shared between threads;
// the chunks it produces are ordinary side-free carriers, which CAF's
// middleman may serialize.
#pragma once

#include "messages/cluster.capnp.h"
#include "messages/sealed.hpp"

#include <cstdint>
#include <vector>

namespace kvtier::msg {

/// Bytes per chunk unless told otherwise: a few MiB (large enough to
/// amortize a message, small enough not to hold a connection up).
inline constexpr uint32_t default_chunk_size = uint32_t{4} << 20;

/// The sending side: one flattened message, served chunk by chunk.
class outgoing_transfer {
public:
  /// Lays `c` out flat for transfer `id` (`carrier::to_pieces`: its large
  /// payloads are sent from where they lie, not copied) and checksums it.
  /// Fails as `carrier::to_pieces` does, or with `invalid_argument` for a
  /// chunk size of 0.
  /// Without `checksum` the header says `laneChecksum` and lists the pieces'
  /// lengths (a bulk lane sums the pieces' block hashes as it writes them,
  /// off the reply's path: block_hash.hpp) and no chunk of the transfer may
  /// be served.
  static caf::expected<outgoing_transfer>
  make(uint64_t id, const carrier& c, uint32_t chunk_size = default_chunk_size,
       bool checksum = true);

  /// Fills in the header the receiver needs before it pulls chunks.
  void write_header(TransferHeader::Builder out) const;

  uint32_t chunk_count() const noexcept {
    return count_;
  }

  /// Bytes of the flat message.
  uint64_t total_length() const noexcept {
    return total_;
  }

  /// The flat message as pieces to send one after another (a bulk lane).
  const std::vector<view>& pieces() const noexcept {
    return pieces_;
  }

  /// Whether it is served on a lane only (made without a checksum).
  bool lane_only() const noexcept {
    return lane_only_;
  }

  /// Chunk `index` as a side-free message (its bytes copied inline).
  /// Fails with `invalid_argument` for an index past the last chunk or a
  /// transfer served on a lane only.
  caf::expected<sealed<FetchChunkReply>> chunk(uint32_t index) const;

private:
  outgoing_transfer() = default;

  uint64_t id_ = 0;
  uint64_t root_type_ = 0;
  uint32_t chunk_size_ = 0;
  uint32_t count_ = 0;
  uint64_t checksum_ = 0;
  uint64_t total_ = 0;
  bool lane_only_ = false;
  std::vector<view> pieces_;
};

/// The receiving side: collects chunks, verifies, then decodes.
class incoming_transfer {
public:
  /// Checks the header: `malformed_message` when its sizes disagree,
  /// `message_limit_exceeded` when the total exceeds `limits`.
  static caf::expected<incoming_transfer>
  start(TransferHeader::Reader header, const reader_limits& limits = {});

  /// Takes one chunk (any order; a repeated chunk is ignored). Fails with
  /// `malformed_message` for another transfer's chunk, an index, offset or
  /// size that disagrees with the header.
  caf::error add(FetchChunkReply::Reader chunk);

  /// Whether every chunk has arrived.
  bool complete() const noexcept {
    return missing_ == 0;
  }

  /// Verified flat bytes: `malformed_message` while chunks are missing,
  /// `corrupt_data` when the checksum disagrees. The transfer is spent.
  caf::expected<buffer_ref> verified() &&;

  /// The verified bytes decoded as a `Root` message (views into them).
  template <class Root>
  caf::expected<sealed<Root>> finish() && {
    auto limits = limits_;
    auto bytes = std::move(*this).verified();
    if (!bytes)
      return std::move(bytes.error());
    return sealed<Root>::from_flat(std::move(*bytes), limits);
  }

private:
  incoming_transfer() = default;

  uint64_t id_ = 0;
  uint64_t total_ = 0;
  uint32_t chunk_size_ = 0;
  uint64_t checksum_ = 0;
  uint32_t missing_ = 0;
  reader_limits limits_;
  std::vector<bool> have_;
  std::unique_ptr<buffer_builder> bytes_;
};

} // namespace kvtier::msg
