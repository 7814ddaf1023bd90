#include "runtime/cluster/frame_guard.hpp"

#include "messages/error.hpp"
#include "messages/log.hpp"

#include <caf/io/basp/header.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/scribe_impl.hpp>
#include <caf/send.hpp>

#include <sys/socket.h>

#include <set>

namespace kvtier::cluster {

namespace {

namespace net = caf::io::network;

/// Big-endian (CAF's binary serializer writes network order).
uint32_t load_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8)
         | uint32_t{p[3]};
}

/// One accepted connection: CAF's default scribe, with every read the
/// broker configures checked against the connection's bound first.
class guarded_scribe final : public net::scribe_impl {
public:
  guarded_scribe(net::default_multiplexer& mx, net::native_socket fd,
                 std::shared_ptr<msg::wire_guard> guard)
    : net::scribe_impl(mx, fd)
    , guard_(std::move(guard)) {
    // A header comes first (CAF configures it at once; until then nothing
    // is read).
  }

  void configure_read(caf::io::receive_policy::config cfg) override {
    if (refused_)
      return;
    auto want = static_cast<uint64_t>(cfg.second);
    if (want > bound()) {
      refuse(want);
      return;
    }
    reading_header_ = want == caf::io::basp::header_size;
    net::scribe_impl::configure_read(cfg);
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t n) override {
    // (After a refusal a byte still queued may arrive: the broker refuses
    // it as a payload of the wrong length and closes the connection.)
    bool frame_done = true;
    if (reading_header_ && n == caf::io::basp::header_size) {
      auto* p = static_cast<const unsigned char*>(buf);
      if (p[0]
          > static_cast<unsigned char>(caf::io::basp::message_type::heartbeat))
        guard_->garbage_frames.fetch_add(1, std::memory_order_relaxed);
      frame_done = load_u32(p + 4) == 0;
    }
    auto ok = net::scribe_impl::consume(ctx, buf, n);
    // The first frame read whole is the peer's handshake (the broker has
    // checked it and closed the connection if it was not one).
    if (frame_done && ok)
      handshaken_ = true;
    return ok;
  }

private:
  uint64_t bound() const {
    if (!handshaken_)
      return msg::handshake_max_bytes;
    return guard_->max_bytes.load(std::memory_order_relaxed)
           + frame_envelope_bytes;
  }

  /// Closes the connection without growing the buffer: the broker is told
  /// by the next read (end of stream, or a payload of the wrong length,
  /// which it refuses as malformed).
  void refuse(uint64_t want) {
    refused_ = true;
    guard_->oversized_frames.fetch_add(1, std::memory_order_relaxed);
    log::warn(
      "cluster: a connection from " + addr() + ":" + std::to_string(port())
      + " announced a frame of " + std::to_string(want) + " bytes "
      + (handshaken_ ? "(cluster.max-message-bytes is "
                         + std::to_string(guard_->max_bytes.load()) + ")"
                     : "before its handshake (at most "
                         + std::to_string(msg::handshake_max_bytes) + ")")
      + ": closed unread");
    ::shutdown(stream_.fd(), SHUT_RDWR);
    net::scribe_impl::configure_read(caf::io::receive_policy::exactly(1));
  }

  std::shared_ptr<msg::wire_guard> guard_;
  bool reading_header_ = false;
  bool handshaken_ = false;
  bool refused_ = false;
};

/// The node's listening socket: CAF's default doorman, but each accepted
/// connection is a guarded scribe.
class guarded_doorman final : public net::doorman_impl {
public:
  guarded_doorman(net::default_multiplexer& mx, net::native_socket fd,
                  std::shared_ptr<msg::wire_guard> guard)
    : net::doorman_impl(mx, fd)
    , guard_(std::move(guard)) {}

  bool new_connection() override {
    if (detached())
      return false;
    auto& mx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    static_cast<void>(net::keepalive(fd, true));
    auto sptr = caf::make_counted<guarded_scribe>(mx, fd, guard_);
    auto hdl = sptr->hdl();
    parent()->add_scribe(std::move(sptr));
    return doorman::new_connection(&mx, hdl);
  }

private:
  std::shared_ptr<msg::wire_guard> guard_;
};

} // namespace

caf::expected<uint16_t>
publish_guarded(caf::actor_system& sys, const caf::actor& whom, uint16_t port,
                const std::string& address,
                std::shared_ptr<msg::wire_guard> guard) {
  auto& mm = sys.middleman();
  auto* mx = dynamic_cast<net::default_multiplexer*>(&mm.backend());
  if (mx == nullptr)
    return make_error(ec::invalid_config,
                      "cluster: the middleman's backend is not CAF's default "
                      "multiplexer");
  auto fd = net::new_tcp_acceptor_impl(port, address.c_str(), true);
  if (!fd)
    return std::move(fd.error());
  auto dm = caf::make_counted<guarded_doorman>(*mx, *fd, std::move(guard));
  auto bound = dm->port();
  // What middleman::publish hands the broker (a dynamically typed actor
  // publishes no signatures).
  auto basp = mm.named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  caf::anon_send(basp, caf::publish_atom_v, caf::io::doorman_ptr{dm}, bound,
                 caf::actor_cast<caf::strong_actor_ptr>(whom),
                 std::set<std::string>{});
  return bound;
}

} // namespace kvtier::cluster
