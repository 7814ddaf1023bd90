// The built-in parts of the service's report, every counter declared once.
//
// Each part (a tier's or role's counters: "ram", "ssd", "checkpoints",
// "sessions", "objects", "admission", "peer", "node", "process", "tokens") is
// one list below: per counter its name (the member, the /stats key), its kind,
// its Prometheus metric ("" means `kvtier_<part>_<name>`, a running total
// ending in `_total`), an optional label of its series ("key=value", for a
// metric that several counters share) and one line of help. From the list
// come the part's struct (a `uint64_t` member per counter, what
// `service_report` holds) and its field table (`fields()`), which
// everything else iterates: the member that reports the part writes it as
// a `TierCounters` section (actors/tier_counters.hpp), the service decodes
// it by name, /stats and /metrics print it (runtime/http/exposition.cpp)
// and Python's report() shows it. A new counter of a part is one line here
// and the code that counts it; RAM's and SSD's engines keep counters of the
// same names, copied by `from` (a counter the engine does not keep is set
// by its actor).
//
// Plain values and constant tables; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvtier::tiers::report {

/// How a counter behaves.
enum class kind : uint8_t {
  /// A running total (Prometheus counter, `_total`).
  total,
  /// A level that may go down (entries, bytes, a setting).
  gauge,
  /// 0 or 1: a JSON boolean in /stats, a gauge in /metrics.
  flag,
};

/// One declared counter.
struct counter_info {
  std::string_view name;
  report::kind kind = kind::total;
  /// The Prometheus name; "" for `kvtier_<part>_<name>` (+ `_total`).
  std::string_view metric;
  /// "" or "key=value": the label of this counter's series.
  std::string_view label;
  std::string_view help;
};

/// A declared counter and where its value lives in the part's struct.
template <class Part>
struct field {
  counter_info info;
  uint64_t Part::*member;
};

/// The metric of `c` in part `part`: its own, or `kvtier_<part>_<name>`
/// with `_total` for a running total.
std::string metric_of(std::string_view part, const counter_info& c);

// X(name, kind, metric, label, help) per counter.

#define KVTIER_REPORT_RAM(X)                                                   \
  X(entries, gauge, "", "", "prefix entries in RAM")                           \
  X(bytes, gauge, "", "", "bytes of state RAM holds (resident and leaving)")   \
  X(cap_bytes, gauge, "", "", "the RAM tier's byte cap")                       \
  X(resident_bytes, gauge, "", "",                                             \
    "bytes of resident entries (what the cap bounds)")                         \
  X(hits, total, "", "", "acquires RAM served a prefix for")                   \
  X(misses, total, "", "", "acquires RAM had nothing for")                     \
  X(session_hits, total, "", "",                                               \
    "acquires served from the session's pinned entry")                         \
  X(session_misses, total, "", "",                                             \
    "session acquires whose pinned entry did not serve")                       \
  X(prefix_scans, total, "", "", "prefix index walks")                         \
  X(evictions, total, "", "", "entries evicted over the cap")                  \
  X(supersessions, total, "", "",                                              \
    "entries a longer trimmable entry stood in for")                           \
  X(replacements, total, "", "",                                               \
    "puts that replaced an entry of the same key")                             \
  X(oversize, total, "", "", "puts larger than the whole cap")                 \
  X(observer_errors, total, "", "", "put observer calls that threw")           \
  X(backing_lost, total, "", "", "entries whose backing memory was lost")      \
  X(leaving_entries, gauge, "", "",                                            \
    "evicted entries still servable until their writes settle")                \
  X(leaving_bytes, gauge, "", "", "bytes only leaving entries hold")           \
  X(leaving_dropped, total, "", "",                                            \
    "leaving entries whose write was not stored")                              \
  X(rejoined, total, "", "", "leaving entries a hit made resident again")      \
  X(boundary_dropped, total, "", "", "optional entries a boundary dropped")    \
  X(snapshots, total, "", "", "write-behind snapshots made durable")           \
  X(pinned_entries, gauge, "", "", "entries an engine's pin holds")            \
  X(pinned_bytes, gauge, "", "",                                               \
    "bytes engine pins hold (at most the pin budget)")                         \
  X(pins_granted, total, "", "", "engine pins granted")                        \
  X(pins_refused, total, "", "", "engine pins refused over the pin budget")    \
  X(pins_expired, total, "", "", "engine pins whose time to live ran out")     \
  X(bookkeeping_bytes, gauge, "", "",                                          \
    "bytes the tier spends beside state: index, records, bodies (estimate)")   \
  X(bookkeeping_budget_bytes, gauge, "", "",                                   \
    "the most bookkeeping resident entries may cost (0: unbounded)")           \
  X(bookkeeping_evictions, total, "", "",                                      \
    "entries evicted over the bookkeeping budget alone")

#define KVTIER_REPORT_SSD(X)                                                   \
  X(files, gauge, "", "", "entry files on SSD")                                \
  X(index_files, gauge, "", "", "entry files the start-up scan indexed")       \
  X(indexing, flag, "", "", "1 while the start-up scan indexes files")         \
  X(index_seconds, gauge, "", "",                                              \
    "seconds the start-up scan took, rounded up (0 until it ends)")            \
  X(file_bytes, gauge, "", "", "bytes of entry files")                         \
  X(cap_bytes, gauge, "", "", "the SSD tier's byte cap")                       \
  X(index_bytes, gauge, "", "",                                                \
    "bytes the SSD tier's index holds in RAM: keys, records (estimate)")       \
  X(queue_items, gauge, "", "", "writes waiting for the disk")                 \
  X(queue_bytes, gauge, "", "", "bytes of writes waiting for the disk")        \
  X(io_buffer_bytes, gauge, "", "",                                            \
    "bytes of buffers running reads and writes hold")                          \
  X(writes_ok, total, "", "", "entry files written")                           \
  X(writes_failed, total, "", "", "write attempts that failed")                \
  X(write_no_space, total, "", "", "write attempts that found the disk full")  \
  X(writes_given_up, total, "", "", "writes that failed their last attempt")   \
  X(writes_retried, total, "", "", "failed writes tried again")                \
  X(writes_cancelled, total, "", "", "writes cancelled before they ran")       \
  X(dropped, total, "", "", "writes dropped over the write-behind cap")        \
  X(superseded, total, "", "", "queued writes a newer one replaced")           \
  X(rejected_too_large, total, "", "", "writes larger than the SSD cap")       \
  X(evicted, total, "", "", "files removed over the SSD cap")                  \
  X(files_superseded, total, "", "",                                           \
    "files a longer trimmable file superseded")                                \
  X(delta_files, total, "", "", "delta files made durable")                    \
  X(delta_refused, total, "", "",                                              \
    "prefix writes with a parent written whole (rows differed)")               \
  X(chain_cascades, total, "", "",                                             \
    "delta files removed with a file they depend on")                          \
  X(prefix_bytes_written, total, "", "",                                       \
    "bytes handed to the engine for prefix files")                             \
  X(new_token_bytes, total, "", "",                                            \
    "ideal bytes: new tokens times bytes per token")                           \
  X(admission_skipped, total, "", "",                                          \
    "spills the admission rule did not write")                                 \
  X(admission_skipped_bytes, total, "", "",                                    \
    "bytes of the files those spills would have been")                         \
  X(budget_refused, total, "", "", "writes the daily write budget refused")    \
  X(budget_refused_bytes, total, "", "", "bytes of the writes it refused")     \
  X(budget_used_bytes, gauge, "", "",                                          \
    "bytes charged to the write budget in the last 24 hours")                  \
  X(budget_bytes_per_day, gauge, "", "", "the daily write budget (0: none)")   \
  X(restores_ok, total, "", "", "entries restored from SSD")                   \
  X(restores_failed, total, "", "", "restores that failed")                    \
  X(restores_mismatched, total, "", "",                                        \
    "restores refused: another model's file")                                  \
  X(coalesced, total, "", "", "reads that joined a read in flight")            \
  X(cancelled, total, "", "", "prefetch reads cancelled")                      \
  X(corrupt_removed, total, "", "", "corrupt files removed")                   \
  X(geometry_mismatched, gauge, "kvtier_ssd_geometry_mismatched_files", "",    \
    "files of another model left unindexed at start")                          \
  X(removal_records, total, "", "", "removal records written")                 \
  X(removal_failures, total, "", "", "removals that failed")                   \
  X(removals_pending, gauge, "", "", "removals not durable yet")

#define KVTIER_REPORT_CHECKPOINTS(X)                                           \
  X(held, gauge, "", "", "checkpoint identities held")                         \
  X(saved, total, "", "", "checkpoint saves kept")                             \
  X(disposed, total, "", "", "checkpoint saves disposed (an older attempt)")   \
  X(resumed, total, "", "", "acquires that resumed a checkpoint")              \
  X(stale, total, "", "", "acquires that found a stale checkpoint")            \
  X(removed, total, "", "", "checkpoint identities removed")                   \
  X(every_tokens, gauge, "", "", "service.checkpoint-every-tokens (0: none)")  \
  X(ram_only, flag, "", "",                                                    \
    "1: checkpoints are kept in RAM only (no SSD tier) and none survives a "   \
    "restart")

#define KVTIER_REPORT_SESSIONS(X)                                              \
  X(open, gauge, "", "", "sessions with affinity now")                         \
  X(protected_entries, gauge, "", "", "entries sessions pin in RAM")           \
  X(opened, total, "", "", "sessions opened")                                  \
  X(closed, total, "", "", "sessions closed")

#define KVTIER_REPORT_OBJECTS(X)                                               \
  X(entries, gauge, "", "", "tensor objects in RAM")                           \
  X(bytes, gauge, "", "", "bytes of tensor objects in RAM")                    \
  X(hits, total, "", "", "object gets served")                                 \
  X(misses, total, "", "", "object gets not served")

#define KVTIER_REPORT_ADMISSION(X)                                             \
  X(admitted, total, "", "", "requests admitted")                              \
  X(refused, total, "", "", "admits answered wait")                            \
  X(errors, total, "", "", "admits refused as impossible")                     \
  X(released, total, "", "", "requests released")                              \
  X(queue_full, total, "", "", "queued admits refused over max-queued")        \
  X(waiting, gauge, "", "", "queued admits waiting")                           \
  X(held_bytes, gauge, "", "", "bytes admitted requests hold")                 \
  X(holders, gauge, "", "", "admitted requests holding bytes")                 \
  X(budget_bytes, gauge, "", "", "the admission budget")                       \
  X(max_queued, gauge, "", "", "the queue's bound")

#define KVTIER_REPORT_PEER(X)                                                  \
  X(peers_up, gauge, "", "", "peers whose entries may be fetched now")         \
  X(entries, gauge, "kvtier_peer_directory_entries", "",                       \
    "distinct entries the peer directory knows of")                            \
  X(in_flight_bytes, gauge, "", "", "bytes of peer fetches running now")       \
  X(finds, total, "", "", "lookups a peer candidate answered")                 \
  X(over_cap, total, "", "", "candidates refused over fetch-max-bytes")        \
  X(fetches, total, "", "", "peer transfers started")                          \
  X(fetched, total, "", "", "entries fetched and verified")                    \
  X(bytes, total, "kvtier_peer_fetched_bytes_total", "",                       \
    "bytes of verified peer transfers")                                        \
  X(coalesced, total, "", "", "restores that joined a fetch in flight")        \
  X(lane_fetches, total, "", "", "transfers read from a bulk lane")            \
  X(chunk_fetches, total, "", "", "transfers pulled chunk by chunk")           \
  X(failed_none, total, "kvtier_peer_fetch_failures_total", "reason=none",     \
    "peer fetches that failed, by reason")                                     \
  X(failed_unreachable, total, "kvtier_peer_fetch_failures_total",             \
    "reason=unreachable", "peer fetches that failed, by reason")               \
  X(failed_timeout, total, "kvtier_peer_fetch_failures_total",                 \
    "reason=timeout", "peer fetches that failed, by reason")                   \
  X(failed_corrupt, total, "kvtier_peer_fetch_failures_total",                 \
    "reason=corrupt", "peer fetches that failed, by reason")                   \
  X(failed_other, total, "kvtier_peer_fetch_failures_total", "reason=other",   \
    "peer fetches that failed, by reason")                                     \
  X(written_to_ssd, total, "", "", "fetched entries written to the local SSD") \
  X(ssd_write_failed, total, "", "",                                           \
    "such writes that failed or were dropped")                                 \
  X(served, total, "", "",                                                     \
    "fetches of peers this node answered with a transfer")                     \
  X(served_none, total, "", "", "fetches of peers answered none")              \
  X(serve_refused, total, "", "", "fetches of peers refused")                  \
  X(serve_bytes, total, "kvtier_peer_served_bytes_total", "",                  \
    "bytes offered to peers")                                                  \
  X(feed_snapshots, total, "", "", "peer feed snapshots applied")              \
  X(feed_gap_resyncs, total, "", "", "snapshots after a gap in a peer's feed") \
  X(feed_restart_resyncs, total, "", "", "snapshots after a peer's restart")   \
  X(refused_remote, total, "", "",                                             \
    "messages from other processes the peer tier refused")                     \
  X(lane_refused, total, "", "",                                               \
    "bulk lane requests refused (unknown transfer, wrong token, bad "          \
    "request)")                                                                \
  X(lane_failed, total, "", "", "bulk lane writes that broke or timed out")

#define KVTIER_REPORT_NODE(X)                                                  \
  X(refused_oversized, total, "kvtier_node_refused_messages_total",            \
    "reason=oversized", "peer messages refused before decoding, by reason")    \
  X(refused_undecodable, total, "kvtier_node_refused_messages_total",          \
    "reason=undecodable", "peer messages refused before decoding, by reason")  \
  X(oversized_frames, total, "kvtier_node_refused_frames_total",               \
    "reason=oversized",                                                        \
    "frames the node's port refused (connection closed), by reason")           \
  X(garbage_frames, total, "kvtier_node_refused_frames_total",                 \
    "reason=garbage",                                                          \
    "frames the node's port refused (connection closed), by reason")           \
  X(refused_connections, total, "", "",                                        \
    "connections the node's port closed before their handshake (too many "     \
    "unproven, rate, a failing source, deadline)")                             \
  X(failed_handshakes, total, "", "",                                          \
    "connections to the node's port that closed without finishing the "        \
    "handshake")                                                               \
  X(configured_peers, gauge, "", "", "peers the node was configured to join")

#define KVTIER_REPORT_PROCESS(X)                                               \
  X(resident_bytes, gauge, "", "",                                             \
    "the process's resident set (state, bookkeeping, runtime, all)")           \
  X(peak_resident_bytes, gauge, "", "",                                        \
    "the most the process's resident set has been (VmHWM)")                    \
  X(feed_ring_events, gauge, "", "",                                           \
    "events the event feed keeps for subscribers that come back")              \
  X(feed_ring_bytes, gauge, "", "",                                            \
    "bytes those kept events hold, keys included (cluster.feed-ring-bytes)")   \
  X(feed_table_entries, gauge, "", "",                                         \
    "entries of the event feed's table of what each tier holds")               \
  X(feed_table_bytes, gauge, "", "",                                           \
    "bytes the event feed's table holds (estimate)")

#define KVTIER_REPORT_TOKENS(X)                                                \
  X(ram, total, "kvtier_tokens_served_total", "tier=ram",                      \
    "prompt tokens acquires served from stored state, by where it came from")  \
  X(ssd, total, "kvtier_tokens_served_total", "tier=ssd",                      \
    "prompt tokens acquires served from stored state, by where it came from")  \
  X(peer, total, "kvtier_tokens_served_total", "tier=peer",                    \
    "prompt tokens acquires served from stored state, by where it came from")  \
  X(checkpoint, total, "kvtier_tokens_served_total", "tier=checkpoint",        \
    "prompt tokens acquires served from stored state, by where it came from")  \
  X(store, total, "kvtier_tokens_served_total", "tier=store",                  \
    "prompt tokens acquires served from stored state, by where it came from")  \
  X(computed, total, "", "",                                                   \
    "prompt tokens acquires left the engine to compute")

#define KVTIER_REPORT_MEMBER_(name, ...) uint64_t name = 0;
#define KVTIER_REPORT_COPY_(name, ...)                                         \
  if constexpr (requires { src.name; })                                        \
    dst.name = static_cast<uint64_t>(src.name);

/// A part's struct: a member per declared counter, its name, its table, and
/// `from(src)`: the counters `src` keeps under the same names (the others 0).
#define KVTIER_REPORT_PART(type, part_name, LIST)                              \
  struct type {                                                                \
    LIST(KVTIER_REPORT_MEMBER_)                                                \
    static constexpr std::string_view name = part_name;                        \
    static std::span<const field<type>> fields();                              \
    template <class Src>                                                       \
    static type from(const Src& src) {                                         \
      type dst;                                                                \
      LIST(KVTIER_REPORT_COPY_)                                                \
      return dst;                                                              \
    }                                                                          \
  }

KVTIER_REPORT_PART(ram, "ram", KVTIER_REPORT_RAM);
KVTIER_REPORT_PART(ssd, "ssd", KVTIER_REPORT_SSD);
KVTIER_REPORT_PART(checkpoints, "checkpoints", KVTIER_REPORT_CHECKPOINTS);
KVTIER_REPORT_PART(sessions, "sessions", KVTIER_REPORT_SESSIONS);
KVTIER_REPORT_PART(objects, "objects", KVTIER_REPORT_OBJECTS);
KVTIER_REPORT_PART(admission, "admission", KVTIER_REPORT_ADMISSION);
KVTIER_REPORT_PART(peer, "peer", KVTIER_REPORT_PEER);
KVTIER_REPORT_PART(node, "node", KVTIER_REPORT_NODE);
KVTIER_REPORT_PART(process, "process", KVTIER_REPORT_PROCESS);
KVTIER_REPORT_PART(tokens, "tokens", KVTIER_REPORT_TOKENS);
#undef KVTIER_REPORT_MEMBER_
#undef KVTIER_REPORT_COPY_

/// Every built-in part, P(type) each, in report order: the one list the
/// report, /stats, /metrics and the tests iterate (a new part is one line
/// here and its KVTIER_REPORT_PART above; `service_report` names its
/// members after the types).
#define KVTIER_REPORT_PARTS(P)                                                 \
  P(ram)                                                                       \
  P(ssd)                                                                       \
  P(checkpoints)                                                               \
  P(sessions) P(objects) P(admission) P(peer) P(node) P(process) P(tokens)

/// Calls `f.template operator()<Part>()` for every built-in part.
template <class F>
void for_each_part(F&& f) {
#define KVTIER_REPORT_VISIT_(type) f.template operator()<type>();
  KVTIER_REPORT_PARTS(KVTIER_REPORT_VISIT_)
#undef KVTIER_REPORT_VISIT_
}

/// Sets the counter of `part` named `counter` to `value`, summing when
/// several sections carry it (each member writes whole parts, so a
/// counter another member reports reads 0 in its section). False when
/// `part` declares no such counter.
template <class Part>
bool add_named(Part& part, std::string_view counter, uint64_t value) {
  for (auto& f : Part::fields())
    if (f.info.name == counter) {
      part.*f.member += value;
      return true;
    }
  return false;
}

} // namespace kvtier::tiers::report
