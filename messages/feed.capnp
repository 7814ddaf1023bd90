# The event feed of a kvtier node (actors/feed_actor.hpp, docs/cluster.md
# "Event feed"): every change of what the node holds in RAM and on SSD,
# numbered per node from 1 without holes, pushed to subscribers in batches
# (one message per feed turn, not per event), and a snapshot of everything
# held for a subscriber that joins late or saw a gap. Prefix entries only:
# no checkpoint, no object. Owned by messages/. None holds side buffers, so
# each may cross nodes through CAF's middleman; a receiver checks every
# size (feed_limits in actors/feed_actor.hpp) before it believes one, and
# refuses and counts what is malformed.
@0xb3ebe4fa6d501c47;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

enum FeedKind {
  put @0;          # RAM stored the entry (a publish, an install, a replace)
  evict @1;        # it left RAM (over the cap, a boundary, a close)
  demote @2;       # it left RAM by idle demotion (it is durable on SSD)
  durable @3;      # an SSD file of it was written (or found at start)
  superseded @4;   # it left RAM: a longer trimmable entry stands in for it
  removed @5;      # its SSD file is gone (evicted, erased, cap lowered)
}

enum FeedTier {
  ram @0;
  ssd @1;
}

struct FeedEvent {
  # One numbered change.
  seq @0 :UInt64;          # per node, from 1, no holes
  kind @1 :FeedKind;
  tier @2 :FeedTier;       # ram for put/evict/demote/superseded, ssd else
  ns @3 :Text;
  key @4 :List(UInt32);    # the entry's tokens
  byteLength @5 :UInt64;   # bytes a fetch would move (layers only)
  trimmable @6 :Bool;      # serves shorter prefixes too
}

struct FeedBatch {
  # Consecutive events of one node: events[i].seq == firstSeq + i.
  node @0 :Text;           # the publishing node's id
  incarnation @1 :UInt64;  # random per feed start: a restart changes it
  firstSeq @2 :UInt64;
  events @3 :List(FeedEvent);
}

struct FeedHolding {
  # One prefix entry a node holds, in one or both tiers.
  ns @0 :Text;
  key @1 :List(UInt32);
  inRam @2 :Bool;
  inSsd @3 :Bool;
  ramBytes @4 :UInt64;
  ssdBytes @5 :UInt64;
  trimmable @6 :Bool;
}

struct FeedSnapshot {
  # Everything a node holds, current at `seq` (events from seq + 1 follow),
  # in `parts` parts of a few MiB each, so a large table never needs one
  # giant message: the SubscribeFeedReply carries one part and the feed
  # pushes the others to the subscriber; every part names the same node,
  # incarnation and seq, and the snapshot holds once all have arrived.
  node @0 :Text;
  incarnation @1 :UInt64;
  seq @2 :UInt64;
  entries @3 :List(FeedHolding);
  part @4 :UInt32;         # this part's index, from 0
  parts @5 :UInt32;        # parts in all (0: one, from a sender before parts)
}

struct SubscribeFeed {
  # Follow a node's feed from `fromSeq` (0: a snapshot first). The sender
  # becomes a subscriber (monitored) and receives FeedBatch messages.
  fromSeq @0 :UInt64;
  incarnation @1 :UInt64;  # of the feed fromSeq counts in; 0: unknown
  fromNow @2 :Bool;        # local embedders: no replay, no snapshot
}

struct SubscribeFeedReply {
  union {
    following @0 :FeedBatch;    # the events from fromSeq held in the ring
    snapshot @1 :FeedSnapshot;  # the ring no longer holds fromSeq
  }
}
