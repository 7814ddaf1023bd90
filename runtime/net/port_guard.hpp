// The node's port: what a connection that has not proven who it is may make
// the node do, in front of CAF's middleman (plaintext and TLS alike).
//
// CAF 0.17.6's BASP broker reads a 32-byte frame header, then asks its
// connection to read exactly the payload the header announces (a uint32: up
// to 4 GiB), and the connection resizes its read buffer to that size at once
// (zero-filled): one header from any local process made a node allocate and
// clear 4 GiB and stop answering for seconds. And CAF's OpenSSL module makes
// a TLS session (a fresh SSL context, the certificate, key and CA read from
// their files) and runs the handshake for every connection it accepts, on
// the one I/O thread all connections share: a peer reconnecting as fast as
// it can starved the node's established members (bench_handshake).
//
// `publish_guarded` publishes the node actor through the same BASP broker
// as `middleman::publish` / `openssl::publish`, with kvtier's own listener
// and connections:
//
//   - Admission (`port_limits`, from the `cluster.max-unproven-connections`,
//     `handshakes-per-s`, `handshake-timeout-ms` and
//     `failed-handshake-penalty-ms` options): at most `max_unproven`
//     connections may be short of their handshake at once, and new ones are
//     admitted at most `handshakes_per_s` per second (a token bucket of
//     `burst`); a source address whose connection ended without completing its
//     handshake is refused for a penalty that doubles from `penalty_base` up to
//     `penalty_max` and ends with its next completed handshake (loopback
//     sources are exempt: every local process shares one address). A
//     connection short of its handshake after `handshake_deadline` is
//     closed when the next one arrives. What is refused is closed at once,
//     before any TLS session or buffer exists, and counted
//     (`msg::wire_guard::refused_connections`, `failed_handshakes`).
//   - Frames: until a connection's first frame (CAF's handshake) has been
//     read whole, a frame may announce at most `msg::handshake_max_bytes`;
//     after it, at most the node's `cluster.max-message-bytes` plus
//     `frame_envelope_bytes` (CAF's framing around kvtier's message). A
//     frame over its bound closes the connection before the buffer grows,
//     counted (`oversized_frames`) and logged at warn level with the
//     sender's address; a header whose operation is not CAF's is counted
//     (`garbage_frames`) and the broker closes the connection.
//
// With TLS a connection's "handshake" is both: the TLS one (the peer's
// certificate checked against the cluster's CA before any frame is read)
// and CAF's first frame. Established connections are never touched.
//
// Threads: the listener and its connections run on the middleman's I/O
// thread; the counters are atomics. `publish_guarded` may be called from
// any thread but the middleman's.
#pragma once

#include "messages/wire_guard.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace kvtier::net {

/// What CAF's framing may add around a message of `cluster.max-message-bytes`
/// (the forwarding stack, the type names, the carrier's length prefix).
inline constexpr uint64_t frame_envelope_bytes = uint64_t{64} << 10;

/// The admission rules of a node's port (see the header comment). A node
/// sets them from `cluster.max-unproven-connections`,
/// `cluster.handshakes-per-s` (also the burst),
/// `cluster.failed-handshake-penalty-ms` and `cluster.handshake-timeout-ms`
/// (the penalty's cap and the deadline); these defaults are for tests and
/// equal the shipped ones (checked by tests/runtime/options_test.cpp).
struct port_limits {
  uint32_t max_unproven = 32;
  double handshakes_per_s = 20;
  uint32_t burst = 20;
  std::chrono::milliseconds penalty_base{200};
  std::chrono::milliseconds penalty_max{10000};
  std::chrono::milliseconds handshake_deadline{10000};
};

/// Publishes `whom` on `address`:`port` (0: any free port) through the
/// middleman's BASP broker of `sys`, every connection admitted and bounded
/// as the header says and counted in `guard`; over TLS (CAF's OpenSSL
/// module, configured on `sys`) when `tls`. Returns the port bound, or
/// CAF's error when it cannot listen (the caller names the address).
caf::expected<uint16_t> publish_guarded(caf::actor_system& sys,
                                        const caf::actor& whom, uint16_t port,
                                        const std::string& address, bool tls,
                                        std::shared_ptr<msg::wire_guard> guard,
                                        port_limits limits = {});

} // namespace kvtier::net
