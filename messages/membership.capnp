# Membership messages between kvtier nodes (runtime/cluster/, docs/cluster.md
# "Joining", "Failure detection", "Shutdown"). CAF's middleman carries them
# as sealed carriers; none holds side buffers. Owned by messages/; the
# node actor (runtime/cluster/node_actor.hpp) checks every field's size
# before it believes one, so a malformed or oversized message from a peer
# is refused and counted, never trusted.
@0xf9e4066f23a3f673;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

struct NodeIdentity {
  # Who a node is, as it says when two nodes meet.
  nodeId @0 :Text;         # unique in the cluster (cluster.node-id)
  fingerprint @1 :Text;    # tiers::model_identity::fingerprint()
  protocol @2 :UInt32;     # cluster::protocol_version
  address @3 :Text;        # HOST:PORT it listens on
}

struct MemberAddress {
  # A member a node knows is up, so a newcomer can reach it too.
  nodeId @0 :Text;
  address @1 :Text;
}

struct ClusterHello {
  # The connecting node introduces itself.
  from @0 :NodeIdentity;
}

struct ClusterHelloReply {
  accepted @0 :Bool;
  reason @1 :Text;         # why not, in words (empty when accepted)
  from @2 :NodeIdentity;   # the answering node
  members @3 :List(MemberAddress); # the answering node's up members
  kind @4 :Text;           # the refusal: "model identity", "node id",
                           # "protocol version", "malformed", "leaving"
}

struct ClusterHeartbeat {
  # Sent to every up member every cluster.heartbeat-ms.
  nodeId @0 :Text;
  seq @1 :UInt64;
  members @2 :List(MemberAddress);
  load @3 :NodeLoad;       # unset: the sender's admission did not answer
}

struct ClusterLeave {
  # The sender is shutting down: mark it down now.
  nodeId @0 :Text;
}

struct ClusterLeaveReply {
  known @0 :Bool;          # whether the receiver had it as a member
}

struct ListMembers {
  # Ask a node for its membership view (tests, `kvtier members`).
}

struct MemberView {
  nodeId @0 :Text;
  address @1 :Text;
  state @2 :Text;          # "up", "down", "left"
}

struct ListMembersReply {
  self @0 :NodeIdentity;
  members @1 :List(MemberView);
  refusedIdentity @2 :UInt64;  # hellos refused: another model identity
  refusedNodeId @3 :UInt64;    # hellos refused: node id collision
  refusedProtocol @4 :UInt64;  # hellos refused: another protocol version
  badMessages @5 :UInt64;      # malformed, oversized or unexpected input
  leaving @6 :Bool;            # shutting down
  refusedOversized @7 :UInt64;   # peer messages over max-message-bytes (never decoded)
  refusedUndecodable @8 :UInt64; # peer messages that failed to decode
  refusedAdmin @9 :UInt64;       # admin requests from remote senders refused
  refusedHandshake @10 :UInt64;  # our connection attempts closed in the (TLS) handshake
  oversizedFrames @11 :UInt64;   # frames on the node's port announced over their bound (connection closed)
  garbageFrames @12 :UInt64;     # frame headers on the node's port that are not CAF's protocol (closed)
  refusedConnections @13 :UInt64; # connections the port's gate closed before their handshake (too many unproven, rate, a failing source)
  failedHandshakes @14 :UInt64;  # connections to the port that closed without finishing CAF's handshake
}

struct NodeLoad {
  # How busy a node is, as its heartbeats say (the router weighs it,
  # tiers/routing.hpp): its admission's figures when the beat left.
  heldBytes @0 :UInt64;    # KV bytes admitted requests hold
  budgetBytes @1 :UInt64;  # admission.kv-budget-bytes
  holders @2 :UInt64;      # requests holding bytes
  waiting @3 :UInt64;      # admits queued
}
