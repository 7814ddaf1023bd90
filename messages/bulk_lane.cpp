#include "messages/bulk_lane.hpp"

#include "messages/block_hash.hpp"

// The streaming state as a plain struct (the same package gives header
// and library).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kvtier::msg {

namespace {

constexpr uint32_t magic = 0x4c42564b; // "KVBL"
// 2: the checksum is over blocks (block_hash.hpp) and the header names the
// pieces; a version-1 peer is refused, never misread.
constexpr uint32_t version = 2;
constexpr uint64_t status_ok = 0;
constexpr uint64_t status_refused = 1;

/// The request a receiver sends, in host order (both ends are kvtier).
struct request {
  uint32_t magic;
  uint32_t version;
  uint64_t transfer_id;
  uint64_t token;
};

caf::error sys_error(const std::string& what) {
  return make_error(ec::io_error,
                    "bulk lane: " + what + ": " + std::strerror(errno));
}

using clock_type = std::chrono::steady_clock;

int ms_left(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock_type::now())
                .count();
  return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

/// Waits until `fd` is ready for `events` (or `stop_fd` fires) by
/// `deadline`: 1 ready, 0 timed out, -1 stopped or failed.
int wait_for(int fd, short events, clock_type::time_point deadline,
             int stop_fd = -1) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    auto n = ::poll(p, stop_fd >= 0 ? 2 : 1, ms_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (stop_fd >= 0 && p[1].revents != 0))
      return -1;
    if (n == 0)
      return 0;
    return 1;
  }
}

/// Moves exactly `n` bytes by `deadline`; errors name `what`. `moved`
/// sees each run of bytes as it is moved.
template <class Op, class Moved = void (*)(const std::byte*, uint64_t)>
caf::error move_all(
  int fd, std::byte* data, uint64_t n, short events,
  clock_type::time_point deadline, const char* what, Op op, int stop_fd = -1,
  Moved moved = [](const std::byte*, uint64_t) {}) {
  uint64_t done = 0;
  bool ready = false; // try first; wait only when the socket says EAGAIN
  while (done < n) {
    if (!ready || clock_type::now() >= deadline) {
      auto w = wait_for(fd, events, deadline, stop_fd);
      if (w == 0)
        return make_error(ec::timeout, std::string{"bulk lane: "} + what
                                         + " did not finish by the deadline ("
                                         + std::to_string(done) + " of "
                                         + std::to_string(n) + " bytes)");
      if (w < 0)
        return sys_error(what);
    }
    auto chunk = std::min<uint64_t>(n - done, uint64_t{1} << 24);
    auto r = op(fd, data + done, chunk);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      ready = errno == EINTR;
      continue;
    }
    if (r < 0)
      return sys_error(what);
    if (r == 0)
      return make_error(ec::io_error,
                        std::string{"bulk lane: the peer closed during "} + what
                          + " after " + std::to_string(done) + " of "
                          + std::to_string(n) + " bytes");
    ready = true;
    moved(data + done, static_cast<uint64_t>(r));
    done += static_cast<uint64_t>(r);
  }
  return {};
}

caf::error write_all(int fd, const void* data, uint64_t n,
                     clock_type::time_point deadline, int stop_fd = -1) {
  return move_all(
    fd, const_cast<std::byte*>(static_cast<const std::byte*>(data)), n, POLLOUT,
    deadline, "write",
    [](int f, std::byte* p, uint64_t k) {
      return ::send(f, p, k, MSG_NOSIGNAL);
    },
    stop_fd);
}

/// Reads exactly `n` bytes by `deadline`; `moved` sees each run as it lands.
template <class Moved = void (*)(const std::byte*, uint64_t)>
caf::error read_all(
  int fd, void* data, uint64_t n, clock_type::time_point deadline,
  int stop_fd = -1, Moved moved = [](const std::byte*, uint64_t) {}) {
  return move_all(
    fd, static_cast<std::byte*>(data), n, POLLIN, deadline, "read",
    [](int f, std::byte* p, uint64_t k) { return ::recv(f, p, k, 0); }, stop_fd,
    moved);
}

/// A socket address for numeric `address` and `port`.
bool make_address(const std::string& address, uint16_t port,
                  sockaddr_storage& out, socklen_t& len) {
  std::memset(&out, 0, sizeof out);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (::inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (::inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

} // namespace

caf::expected<std::unique_ptr<bulk_server>>
bulk_server::start(const std::string& address, uint16_t port,
                   std::chrono::milliseconds io_timeout) {
  sockaddr_storage sa;
  socklen_t len = 0;
  if (!make_address(address, port, sa, len))
    return make_error(ec::invalid_config,
                      "bulk lane: '" + address + "' is not a numeric address");
  std::unique_ptr<bulk_server> s{new bulk_server};
  s->io_timeout_ = io_timeout;
  s->token_state_ =
    std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  s->listen_fd_ = ::socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0)
    return sys_error("socket");
  int one = 1;
  ::setsockopt(s->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0)
    return sys_error("bind " + address + ":" + std::to_string(port));
  if (::listen(s->listen_fd_, 16) != 0)
    return sys_error("listen");
  socklen_t got = sizeof sa;
  ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&sa), &got);
  s->address_ = address;
  s->port_ = ntohs(sa.ss_family == AF_INET
                     ? reinterpret_cast<sockaddr_in*>(&sa)->sin_port
                     : reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port);
  s->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->stop_fd_ < 0)
    return sys_error("eventfd");
  tune(s->listen_fd_);
  s->acceptor_ = std::thread([p = s.get()] { p->accept_loop(); });
  return s;
}

bulk_server::~bulk_server() {
  stopping_ = true;
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_fd_, &one, sizeof one);
  }
  if (acceptor_.joinable())
    acceptor_.join();
  std::vector<worker> workers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    workers.swap(workers_);
  }
  for (auto& w : workers)
    w.thread.join();
  if (listen_fd_ >= 0)
    ::close(listen_fd_);
  if (stop_fd_ >= 0)
    ::close(stop_fd_);
}

uint64_t bulk_server::offer(uint64_t transfer_id, std::vector<view> pieces) {
  std::lock_guard<std::mutex> guard{mtx_};
  // splitmix64 over a random seed: unguessable enough for a loopback or
  // TLS-guarded LAN lane (it only keeps a stray client from reading).
  uint64_t z = (token_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  auto token = (z ^ (z >> 31)) | 1; // never 0 ("no lane")
  offers_[transfer_id] = offered{
    std::make_shared<const std::vector<view>>(std::move(pieces)), token};
  return token;
}

void bulk_server::withdraw(uint64_t transfer_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  offers_.erase(transfer_id);
}

bulk_server_stats bulk_server::stats() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return stats_;
}

void bulk_server::accept_loop() {
  while (!stopping_) {
    auto w = wait_for(listen_fd_, POLLIN,
                      clock_type::now() + std::chrono::hours(1), stop_fd_);
    if (w < 0)
      return;
    if (w == 0)
      continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    tune(fd);
    std::lock_guard<std::mutex> guard{mtx_};
    reap();
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(worker{std::thread([this, fd, done] {
                                serve(fd);
                                ::close(fd);
                                *done = true;
                              }),
                              done});
  }
}

void bulk_server::reap() {
  for (auto i = workers_.begin(); i != workers_.end();) {
    if (*i->done) {
      i->thread.join();
      i = workers_.erase(i);
    } else {
      ++i;
    }
  }
}

void bulk_server::serve(int fd) {
  auto deadline = clock_type::now() + io_timeout_;
  request req{};
  if (read_all(fd, &req, sizeof req, deadline, stop_fd_)) {
    std::lock_guard<std::mutex> guard{mtx_};
    ++stats_.refused;
    return;
  }
  std::shared_ptr<const std::vector<view>> pieces;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = offers_.find(req.transfer_id);
    if (req.magic == magic && req.version == version && i != offers_.end()
        && i->second.token == req.token)
      pieces = i->second.pieces;
    else
      ++stats_.refused;
  }
  auto status = pieces ? status_ok : status_refused;
  if (write_all(fd, &status, sizeof status, deadline, stop_fd_) || !pieces)
    return;
  // The whole message; the deadline grows with its size (at least 100 MB/s).
  auto total = total_length(*pieces);
  deadline =
    clock_type::now() + io_timeout_ + std::chrono::milliseconds(total / 100000);
  // Each slice's blocks are hashed just before it is written (the hash
  // brings it into cache for the socket's copy) unless the buffer knows
  // their hashes already; the sum follows the bytes.
  constexpr uint64_t slice_blocks = (uint64_t{1} << 20) / lane_block;
  std::vector<uint64_t> lengths;
  for (auto& p : *pieces)
    lengths.push_back(p.length);
  lane_checksum sum{lengths};
  caf::error err;
  for (auto& p : *pieces) {
    for (uint64_t b = 0; b < blocks_of(p.length) && !err; b += slice_blocks) {
      for (auto h : hashes_of(p, b, slice_blocks))
        sum.add(h);
      auto at = b * lane_block;
      auto n = std::min(slice_blocks * lane_block, p.length - at);
      err = write_all(fd, p.bytes().data() + at, n, deadline, stop_fd_);
    }
    if (err)
      break;
  }
  if (!err) {
    uint64_t digest = sum.digest();
    err = write_all(fd, &digest, sizeof digest, deadline, stop_fd_);
  }
  std::lock_guard<std::mutex> guard{mtx_};
  if (err) {
    ++stats_.failed;
    return;
  }
  ++stats_.served;
  stats_.bytes += total;
}

caf::error check_lane_header(TransferHeader::Reader header,
                             uint64_t max_bytes) {
  auto total = header.getTotalLength();
  if (header.getBulkPort() == 0 || header.getBulkToken() == 0)
    return make_error(ec::invalid_argument,
                      "bulk lane: the transfer names no lane");
  if (total == 0 || total % 8 != 0)
    return make_error(ec::malformed_message, "bulk lane: a transfer of "
                                               + std::to_string(total)
                                               + " bytes");
  if (total > max_bytes)
    return make_error(ec::message_limit_exceeded,
                      "bulk lane: a transfer of " + std::to_string(total)
                        + " bytes exceeds the limit of "
                        + std::to_string(max_bytes));
  // The piece table: the checksum's block boundaries (a wrong one fails
  // the checksum; one that disagrees with the length fails here).
  auto pieces = header.getLanePieces();
  uint64_t sum = 0;
  bool fits = pieces.size() > 0 && pieces.size() <= max_lane_pieces;
  for (auto n : pieces) {
    if (n > total - sum) {
      fits = false;
      break;
    }
    sum += n;
  }
  if (!fits || sum != total)
    return make_error(ec::corrupt_data,
                      "bulk lane: transfer "
                        + std::to_string(header.getTransferId()) + " names "
                        + std::to_string(pieces.size()) + " pieces of "
                        + std::to_string(sum) + " bytes for a length of "
                        + std::to_string(total) + " (1 .. "
                        + std::to_string(max_lane_pieces) + " pieces)");
  return {};
}

caf::expected<buffer_ref> receive_lane(TransferHeader::Reader header,
                                       const lane_read& read) {
  auto total = header.getTotalLength();
  auto pieces = header.getLanePieces();
  uint64_t status = 0;
  if (auto err = read(reinterpret_cast<std::byte*>(&status), sizeof status,
                      [](const std::byte*, uint64_t) {}))
    return err;
  if (status != status_ok)
    return make_error(ec::invalid_argument,
                      "bulk lane: the sender refused transfer "
                        + std::to_string(header.getTransferId())
                        + " (unknown, withdrawn or another token)");
  buffer_builder b{total};
  // Each block is hashed as soon as its bytes landed (still in cache);
  // the whole flat message too when the header names a checksum of it.
  std::vector<uint64_t> lengths;
  for (auto n : pieces)
    lengths.push_back(n);
  landing_checksum landing{b.data(), lengths};
  bool flat_sum = !header.getLaneChecksum();
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  if (auto err = read(b.data(), total, [&](const std::byte* p, uint64_t k) {
        landing.landed(k);
        if (flat_sum)
          XXH3_64bits_update(&state, p, k);
      }))
    return err;
  uint64_t trailer = 0;
  if (auto err = read(reinterpret_cast<std::byte*>(&trailer), sizeof trailer,
                      [](const std::byte*, uint64_t) {}))
    return err;
  auto flat = std::move(b).freeze();
  if (landing.digest() != trailer
      || (flat_sum && XXH3_64bits_digest(&state) != header.getChecksum()))
    return make_error(
      ec::corrupt_data,
      "bulk lane: transfer " + std::to_string(header.getTransferId())
        + ": checksum mismatch over " + std::to_string(total) + " bytes");
  // Verified: the blocks' hashes stay with the bytes, so that serving a
  // payload of them on again sends it without hashing.
  for (size_t i = 0; i < lengths.size(); ++i)
    remember_hashes(*flat, landing.piece_start(i), landing.whole_blocks(i));
  return flat;
}

caf::expected<buffer_ref> bulk_fetch(const std::string& address,
                                     TransferHeader::Reader header,
                                     clock_type::time_point deadline,
                                     uint64_t max_bytes) {
  if (auto err = check_lane_header(header, max_bytes))
    return err;
  sockaddr_storage sa;
  socklen_t len = 0;
  if (!make_address(address, header.getBulkPort(), sa, len))
    return make_error(ec::invalid_argument,
                      "bulk lane: '" + address + "' is not a numeric address");
  int fd = ::socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sys_error("socket");
  struct closer {
    int fd;
    ~closer() {
      ::close(fd);
    }
  } guard{fd};
  tune(fd);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0
      && errno != EINPROGRESS)
    return sys_error("connect to " + address + ":"
                     + std::to_string(header.getBulkPort()));
  auto w = wait_for(fd, POLLOUT, deadline);
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
  if (w == 0)
    return make_error(ec::timeout, "bulk lane: connect to " + address
                                     + " did not finish by the deadline");
  if (w < 0 || soerr != 0) {
    errno = soerr;
    return sys_error("connect to " + address + ":"
                     + std::to_string(header.getBulkPort()));
  }
  request req{magic, version, header.getTransferId(), header.getBulkToken()};
  if (auto err = write_all(fd, &req, sizeof req, deadline))
    return err;
  return receive_lane(
    header, [&](std::byte* data, uint64_t n, const lane_landed& landed) {
      return read_all(fd, data, n, deadline, -1, landed);
    });
}

bulk_jobs::~bulk_jobs() {
  std::vector<worker> all;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    all.swap(workers_);
  }
  for (auto& w : all)
    if (w.thread.joinable())
      w.thread.join();
}

void bulk_jobs::run(std::function<void()> job) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto i = workers_.begin(); i != workers_.end();)
    if (i->done->load()) {
      i->thread.join();
      i = workers_.erase(i);
    } else {
      ++i;
    }
  workers_.push_back(worker{std::thread{[job = std::move(job), done] {
                              job();
                              done->store(true);
                            }},
                            done});
}

size_t bulk_jobs::running() const {
  std::lock_guard<std::mutex> guard{mtx_};
  size_t n = 0;
  for (auto& w : workers_)
    n += w.done->load() ? 0 : 1;
  return n;
}

} // namespace kvtier::msg
