#include "runtime/net/port_guard.hpp"

#include "runtime/net/address.hpp"

#include "messages/error.hpp"
#include "messages/log.hpp"

#include <caf/io/basp/header.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/scribe_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/openssl/session.hpp>
#include <caf/send.hpp>

#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

namespace kvtier::net {

namespace {

namespace io = caf::io::network;
using clk = std::chrono::steady_clock;
using millis = std::chrono::milliseconds;

/// Big-endian (CAF's binary serializer writes network order).
uint32_t load_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8)
         | uint32_t{p[3]};
}

/// The port's admission state, shared by its listener and connections.
class gate {
public:
  gate(port_limits limits, std::shared_ptr<msg::wire_guard> guard)
    : lim_(limits)
    , guard_(std::move(guard))
    , tokens_(limits.burst)
    , refilled_(clk::now()) {}

  msg::wire_guard& guard() {
    return *guard_;
  }

  /// Whether a connection from `addr` on `fd` may start its handshake now
  /// (it then counts as unproven until `proven` or `ended`).
  bool admit(io::native_socket fd, const std::string& addr) {
    std::lock_guard<std::mutex> lock{mtx_};
    auto now = clk::now();
    close_overdue(now);
    if (!is_loopback(addr)) {
      auto i = penalties_.find(addr);
      if (i != penalties_.end() && now < i->second.until)
        return refuse();
    }
    if (unproven_.size() >= lim_.max_unproven)
      return refuse();
    auto elapsed = std::chrono::duration<double>(now - refilled_).count();
    refilled_ = now;
    tokens_ =
      std::min<double>(lim_.burst, tokens_ + elapsed * lim_.handshakes_per_s);
    if (tokens_ < 1)
      return refuse();
    tokens_ -= 1;
    unproven_[fd] = {now, false};
    return true;
  }

  /// The connection on `fd` completed its handshake.
  void proven(io::native_socket fd, const std::string& addr) {
    std::lock_guard<std::mutex> lock{mtx_};
    unproven_.erase(fd);
    penalties_.erase(addr);
  }

  /// The connection on `fd` is gone (`proven`: after its handshake).
  void ended(io::native_socket fd, const std::string& addr, bool proven) {
    std::lock_guard<std::mutex> lock{mtx_};
    unproven_.erase(fd);
    if (proven)
      return;
    guard_->failed_handshakes.fetch_add(1, std::memory_order_relaxed);
    if (is_loopback(addr))
      return;
    auto now = clk::now();
    if (penalties_.size() >= max_penalties)
      prune(now);
    auto& p = penalties_[addr];
    p.strikes = std::min<uint32_t>(p.strikes + 1, 16);
    auto wait = std::min<millis>(lim_.penalty_max,
                                 lim_.penalty_base * (1u << (p.strikes - 1)));
    p.until = now + wait;
  }

private:
  struct unproven {
    clk::time_point since;
    bool shut = false;
  };
  struct penalty {
    uint32_t strikes = 0;
    clk::time_point until;
  };
  static constexpr size_t max_penalties = 4096;

  bool refuse() {
    guard_->refused_connections.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  /// Connections short of their handshake past the deadline: shut down
  /// (their next read sees the end and the broker lets them go).
  void close_overdue(clk::time_point now) {
    for (auto& [fd, u] : unproven_)
      if (!u.shut && now - u.since > lim_.handshake_deadline) {
        ::shutdown(fd, SHUT_RDWR);
        u.shut = true;
      }
  }

  /// Forgets penalties that ended long ago (the table stays bounded).
  void prune(clk::time_point now) {
    for (auto i = penalties_.begin(); i != penalties_.end();)
      if (i->second.until + lim_.penalty_max < now)
        i = penalties_.erase(i);
      else
        ++i;
    if (penalties_.size() >= max_penalties)
      penalties_.clear(); // a flood of addresses: start over
  }

  std::mutex mtx_;
  port_limits lim_;
  std::shared_ptr<msg::wire_guard> guard_;
  double tokens_;
  clk::time_point refilled_;
  std::map<io::native_socket, unproven> unproven_;
  std::map<std::string, penalty> penalties_;
};

using gate_ptr = std::shared_ptr<gate>;

/// The rules of one connection's frames, for either kind of connection.
class frame_rules {
public:
  frame_rules(gate_ptr g, io::native_socket fd)
    : gate_(std::move(g))
    , fd_(fd) {
    if (auto a = io::remote_addr_of_fd(fd))
      addr_ = *a;
    if (auto p = io::remote_port_of_fd(fd))
      port_ = *p;
  }

  ~frame_rules() {
    gate_->ended(fd_, addr_, handshaken_);
  }

  /// The read the broker asked for, or, refused, one byte: the next read
  /// is one byte or the end, and the broker lets the connection go (a
  /// payload of the wrong length is malformed).
  caf::io::receive_policy::config
  read_policy(caf::io::receive_policy::config cfg) {
    return allow(cfg.second) ? cfg : caf::io::receive_policy::exactly(1);
  }

  /// `n` bytes handed to the broker by `deliver` (the scribe's own
  /// consume), inspected before and noted after.
  template <class Deliver>
  bool consume(const void* buf, size_t n, Deliver deliver) {
    auto frame_done = inspect(buf, n);
    auto ok = deliver();
    took(frame_done, ok);
    return ok;
  }

private:
  /// Whether the broker may have `want` bytes read next; when not, the
  /// connection is shut down and the refusal counted and logged.
  bool allow(uint64_t want) {
    if (refused_)
      return false;
    if (want > bound()) {
      refuse(want);
      return false;
    }
    reading_header_ = want == caf::io::basp::header_size;
    return true;
  }

  /// Before the broker sees `n` bytes: whether they complete a frame.
  bool inspect(const void* buf, size_t n) {
    if (!reading_header_ || n != caf::io::basp::header_size)
      return true; // a payload: the frame is whole
    auto* p = static_cast<const unsigned char*>(buf);
    if (p[0]
          > static_cast<unsigned char>(caf::io::basp::message_type::heartbeat)
        && !refused_) {
      // Not CAF's protocol: counted once, and nothing more is read (CAF
      // drops the connection on this header; the rest is not looked at).
      refused_ = true;
      gate_->guard().garbage_frames.fetch_add(1, std::memory_order_relaxed);
      ::shutdown(fd_, SHUT_RDWR);
    }
    return load_u32(p + 4) == 0;
  }

  /// After the broker took a frame's last bytes (`ok`: it keeps the
  /// connection): the first such frame is the peer's handshake.
  void took(bool frame_done, bool ok) {
    if (frame_done && ok && !handshaken_) {
      handshaken_ = true;
      gate_->proven(fd_, addr_);
    }
  }

  uint64_t bound() const {
    if (!handshaken_)
      return msg::handshake_max_bytes;
    return gate_->guard().max_bytes.load(std::memory_order_relaxed)
           + frame_envelope_bytes;
  }

  void refuse(uint64_t want) {
    refused_ = true;
    auto& g = gate_->guard();
    g.oversized_frames.fetch_add(1, std::memory_order_relaxed);
    log::warn(
      "cluster: a connection from " + addr_ + ":" + std::to_string(port_)
      + " announced a frame of " + std::to_string(want) + " bytes "
      + (handshaken_ ? "(cluster.max-message-bytes is "
                         + std::to_string(g.max_bytes.load()) + ")"
                     : "before its handshake (at most "
                         + std::to_string(msg::handshake_max_bytes) + ")")
      + ": closed unread");
    ::shutdown(fd_, SHUT_RDWR);
  }

  gate_ptr gate_;
  io::native_socket fd_;
  std::string addr_;
  uint16_t port_ = 0;
  bool reading_header_ = false;
  bool handshaken_ = false;
  bool refused_ = false;
};

/// A plaintext connection: CAF's default one under the frame rules.
class plain_scribe final : public io::scribe_impl {
public:
  plain_scribe(io::default_multiplexer& mx, io::native_socket fd, gate_ptr g)
    : io::scribe_impl(mx, fd)
    , rules_(std::move(g), fd) {}

  void configure_read(caf::io::receive_policy::config cfg) override {
    io::scribe_impl::configure_read(rules_.read_policy(cfg));
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t n) override {
    return rules_.consume(
      buf, n, [&] { return io::scribe_impl::consume(ctx, buf, n); });
  }

private:
  frame_rules rules_;
};

/// Reads and writes of a TLS connection through its OpenSSL session.
///
/// OpenSSL keeps one error queue per thread, and `SSL_get_error` (which
/// CAF's session asks after every call that did not complete) answers
/// "failed" whenever that queue holds anything, whoever left it there. All
/// of a node's connections share the middleman's one I/O thread, so a
/// refused handshake (a plaintext peer, another CA's certificate) left its
/// errors for the next established connection's read, which CAF then
/// closed: a peer failing handshakes cut the node's certified members off
/// (bench_handshake: every certified ask timed out under a plaintext
/// flood). Each call here starts and ends with an empty queue.
struct tls_policy {
  explicit tls_policy(caf::openssl::session_ptr s)
    : session(std::move(s)) {}

  io::rw_state read_some(size_t& result, io::native_socket fd, void* buf,
                         size_t len) {
    ERR_clear_error();
    auto r = session->read_some(result, fd, buf, len);
    ERR_clear_error();
    return r;
  }

  io::rw_state write_some(size_t& result, io::native_socket fd, const void* buf,
                          size_t len) {
    ERR_clear_error();
    auto r = session->write_some(result, fd, buf, len);
    ERR_clear_error();
    return r;
  }

  bool must_read_more(io::native_socket fd, size_t threshold) {
    return session->must_read_more(fd, threshold);
  }

  caf::openssl::session_ptr session;
};

/// A TLS connection (what CAF's OpenSSL module makes for an accepted
/// socket), under the frame rules.
class tls_scribe final : public caf::io::scribe {
public:
  tls_scribe(io::default_multiplexer& mx, io::native_socket fd,
             caf::openssl::session_ptr s, gate_ptr g)
    : caf::io::scribe(io::conn_hdl_from_socket(fd))
    , stream_(mx, fd, std::move(s))
    , rules_(std::move(g), fd) {}

  void configure_read(caf::io::receive_policy::config cfg) override {
    stream_.configure_read(rules_.read_policy(cfg));
    if (!launched_)
      launch();
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t n) override {
    return rules_.consume(
      buf, n, [&] { return caf::io::scribe::consume(ctx, buf, n); });
  }

  void ack_writes(bool enable) override {
    stream_.ack_writes(enable);
  }
  std::vector<char>& wr_buf() override {
    return stream_.wr_buf();
  }
  std::vector<char>& rd_buf() override {
    return stream_.rd_buf();
  }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override {
    stream_.flush(this);
  }
  std::string addr() const override {
    auto x = io::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }
  uint16_t port() const override {
    auto x = io::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override {
    stream_.activate(this);
  }
  void remove_from_loop() override {
    stream_.passivate();
  }

private:
  void launch() {
    launched_ = true;
    stream_.start(this);
    // The session may still owe the peer handshake bytes (SSL_accept):
    // one empty write gets the stream polled for writing.
    stream_.force_empty_write(this);
  }

  bool launched_ = false;
  io::stream_impl<tls_policy> stream_;
  frame_rules rules_; // goes before the stream closes its socket
};

/// The node's listening socket: each accepted connection admitted by the
/// gate, then made a plain or a TLS connection under the frame rules.
class guarded_doorman final : public io::doorman_impl {
public:
  guarded_doorman(io::default_multiplexer& mx, io::native_socket fd, gate_ptr g,
                  bool tls)
    : io::doorman_impl(mx, fd)
    , gate_(std::move(g))
    , tls_(tls) {}

  bool new_connection() override {
    if (detached())
      return false;
    auto& mx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    auto addr = io::remote_addr_of_fd(fd);
    if (!gate_->admit(fd, addr ? *addr : std::string{})) {
      io::close_socket(fd);
      return false;
    }
    caf::io::scribe_ptr sptr;
    if (tls_) {
      static_cast<void>(io::nonblocking(fd, true));
      ERR_clear_error(); // see tls_policy
      auto session = caf::openssl::make_session(parent()->system(), fd, true);
      ERR_clear_error();
      if (!session) { // the handshake failed at once
        gate_->ended(fd, addr ? *addr : std::string{}, false);
        io::close_socket(fd);
        return false;
      }
      sptr = caf::make_counted<tls_scribe>(mx, fd, std::move(session), gate_);
    } else {
      static_cast<void>(io::keepalive(fd, true));
      sptr = caf::make_counted<plain_scribe>(mx, fd, gate_);
    }
    auto hdl = sptr->hdl();
    parent()->add_scribe(std::move(sptr));
    return doorman::new_connection(&mx, hdl);
  }

private:
  gate_ptr gate_;
  bool tls_;
};

} // namespace

caf::expected<uint16_t> publish_guarded(caf::actor_system& sys,
                                        const caf::actor& whom, uint16_t port,
                                        const std::string& address, bool tls,
                                        std::shared_ptr<msg::wire_guard> guard,
                                        port_limits limits) {
  auto& mm = sys.middleman();
  auto* mx = dynamic_cast<io::default_multiplexer*>(&mm.backend());
  if (mx == nullptr)
    return make_error(ec::invalid_config,
                      "cluster: the middleman's backend is not CAF's default "
                      "multiplexer");
  auto fd = io::new_tcp_acceptor_impl(port, address.c_str(), true);
  if (!fd)
    return std::move(fd.error());
  auto g = std::make_shared<gate>(limits, std::move(guard));
  auto dm = caf::make_counted<guarded_doorman>(*mx, *fd, std::move(g), tls);
  auto bound = dm->port();
  // What middleman::publish and openssl::publish hand the broker (a
  // dynamically typed actor publishes no signatures).
  auto basp = mm.named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  caf::anon_send(basp, caf::publish_atom_v, caf::io::doorman_ptr{dm}, bound,
                 caf::actor_cast<caf::strong_actor_ptr>(whom),
                 std::set<std::string>{});
  return bound;
}

} // namespace kvtier::net
