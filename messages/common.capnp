# Common structures of the kvtier message protocol: the envelope every flat
# message starts with, tensor payloads, layer descriptors, entries, request
# identity and errors. Owned by messages/; every other schema imports it.
#
# Policy: ordinals are append-only (a message crosses nodes running other
# builds). A change that an older reader would misread bumps `protocol`.
@0xb1881292457d17c0;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

const protocolVersion :UInt16 = 1;
# Written into every envelope; a reader rejects any other value.

struct Envelope {
  # The root of every flat kvtier message. The body's type travels beside
  # it, so bytes of one message kind read as another give an error instead
  # of a plausible-looking wrong value.
  rootType @0 :UInt64;   # Cap'n Proto type id of the body's struct
  protocol @1 :UInt16;   # protocolVersion of the writer
  body @2 :AnyPointer;   # the message itself, a struct of type rootType
}

struct Payload {
  # Tensor bytes. In-process they ride beside the message as shared
  # buffers (zero-copy); across nodes they are inline Data.
  length @0 :UInt64;     # bytes; equals the side view's or data's length
  union {
    side @1 :UInt32;     # in-process: index into the carrier's side views
    data @2 :Data;       # across nodes: the bytes themselves
  }
}

enum LayerKind {
  kv @0;                 # grows per token, token-major, trimmable
  ring @1;               # sliding window; trimmable while offset < window
  recurrent @2;          # fixed size, valid only at its exact offset
  object @3;             # an exact tensor object (encoder output)
}

struct LayerDescriptor {
  # What a layer state is, without its bytes (SSD headers, admission and
  # saved-prefix listings use it alone).
  kind @0 :LayerKind;
  bytesPerToken @1 :UInt32;  # kv, ring: bytes of one token row; else 0
  window @2 :UInt32;         # ring: window in tokens; else 0
  tokens @3 :UInt64;         # tokens this state encodes (its offset)
  minOffset @4 :UInt64;      # cannot be trimmed below this offset
  byteLength @5 :UInt64;     # total bytes of the layer's segments
}

struct Layer {
  # One model layer's state: its descriptor and its bytes in order.
  descriptor @0 :LayerDescriptor;
  segments @1 :List(Payload);  # concatenated, they hold byteLength bytes
}

struct Attachment {
  # An exact-boundary tensor a producing method attaches to an entry.
  name @0 :Text;
  segments @1 :List(Payload);
}

struct Entry {
  # Tokens + namespace + the layer states that encode exactly that prefix.
  ns @0 :Text;
  tokens @1 :List(UInt32);
  layers @2 :List(Layer);
  attachments @3 :List(Attachment);
  session :union {
    none @4 :Void;         # not tied to a session
    id @5 :Text;           # the session that produced it
  }
  priority @6 :UInt8 = 35; # the retention priority (0..100) it is kept by
                           # where it goes next: a restored or fetched
                           # entry keeps its file's or donor's; not part
                           # of the state (a publish takes its request's)
}

struct StoredObject {
  # An exact tensor object (an encoder output), stored under its key.
  key @0 :Text;
  attachments @1 :List(Attachment);
}

struct CheckpointKey {
  # What names a checkpoint beyond its namespace and tokens
  # (tiers/storage_key.hpp).
  request @0 :UInt64;      # the engine request id (part of the key)
  attempt @1 :UInt32;      # the attempt that wrote it (not part of the key)
}

struct EntryKey {
  # Names an entry without its state: namespace, exact tokens and what kind
  # of key it is. A checkpoint or an object is its own kind of key, never a
  # namespace convention: no prefix key names one.
  ns @0 :Text;
  tokens @1 :List(UInt32);
  kind :union {
    prefix @2 :Void;       # a reusable prefix entry (the default)
    checkpoint @3 :CheckpointKey; # a generation checkpoint of one request
    object @4 :Void;       # an exact tensor object: ns holds its key, no
                           # tokens
  }
}

struct RequestIdentity {
  # Who asks: one engine request, as the scheduler knows it.
  id @0 :UInt64;           # the engine's request id, unique while live
  ns @1 :Text;             # namespace its state belongs to
  session :union {
    none @2 :Void;
    id @3 :Text;           # the conversation it belongs to
  }
  prompt @4 :List(UInt32); # prompt tokens
  maxNewTokens @5 :UInt32; # generation budget (for admission projections)
  attempt @6 :UInt32;      # which try of the request id this is (a retry
                           # is a new attempt); owns the checkpoints it
                           # saves or resumes
  priority @7 :UInt8 = 35; # retention of the state it publishes, 0..100:
                           # every RAM entry of a lower priority is evicted
                           # before any of a higher one (more is refused)
  pinMs @8 :UInt64;        # pin the state it publishes in RAM this long,
                           # renewed by every hit, within the pin budget;
                           # 0: no pin
}

struct Error {
  # A failure as a value: kvtier::ec code and human-readable context.
  code @0 :UInt8;          # a kvtier::ec enumerator (append-only)
  context @1 :Text;        # what failed, with the values involved
}

enum Tier {
  none @0;                 # nowhere: fresh state
  ram @1;                  # the RAM tier (zero-copy views of a donor)
  ssd @2;                  # the SSD tier (restored from a file)
  checkpoint @3;           # the request's own resumable generation
  peer @4;                 # another node
  store @5;                # a store added beside the built-in tiers (its
                           # name is in the report's `tiers`)
}
