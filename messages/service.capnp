# Messages between the engine-facing API (runtime/) and the cache_service
# facade actor, one request/reply pair per call of docs/api.md, plus
# the put-observer event. Owned by messages/.
#
# State rides as `Entry` values whose payloads are side-buffer references
# in-process. Failures of a whole call travel as CAF errors (kvtier::ec);
# `Error` fields below carry detail inside replies that otherwise succeed.
@0x9660d2da5dd30441;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

using Common = import "common.capnp";
using Entry = Common.Entry;
using EntryKey = Common.EntryKey;
using Error = Common.Error;
using RequestIdentity = Common.RequestIdentity;
using Tier = Common.Tier;

struct PeekPrefix {
  # Longest prefix of `prompt` held in RAM under `ns`; takes nothing.
  ns @0 :Text;
  prompt @1 :List(UInt32);
}

struct PeekPrefixReply {
  tokens @0 :UInt64;       # usable prefix length in RAM; 0 when none
}

struct AcquireState {
  # The request's checkpoint, else its longest usable prefix, else fresh.
  request @0 :RequestIdentity;
}

struct AcquireStateReply {
  source @0 :Tier;         # where the state came from; none: fresh
  usableTokens @1 :UInt64; # prompt tokens the state covers
  entry @2 :Entry;         # the lent state, trimmed to usableTokens
  staleCheckpointTokens @3 :UInt64; # the request's checkpoint did not
                           # extend its prompt (its tokens; it was not
                           # served); 0: none
}

enum PutOutcome {
  kept @0;                 # stored as a new entry
  replaced @1;             # stored, replacing the entry with the same key
  droppedOverCap @2;       # larger than the whole cap: spilled, then dropped
  droppedByPolicy @3;      # the retention policy declined it
  droppedClosed @4;        # the service is closing or closed
}

struct PublishState {
  # The engine offers state covering `tokens` for reuse.
  request @0 :RequestIdentity;
  entry @1 :Entry;         # ns, tokens and layers of the offered state
  protect @2 :Bool;        # service -> RAM only: pin the new entry (its
                           # session's newest) in the same step as the put
}

struct PublishStateReply {
  kept @0 :Bool;           # whether the cache holds the state now
  outcome @1 :PutOutcome;  # why
  superseded @2 :UInt32;   # prefix-ancestors removed without spill
  pin @3 :UInt64;          # RAM -> service: the pin protecting the entry
                           # (protect set and kept); 0 otherwise
  pinned @4 :Bool;         # the request's pinMs was granted
  pinRefused @5 :Bool;     # it was refused: over the pin budget
}

struct WouldKeep {
  # Whether state this request would publish could be kept (keeps()).
  request @0 :RequestIdentity;
}

struct WouldKeepReply {
  keeps @0 :Bool;
}

struct AdmitRequest {
  # Hold the request's projected KV bytes now, or say it must wait.
  request @0 :RequestIdentity;
  queue @1 :Bool;          # true: wait in arrival order; the reply comes
                           # once admitted (an awaitable admit, never false)
}

struct AdmitRequestReply {
  union {
    admitted @0 :Bool;     # true: bytes held until release; false: wait
    never @1 :Error;       # position_limit_exceeded, over_budget; queue_full, closed
  }
  projectedBytes @2 :UInt64; # the request's projected KV bytes
  availableBytes @3 :UInt64; # budget left before this decision
}

struct FitsRequest {
  # Whether AdmitRequest would admit now; holds nothing.
  request @0 :RequestIdentity;
}

struct FitsRequestReply {
  union {
    fits @0 :Bool;
    never @1 :Error;       # as in AdmitRequestReply
  }
  projectedBytes @2 :UInt64;
  availableBytes @3 :UInt64;
}

struct ReleaseRequest {
  # The request is done: return its budget, settle its checkpoints.
  request @0 :RequestIdentity;
  completed @1 :Bool;      # true removes its checkpoints, false keeps them
}

struct ReleaseRequestReply {
  releasedBytes @0 :UInt64;       # 0 when the request held nothing
  checkpointsRemoved @1 :UInt32;  # owned by the released attempt
  checkpointsKept @2 :UInt32;     # owned by the released attempt
  removalPending @3 :Bool;        # completed, and the removal of a file
                                  # could not be made durable yet (the
                                  # next flushes retry it and report it)
  removalError @4 :Error;         # why, when removalPending
}

struct SaveCheckpoint {
  # A resumable point of the request's generation; the cache owns it.
  request @0 :RequestIdentity;
  entry @1 :Entry;         # prompt + generated tokens so far, and state
}

struct SaveCheckpointReply {
  kept @0 :Bool;           # false: disposed (e.g. over the cap, closed)
  tokens @1 :UInt64;       # tokens the newest kept checkpoint covers
}

struct CloseSession {
  # Drop a session's affinity; reusable state stays.
  session @0 :Text;
}

struct CloseSessionReply {
  unprotected @0 :UInt32;  # entries that lost session protection
}

struct PrefetchPrefix {
  # Start cold reads for a prompt while its request is being prepared.
  ns @0 :Text;
  prompt @1 :List(UInt32);
  session :union {
    none @2 :Void;
    id @3 :Text;
  }
  betterThan @4 :UInt64;   # facade -> SSD only: the usable prefix RAM holds;
                           # the SSD reads only a strictly longer one
}

struct PrefetchPrefixReply {
  leaseId @0 :UInt64;      # ends the interest via ReleasePrefetch; 0: none
  readsStarted @1 :UInt32; # new reads this prefetch started
  readsJoined @2 :UInt32;  # in-flight reads it joined (coalesced)
  tokens @3 :UInt64;       # longest prefix the reads will restore; 0: none
  entry @4 :Entry;         # SSD -> facade only: the restored state, which
                           # the facade installs in RAM under the lease
  ramTokens @5 :UInt64;    # facade -> engine: the usable prefix RAM held
                           # when the prefetch was decided
}

struct ReleasePrefetch {
  # End a prefetch's interest (the lease's release or its cancellation).
  leaseId @0 :UInt64;
}

struct ReleasePrefetchReply {
  released @0 :Bool;       # false: unknown or already released lease
}

struct DurabilityResult {
  # Evidence of what flush or close made durable.
  durable @0 :Bool;        # everything kept is on storage
  pending @1 :UInt64;      # writes still in flight
  dropped @2 :UInt64;      # entries that could not be stored (no room)
  failed @3 :UInt64;       # writes that failed
  entries @4 :UInt64;      # durable entries
  longestDurablePrefix @5 :UInt64; # tokens of the longest durable prefix
  errors @6 :List(Error);  # distinct failures, for the operator
  abandoned @7 :UInt64;    # close only: writes released unwritten (queued or failed)
  removalsPending @8 :UInt64; # completed checkpoints whose removal is not
                           # durable yet (retried by every flush)
}

struct FlushState {
  # Make every kept prefix and checkpoint durable as far as storage allows.
  unused @0 :Void;
}

struct FlushStateReply {
  result @0 :DurabilityResult;
}

struct CloseService {
  # After every request drained: flush, then clear. Idempotent.
  unused @0 :Void;
}

struct CloseServiceReply {
  result @0 :DurabilityResult;
  alreadyClosed @1 :Bool;  # an earlier close produced `result`
}

struct DemoteIdle {
  # Make entries unused for idleMs durable, then drop them from RAM.
  idleMs @0 :UInt64;
}

struct DemoteIdleReply {
  demoted @0 :UInt64;      # entries that left RAM; 0 without a cold tier
}

struct StopIdleDemotion {
  # Stop idle demotion ahead of a drain; state stays.
  unused @0 :Void;
}

struct StopIdleDemotionReply {
  stopped @0 :Bool;        # false: it was not running
}

struct RelievePressure {
  # Release LRU entries (finishing their SSD writes) until RAM holds at
  # most targetBytes; the engine repeats while its memory check fails.
  targetBytes @0 :UInt64;
  deadlineMs @1 :UInt64;   # answer by then with what was freed (0: the
                           # service's storage deadline)
}

struct RelievePressureReply {
  released @0 :UInt64;     # entries released
  releasedBytes @1 :UInt64; # bytes whose buffers were really freed
  heldBytes @2 :UInt64;    # RAM bytes held afterwards
  error @3 :Error;         # code 0, or why less was freed: a write that
                           # failed (the entry stays, servable), timeout
  pending @4 :UInt64;      # entries whose writes had not settled yet
}

struct ReclaimAtBoundary {
  # An execution boundary passed: give optional snapshots back. No I/O.
  targetBytes @0 :UInt64;  # bytes the engine would like back
}

struct ReclaimAtBoundaryReply {
  released @0 :UInt64;     # RAM copies already durable, released
  releasedBytes @1 :UInt64; # bytes whose buffers were really freed
  dropped @2 :UInt64;      # optional entries dropped (durable nowhere)
  droppedBytes @3 :UInt64;
}

struct ReadStats {
  unused @0 :Void;
}

struct ReadStatsReply {
  # Pending persistence.
  pendingSnapshots @0 :UInt64;       # prefix snapshots not yet durable
  pendingSpills @1 :UInt64;          # spill writes in flight
  pendingCheckpointWrites @2 :UInt64;
  pendingBytes @3 :UInt64;           # bytes of writes not yet settled
  retryingWrites @4 :UInt64;         # failed, waiting for a retry
  waitingSnapshots @5 :UInt64;       # RAM: write-behind snapshots not yet
                                     # ordered (their delay or the budget)
  leavingEntries @6 :UInt64;         # RAM: evicted, servable, write pending
}

struct IoCounters {
  tier @0 :Tier;
  reads @1 :UInt64;
  writes @2 :UInt64;
  bytesRead @3 :UInt64;
  bytesWritten @4 :UInt64;
  failures @5 :UInt64;
  submitted @6 :UInt64;    # every op handed to the I/O engine
  syncs @7 :UInt64;        # fsync ops submitted
  calls @8 :UInt64;        # blocking file-system calls (create, rename...)
}

struct ReadReport {
  unused @0 :Void;
}

struct ReadReportReply {
  # Each member of the service answers with the sections it counts; the
  # facade's reply carries them all plus its own figures.
  tiers @0 :List(TierCounters); # one section per part: the built-in parts
                           # ("ram", "ssd", "checkpoints", "sessions",
                           # "objects", "admission", "peer", "tokens"),
                           # declared in tiers/report_parts.hpp, and those
                           # of tiers added beside them
  io @1 :List(IoCounters); # one per tier doing I/O
  demotions @2 :UInt64;    # entries demoted by idle demotion (RAM)
  deadTiers @3 :UInt64;    # cold tier actors the facade saw go down (each
                           # dropped from its lookups; counted once)
  coldTiers @4 :UInt64;    # cold tier actors its lookups consult now
  closed @5 :Bool;         # close began: new work is refused (the facade)
  coldLate @6 :UInt64;     # acquires whose RAM hit was served without a
                           # cold tier that had not answered within
                           # service.cold-wait-ms (the facade)
  silentTiers @7 :List(Text); # members that did not answer this report by
                           # their deadline (their sections are missing):
                           # "ram", "admission", "checkpoints", "sessions",
                           # "ssd", "peer", or an added store's name
}

struct TierCounters {
  # One part's counters by name (actors/tier_counters.hpp): the report,
  # /stats and /metrics iterate them, nothing names them one by one.
  tier @0 :Text;           # the tier's name (lower_snake_case)
  counters @1 :List(CounterValue);
}

struct CounterValue {
  name @0 :Text;           # lower_snake_case, unique within its tier
  help @1 :Text;           # one line, for /metrics and the docs (empty for
                           # a built-in part's: its readers know it)
  gauge @2 :Bool;          # a level that may go down; false: a running total
  value @3 :UInt64;
}

struct ListSavedPrefixes {
  # The token prefixes on SSD, from file headers only.
  unused @0 :Void;
}

struct ListSavedPrefixesReply {
  prefixes @0 :List(EntryKey);
}

struct PutEvent {
  # To the put observer: a put succeeded (observers cannot undo it).
  key @0 :EntryKey;
}

struct PutObject {
  # An exact tensor object (encoder output) under the same budget; the key
  # names it exactly (the engine folds model and inputs into it).
  object @0 :Common.StoredObject;
}

struct PutObjectReply {
  kept @0 :Bool;           # false: larger than the whole cap
}

struct GetObject {
  key @0 :Text;
}

struct GetObjectReply {
  union {
    missing @0 :Void;
    object @1 :Common.StoredObject;
  }
}

struct SetSsdLimit {
  # Engine -> service -> SSD: the SSD tier's byte cap from now on (its
  # owner's live share of a budget several services on one root split).
  # Lowering it removes least recently used files at once.
  capBytes @0 :UInt64;
}

struct SetSsdLimitReply {
  capBytes @0 :UInt64;     # the cap now
  evicted @1 :UInt64;      # files removed to get under it
  fileBytes @2 :UInt64;    # bytes of entry files held afterwards
}

struct RouteRequest {
  # Engine front end -> any node (embedded or over CAF): which node should
  # serve this prompt (docs/cluster.md "Routing"). Reads only.
  ns @0 :Text;
  prompt @1 :List(UInt32);
  maxNewTokens @2 :UInt32; # for the headroom check (0: the prompt alone)
}

struct RouteOption {
  nodeId @0 :Text;
  address @1 :Text;        # HOST:PORT its node actor listens on
  source @2 :Common.Tier;  # where its reused prefix would come from
  fromSsd @3 :Bool;        # that copy is on SSD (its own, or a peer's)
  usableTokens @4 :UInt64; # prefix tokens it would reuse
  cost @5 :Float64;        # expected cost, prefill-token equivalents
  recentTokens @6 :Float64;# this router's recent load figure for it
  full @7 :Bool;           # it lacks admission headroom
}

struct RouteRequestReply {
  best @0 :UInt32;         # index into options
  options @1 :List(RouteOption); # the asking node first, then its up peers
}
