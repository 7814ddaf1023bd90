# Messages between the cache_service facade and the tier actors (RAM, SSD,
# sessions, checkpoints), from the RAM tier to the SSD tier, and from the
# sessions actor to the RAM tier. Owned by messages/.
#
# The RAM tier never touches storage: eviction, demotion, snapshots and
# checkpoint persistence all become SpillEntry orders to the SSD actor,
# which replies when the write is durable or has failed.
@0xe1f98df181ab373e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

using Common = import "common.capnp";
using Service = import "service.capnp";
using Membership = import "membership.capnp";
using Entry = Common.Entry;
using EntryKey = Common.EntryKey;
using Error = Common.Error;

# An acquire's lookups: the facade hands the engine's AcquireState itself to
# the RAM tier (which answers with the engine's AcquireStateReply, forwarded
# unchanged when RAM wins) and to the SSD tier (which answers below).

struct FindPrefix {
  # RAM -> SSD, before it marks a restored entry durable: the longest usable
  # saved prefix, from the index only.
  ns @0 :Text;
  prompt @1 :List(UInt32);
  betterThan @2 :UInt64;   # only strictly longer prefixes are candidates
}

struct FindPrefixReply {
  # SSD -> service, to an AcquireState: the longest usable saved prefix,
  # from the index only.
  usableTokens @0 :UInt64; # 0: no candidate
  key @1 :EntryKey;        # the file's entry (may be longer than usable)
}

struct RestoreEntry {
  # Service -> SSD: read a saved entry back into RAM-ready buffers; RAM ->
  # SSD for an object (key kind object, usableTokens 0), which the SSD
  # actor answers from a pending write of the key when one holds it.
  key @0 :EntryKey;
  usableTokens @1 :UInt64; # trim to this many tokens after the read
  requestId @2 :UInt64;    # whose interest keeps the result resident
}

struct RestoreEntryReply {
  union {
    entry @0 :Entry;       # the restored state, trimmed to usableTokens
    failed @1 :Error;      # not_found, corrupt_data, io_error...
  }
  coalesced @2 :Bool;      # joined a read already in flight
  durable @3 :Bool;        # when the reply left: a file of the key is
                           # indexed and no newer write of it is pending
                           # (an object answered from the write-behind
                           # queue is not)
}

enum SpillReason {
  spill @0;                # evicted over the RAM cap
  demote @1;               # idle demotion
  snapshot @2;             # prefix snapshot for durability (stays in RAM)
  checkpoint @3;           # a generation checkpoint
}

struct SpillEntry {
  # RAM -> SSD: write this item durably (temp, fsync, rename).
  orderId @0 :UInt64;      # the RAM tier's id for this order
  reason @1 :SpillReason;
  item :union {
    entry @2 :Entry;       # a prefix entry (or a checkpoint)
    object @3 :Common.StoredObject; # an exact tensor object (any reason
                           # but checkpoint; kind prefix)
  }
  parent :union {
    none @4 :Void;
    key @5 :EntryKey;      # a file holding a shared prefix of the entry
  }
  kind :union {
    prefix @6 :Void;       # the entry is a prefix entry (reasons other
                           # than checkpoint)
    checkpoint @7 :Common.CheckpointKey; # reason checkpoint only
  }
  notify @8 :Bool;         # RAM -> SSD: answered `queued` at once; every
                           # outcome of the write (also an immediate one)
                           # follows as a SpillSettled to the RAM actor
  priority @9 :UInt8 = 35; # the entry's retention priority in RAM (0..100):
                           # the SSD tier evicts every file of a lower
                           # priority before any of a higher one
}

enum SpillOutcome {
  durable @0;              # written and fsynced
  alreadyDurable @1;       # its file existed: nothing written
  failed @2;               # the write failed (see error)
  refused @3;              # larger than the SSD cap, or the tier is closed
  dropped @4;              # the write-behind queue was full
  superseded @5;           # a newer write of the same key replaced it
  cancelled @6;            # an EraseEntry of the key took it back unwritten
  givenUp @7;              # failed its last attempt: released unwritten
  queued @8;               # (notify orders) taken; SpillSettled follows
}

struct SpillEntryReply {
  orderId @0 :UInt64;
  outcome @1 :SpillOutcome;
  error @2 :Error;         # code 0 unless failed or refused
  fileBytes @3 :UInt64;    # bytes the file takes on storage
}

struct SpillSettled {
  # SSD -> RAM, for a SpillEntry with `notify`: one outcome of its write,
  # in the order they happen (failed ones, while the SSD tier retries,
  # then one final: durable, alreadyDurable, dropped, givenUp, cancelled,
  # superseded, refused). Normal priority, on the FIFO of SsdEvictEvent,
  # so a durable outcome always comes before the event of that file's
  # removal.
  orderId @0 :UInt64;
  outcome @1 :SpillOutcome;
  error @2 :Error;         # why, for failed, givenUp and refused
  attempts @3 :UInt32;     # attempts made so far
}

struct FindCheckpoint {
  # Service -> checkpoints: the request's newest resumable generation, if
  # it extends the request's prompt (its tokens begin with it).
  request @0 :Common.RequestIdentity;
}

struct FindCheckpointReply {
  union {
    none @0 :Void;
    entry @1 :Entry;       # prompt + generated tokens and their state
  }
  fromSsd @2 :Bool;        # found after a restart, read from storage
  staleTokens @3 :UInt64;  # none: the identity's checkpoint does not
                           # extend the prompt (its tokens); 0: none held
}

struct InstallEntry {
  # Service -> RAM: place an entry that came from another tier (a restore
  # from SSD, a fetch from a peer) so later requests find it in RAM.
  entry @0 :Entry;
  durable @1 :Bool;        # its SSD file exists: leaving RAM needs no write
  interest @2 :UInt64;     # request or prefetch lease keeping it resident;
                           # 0 for none
}

struct InstallEntryReply {
  kept @0 :Bool;
  outcome @1 :Service.PutOutcome;
}

enum SsdEvictReason {
  evicted @0;              # least recently used over the SSD byte cap
  corrupt @1;              # a restore found it corrupt; the file is removed
  gone @2;                 # a restore found it gone or replaced; forgotten
  erased @3;               # removed on request (EraseEntry)
  superseded @4;           # a trimmable longer file of the same ns serves
                           # every prompt it did
}

struct SsdEvictEvent {
  # SSD -> RAM, one per entry file the SSD tier stops holding; for a
  # checkpoint file (key kind checkpoint) SSD -> checkpoints instead. RAM copies that file backed (the entry of this key, and
  # entries restored trimmed from it) are no longer durable and must be
  # written before they leave RAM; a checkpoint held in memory whose file
  # it was is written again by the next flush. Sent after every reply that
  # told the receiver the file was durable, so the pair's FIFO order keeps
  # a durable mark from outliving its file.
  key @0 :EntryKey;
  reason @1 :SsdEvictReason;
  fileBytes @2 :UInt64;    # bytes the file took on storage
}

struct KeepsBytes {
  # Service -> RAM: whether state of this many projected bytes could be
  # kept (WouldKeep, once the service has projected the request's bytes).
  bytes @0 :UInt64;
}

struct KeepsBytesReply {
  keeps @0 :Bool;
}

struct EraseEntry {
  # Checkpoints -> SSD: remove the file of exactly this key (a checkpoint
  # file a newer durable one made redundant; a completed generation uses
  # RemoveCheckpoints) and cancel every write of it pending now (a queued
  # one is never written; one in flight is removed once it finishes). Not
  # an error when absent. RAM -> SSD for an object key: a put replaced the
  # object, so no older copy of it may ever be restored.
  key @0 :EntryKey;
}

struct EraseEntryReply {
  erased @0 :Bool;         # false: no such file and no write of it
}

struct RemoveCheckpoints {
  # Checkpoints -> SSD: a completed generation. Remove every file and
  # pending write of the checkpoint identity (request, ns), whatever their
  # tokens or attempt, durably: the reply comes once a removal record
  # covering them is durable (or they are durably gone), so a restart never
  # indexes them again. Writes of the identity ordered later are not
  # affected.
  request @0 :UInt64;
  ns @1 :Text;
}

struct RemoveCheckpointsReply {
  durable @0 :Bool;        # false: pending (error says why); every flush
                           # retries it and reports it until it is done
  error @1 :Error;
}

struct SessionPutEvent {
  # Service -> sessions: a publish naming a session was kept in RAM and
  # pinned there as the session's newest entry. No reply.
  session @0 :Text;
  key @1 :EntryKey;
  pin @2 :UInt64;          # the RAM tier's pin protecting it
}

struct UnprotectEntry {
  # Sessions -> RAM: take one pin off an entry (a session moved on or
  # closed). Deletes nothing; not an error when the entry or the pin left.
  key @0 :EntryKey;
  pin @1 :UInt64;
}

struct UnprotectEntryReply {
  unprotected @0 :Bool;    # false: the entry, or this pin on it, had left
}

struct PeerHoldings {
  # Service -> peer tier, for a RouteRequest: what every up peer holds of
  # this prompt and how loaded it said it is.
  ns @0 :Text;
  prompt @1 :List(UInt32);
}

struct PeerHolding {
  nodeId @0 :Text;
  address @1 :Text;
  ramTokens @2 :UInt64;    # longest usable prefix in its RAM (directory)
  ssdTokens @3 :UInt64;    # on its SSD
  load @4 :Membership.NodeLoad; # its last heartbeat's (unset: none yet)
}

struct PeerHoldingsReply {
  peers @0 :List(PeerHolding);
}
