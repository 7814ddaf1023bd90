// The membership logic of a kvtier node, without sockets or actors: who
// this node is, which peers it knows (by node id) and where it can reach
// them (by HOST:PORT), whether each is up, when a silent one counts as
// down, when to try an address again (exponential backoff, capped), and
// whether a peer that introduces itself is accepted (docs/cluster.md
// "Joining", "Failure detection").
//
// Policy: a peer is accepted only when its protocol version, its model
// identity fingerprint and its node id fit: another version or identity is
// refused (both sides judge the same way), as is our own node id and an id
// already up at another address (a collision); a restarted peer at the
// same address replaces its old self. A peer is down when nothing was heard
// from it for `down_after` or when it said it leaves; its address is tried
// again after the backoff, doubling with every failed attempt up to the
// cap, and reset by success. An address whose peer was refused is not
// tried again. Time is the caller's (`time_point` arguments), so tests step
// it by hand.
//
// Owner: one node actor (actors/node_actor.hpp), or a test; not
// thread-safe. Plain values in (the runtime turns its options into an
// `identity` and a `timing`: runtime/cluster/node.hpp), no actors, no I/O.
#pragma once

#include "tiers/address.hpp"

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::tiers {

using clock = std::chrono::steady_clock;
using time_point = clock::time_point;
using millis = std::chrono::milliseconds;

/// Version of the cluster protocol (messages/membership.capnp, cluster.capnp
/// and the bulk lane); a peer with another one is refused at hello. 2: the
/// bulk lane's checksum is over blocks (messages/block_hash.hpp) and
/// heartbeats carry the node's load (routing).
inline constexpr uint32_t protocol_version = 2;

/// Largest fingerprint a peer may send (bytes; its node id and address:
/// tiers/address.hpp), and the most member addresses one message may carry.
inline constexpr size_t max_fingerprint_bytes = 128;
inline constexpr size_t max_listed_members = 1024;

/// Who a node is, as it introduces itself.
struct identity {
  std::string node_id;
  std::string fingerprint;
  uint32_t protocol = protocol_version;
  /// HOST:PORT it listens on.
  std::string address;
};

/// Why a hello was refused.
enum class refusal {
  none,
  /// A field is empty, too long or not of its form.
  malformed,
  /// Another membership protocol version.
  protocol,
  /// Another model identity fingerprint.
  model_identity,
  /// The peer uses our own node id, or one up at another address.
  node_id,
  /// This node is leaving.
  leaving,
};

const char* to_string(refusal r);

/// A judgement of a hello: `reason == none` accepts; `text` names both
/// sides' values for the log and the reply.
struct decision {
  refusal reason = refusal::none;
  std::string text;
  bool accepted() const noexcept {
    return reason == refusal::none;
  }
};

/// Exponential backoff: `base` before the first retry, doubling per failed
/// attempt, never more than `cap` (`cluster.reconnect-backoff-ms` and
/// `cluster.reconnect-backoff-max-ms` for reconnections).
struct backoff {
  millis base{100};
  millis cap{5000};
  /// The wait after `failures` failed attempts in a row (0: the first).
  millis delay(uint32_t failures) const;
};

/// Timing of failure detection: `cluster.heartbeat-ms`,
/// `cluster.down-after-ms` and the reconnection backoff, which a node sets
/// from its options (`timing_of`); these defaults are for tests and equal
/// the shipped ones (checked by tests/runtime/options_test.cpp).
struct timing {
  millis heartbeat{250};
  millis down_after{2000};
  backoff reconnect;
};

enum class peer_state { up, down, left };

const char* to_string(peer_state s);

std::ostream& operator<<(std::ostream& os, refusal r);
std::ostream& operator<<(std::ostream& os, peer_state s);

/// One known peer.
struct member {
  std::string node_id;
  std::string address;
  peer_state state = peer_state::down;
  time_point last_heard{};
};

/// Counters of refused and bad input.
struct refusal_counts {
  uint64_t model_identity = 0;
  uint64_t node_id = 0;
  uint64_t protocol = 0;
  uint64_t malformed = 0;
};

class membership {
public:
  membership(identity self, timing t);

  const identity& self() const noexcept {
    return self_;
  }
  const timing& times() const noexcept {
    return timing_;
  }

  /// Our node id and address, once known (after publishing).
  void set_self(std::string node_id, std::string address);

  /// An address to keep connected to (cluster.peers, --join, an address a
  /// peer listed). Ignored when it is our own; due at once when new.
  void add_address(const std::string& address, time_point now);

  /// Checks `remote`'s fields (sizes, forms) and then its fit with us:
  /// protocol, fingerprint, node id. Counts a refusal when `count`.
  decision judge(const identity& remote, bool count = true);

  /// `remote` (judged acceptable) is up from `now`. True when this is a
  /// change (it was unknown, down or left): fire "peer up".
  bool mark_up(const identity& remote, time_point now);

  /// Something was heard from `node_id`: a heartbeat. False when it is not
  /// an up member (then the caller should say hello again).
  bool heard(const std::string& node_id, time_point now);

  /// `node_id` is down from `now` (`left`: it said it leaves). True when
  /// it was up: fire "peer down". Its address is tried again after the
  /// backoff.
  bool mark_down(const std::string& node_id, time_point now, bool left = false);

  /// Up members silent for longer than `down_after` at `now`, marked down
  /// (fire "peer down" for each).
  std::vector<std::string> expire(time_point now);

  /// Addresses due for a connection attempt at `now` (no up member there,
  /// none in flight, not refused, backoff elapsed); each is in flight
  /// until `attempt_done`.
  std::vector<std::string> due(time_point now);

  /// The attempt at `address` ended: success resets its backoff; failure
  /// schedules the next attempt; `refused` stops trying it.
  void attempt_done(const std::string& address, bool success, time_point now,
                    bool refused = false);

  /// An attempt at `address` may start at once (a heartbeat came from a
  /// member we had given up on).
  void retry_now(const std::string& address, time_point now);

  /// The member with `node_id`, if known.
  const member* find(const std::string& node_id) const;

  /// Every known member, by node id.
  const std::map<std::string, member>& members() const noexcept {
    return members_;
  }

  /// Up members.
  std::vector<const member*> up_members() const;

  const refusal_counts& refused() const noexcept {
    return refused_;
  }

  /// Counts one malformed, oversized or unexpected message.
  void count_bad() noexcept {
    ++refused_.malformed;
  }

  /// Failed attempts at `address` in a row.
  uint32_t failures(const std::string& address) const;

  /// When `address` may be tried next; nullopt when unknown or refused.
  std::optional<time_point> next_attempt(const std::string& address) const;

private:
  struct target {
    time_point next{};
    uint32_t failures = 0;
    bool in_flight = false;
    bool refused = false;
  };

  bool up_at(const std::string& address) const;

  identity self_;
  timing timing_;
  std::map<std::string, member> members_;
  std::map<std::string, target> targets_;
  refusal_counts refused_;
};

} // namespace kvtier::tiers
