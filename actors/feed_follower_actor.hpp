// The feed follower: follows the event feed (actors/feed_actor.hpp) of
// every peer of this node and hands what it learns to one target actor as
// `actors::directory_batch` messages (the peer tier's directory; a probe in
// tests). docs/cluster.md "Event feed" states the rules.
//
// `feed_sequence` is the plain sequence logic, one record per followed
// node (single-threaded, no actor code): the next seq in order is applied;
// a duplicate or older one is ignored; a gap, or a batch of another
// incarnation (the peer restarted), asks for a resync, i.e. a subscription
// from 0, whose snapshot replaces everything the node held (replace=true)
// and whose seq the following batches continue. While a subscription is
// out, pushed batches are ignored: its reply decides where the node stands.
//
// The actor (`spawn_feed_follower`) is a cluster listener of the node
// actor (actors/node_actor.hpp): on `peer_up_atom(node, handle)` it
// subscribes through `handle` (the peer's node actor forwards to its feed)
// from the node's last seq + 1, or from 0 for a node it does not follow
// (first meeting, or a rejoin after a down: the peer tier dropped that
// node's entries, so a snapshot brings them back); on `peer_down_atom` it
// forgets the node. Every subscription has a deadline (`deadline`); one that
// fails waits for the node's next up. Batches are believed only from the
// CAF node of the handle the node came up with, after `read_batch`'s
// checks; anything else is refused and counted. Owned by
// runtime/service/spawn.cpp (or a test).
#pragma once

#include "actors/cluster_interfaces.hpp"
#include "actors/feed_actor.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace kvtier::actors {

/// What a follower makes of one batch, snapshot or reply.
enum class follow_verdict : uint8_t {
  /// `batch` holds what to hand on.
  apply,
  /// Old, duplicate, not followed, or waiting for a subscription's reply.
  ignore,
  /// A gap or a restart: subscribe from 0 (`subscribe_from` says so).
  resync,
};

struct follow_step {
  follow_verdict verdict = follow_verdict::ignore;
  actors::directory_batch batch;
};

/// The directory item of an event (present for put and durable).
actors::directory_item item_of(const actors::feed_event& e);

/// Every holding of a snapshot as directory items (one per tier held).
caf::expected<std::vector<actors::directory_item>>
read_snapshot(msg::FeedSnapshot::Reader s);

class feed_sequence {
public:
  /// Where a subscription to `node` starts.
  struct start {
    uint64_t from_seq = 0;
    uint64_t incarnation = 0;
  };

  /// 0 for a node not followed or due for a resync, else last seq + 1.
  start subscribe_from(const std::string& node) const;

  /// A subscription to `node` is out: batches are ignored until its reply.
  void subscribing(const std::string& node);

  /// It failed: the node waits for its next up (nothing is applied).
  void subscribe_failed(const std::string& node);

  /// A pushed batch of `node`.
  follow_step on_batch(const std::string& node, uint64_t incarnation,
                       uint64_t first_seq,
                       const std::vector<actors::feed_event>& events);

  /// A subscription's reply: following (events from first_seq).
  follow_step on_following(const std::string& node, uint64_t incarnation,
                           uint64_t first_seq,
                           const std::vector<actors::feed_event>& events);

  /// A subscription's reply: a snapshot current at `seq`.
  follow_step on_snapshot(const std::string& node, uint64_t incarnation,
                          uint64_t seq,
                          std::vector<actors::directory_item> items);

  /// `node` went down: everything known of it goes.
  void forget(const std::string& node);

  /// Whether `node` is followed (subscribed or subscribing).
  bool follows(const std::string& node) const;

  /// The last seq applied of `node` (0: none).
  uint64_t last(const std::string& node) const;

  follow_counts& counts() noexcept {
    return counts_;
  }
  const follow_counts& counts() const noexcept {
    return counts_;
  }

private:
  struct record {
    uint64_t incarnation = 0;
    uint64_t last = 0;
    bool awaiting = false;
    /// Why a snapshot is needed (directory_batch::after_gap or
    /// after_restart); 0: none.
    uint8_t resync = 0;
    /// A snapshot or a following reply arrived: `last` counts.
    bool synced = false;
  };
  /// `r` needs a snapshot, for `why`; counted as a gap or a restart.
  follow_step resync(record& r, uint8_t why);
  follow_step apply(const std::string& node, record& r,
                    const std::vector<actors::feed_event>& events,
                    uint64_t first_seq);
  std::map<std::string, record> nodes_;
  follow_counts counts_;
};

/// Spawns the follower actor: directory batches go to `target` (may be
/// null: followed, handed to nobody); each subscription waits at most
/// `deadline`. Pass it to the node as a listener.
feed_follower_actor spawn_feed_follower(caf::actor_system& sys,
                                        directory_sink_actor target,
                                        std::chrono::milliseconds deadline);

} // namespace kvtier::actors
