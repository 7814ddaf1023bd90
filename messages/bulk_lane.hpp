// The bulk lane: a peer fetch's bytes over a plain loopback-or-LAN TCP
// connection beside CAF's middleman, because the middleman's per-message
// serialization copies each chunk several times (bench_transfer measured
// about a tenth of raw TCP through it on this machine).
//
// The control stays with the actors: a sender offers a flat message under a
// transfer id (transfer_table) and, with a lane, also here, which yields a
// random 64-bit token (the message's pieces: its large payloads are written
// from the memory they lie in, never copied into one flat buffer first); the
// FetchEntryReply's header names the lane's port and the token. The receiver
// connects, sends one request (magic, version, transfer id, token), and reads a
// status word and then exactly the header's total length into one aligned
// buffer (hashing each 64 KiB block of each piece as it lands, while its bytes
// are still in cache), then the checksum over those blocks' hashes
// (block_hash.hpp: the header of a lane transfer says `laneChecksum`, carries
// no flat checksum and lists the pieces' lengths), which the sender computed
// as it wrote them from the hashes its buffers keep (a block it never sent is
// hashed just before it is written), and verifies the bytes against it, and
// against the header's own flat checksum when there is one, before anything
// decodes them. A wrong token, an unknown or withdrawn id, a request of
// another version, a short read, a checksum mismatch, a piece table that
// disagrees with the length or a missed deadline is an error and yields
// nothing; the sender's bytes stay owned by its table (the lane holds a
// reference while it writes them).
//
// Threads: `bulk_server` runs one accept thread and one thread per
// connection it is writing to (a peer fetch is a few large transfers, not
// many small ones); `offer`/`withdraw` may be called from any thread.
// `bulk_fetch` blocks its caller: run it off the actor threads.
#pragma once

#include "messages/buffer.hpp"
#include "messages/cluster.capnp.h"
#include "messages/error.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvtier::msg {

/// Counters of a lane's server side.
struct bulk_server_stats {
  uint64_t served = 0;
  uint64_t bytes = 0;
  uint64_t refused = 0; // unknown id, wrong token, bad request
  uint64_t failed = 0;  // the connection broke or timed out mid-write
};

class bulk_server {
public:
  /// Listens on `address` (numeric IPv4 or IPv6) and `port` (0 picks one).
  /// `io_timeout` bounds every read and write of a connection.
  static caf::expected<std::unique_ptr<bulk_server>>
  start(const std::string& address, uint16_t port,
        std::chrono::milliseconds io_timeout = std::chrono::seconds(10));

  /// Stops accepting, ends every connection, joins the threads.
  ~bulk_server();

  bulk_server(const bulk_server&) = delete;
  bulk_server& operator=(const bulk_server&) = delete;

  uint16_t port() const noexcept {
    return port_;
  }

  /// The numeric address it listens on (as given to `start`).
  const std::string& address() const noexcept {
    return address_;
  }

  /// Serves the flat message `pieces` (written one after another) under
  /// `transfer_id` until withdrawn; returns the token a receiver must
  /// present (replacing an earlier offer of the id).
  uint64_t offer(uint64_t transfer_id, std::vector<view> pieces);

  /// Serves `transfer_id` no more (a write running ends on its own).
  void withdraw(uint64_t transfer_id);

  bulk_server_stats stats() const;

private:
  bulk_server() = default;
  void accept_loop();
  void serve(int fd);

  struct offered {
    std::shared_ptr<const std::vector<view>> pieces;
    uint64_t token = 0;
  };

  int listen_fd_ = -1;
  int stop_fd_ = -1; // an eventfd that wakes every poll at shutdown
  uint16_t port_ = 0;
  std::string address_;
  std::chrono::milliseconds io_timeout_{10000};
  std::atomic<bool> stopping_{false};
  mutable std::mutex mtx_;
  std::map<uint64_t, offered> offers_;
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  /// Joins the workers that finished (under `mtx_`).
  void reap();
  std::vector<worker> workers_;
  std::thread acceptor_;
  bulk_server_stats stats_;
  uint64_t token_state_ = 0;
};

/// Pieces a lane transfer may name at most (its header's piece table).
inline constexpr uint32_t max_lane_pieces = uint32_t{1} << 16;

/// Checks a lane transfer's header before anything is fetched: a lane
/// named (`invalid_argument`), a length that is a whole number of words
/// (`malformed_message`) within `max_bytes` (`message_limit_exceeded`),
/// and 1 .. `max_lane_pieces` pieces whose lengths add up to it
/// (`corrupt_data`).
caf::error check_lane_header(TransferHeader::Reader header, uint64_t max_bytes);

/// Told about each run of bytes as it lands (pointer, length).
using lane_landed = std::function<void(const std::byte*, uint64_t)>;

/// Where a lane reply's bytes come from: fills exactly `n` bytes at
/// `data`, telling `landed` about each run as it arrives, or fails.
using lane_read =
  std::function<caf::error(std::byte* data, uint64_t n, const lane_landed&)>;

/// The receiving half of a lane transfer once its request is sent (the
/// part of `bulk_fetch` that decodes what the sender wrote, apart from the
/// socket, so that it can be fed arbitrary bytes): the status word, the
/// header's `totalLength` bytes and the checksum trailer, read through
/// `read`, and verified. `header` must have passed `check_lane_header`. A
/// refusal is `invalid_argument`, a checksum mismatch `corrupt_data`, a
/// read's error is returned as it is.
caf::expected<buffer_ref> receive_lane(TransferHeader::Reader header,
                                       const lane_read& read);

/// Fetches transfer `header` from the lane at `address`:`port` (the header
/// names port and token), by `deadline`: the verified flat bytes, or
/// `peer_unreachable`-style errors as `io_error` (connect, read, short
/// read), `timeout` (the deadline passed), `invalid_argument` (the sender
/// refused the request), `corrupt_data` (checksum mismatch, or a piece
/// table that does not add up to the length),
/// `message_limit_exceeded` (over `max_bytes`).
caf::expected<buffer_ref>
bulk_fetch(const std::string& address, TransferHeader::Reader header,
           std::chrono::steady_clock::time_point deadline,
           uint64_t max_bytes = uint64_t{1} << 30);

/// Runs blocking lane work (`bulk_fetch`) off the actor threads: each job
/// on a thread of its own (a peer fetch is a few large transfers, not many
/// small ones), which hands its result back itself (the peer tier's job
/// stores it and sends its actor a message). `run` may be called from any
/// thread; the destructor joins every thread, so each job must be bounded
/// (bulk_fetch is, by its deadline).
class bulk_jobs {
public:
  bulk_jobs() = default;
  ~bulk_jobs();

  bulk_jobs(const bulk_jobs&) = delete;
  bulk_jobs& operator=(const bulk_jobs&) = delete;

  void run(std::function<void()> job);

  /// Jobs started and not yet joined (finished ones are joined lazily).
  size_t running() const;

private:
  struct worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  mutable std::mutex mtx_;
  std::vector<worker> workers_;
};

} // namespace kvtier::msg
