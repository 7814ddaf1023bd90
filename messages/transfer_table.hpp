// Both ends of a peer fetch above the chunk codec (transfer.hpp): the
// sender's table of offered transfers and the receiver's windowed pull.
//
// The sender lays an entry out once (outgoing_transfer: its large payloads
// by reference), offers it under a fresh id and serves
// its chunks while the receiver pulls them; the bytes of every transfer in
// the table count against one byte cap (an offer over it is refused, never
// queued), and a transfer nobody pulls for `idle_ms` expires, so a receiver
// that died mid-transfer costs the sender nothing lasting. A receiver that
// is done, or gives up, cancels the transfer; a chunk may be pulled again
// until then (a retried request).
//
// The receiver keeps at most `window` chunk requests in flight, takes the
// answers in any order, and decodes nothing before every chunk arrived and
// the whole message verified (incoming_transfer). Neither end keeps a clock:
// the owner passes `now_ms` and runs deadlines itself.
//
// Owned by messages/; plain single-owner objects, no threads, no actors.
#pragma once

#include "messages/transfer.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace kvtier::msg {

/// Limits of a sender's table. A node's come from its options
/// (`cluster.serve-max-bytes`, `cluster.serve-idle-ms`); the defaults here
/// are for tests and equal the shipped ones (checked by
/// tests/runtime/options_test.cpp).
struct transfer_limits {
  /// Flat bytes all offered transfers may hold together.
  uint64_t max_bytes = uint64_t{1} << 30;
  /// A transfer nobody pulled a chunk of for this long goes.
  uint64_t idle_ms = 10000;
  /// Bytes per chunk.
  uint32_t chunk_size = default_chunk_size;
};

/// What a sender's table did, for reports.
struct transfer_table_stats {
  uint64_t offered = 0;
  uint64_t refused_over_cap = 0;
  uint64_t chunks_served = 0;
  uint64_t cancelled = 0;
  uint64_t expired = 0;
  uint64_t unknown_pulls = 0;
};

/// The sending side: offered transfers by id, under one byte cap.
class bulk_server;

class transfer_table {
public:
  /// With a `lane`, every offer is also served there (its header names the
  /// lane's port and token) and leaves it when cancelled or expired; the
  /// lane must outlive the table.
  explicit transfer_table(transfer_limits limits = {},
                          bulk_server* lane = nullptr);

  /// Flattens `c` and offers it: the reply names `usable_tokens` and the
  /// header a receiver starts from. `queue_full` when the table's bytes
  /// would exceed the cap; errors of `outgoing_transfer::make` otherwise.
  /// With the table's lane (and `use_lane`), the header names the lane
  /// and says `laneChecksum`: the lane hashes the bytes as it writes them,
  /// and chunks of the transfer are refused. Otherwise the checksum is in
  /// the header and the transfer is pulled in chunks.
  caf::expected<sealed<FetchEntryReply>> offer(const carrier& c,
                                               uint64_t usable_tokens,
                                               uint64_t now_ms,
                                               bool use_lane = true);

  /// Chunk `req.index` of transfer `req.transferId`; `invalid_argument`
  /// naming the id for a transfer the table does not hold (never offered,
  /// cancelled or expired) or an index past its last chunk.
  caf::expected<sealed<FetchChunkReply>> chunk(FetchChunk::Reader req,
                                               uint64_t now_ms);

  /// Frees transfer `id`; false when the table does not hold it.
  bool cancel(uint64_t id);

  /// Frees every transfer idle for `idle_ms` at `now_ms`; returns how many.
  size_t expire(uint64_t now_ms);

  size_t size() const noexcept {
    return live_.size();
  }

  /// Flat bytes held by the offered transfers.
  uint64_t bytes() const noexcept {
    return bytes_;
  }

  const transfer_table_stats& stats() const noexcept {
    return stats_;
  }

  const transfer_limits& limits() const noexcept {
    return limits_;
  }

private:
  struct live {
    outgoing_transfer out;
    uint64_t bytes = 0;
    uint64_t last_use_ms = 0;
  };

  transfer_limits limits_;
  bulk_server* lane_ = nullptr;
  uint64_t next_id_ = 1;
  uint64_t bytes_ = 0;
  std::map<uint64_t, live> live_;
  transfer_table_stats stats_;
};

/// The receiving side of one transfer: which chunks to ask for next.
class transfer_pull {
public:
  /// Starts from an announced header (incoming_transfer::start's checks);
  /// `invalid_argument` for a window of 0.
  static caf::expected<transfer_pull> start(TransferHeader::Reader header,
                                            uint32_t window,
                                            const reader_limits& limits = {});

  uint64_t id() const noexcept {
    return id_;
  }

  uint32_t chunk_count() const noexcept {
    return count_;
  }

  /// Chunk indices to request now: as many as the window has room for,
  /// in order; each is returned once (until `retry`).
  std::vector<uint32_t> next();

  /// Takes one answer; its index leaves the in-flight set. Errors of
  /// `incoming_transfer::add` (the pull is then unusable).
  caf::error add(FetchChunkReply::Reader chunk);

  /// Asks for chunk `index` again (its request was lost or timed out).
  void retry(uint32_t index);

  /// Chunk requests sent and not answered.
  size_t in_flight() const noexcept {
    return in_flight_.size();
  }

  bool complete() const noexcept {
    return in_.complete();
  }

  /// The verified message (see incoming_transfer::finish).
  template <class Root>
  caf::expected<sealed<Root>> finish() && {
    return std::move(in_).template finish<Root>();
  }

private:
  transfer_pull(incoming_transfer in, uint64_t id, uint32_t count,
                uint32_t window)
    : in_(std::move(in))
    , id_(id)
    , count_(count)
    , window_(window) {}

  incoming_transfer in_;
  uint64_t id_ = 0;
  uint32_t count_ = 0;
  uint32_t window_ = 0;
  uint32_t next_index_ = 0;
  std::vector<uint32_t> again_;
  std::vector<uint32_t> in_flight_;
};

} // namespace kvtier::msg
