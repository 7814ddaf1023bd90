// The event feed: one actor per service that numbers every change of what
// the node holds (issue #12 item 2, docs/cluster.md "Event feed"). The RAM
// actor tells it of put, evict, demote and superseded, the SSD actor of
// durable and removed (and, when attached, of every prefix file it holds
// already: they are the feed's first events), each as one `feed_change`
// send: no reply, no waiting, so the RAM actor's hot path pays one message.
//
// Policy: every change that alters the feed's table (what each tier holds,
// by (ns, key)) gets the next sequence number (from 1, no holes); one that
// changes nothing (the removal of an entry the table does not hold) is not
// an event. The table is a radix tree per tier (tiers/prefix_tree.hpp), so
// keys that share a prefix share its tokens, as in the tiers' own indexes.
// The last `ring` events are kept, and no more than `ring_bytes` of them
// (each event carries its entry's whole key); the memory both take is
// published in `feed_memory` for the service's report. Subscribers (local
// actors, or a peer's follower through its node actor) are monitored and get
// the events of each turn as FeedBatch messages: the feed sends itself a flush
// after the first change of a turn, so a busy feed sends one batch per
// subscriber per turn, not one message per event (and at most
// `feed_limits::batch_events` events per batch). SubscribeFeed{fromSeq}
// answers `following` with the events from fromSeq when the ring holds them
// all without a hole (and the subscriber names this feed's incarnation),
// else `snapshot`: the table itself at the current seq, consistent by
// construction, in parts of `snapshot_part_bytes` (the reply carries the
// first; the others are pushed to the subscriber as FeedSnapshot messages
// before it); events from seq + 1 follow either way. Prefix entries only.
//
// Test hook: `feed_skip_atom` (local senders only; a remote one is refused
// and counted) makes the feed skip sequence numbers so a follower sees a
// gap. Owned by runtime/service/spawn.cpp; used only through messages.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/prefix_tree.hpp"

#include <caf/event_based_actor.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::actors {

/// Bounds of feed messages: what a feed sends, and what a receiver accepts
/// (anything larger is refused and counted, never trusted).
struct feed_limits {
  /// Events in one pushed FeedBatch (a turn with more sends several).
  static constexpr size_t batch_events = 1024;
  /// Events in any FeedBatch a receiver accepts (a `following` reply
  /// carries up to the ring's length).
  static constexpr size_t max_events = 1u << 20;
  /// Entries of a snapshot a receiver accepts (all parts together).
  static constexpr size_t max_entries = 1u << 21;
  /// Bytes of keys and fields in one snapshot part a feed sends (an entry
  /// larger than that alone is a part of its own), and the parts of one
  /// snapshot a receiver accepts.
  static constexpr size_t snapshot_part_bytes = size_t{4} << 20;
  static constexpr size_t max_snapshot_parts = 1u << 16;
  /// Bytes of a namespace.
  static constexpr size_t max_ns_bytes = 4096;
  /// Tokens of a key.
  static constexpr size_t max_key_tokens = 1u << 22;
  /// Bytes of a node id (cluster::max_node_id_bytes).
  static constexpr size_t max_node_bytes = 128;
};

/// One feed event, decoded (what local subscribers are given).
struct feed_event {
  uint64_t seq = 0;
  msg::FeedKind kind = msg::FeedKind::PUT;
  msg::FeedTier tier = msg::FeedTier::RAM;
  std::string ns;
  std::vector<uint32_t> key;
  uint64_t bytes = 0;
  bool trimmable = false;

  friend bool operator==(const feed_event&, const feed_event&) = default;
};

/// "put", "evict", ... (the schema's names).
const char* to_string(msg::FeedKind k);

/// The events of a batch, checked against `feed_limits` (consecutive seqs
/// from firstSeq, known kinds and tiers, bounded sizes); an error
/// (`malformed_message`, `message_limit_exceeded`) naming what is wrong.
caf::expected<std::vector<feed_event>> read_batch(msg::FeedBatch::Reader b);

/// The memory the feed holds, updated by the feed after every change and
/// read by the service's report from any thread (the `process` part).
struct feed_memory {
  /// Events in the ring, and the bytes they hold (structs and keys).
  std::atomic<uint64_t> ring_events{0};
  std::atomic<uint64_t> ring_bytes{0};
  /// Entries of the table (both tiers), and the bytes its trees hold.
  std::atomic<uint64_t> table_entries{0};
  std::atomic<uint64_t> table_bytes{0};
};

/// What one event costs the ring: its struct, its namespace and key, and
/// the allocator's overhead of each.
uint64_t ring_bytes_of(const feed_event& e);

struct feed_config {
  /// The node id batches and snapshots name (may be set later).
  std::string node;
  /// Distinguishes this feed from an earlier one of the same node (a
  /// restart); 0: a random one.
  uint64_t incarnation = 0;
  /// Events kept for subscribers that come back (`cluster.feed-ring`; the
  /// service sets it, this default equals the shipped one, checked by
  /// tests/runtime/options_test.cpp).
  size_t ring = 4096;
  /// Bytes the ring's events may hold (`cluster.feed-ring-bytes`, the
  /// same check): the oldest leave first when either bound is passed.
  uint64_t ring_bytes = uint64_t{16} << 20;
  /// Where the feed publishes its memory (may be null).
  std::shared_ptr<feed_memory> memory;
  /// Local subscribers from the first event on (the put observer).
  std::vector<caf::actor> subscribers;
  /// Bytes of one snapshot part (tests make it small).
  size_t snapshot_part_bytes = feed_limits::snapshot_part_bytes;
};

struct feed_state {
  static inline const char* name = "event-feed";

  struct subscriber {
    caf::actor handle;
    /// The first seq it has not been sent.
    uint64_t next = 1;
  };

  feed_config cfg;
  uint64_t seq = 0;
  /// What each tier holds now (index: msg::FeedTier), by (ns, key); an
  /// entry's value packs the bytes held and whether it is trimmable
  /// (`bytes << 1 | trimmable`).
  tiers::prefix_tree tables[2];
  std::deque<feed_event> ring;
  /// What the ring's events hold (`ring_bytes_of` each).
  uint64_t ring_bytes = 0;
  /// Events numbered since the last flush.
  std::vector<feed_event> pending;
  bool flush_armed = false;
  std::vector<subscriber> subscribers;
  /// Subscribers dropped since start (down, or ended).
  uint64_t dropped = 0;
  /// Requests refused (malformed, remote test hooks).
  uint64_t refused = 0;
};

using feed_pointer = feed_actor::stateful_pointer<feed_state>;

/// The behaviour.
feed_actor::behavior_type feed(feed_pointer self, feed_config cfg);

/// A local subscriber: calls `f` for every event of every batch it gets
/// (on its own actor thread, in seq order); what `f` throws is counted in
/// `*errors` (may be null) and contained.
caf::behavior feed_listener(caf::event_based_actor* self,
                            std::function<void(const feed_event&)> f,
                            std::shared_ptr<std::atomic<uint64_t>> errors);

} // namespace kvtier::actors
