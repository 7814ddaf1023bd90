// What kvtier checks on the bytes of a message from another process before
// Cap'n Proto reads them, and the counters of what it refused.
//
// Where remote bytes first reach kvtier: CAF's middleman (BASP, 0.17.6)
// reads a frame header, then the whole payload the header announces (a
// uint32 length: CAF itself bounds it by nothing below 4 GiB), and a BASP
// worker deserializes the message; a `sealed<Root>` inside it is one string
// of flat bytes whose load callback (`load_flat`, sealed.hpp) is the first
// kvtier code to see them. There, before anything is decoded or copied, the
// size is checked against the receiving system's `max_bytes`
// (`cluster.max-message-bytes`), then `from_flat` decodes under
// `reader_limits`. A refusal returns an error to CAF, which drops the
// message (the sender's request runs into its deadline; CAF logs it at
// error level when logging is on) and keeps the connection; it is counted
// here, per actor system, and shown in the node's membership view
// (`ListMembers`, docs/cluster.md "Security").
//
// A `wire_guard` is registered for an actor system by `cluster::node`
// (`guard_scope`); a system without one uses the process-wide default
// guard (default limit). Counters are atomics: any thread.
//
// Test hook: `set_wire_mutator` rewrites the flat bytes of every carrier
// this process serializes (the mutation tests send malformed messages
// through the middleman as a remote peer would); off unless a test sets it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace caf {
class actor_system;
class execution_unit;
} // namespace caf

namespace kvtier::msg {

/// The guard's bound before a node sets `cluster.max-message-bytes`, equal
/// to that option's shipped default (checked by
/// tests/runtime/options_test.cpp): well above a 4 MiB transfer chunk and a
/// feed batch, below the 1 GiB reader traversal limit.
inline constexpr uint64_t default_max_message_bytes = uint64_t{256} << 20;

/// Limits and counters for the messages one actor system receives.
struct wire_guard {
  std::atomic<uint64_t> max_bytes{default_max_message_bytes};
  /// Messages over `max_bytes`: refused unread.
  std::atomic<uint64_t> oversized{0};
  /// Messages that failed to decode (malformed, wrong root type, over the
  /// reader limits).
  std::atomic<uint64_t> undecodable{0};
  /// Frames a connection to the node's port announced beyond what it may
  /// send (runtime/net/port_guard.hpp): over `handshake_max_bytes`
  /// before its handshake, over `max_bytes` (plus the frame's envelope)
  /// after it. The connection is closed before anything is allocated.
  std::atomic<uint64_t> oversized_frames{0};
  /// Frame headers on the node's port that are not CAF's protocol (an
  /// unknown operation, or fields its rules forbid): the connection is
  /// closed.
  std::atomic<uint64_t> garbage_frames{0};
  /// Connections to the node's port closed at once, before any handshake:
  /// over the port's admission rate or its bound of connections short of
  /// their handshake, or from an address serving a penalty for failed
  /// handshakes (runtime/net/port_guard.hpp).
  std::atomic<uint64_t> refused_connections{0};
  /// Connections that ended before completing their handshake (TLS or
  /// CAF's own), refused frames included.
  std::atomic<uint64_t> failed_handshakes{0};
};

/// The most a connection may announce for a frame before its handshake is
/// done: CAF's handshakes are a few hundred bytes.
inline constexpr uint64_t handshake_max_bytes = uint64_t{64} << 10;

/// The guard of the system `ctx` runs in (the default one for none).
wire_guard& guard_of(caf::execution_unit* ctx);

/// Registers a fresh guard for `sys` for its lifetime (one per system; a
/// second scope for the same system shares the first's guard).
class guard_scope {
public:
  guard_scope(caf::actor_system& sys, uint64_t max_bytes);
  ~guard_scope();
  guard_scope(const guard_scope&) = delete;
  guard_scope& operator=(const guard_scope&) = delete;

  wire_guard& guard() noexcept {
    return *guard_;
  }
  const std::shared_ptr<wire_guard>& shared() const noexcept {
    return guard_;
  }

private:
  caf::actor_system* sys_;
  std::shared_ptr<wire_guard> guard_;
};

/// Test hook: every carrier this process serializes for CAF passes its flat
/// bytes through `f` (empty: off).
void set_wire_mutator(std::function<void(std::string&)> f);

/// Applies the mutator, if any (sealed.hpp's save callback).
void mutate_wire(std::string& bytes);

} // namespace kvtier::msg
