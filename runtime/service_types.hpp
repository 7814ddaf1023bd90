// Value types of the embedded API (runtime/service.hpp): what a call takes
// and what it answers. Plain values; entries hold buffer references (views),
// never copies of tensor bytes, and may be moved to any thread.
//
// Ownership (docs/api.md "Handoff and deadlines"): an `acquired_state` belongs
// to the caller (its views keep the donor's buffers alive however long it is
// held); an entry given to `publish` or `checkpoint` belongs to the cache once
// the call returns successfully, and stays the caller's when it fails.
#pragma once

#include "../tiers/latency.hpp"
#include "../tiers/report_parts.hpp"
#include "../tiers/state.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// One engine request as the cache sees it.
/// Its identity for checkpoints is (`id`, namespace): the engine must hand
/// the same id again to resume a generation, also after a restart. A
/// checkpoint resumes a request only when its tokens begin with the
/// request's prompt. `attempt` names the try: a retry of the same request
/// id passes a higher one, so that releasing an earlier try as completed
/// never removes the retry's checkpoints (docs/api.md, "Requests and
/// identity").
struct state_request {
  /// The engine's request id, unique while the request lives.
  uint64_t id = 0;
  /// Prompt tokens.
  tiers::token_seq prompt;
  /// Generation budget (admission projects prompt + this many tokens).
  uint32_t max_new_tokens = 0;
  /// The conversation it belongs to (session affinity), if any.
  std::optional<std::string> session;
  /// Which try of the request id this is (0 for an engine that never
  /// retries); it owns the checkpoints it saves or resumes.
  uint32_t attempt = 0;
  /// Retention of the state this request publishes, 0 to 100 (more is
  /// refused with `invalid_argument`): every RAM entry of a lower priority
  /// is evicted before any of a higher one (docs/eviction.md).
  uint8_t priority = tiers::default_priority;
  /// Pin the state this request publishes in RAM for this many
  /// milliseconds, renewed by every hit, within `ram-tier.pin-share` of
  /// the cap (`publish_result::pinned`); 0: no pin.
  uint64_t pin_ms = 0;
};

/// Where acquired state came from.
/// `store`: a store added beside the built-in tiers (its counters are in
/// `service_report::tiers`).
enum class state_source : uint8_t { none, ram, ssd, checkpoint, peer, store };

const char* to_string(state_source s);

/// What `acquire` hands over: the caller's from now on.
struct acquired_state {
  state_source source = state_source::none;
  /// Tokens the state covers: the usable prefix of the prompt, or the
  /// whole checkpoint (prompt + generated tokens) when resuming.
  uint64_t usable_tokens = 0;
  /// The state, trimmed to `usable_tokens` (no layers when fresh).
  tiers::entry state;
  /// The request's checkpoint (same id, same namespace) did not extend its
  /// prompt, so it was not served (the request went through the prefix
  /// search as a fresh prompt): that checkpoint's tokens; 0 when none.
  uint64_t stale_checkpoint_tokens = 0;
};

/// One node as `route` weighed it (docs/cluster.md "Routing").
struct route_option {
  std::string node_id;
  /// HOST:PORT of its node actor, known from the moment the peer is up
  /// (empty: no cluster).
  std::string address;
  /// Where its reused prefix would come from: ram or ssd (its own), peer
  /// (a fetch), none.
  state_source source = state_source::none;
  /// That copy is on SSD (its own, or the peer's).
  bool from_ssd = false;
  uint64_t usable_tokens = 0;
  /// Expected cost, prefill-token equivalents (route.* options).
  double cost = 0;
  /// The router's recent load figure for it (tokens it sent there lately).
  double recent_tokens = 0;
  /// It lacked admission headroom.
  bool full = false;
};

/// `route`'s answer: the cheapest node and every node's figures.
struct route_decision {
  /// The chosen node (a copy of options[best]).
  route_option chosen;
  size_t best = 0;
  /// The asking node first, then its up peers.
  std::vector<route_option> options;
};

/// Why a publish kept or dropped its state.
enum class put_outcome : uint8_t {
  kept,
  replaced,
  dropped_over_cap,
  dropped_by_policy,
  dropped_closed,
};

const char* to_string(put_outcome o);

struct publish_result {
  bool kept = false;
  put_outcome outcome = put_outcome::kept;
  /// Prefix-ancestors removed without spill.
  uint32_t superseded = 0;
  /// The request's `pin_ms` was granted / refused (over the pin budget).
  bool pinned = false;
  bool pin_refused = false;
};

/// An admission answer. A request that can never be admitted is an error
/// (`ec::position_limit_exceeded`, `ec::over_budget`), not a decision.
struct admit_decision {
  /// admit: true holds the bytes until release; fits: true would admit.
  bool admitted = false;
  uint64_t projected_bytes = 0;
  /// Budget left before this decision.
  uint64_t available_bytes = 0;
};

struct release_result {
  uint64_t released_bytes = 0;
  /// Checkpoints the released attempt owned: removed (completed) or kept.
  uint32_t checkpoints_removed = 0;
  uint32_t checkpoints_kept = 0;
  /// Completed, and removing a checkpoint file could not be made durable
  /// yet (`removal_error` says why): the checkpoint is never served again
  /// by this process, every flush retries the removal and reports it
  /// (`durability_result::removals_pending`) until it is done.
  bool removal_pending = false;
  std::string removal_error;
};

/// Evidence of what `flush` or `close` made durable.
struct durability_result {
  /// Everything kept is on storage (false without a cold tier when state
  /// was held, and whenever a write failed or was dropped).
  bool durable = false;
  uint64_t pending = 0;
  uint64_t dropped = 0;
  uint64_t failed = 0;
  uint64_t entries = 0;
  /// Tokens of the longest durable prefix entry (checkpoints excluded).
  uint64_t longest_durable_prefix = 0;
  /// Completed checkpoints whose removal is not durable yet.
  uint64_t removals_pending = 0;
  /// Distinct failures, for the operator.
  std::vector<std::string> errors;
  /// close only: writes the SSD tier released unwritten with their buffers
  /// (still queued, or failed and kept for a retry); `durable` is false
  /// when there were any.
  uint64_t abandoned = 0;
  /// close only: an earlier close produced this result.
  bool already_closed = false;
};

/// Pending persistence (`stats()`): writes the SSD tier has not settled
/// (queued, running, or failed and waiting for a retry), by reason, and
/// what the RAM tier holds for them.
struct persistence_stats {
  uint64_t pending_snapshots = 0;
  /// Spills (eviction, pressure relief) and demotions.
  uint64_t pending_spills = 0;
  uint64_t pending_checkpoint_writes = 0;
  /// Bytes of those writes.
  uint64_t pending_bytes = 0;
  /// Of those, failed and waiting for a retry.
  uint64_t retrying_writes = 0;
  /// Write-behind snapshots not ordered yet (their delay, the budget).
  uint64_t waiting_snapshots = 0;
  /// Entries evicted from RAM whose writes are pending: still servable.
  uint64_t leaving_entries = 0;
};

/// What `set_ssd_limit` did.
struct ssd_limit_result {
  /// The SSD tier's byte cap now.
  uint64_t cap_bytes = 0;
  /// Files removed (least recently used first) to get under it.
  uint64_t evicted = 0;
  /// Bytes of entry files held afterwards (at most `cap_bytes`).
  uint64_t file_bytes = 0;
};

/// What pressure relief and a boundary gave back. Bytes are those whose
/// buffers were really freed: a view lent to a running request or a
/// write still queued keeps its bytes, and they are not counted.
struct reclaim_result {
  /// Entries released: relief's entries that left RAM; a boundary's RAM
  /// copies that were durable on SSD already.
  uint64_t released = 0;
  uint64_t released_bytes = 0;
  /// RAM bytes held afterwards (relief only; 0 from a boundary).
  uint64_t held_bytes = 0;
  /// boundary: optional entries dropped, durable nowhere (lost, not
  /// demoted), and their bytes.
  uint64_t dropped = 0;
  uint64_t dropped_bytes = 0;
  /// relief: entries whose writes had not settled when it answered.
  uint64_t pending = 0;
  /// relief: why less was freed than asked (none when all went well): a
  /// write that failed (`io_error`, `no_space`: the entry stays in RAM,
  /// servable) or `timeout` (the storage deadline passed).
  caf::error error;
};

/// One prefetch: its lease and what the reads will restore. Lease 0, no
/// reads and 0 tokens when nothing on SSD was worth reading: no usable
/// file, or none longer than the `ram_tokens` RAM already held.
struct prefetch_info {
  uint64_t lease = 0;
  uint32_t reads_started = 0;
  uint32_t reads_joined = 0;
  uint64_t tokens = 0;
  /// The usable prefix RAM held when the prefetch was decided.
  uint64_t ram_tokens = 0;
};

/// Operations submitted to storage by one tier.
struct io_counters {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t failures = 0;
  /// Every op handed to the I/O engine (reads, writes, syncs, calls).
  uint64_t submitted = 0;
};

/// Every counter (`report()`). The built-in parts are declared in
/// tiers/report_parts.hpp, one line per counter (its name, kind, metric
/// and help: docs/operations.md lists them); /stats, /metrics and
/// Python's report() print every declared counter.
struct service_report {
  using ram_part = ::kvtier::tiers::report::ram;
  using ssd_part = ::kvtier::tiers::report::ssd;
  using checkpoints_part = ::kvtier::tiers::report::checkpoints;
  using sessions_part = ::kvtier::tiers::report::sessions;
  using objects_part = ::kvtier::tiers::report::objects;
  using admission_part = ::kvtier::tiers::report::admission;
  using peer_part = ::kvtier::tiers::report::peer;
  using node_part = ::kvtier::tiers::report::node;
  using tokens_part = ::kvtier::tiers::report::tokens;
  using process_part = ::kvtier::tiers::report::process;

  /// The RAM tier (resident and leaving entries: evicted ones still
  /// servable until their writes settle).
  ram_part ram;
  /// The SSD tier (files, its write queue, restores, removals).
  ssd_part ssd;
  /// Checkpoints: identities held, saves kept and disposed, acquires that
  /// resumed one and that found a stale one, identities removed;
  /// `ram_only` (1) when there is no SSD tier, so none survives a restart.
  checkpoints_part checkpoints;
  sessions_part sessions;
  /// Exact tensor objects (encoder outputs) in RAM.
  objects_part objects;
  /// Entries demoted by idle demotion.
  uint64_t demotions = 0;
  /// Cold tier actors the facade's lookups consult now (the SSD tier, when
  /// configured), and those it saw go down and dropped (each once).
  uint64_t cold_tiers = 0, dead_tiers = 0;
  /// Acquires whose RAM hit was served without waiting longer for a cold
  /// tier that had not answered within `service.cold-wait-ms` (a longer
  /// prefix it held was not used).
  uint64_t cold_late = 0;
  /// Whether close began: the service refuses new work (/health says so).
  bool closed = false;
  /// The admission budget and its queue (`admission.max-queued`).
  admission_part admission;
  /// The peer tier (cluster.enabled; docs/cluster.md): fetching side, then
  /// serving side (its bulk lane's too).
  peer_part peer;
  /// The node's port (cluster.enabled), read from its guard's counters:
  /// peer messages refused before decoding (over
  /// cluster.max-message-bytes) and that failed to decode; frames the port
  /// refused (announced over their bound; not CAF's protocol); connections
  /// its gate closed before their handshake and connections that closed
  /// without finishing it. The configured peers (cluster.peers and
  /// --join), for /health.
  node_part node;
  /// The process the service runs in: its resident set now and at its
  /// peak, read from /proc when the report is made (the true footprint,
  /// beside the RAM tier's state bytes and bookkeeping; 0 where /proc is
  /// missing).
  process_part process;
  /// Calls `f(part)` for every built-in part (KVTIER_REPORT_PARTS), and
  /// `each_member(f)` `f(&service_report::part)`.
  template <class F>
  void each_part(F&& f) {
#define KVTIER_SERVICE_PART_(type) f(type);
    KVTIER_REPORT_PARTS(KVTIER_SERVICE_PART_)
#undef KVTIER_SERVICE_PART_
  }
  template <class F>
  static void each_member(F&& f) {
#define KVTIER_SERVICE_PART_(type) f(&service_report::type);
    KVTIER_REPORT_PARTS(KVTIER_SERVICE_PART_)
#undef KVTIER_SERVICE_PART_
  }
  /// Prompt tokens of the acquires the service answered (the facade counts
  /// them once): served from RAM (a hit, also of a donor a prefetch
  /// brought), restored from SSD or fetched from a peer by the acquire, the
  /// request's own checkpoint (its prompt part), from a store added beside
  /// the built-in tiers, and computed (no state covered them).
  /// served + computed = every prompt token acquired.
  tokens_part tokens;
  /// The counters of the tiers added beside the built-in ones (a store):
  /// each tier's name and its counters, as it declared them; /stats and
  /// /metrics iterate them.
  struct tier_section {
    struct counter {
      std::string name, help;
      bool gauge = false;
      uint64_t value = 0;
    };
    std::string tier;
    std::vector<counter> counters;
  };
  std::vector<tier_section> tiers;
  /// Tiers that did not answer this report by their deadline (half of
  /// `service.storage-deadline-ms`): "ram", "admission", "checkpoints",
  /// "sessions", "ssd", "peer". Their parts above are zero; /health fails
  /// on any.
  std::vector<std::string> silent_tiers;
  /// Storage operations per tier: RAM (always zero) and SSD.
  io_counters ram_io;
  io_counters ssd_io;
};

/// How long calls took (`service::latency`; Prometheus histograms on the
/// HTTP endpoint, docs/operations.md): acquire and publish as the API's
/// callers saw them, and the SSD restores and peer fetches of acquires,
/// from the facade's request to the tier until the entry was installed in
/// RAM. The buckets hold calls that succeeded; each snapshot's `failed`
/// counts the calls that did not (errors, missed deadlines, restores that
/// delivered nothing).
struct latency_report {
  tiers::latency_histogram::snapshot acquire, publish, restore, remote_fetch;
};

/// A prefix saved on SSD (from its file header).
struct saved_prefix {
  std::string ns;
  tiers::token_seq tokens;
};

/// What a change of the service's holdings was (docs/api.md
/// `subscribe_events`, docs/cluster.md "Event feed").
enum class feed_kind : uint8_t {
  put,        // RAM stored the entry
  evict,      // it left RAM (over the cap, a boundary, close)
  demote,     // it left RAM by idle demotion (durable on SSD)
  durable,    // an SSD file of it was written (or found at start)
  superseded, // it left RAM: a longer trimmable entry stands in for it
  removed,    // its SSD file is gone
};

/// Where the change happened.
enum class feed_tier : uint8_t { ram, ssd };

/// One numbered change of what the service holds (prefix entries only).
struct feed_event {
  /// From 1, no holes (but after the feed's test hook).
  uint64_t seq = 0;
  feed_kind kind = feed_kind::put;
  feed_tier tier = feed_tier::ram;
  std::string ns;
  tiers::token_seq tokens;
  /// Bytes of the entry's layers.
  uint64_t bytes = 0;
  /// Whether it serves shorter prefixes too.
  bool trimmable = false;
};

} // namespace kvtier::runtime
