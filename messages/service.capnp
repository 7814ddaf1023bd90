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

struct RamCounters {
  # Mirrors the RAM tier's counters (tiers/ram_types.hpp).
  entries @0 :UInt64;
  bytes @1 :UInt64;        # shared buffers counted once
  capBytes @2 :UInt64;
  hits @3 :UInt64;         # lookups that lent a prefix (RAM candidacy only)
  misses @4 :UInt64;
  sessionHits @5 :UInt64;  # lookups naming a session, served from it
  sessionMisses @6 :UInt64;
  prefixScans @7 :UInt64;  # index walks (lookups and peeks)
  evictions @8 :UInt64;    # over the cap or for pressure relief
  supersessions @9 :UInt64; # ancestors removed by a trimmable newcomer
  replacements @10 :UInt64; # puts replacing the same key
  oversize @11 :UInt64;    # puts larger than the whole cap
  observerErrors @12 :UInt64; # put observers that threw (contained)
  backingLost @13 :UInt64; # durable marks cleared: their SSD file went
  leavingEntries @14 :UInt64; # evicted, still servable: writes pending
  leavingBytes @15 :UInt64; # bytes only leaving entries hold (off the cap)
  leavingDropped @16 :UInt64; # leaving entries whose write was not stored
  rejoined @17 :UInt64;    # leaving entries a hit made resident again
  boundaryDropped @18 :UInt64; # optional entries a boundary dropped
  snapshots @19 :UInt64;   # write-behind snapshots made durable
  residentBytes @20 :UInt64; # bytes of resident entries (the cap's)
}

struct SsdCounters {
  # Mirrors the SSD tier's counters (tiers/ssd/ssd_stats.hpp).
  files @0 :UInt64;
  fileBytes @1 :UInt64;
  capBytes @2 :UInt64;
  queueItems @3 :UInt64;   # writes waiting in the write-behind queue
  queueBytes @4 :UInt64;
  writesOk @5 :UInt64;
  writesFailed @6 :UInt64;
  writeNoSpace @7 :UInt64;
  dropped @8 :UInt64;      # spills dropped over the queue cap
  superseded @9 :UInt64;   # queued writes replaced by a newer one
  rejectedTooLarge @10 :UInt64;
  evicted @11 :UInt64;     # files removed over the byte cap
  restoresOk @12 :UInt64;  # cold restores (counted here, not as RAM hits)
  restoresFailed @13 :UInt64;
  coalesced @14 :UInt64;   # restores that joined a read in flight
  cancelled @15 :UInt64;   # reads whose last interest ended first
  corruptRemoved @16 :UInt64; # files dropped as corrupt at scan or read
  writesCancelled @17 :UInt64; # queued writes taken back by EraseEntry
  geometryMismatched @18 :UInt64; # files the scan left unindexed: layers of another model (kept)
  restoresMismatched @19 :UInt64; # restores refused: the file is another model's (a miss, file kept)
  removalRecords @20 :UInt64; # checkpoint removal records written
  removalFailures @21 :UInt64; # removal steps that failed (retried)
  removalsPending @22 :UInt64; # checkpoint removals not durably done
  filesSuperseded @23 :UInt64; # prefix files a trimmable longer one
                           # superseded (removed)
  writesGivenUp @24 :UInt64; # writes that failed their last attempt
  writesRetried @25 :UInt64; # failed writes tried again
  ioBufferBytes @26 :UInt64; # buffers of writes and reads running (headers,
                           # read buffers): the SSD tier's own, not RAM's
  deltaFiles @27 :UInt64;  # delta files made durable (rows past a parent)
  deltaRefused @28 :UInt64; # prefix writes with a parent written whole
                           # (shared rows differed)
  chainCascades @29 :UInt64; # delta files removed with a file they depend on
  prefixBytesWritten @30 :UInt64; # prefix files: bytes handed to the engine
  newTokenBytes @31 :UInt64; # the ideal: new tokens x bytes per token
}

struct CheckpointCounters {
  # The checkpoints actor's part of the report.
  held @0 :UInt64;         # identities held (memory or file)
  saved @1 :UInt64;        # checkpoints kept by `checkpoint`
  disposed @2 :UInt64;     # checkpoints disposed (not newer, stale attempt)
  resumed @3 :UInt64;      # acquires served a checkpoint
  stale @4 :UInt64;        # acquires whose checkpoint did not extend the
                           # prompt (served through the prefix search)
  removed @5 :UInt64;      # identities removed by completed releases
  everyTokens @6 :UInt64;  # service.checkpoint-every-tokens (0: none)
  ramOnly @7 :Bool;        # an interval without an SSD tier: checkpoints
                           # live in RAM only and none survives a restart
}

struct SessionCounters {
  open @0 :UInt64;         # sessions open now (sessions actor)
  protectedEntries @1 :UInt64; # RAM entries carrying a pin (RAM actor)
  closed @2 :UInt64;       # open sessions closed (sessions actor)
  opened @3 :UInt64;       # sessions that became open (sessions actor)
}

struct ObjectCounters {
  entries @0 :UInt64;
  bytes @1 :UInt64;
  hits @2 :UInt64;
  misses @3 :UInt64;
}

struct AdmissionCounters {
  admitted @0 :UInt64;     # requests that started holding bytes
  refused @1 :UInt64;      # admit answers "wait"
  errors @2 :UInt64;       # requests that could never be admitted
  released @3 :UInt64;     # requests that gave their bytes back
  waiting @4 :UInt64;      # requests queued right now
  heldBytes @5 :UInt64;
  holders @6 :UInt64;      # requests holding bytes right now
  budgetBytes @7 :UInt64;
  maxQueued @8 :UInt64;    # the queue's bound (admission.max-queued)
  queueFull @9 :UInt64;    # queued admits refused over that bound
}

struct ReadReport {
  unused @0 :Void;
}

struct ReadReportReply {
  ram @0 :RamCounters;
  ssd @1 :SsdCounters;
  sessions @2 :SessionCounters;
  objects @3 :ObjectCounters;
  demotions @4 :UInt64;    # entries demoted by idle demotion
  admission @5 :AdmissionCounters;
  io @6 :List(IoCounters); # one per tier doing I/O
  checkpoints @7 :CheckpointCounters;
  deadTiers @8 :UInt64;    # cold tier actors the facade saw go down (each
                           # dropped from its lookups; counted once)
  coldTiers @9 :UInt64;    # cold tier actors its lookups consult now
  peer @10 :PeerCounters;  # the peer tier's part (cluster.enabled only)
  closed @11 :Bool;        # close began: new work is refused (the facade)
  coldLate @12 :UInt64;    # acquires whose RAM hit was served without a
                           # cold tier that had not answered within
                           # service.cold-wait-ms (the facade)
  silentTiers @13 :List(Text); # tiers that did not answer this report by
                           # their deadline (their parts are zero): "ram",
                           # "admission", "checkpoints", "sessions", "ssd",
                           # "peer"
  tokens @14 :TokenCounters; # prompt tokens of acquires (the facade)
  tiers @15 :List(TierCounters); # tiers that report their counters by
                           # declaration (a store added beside the built-in
                           # tiers), one section each
}

struct TierCounters {
  # One tier's counters as it declares them (actors/tier_counters.hpp): the
  # report, /stats and /metrics iterate them, nothing names them one by one.
  tier @0 :Text;           # the tier's name (lower_snake_case)
  counters @1 :List(CounterValue);
}

struct CounterValue {
  name @0 :Text;           # lower_snake_case, unique within its tier
  help @1 :Text;           # one line, for /metrics and the docs
  gauge @2 :Bool;          # a level that may go down; false: a running total
  value @3 :UInt64;
}

struct TokenCounters {
  # The facade's count of the prompt tokens its acquires answered: where the
  # state it served came from, and what the engine was left to compute
  # (served + computed = every prompt token of a successful acquire).
  ram @0 :UInt64;          # served from RAM (a hit, or a prefetched donor)
  ssd @1 :UInt64;          # restored from SSD by the acquire
  peer @2 :UInt64;         # fetched from a peer by the acquire
  checkpoint @3 :UInt64;   # the request's own checkpoint (its prompt part)
  computed @4 :UInt64;     # prompt tokens no state covered
  store @5 :UInt64;        # served from a store added beside the built-in
                           # tiers (source `store`)
}

struct PeerCounters {
  # The peer tier's counters (actors/peer_tier_actor.hpp, docs/cluster.md).
  peersUp @0 :UInt64;      # peer nodes whose entries may be fetched now
  entries @1 :UInt64;      # distinct entries the directory knows of
  finds @2 :UInt64;        # FindPrefix calls answered with a candidate
  overCap @3 :UInt64;      # candidates refused over cluster.fetch-max-bytes
  fetches @4 :UInt64;      # transfers started (FetchEntry sent)
  fetched @5 :UInt64;      # entries fetched, verified and handed up
  bytes @6 :UInt64;        # flat bytes of the verified transfers
  coalesced @7 :UInt64;    # restores and prefetches that joined a fetch
  laneFetches @8 :UInt64;  # transfers read from a bulk lane
  chunkFetches @9 :UInt64; # transfers pulled chunk by chunk
  failedNone @10 :UInt64;  # the holder had nothing usable any more
  failedUnreachable @11 :UInt64; # the holder went down or did not answer
  failedTimeout @12 :UInt64; # the fetch deadline passed
  failedCorrupt @13 :UInt64; # checksum, decode or shape check failed
  failedOther @14 :UInt64; # refused by the holder, over the cap, I/O
  inFlightBytes @15 :UInt64; # bytes of transfers running now
  writtenToSsd @16 :UInt64; # fetched entries written to the local SSD
  ssdWriteFailed @17 :UInt64; # such writes that failed or were dropped
  served @18 :UInt64;      # serving side: FetchEntry answered with a transfer
  servedNone @19 :UInt64;  # ... answered none (nothing longer held)
  serveRefused @20 :UInt64; # ... refused: malformed, oversized, over the cap
  serveBytes @21 :UInt64;  # ... flat bytes offered
  feedSnapshots @22 :UInt64; # peer snapshots applied to the directory
  feedGapResyncs @23 :UInt64; # ... of them after a gap in a peer's feed
  feedRestartResyncs @24 :UInt64; # ... after a peer restarted
  refusedRemote @25 :UInt64; # messages to the peer tier from another
                           # process (it serves its own node only)
  laneRefused @26 :UInt64; # bulk lane requests refused: unknown id, wrong
                           # token, bad request (messages/bulk_lane.hpp)
  laneFailed @27 :UInt64;  # bulk lane writes that broke or timed out
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
