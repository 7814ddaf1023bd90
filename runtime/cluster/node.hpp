// A kvtier node's place in a cluster, as the runtime wires it: the node
// actor (actors/node_actor.hpp: meeting peers, the membership view of
// tiers/membership.hpp, heartbeats, reconnections, leaving, and what it
// passes on to the facade, the serve actor, the feed and the replay agent)
// spawned over this process's options and published through CAF's
// middleman on `cluster.listen-address`:`cluster.port` behind the port
// guard (runtime/net/port_guard.hpp), over TLS with `cluster.tls`
// (docs/cluster.md). The node actor's interface is typed (`node_actor`,
// actors/cluster_interfaces.hpp); it is published with no signatures, so
// peers and tools reach it as a dynamically typed actor and the wire
// carries exactly the sealed messages of messages/*.capnp.
//
// Hooks: `set_hooks` installs "peer up(node id, handle)" and "peer
// down(node id)"; they run on the node actor's thread, in the order of the
// membership changes, and must be quick (send a message, do not block). A
// peer that comes back after being down fires "up" again (a rejoin: the
// event feed resyncs there). `handle` is the peer's node actor: requests to
// a peer are sealed messages (messages/membership.capnp, later the peer
// tier's) sent to it with a deadline; it dies (down_msg) when the
// connection goes.
//
// Policy: without `cluster.tls`, loopback addresses only (a listen address,
// seed or learned member elsewhere is refused); with it the node publishes
// and connects through CAF's OpenSSL module and any address is allowed
// (runtime/net/tls.hpp: both sides present certificates of the
// cluster's CA). Every wait is bounded: a connection attempt and a hello by
// `cluster.down-after-ms`, `leave` by its argument. Input from a peer is
// size-checked before it is decoded (messages/wire_guard.hpp) and checked
// field by field by the node actor; admin requests from remote senders
// pass only with `cluster.remote-admin` (actors/node_actor.hpp says what
// goes where). ReplayStep and ReplayFinish (messages/replay.capnp, a
// tool's) go to the replay agent when one is attached (`kvtier node
// --replay-agent`), from any sender; otherwise `ec::not_found`.
//
// Owner: one `service` (runtime/service.hpp) or a test; `node`'s methods
// are called from one thread at a time (the hooks may be set from any).
#pragma once

#include "actors/node_actor.hpp"
#include "messages/wire_guard.hpp"
#include "runtime/config.hpp"
#include "tiers/membership.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvtier::cluster {

// The membership engine's and the node actor's names, as the runtime and
// its users have always spelled them (kvtier::cluster::membership, ...).
using tiers::backoff;
using tiers::clock;
using tiers::decision;
using tiers::identity;
using tiers::max_address_bytes;
using tiers::max_fingerprint_bytes;
using tiers::max_listed_members;
using tiers::max_node_id_bytes;
using tiers::member;
using tiers::membership;
using tiers::millis;
using tiers::peer_state;
using tiers::protocol_version;
using tiers::refusal;
using tiers::refusal_counts;
using tiers::time_point;
using tiers::timing;
using tiers::to_string;

using actors::hook_slot;
using actors::node_delegates;
using actors::node_policy;
using actors::peer_hooks;

/// One member as `members()` reports it.
struct member_view {
  std::string node_id;
  std::string address;
  peer_state state = peer_state::down;
};

/// A node's membership view, as `ListMembers` answers.
struct members_view {
  identity self;
  std::vector<member_view> members;
  refusal_counts refused;
  /// Peer messages refused before decoding (over cluster.max-message-bytes)
  /// and ones that failed to decode (messages/wire_guard.hpp).
  uint64_t refused_oversized = 0;
  uint64_t refused_undecodable = 0;
  /// Frames the node's port refused before CAF read them (the guard's
  /// `oversized_frames` and `garbage_frames`): the connection was closed.
  uint64_t oversized_frames = 0;
  uint64_t garbage_frames = 0;
  /// Connections the port's gate closed before their handshake (too many
  /// unproven at once, over the handshake rate, a source in its penalty,
  /// past the handshake deadline), and connections that closed without
  /// finishing the handshake (runtime/net/port_guard.hpp).
  uint64_t refused_connections = 0;
  uint64_t failed_handshakes = 0;
  /// Admin requests from remote senders refused (cluster.remote-admin off).
  uint64_t refused_admin = 0;
  /// This node's connection attempts that closed in the handshake: over
  /// TLS a certificate check failed (either side's) or the peer speaks
  /// plaintext. (A refusal of an incoming connection happens inside CAF's
  /// OpenSSL module and is not seen here.)
  uint64_t refused_handshake = 0;
  bool leaving = false;

  /// Node ids in `state`, sorted.
  std::vector<std::string> in_state(peer_state state) const;
};

/// The cluster fields of `o` with our fingerprint as a membership timing
/// and identity (address empty until published).
identity identity_of(const runtime::service_options& o,
                     const std::string& fingerprint);
timing timing_of(const runtime::service_options& o);

/// `o`'s node policy.
node_policy policy_of(const runtime::service_options& o);

/// Spawns the node actor (not yet published) in `sys`, connecting through
/// its middleman (its OpenSSL manager's when loaded). `guard`: whose
/// refusal counters it reports (null: the process-wide default guard's).
actors::node_actor
spawn_node_actor(caf::actor_system& sys, identity self, timing t,
                 std::shared_ptr<hook_slot> hooks, node_policy policy = {},
                 std::shared_ptr<msg::wire_guard> guard = nullptr);

class node {
public:
  /// Publishes a node actor on `o.cluster_listen_address`:`o.cluster_port`
  /// in `sys` (which needs the middleman, and with `o.cluster_tls` CAF's
  /// OpenSSL module configured with `o`'s files: `configure_tls`) and
  /// starts meeting `o.cluster_peers` and `extra_peers`; `listeners` hear
  /// of every peer up and down from the first on (see hook_slot).
  /// `ec::invalid_config` for a bad address, a non-loopback one without
  /// TLS, or TLS files that do not load (naming the option and file);
  /// `ec::io_error` when the port cannot be bound.
  static caf::expected<std::unique_ptr<node>>
  start(caf::actor_system& sys, const runtime::service_options& o,
        const std::string& fingerprint,
        const std::vector<std::string>& extra_peers = {},
        std::vector<caf::actor> listeners = {});

  /// Leaves (bounded by `down-after-ms`) when not yet left, unpublishes,
  /// stops the actor.
  ~node();

  node(const node&) = delete;
  node& operator=(const node&) = delete;

  uint16_t port() const noexcept {
    return port_;
  }
  /// HOST:PORT as peers reach it.
  const std::string& address() const noexcept {
    return address_;
  }
  const std::string& node_id() const noexcept {
    return node_id_;
  }
  /// The published node actor.
  const actors::node_actor& actor() const noexcept {
    return actor_;
  }
  /// The counters of what this node's port refused (atomics: read them
  /// any time, from any thread; shared, so they may outlive the node).
  const std::shared_ptr<msg::wire_guard>& guard() const noexcept {
    return guard_->shared();
  }
  /// When the node was published (/health's grace for meeting peers).
  std::chrono::steady_clock::time_point started() const noexcept {
    return started_;
  }

  /// Where peers' requests go from now on (replaces earlier ones; the
  /// agent stays).
  void attach(node_delegates d);

  /// Where ReplayStep and ReplayFinish go from now on: the replay agent of
  /// `kvtier node --replay-agent` (runtime/tools/replay_agent.hpp), asked
  /// by any sender (the multi-node replay's driver is another process);
  /// without one (null) they fail `not_found`.
  void attach_agent(caf::actor agent);

  /// Replaces the hooks (empty functions: none).
  void set_hooks(peer_hooks h);

  /// The node's membership view, within `timeout`.
  caf::expected<members_view> members(millis timeout = millis{5000});

  /// Refuses new peers, tells every up peer it leaves and waits for their
  /// acknowledgements, at most `timeout`; the number acknowledged.
  caf::expected<size_t> leave(millis timeout);

private:
  node() = default;

  caf::actor_system* sys_ = nullptr;
  actors::node_actor actor_;
  std::shared_ptr<hook_slot> hooks_;
  uint16_t port_ = 0;
  std::string address_;
  std::string node_id_;
  std::unique_ptr<msg::guard_scope> guard_;
  std::chrono::steady_clock::time_point started_;
  bool tls_ = false;
  millis down_after_{2000};
  bool left_ = false;
};

/// Asks the node actor `node` (this process's or a peer's) for its
/// membership view from `sys`, within `timeout` (`node::members`, and the
/// client helpers of runtime/tools/client.hpp). Not on a thread of `sys`'s
/// own (see runtime/tools/client.hpp).
caf::expected<members_view> ask_members(caf::actor_system& sys,
                                        const actors::node_actor& node,
                                        millis timeout);

} // namespace kvtier::cluster
