// The node's port without TLS: a bound on what an unproven connection may
// make the node allocate, in front of CAF's middleman.
//
// CAF 0.17.6's BASP broker reads a 32-byte frame header, then asks its
// connection to read exactly the payload the header announces (a uint32: up
// to 4 GiB), and the connection resizes its read buffer to that size at once
// (zero-filled). One 32-byte header from any local process therefore made a
// node allocate and clear 4 GiB and stop answering for seconds. The guard is
// the connection itself: `publish_guarded` publishes the node actor through
// the same BASP broker as `middleman::publish`, but each accepted connection
// is a `scribe_impl` that checks every read the broker asks of it before the
// buffer grows:
//
//   - until the connection's first frame (CAF's client handshake) has been
//     read whole, a frame may announce at most `msg::handshake_max_bytes`;
//   - after it, at most the node's `cluster.max-message-bytes` plus
//     `frame_envelope_bytes` (CAF's own framing around kvtier's message).
//
// A frame over its bound closes the connection before anything is allocated
// (the broker sees the connection close, as for a peer that hung up), is
// counted in the node's `msg::wire_guard::oversized_frames` and logged at
// warn level with the peer's address. A header whose operation is not one of
// CAF's is counted as `garbage_frames` (the broker closes the connection).
// Other connections are not affected: nothing waits.
//
// With `cluster.tls` the node publishes through CAF's OpenSSL module instead:
// there a peer proves who it is (a certificate of the cluster's CA) before
// the broker reads any frame, and `cluster.max-message-bytes` is checked
// when the message is decoded (messages/wire_guard.hpp).
//
// Threads: the scribes run on the middleman's I/O thread; the counters are
// atomics. `publish_guarded` may be called from any thread but the
// middleman's.
#pragma once

#include "messages/wire_guard.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace kvtier::cluster {

/// What CAF's framing may add around a message of `cluster.max-message-bytes`
/// (the forwarding stack, the type names, the carrier's length prefix).
inline constexpr uint64_t frame_envelope_bytes = uint64_t{64} << 10;

/// Publishes `whom` on `address`:`port` (0: any free port) through the
/// middleman's BASP broker of `sys`, every accepted connection bounded as
/// the header says and counted in `guard`. Returns the port bound, or
/// CAF's error when it cannot listen (the caller names the address).
caf::expected<uint16_t> publish_guarded(caf::actor_system& sys,
                                        const caf::actor& whom, uint16_t port,
                                        const std::string& address,
                                        std::shared_ptr<msg::wire_guard> guard);

} // namespace kvtier::cluster
