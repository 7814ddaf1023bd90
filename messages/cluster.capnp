# Messages between kvtier nodes (CAF's middleman carries them). Owned by
# messages/.
#
# Nothing here holds side-buffer references: a node fetches a peer's entry
# as the flat bytes of a sealed message (see transfer.hpp), pulled chunk by
# chunk (a few MiB each), and verifies total length and checksum before it
# decodes and installs anything. Peers announce puts and evictions so each
# node knows which prefixes its peers hold.
@0xcdd742120eff48d2;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

using Common = import "common.capnp";
using EntryKey = Common.EntryKey;

struct PeerPutEvent {
  # A node stored an entry its peers may fetch.
  node @0 :Text;           # the announcing node's name
  key @1 :EntryKey;
  byteLength @2 :UInt64;   # bytes a fetch would transfer (layers only)
  trimmable @3 :Bool;      # whether shorter prefixes of it are usable
}

struct PeerEvictEvent {
  # A node no longer holds an entry.
  node @0 :Text;
  key @1 :EntryKey;
}

struct TransferHeader {
  # Describes flat message bytes about to be pulled in chunks.
  transferId @0 :UInt64;   # the sender's id, unique while it is live
  rootType @1 :UInt64;     # envelope rootType of the flat message
  totalLength @2 :UInt64;  # bytes of the flat message
  chunkSize @3 :UInt32;    # bytes per chunk; the last may be shorter
  chunkCount @4 :UInt32;
  checksum @5 :UInt64;     # XXH3-64 of the whole flat message
  bulkPort @6 :UInt16;     # the sender's bulk lane (bulk_lane.hpp); 0: none
  bulkToken @7 :UInt64;    # what the lane wants to hear for this transfer
  bulkHost @8 :Text;       # the numeric address the lane listens on (a
                           # receiver connects only to a loopback one
                           # until TLS, #13); empty: the peer's own host
  laneChecksum @9 :Bool;   # true: `checksum` is unset and the lane sends its
                           # checksum over the pieces' blocks after the bytes
                           # (lanePieces); the transfer is served on the lane
                           # only
  lanePieces @10 :List(UInt64); # a lane transfer: the lengths of the pieces
                           # the lane writes one after another (they sum to
                           # totalLength); its checksum is over their blocks
                           # (docs/messages.md "The bulk lane's checksum")
}

struct FetchEntry {
  # Ask a peer for its longest usable prefix of `prompt`.
  ns @0 :Text;
  prompt @1 :List(UInt32);
  betterThan @2 :UInt64;   # only a strictly longer prefix is worth it
}

struct FetchEntryReply {
  usableTokens @0 :UInt64; # 0: nothing better
  union {
    none @1 :Void;
    transfer @2 :TransferHeader; # a flat RestoreEntryReply to pull
  }
}

struct FetchChunk {
  # Pull one chunk of a transfer.
  transferId @0 :UInt64;
  index @1 :UInt32;
}

struct FetchChunkReply {
  transferId @0 :UInt64;
  index @1 :UInt32;
  offset @2 :UInt64;       # index * chunkSize
  data @3 :Data;           # chunkSize bytes (fewer for the last chunk)
}

struct CancelTransfer {
  # The receiver gives up; the sender frees the flat bytes.
  transferId @0 :UInt64;
}

struct CancelTransferReply {
  cancelled @0 :Bool;      # false: unknown or already finished
}
