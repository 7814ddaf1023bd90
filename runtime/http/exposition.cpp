#include "runtime/http/exposition.hpp"

#include "messages/error.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string_view>

namespace kvtier::http {

namespace {

using runtime::service_report;

enum class kind { counter, gauge };

/// One figure of the report: where /stats puts it, what /metrics calls
/// it (with at most one label), and how to read it.
struct field {
  const char* section; // "" for top-level figures
  const char* key;
  const char* metric;
  const char* label_name; // nullptr: no label
  const char* label_value;
  kind k;
  const char* help;
  uint64_t (*get)(const service_report&);
};

constexpr auto C = kind::counter;
constexpr auto G = kind::gauge;

#define KV_FIELD(sec, part, member, metric, k, help)                           \
  field {                                                                      \
    sec, #member, metric, nullptr, nullptr, k, help,                           \
      [](const service_report& r) -> uint64_t { return r.part.member; }        \
  }
#define KV_LABELED(sec, part, member, metric, lname, lvalue, k, help)          \
  field {                                                                      \
    sec, #member, metric, lname, lvalue, k, help,                              \
      [](const service_report& r) -> uint64_t { return r.part.member; }        \
  }
#define KV_TOP(member, metric, k, help)                                        \
  field {                                                                      \
    "", #member, metric, nullptr, nullptr, k, help,                            \
      [](const service_report& r) -> uint64_t { return r.member; }             \
  }
#define KV_IO(tier, part)                                                      \
  KV_LABELED("io." tier, part, reads, "kvtier_io_reads_total", "tier", tier,   \
             C, "storage reads by tier"),                                      \
    KV_LABELED("io." tier, part, writes, "kvtier_io_writes_total", "tier",     \
               tier, C, "storage writes by tier"),                             \
    KV_LABELED("io." tier, part, bytes_read, "kvtier_io_read_bytes_total",     \
               "tier", tier, C, "bytes read from storage by tier"),            \
    KV_LABELED("io." tier, part, bytes_written,                                \
               "kvtier_io_written_bytes_total", "tier", tier, C,               \
               "bytes written to storage by tier"),                            \
    KV_LABELED("io." tier, part, failures, "kvtier_io_failures_total", "tier", \
               tier, C, "failed storage operations by tier"),                  \
    KV_LABELED("io." tier, part, submitted, "kvtier_io_submitted_total",       \
               "tier", tier, C, "operations handed to the I/O engine by tier")

// clang-format off
const std::vector<field>& fields() {
  static const std::vector<field> all{
    // RAM tier
    KV_FIELD("ram", ram, entries, "kvtier_ram_entries", G, "prefix entries in RAM"),
    KV_FIELD("ram", ram, bytes, "kvtier_ram_bytes", G, "bytes of state RAM holds (resident and leaving)"),
    KV_FIELD("ram", ram, cap_bytes, "kvtier_ram_cap_bytes", G, "the RAM tier's byte cap"),
    KV_FIELD("ram", ram, resident_bytes, "kvtier_ram_resident_bytes", G, "bytes of resident entries (what the cap bounds)"),
    KV_FIELD("ram", ram, hits, "kvtier_ram_hits_total", C, "acquires RAM served a prefix for"),
    KV_FIELD("ram", ram, misses, "kvtier_ram_misses_total", C, "acquires RAM had nothing for"),
    KV_FIELD("ram", ram, session_hits, "kvtier_ram_session_hits_total", C, "acquires served from the session's pinned entry"),
    KV_FIELD("ram", ram, session_misses, "kvtier_ram_session_misses_total", C, "session acquires whose pinned entry did not serve"),
    KV_FIELD("ram", ram, prefix_scans, "kvtier_ram_prefix_scans_total", C, "prefix index walks"),
    KV_FIELD("ram", ram, evictions, "kvtier_ram_evictions_total", C, "entries evicted over the cap"),
    KV_FIELD("ram", ram, supersessions, "kvtier_ram_supersessions_total", C, "entries a longer trimmable entry stood in for"),
    KV_FIELD("ram", ram, replacements, "kvtier_ram_replacements_total", C, "puts that replaced an entry of the same key"),
    KV_FIELD("ram", ram, oversize, "kvtier_ram_oversize_total", C, "puts larger than the whole cap"),
    KV_FIELD("ram", ram, observer_errors, "kvtier_ram_observer_errors_total", C, "put observer calls that threw"),
    KV_FIELD("ram", ram, backing_lost, "kvtier_ram_backing_lost_total", C, "entries whose backing memory was lost"),
    KV_FIELD("ram", ram, leaving_entries, "kvtier_ram_leaving_entries", G, "evicted entries still servable until their writes settle"),
    KV_FIELD("ram", ram, leaving_bytes, "kvtier_ram_leaving_bytes", G, "bytes only leaving entries hold"),
    KV_FIELD("ram", ram, leaving_dropped, "kvtier_ram_leaving_dropped_total", C, "leaving entries whose write was not stored"),
    KV_FIELD("ram", ram, rejoined, "kvtier_ram_rejoined_total", C, "leaving entries a hit made resident again"),
    KV_FIELD("ram", ram, boundary_dropped, "kvtier_ram_boundary_dropped_total", C, "optional entries a boundary dropped"),
    KV_FIELD("ram", ram, snapshots, "kvtier_ram_snapshots_total", C, "write-behind snapshots made durable"),
    // SSD tier
    KV_FIELD("ssd", ssd, files, "kvtier_ssd_files", G, "entry files on SSD"),
    KV_FIELD("ssd", ssd, file_bytes, "kvtier_ssd_file_bytes", G, "bytes of entry files"),
    KV_FIELD("ssd", ssd, cap_bytes, "kvtier_ssd_cap_bytes", G, "the SSD tier's byte cap"),
    KV_FIELD("ssd", ssd, queue_items, "kvtier_ssd_queue_items", G, "writes waiting for the disk"),
    KV_FIELD("ssd", ssd, queue_bytes, "kvtier_ssd_queue_bytes", G, "bytes of writes waiting for the disk"),
    KV_FIELD("ssd", ssd, io_buffer_bytes, "kvtier_ssd_io_buffer_bytes", G, "bytes of buffers running reads and writes hold"),
    KV_FIELD("ssd", ssd, writes_ok, "kvtier_ssd_writes_ok_total", C, "entry files written"),
    KV_FIELD("ssd", ssd, writes_failed, "kvtier_ssd_writes_failed_total", C, "write attempts that failed"),
    KV_FIELD("ssd", ssd, write_no_space, "kvtier_ssd_write_no_space_total", C, "write attempts that found the disk full"),
    KV_FIELD("ssd", ssd, writes_given_up, "kvtier_ssd_writes_given_up_total", C, "writes that failed their last attempt"),
    KV_FIELD("ssd", ssd, writes_retried, "kvtier_ssd_writes_retried_total", C, "failed writes tried again"),
    KV_FIELD("ssd", ssd, writes_cancelled, "kvtier_ssd_writes_cancelled_total", C, "writes cancelled before they ran"),
    KV_FIELD("ssd", ssd, dropped, "kvtier_ssd_dropped_total", C, "writes dropped over the write-behind cap"),
    KV_FIELD("ssd", ssd, superseded, "kvtier_ssd_superseded_total", C, "queued writes a newer one replaced"),
    KV_FIELD("ssd", ssd, rejected_too_large, "kvtier_ssd_rejected_too_large_total", C, "writes larger than the SSD cap"),
    KV_FIELD("ssd", ssd, evicted, "kvtier_ssd_evicted_total", C, "files removed over the SSD cap"),
    KV_FIELD("ssd", ssd, files_superseded, "kvtier_ssd_files_superseded_total", C, "files a longer trimmable file superseded"),
    KV_FIELD("ssd", ssd, delta_files, "kvtier_ssd_delta_files_total", C, "delta files made durable"),
    KV_FIELD("ssd", ssd, delta_refused, "kvtier_ssd_delta_refused_total", C, "prefix writes with a parent written whole (rows differed)"),
    KV_FIELD("ssd", ssd, chain_cascades, "kvtier_ssd_chain_cascades_total", C, "delta files removed with a file they depend on"),
    KV_FIELD("ssd", ssd, prefix_bytes_written, "kvtier_ssd_prefix_bytes_written_total", C, "bytes handed to the engine for prefix files"),
    KV_FIELD("ssd", ssd, new_token_bytes, "kvtier_ssd_new_token_bytes_total", C, "ideal bytes: new tokens times bytes per token"),
    KV_FIELD("ssd", ssd, restores_ok, "kvtier_ssd_restores_ok_total", C, "entries restored from SSD"),
    KV_FIELD("ssd", ssd, restores_failed, "kvtier_ssd_restores_failed_total", C, "restores that failed"),
    KV_FIELD("ssd", ssd, restores_mismatched, "kvtier_ssd_restores_mismatched_total", C, "restores refused: another model's file"),
    KV_FIELD("ssd", ssd, coalesced, "kvtier_ssd_coalesced_total", C, "reads that joined a read in flight"),
    KV_FIELD("ssd", ssd, cancelled, "kvtier_ssd_cancelled_total", C, "prefetch reads cancelled"),
    KV_FIELD("ssd", ssd, corrupt_removed, "kvtier_ssd_corrupt_removed_total", C, "corrupt files removed"),
    KV_FIELD("ssd", ssd, geometry_mismatched, "kvtier_ssd_geometry_mismatched_files", G, "files of another model left unindexed at start"),
    KV_FIELD("ssd", ssd, removal_records, "kvtier_ssd_removal_records_total", C, "removal records written"),
    KV_FIELD("ssd", ssd, removal_failures, "kvtier_ssd_removal_failures_total", C, "removals that failed"),
    KV_FIELD("ssd", ssd, removals_pending, "kvtier_ssd_removals_pending", G, "removals not durable yet"),
    // checkpoints, sessions, objects
    KV_FIELD("checkpoints", checkpoints, held, "kvtier_checkpoints_held", G, "checkpoint identities held"),
    KV_FIELD("checkpoints", checkpoints, saved, "kvtier_checkpoints_saved_total", C, "checkpoint saves kept"),
    KV_FIELD("checkpoints", checkpoints, disposed, "kvtier_checkpoints_disposed_total", C, "checkpoint saves disposed (an older attempt)"),
    KV_FIELD("checkpoints", checkpoints, resumed, "kvtier_checkpoints_resumed_total", C, "acquires that resumed a checkpoint"),
    KV_FIELD("checkpoints", checkpoints, stale, "kvtier_checkpoints_stale_total", C, "acquires that found a stale checkpoint"),
    KV_FIELD("checkpoints", checkpoints, removed, "kvtier_checkpoints_removed_total", C, "checkpoint identities removed"),
    KV_FIELD("checkpoints", checkpoints, every_tokens, "kvtier_checkpoints_every_tokens", G, "service.checkpoint-every-tokens (0: none)"),
    KV_FIELD("checkpoints", checkpoints, ram_only, "kvtier_checkpoints_ram_only", G, "1: checkpoints are kept in RAM only (no SSD tier) and none survives a restart"),
    KV_FIELD("sessions", sessions, open, "kvtier_sessions_open", G, "sessions with affinity now"),
    KV_FIELD("sessions", sessions, protected_entries, "kvtier_sessions_protected_entries", G, "entries sessions pin in RAM"),
    KV_FIELD("sessions", sessions, opened, "kvtier_sessions_opened_total", C, "sessions opened"),
    KV_FIELD("sessions", sessions, closed, "kvtier_sessions_closed_total", C, "sessions closed"),
    KV_FIELD("objects", objects, entries, "kvtier_objects_entries", G, "tensor objects in RAM"),
    KV_FIELD("objects", objects, bytes, "kvtier_objects_bytes", G, "bytes of tensor objects in RAM"),
    KV_FIELD("objects", objects, hits, "kvtier_objects_hits_total", C, "object gets served"),
    KV_FIELD("objects", objects, misses, "kvtier_objects_misses_total", C, "object gets not served"),
    // admission
    KV_FIELD("admission", admission, admitted, "kvtier_admission_admitted_total", C, "requests admitted"),
    KV_FIELD("admission", admission, refused, "kvtier_admission_refused_total", C, "admits answered wait"),
    KV_FIELD("admission", admission, errors, "kvtier_admission_errors_total", C, "admits refused as impossible"),
    KV_FIELD("admission", admission, released, "kvtier_admission_released_total", C, "requests released"),
    KV_FIELD("admission", admission, queue_full, "kvtier_admission_queue_full_total", C, "queued admits refused over max-queued"),
    KV_FIELD("admission", admission, waiting, "kvtier_admission_waiting", G, "queued admits waiting"),
    KV_FIELD("admission", admission, held_bytes, "kvtier_admission_held_bytes", G, "bytes admitted requests hold"),
    KV_FIELD("admission", admission, holders, "kvtier_admission_holders", G, "admitted requests holding bytes"),
    KV_FIELD("admission", admission, budget_bytes, "kvtier_admission_budget_bytes", G, "the admission budget"),
    KV_FIELD("admission", admission, max_queued, "kvtier_admission_max_queued", G, "the queue's bound"),
    // peer tier (cluster.enabled)
    KV_FIELD("peer", peer, peers_up, "kvtier_peer_peers_up", G, "peers whose entries may be fetched now"),
    KV_FIELD("peer", peer, entries, "kvtier_peer_directory_entries", G, "distinct entries the peer directory knows of"),
    KV_FIELD("peer", peer, in_flight_bytes, "kvtier_peer_in_flight_bytes", G, "bytes of peer fetches running now"),
    KV_FIELD("peer", peer, finds, "kvtier_peer_finds_total", C, "lookups a peer candidate answered"),
    KV_FIELD("peer", peer, over_cap, "kvtier_peer_over_cap_total", C, "candidates refused over fetch-max-bytes"),
    KV_FIELD("peer", peer, fetches, "kvtier_peer_fetches_total", C, "peer transfers started"),
    KV_FIELD("peer", peer, fetched, "kvtier_peer_fetched_total", C, "entries fetched and verified"),
    KV_FIELD("peer", peer, bytes, "kvtier_peer_fetched_bytes_total", C, "bytes of verified peer transfers"),
    KV_FIELD("peer", peer, coalesced, "kvtier_peer_coalesced_total", C, "restores that joined a fetch in flight"),
    KV_FIELD("peer", peer, lane_fetches, "kvtier_peer_lane_fetches_total", C, "transfers read from a bulk lane"),
    KV_FIELD("peer", peer, chunk_fetches, "kvtier_peer_chunk_fetches_total", C, "transfers pulled chunk by chunk"),
    KV_LABELED("peer", peer, failed_none, "kvtier_peer_fetch_failures_total", "reason", "none", C, "peer fetches that failed, by reason"),
    KV_LABELED("peer", peer, failed_unreachable, "kvtier_peer_fetch_failures_total", "reason", "unreachable", C, "peer fetches that failed, by reason"),
    KV_LABELED("peer", peer, failed_timeout, "kvtier_peer_fetch_failures_total", "reason", "timeout", C, "peer fetches that failed, by reason"),
    KV_LABELED("peer", peer, failed_corrupt, "kvtier_peer_fetch_failures_total", "reason", "corrupt", C, "peer fetches that failed, by reason"),
    KV_LABELED("peer", peer, failed_other, "kvtier_peer_fetch_failures_total", "reason", "other", C, "peer fetches that failed, by reason"),
    KV_FIELD("peer", peer, written_to_ssd, "kvtier_peer_written_to_ssd_total", C, "fetched entries written to the local SSD"),
    KV_FIELD("peer", peer, ssd_write_failed, "kvtier_peer_ssd_write_failed_total", C, "such writes that failed or were dropped"),
    KV_FIELD("peer", peer, served, "kvtier_peer_served_total", C, "fetches of peers this node answered with a transfer"),
    KV_FIELD("peer", peer, served_none, "kvtier_peer_served_none_total", C, "fetches of peers answered none"),
    KV_FIELD("peer", peer, serve_refused, "kvtier_peer_serve_refused_total", C, "fetches of peers refused"),
    KV_FIELD("peer", peer, serve_bytes, "kvtier_peer_served_bytes_total", C, "bytes offered to peers"),
    KV_FIELD("peer", peer, feed_snapshots, "kvtier_peer_feed_snapshots_total", C, "peer feed snapshots applied"),
    KV_FIELD("peer", peer, feed_gap_resyncs, "kvtier_peer_feed_gap_resyncs_total", C, "snapshots after a gap in a peer's feed"),
    KV_FIELD("peer", peer, feed_restart_resyncs, "kvtier_peer_feed_restart_resyncs_total", C, "snapshots after a peer's restart"),
    KV_FIELD("peer", peer, refused_remote, "kvtier_peer_refused_remote_total", C, "messages from other processes the peer tier refused"),
    KV_FIELD("peer", peer, lane_refused, "kvtier_peer_lane_refused_total", C, "bulk lane requests refused (unknown transfer, wrong token, bad request)"),
    KV_FIELD("peer", peer, lane_failed, "kvtier_peer_lane_failed_total", C, "bulk lane writes that broke or timed out"),
    // the node's port (cluster.enabled)
    KV_LABELED("node", node, refused_oversized, "kvtier_node_refused_messages_total", "reason", "oversized", C, "peer messages refused before decoding, by reason"),
    KV_LABELED("node", node, refused_undecodable, "kvtier_node_refused_messages_total", "reason", "undecodable", C, "peer messages refused before decoding, by reason"),
    KV_LABELED("node", node, oversized_frames, "kvtier_node_refused_frames_total", "reason", "oversized", C, "frames the node's port refused (connection closed), by reason"),
    KV_LABELED("node", node, garbage_frames, "kvtier_node_refused_frames_total", "reason", "garbage", C, "frames the node's port refused (connection closed), by reason"),
    KV_FIELD("node", node, refused_connections, "kvtier_node_refused_connections_total", C, "connections the node's port closed before their handshake (too many unproven, rate, a failing source, deadline)"),
    KV_FIELD("node", node, failed_handshakes, "kvtier_node_failed_handshakes_total", C, "connections to the node's port that closed without finishing the handshake"),
    KV_FIELD("node", node, configured_peers, "kvtier_node_configured_peers", G, "peers the node was configured to join"),
    // prompt tokens of acquires (the hit ratio: served / (served + computed))
    KV_LABELED("tokens", tokens, ram, "kvtier_tokens_served_total", "tier", "ram", C, "prompt tokens acquires served from stored state, by where it came from"),
    KV_LABELED("tokens", tokens, ssd, "kvtier_tokens_served_total", "tier", "ssd", C, "prompt tokens acquires served from stored state, by where it came from"),
    KV_LABELED("tokens", tokens, peer, "kvtier_tokens_served_total", "tier", "peer", C, "prompt tokens acquires served from stored state, by where it came from"),
    KV_LABELED("tokens", tokens, checkpoint, "kvtier_tokens_served_total", "tier", "checkpoint", C, "prompt tokens acquires served from stored state, by where it came from"),
    KV_LABELED("tokens", tokens, store, "kvtier_tokens_served_total", "tier", "store", C, "prompt tokens acquires served from stored state, by where it came from"),
    KV_FIELD("tokens", tokens, computed, "kvtier_tokens_computed_total", C, "prompt tokens acquires left the engine to compute"),
    // storage operations
    KV_IO("ram", ram_io),
    KV_IO("ssd", ssd_io),
    // the service
    KV_TOP(demotions, "kvtier_demotions_total", C, "entries idle demotion moved to SSD"),
    KV_TOP(cold_tiers, "kvtier_cold_tiers", G, "cold tiers lookups consult now"),
    KV_TOP(dead_tiers, "kvtier_dead_tiers_total", C, "cold tiers seen going down"),
    KV_TOP(cold_late, "kvtier_acquire_cold_late_total", C, "RAM hits served without a cold tier that answered too late"),
    KV_TOP(closed, "kvtier_closed", G, "1 once close began (new work is refused)"),
    field{"", "silent_tiers", "kvtier_silent_tiers", nullptr, nullptr, G,
          "tiers that did not answer the report by their deadline (their figures read 0)",
          [](const service_report& r) -> uint64_t { return r.silent_tiers.size(); }},
  };
  return all;
}

struct pending_field {
  const char* key;
  const char* metric;
  const char* help;
  uint64_t runtime::persistence_stats::*member;
};

const std::vector<pending_field>& pending_fields() {
  using P = runtime::persistence_stats;
  static const std::vector<pending_field> all{
    {"pending_snapshots", "kvtier_persistence_pending_snapshots", "write-behind snapshots not settled", &P::pending_snapshots},
    {"pending_spills", "kvtier_persistence_pending_spills", "spills and demotions not settled", &P::pending_spills},
    {"pending_checkpoint_writes", "kvtier_persistence_pending_checkpoint_writes", "checkpoint writes not settled", &P::pending_checkpoint_writes},
    {"pending_bytes", "kvtier_persistence_pending_bytes", "bytes of writes not settled", &P::pending_bytes},
    {"retrying_writes", "kvtier_persistence_retrying_writes", "failed writes waiting for a retry", &P::retrying_writes},
    {"waiting_snapshots", "kvtier_persistence_waiting_snapshots", "snapshots not ordered yet", &P::waiting_snapshots},
    {"leaving_entries", "kvtier_persistence_leaving_entries", "evicted entries whose writes are pending", &P::leaving_entries},
  };
  return all;
}

struct latency_field {
  const char* key;
  const char* metric;
  const char* help;
  tiers::latency_histogram::snapshot runtime::latency_report::*member;
};

const std::vector<latency_field>& latency_fields() {
  using L = runtime::latency_report;
  static const std::vector<latency_field> all{
    {"acquire", "kvtier_acquire_duration_seconds", "acquire calls as the API's callers saw them", &L::acquire},
    {"publish", "kvtier_publish_duration_seconds", "publish calls as the API's callers saw them", &L::publish},
    {"restore", "kvtier_ssd_restore_duration_seconds", "SSD restores of acquires, until installed in RAM", &L::restore},
    {"remote_fetch", "kvtier_peer_fetch_duration_seconds", "peer fetches of acquires, until installed in RAM", &L::remote_fetch},
  };
  return all;
}
// clang-format on

/// The metric of a declared counter: kvtier_<tier>_<name>, a running
/// total ending in _total.
std::string declared_metric(const std::string& tier,
                            const service_report::tier_section::counter& c) {
  auto name = "kvtier_" + tier + "_" + c.name;
  constexpr std::string_view total = "_total";
  if (!c.gauge
      && (name.size() < total.size()
          || name.compare(name.size() - total.size(), total.size(), total)
               != 0))
    name += total;
  return name;
}

/// The member of the service (its name in `silent_tiers`) that reports
/// `f`'s figure; "" for the facade's own figures and the node's.
std::string_view owner_of(const field& f) {
  std::string_view sec{f.section};
  if (sec == "objects"
      || (sec.empty() && std::string_view{f.key} == "demotions"))
    return "ram";
  if (sec.rfind("io.", 0) == 0)
    return sec.substr(3) == "ram" ? "" : sec.substr(3);
  if (sec == "sessions" && std::string_view{f.key} == "protected_entries")
    return "ram";
  if (sec == "tokens" || sec == "node")
    return "";
  return sec;
}

/// Whether `f`'s figure is missing from `r`: its member did not answer the
/// report (its figures read 0 there, which would be a lie on /metrics).
bool missing(const service_report& r, const field& f) {
  auto owner = owner_of(f);
  return !owner.empty()
         && std::find(r.silent_tiers.begin(), r.silent_tiers.end(), owner)
              != r.silent_tiers.end();
}

/// The report's yes/no figures: JSON booleans in /stats, 0 or 1 in
/// /metrics.
bool is_flag(const field& f) {
  std::string_view sec{f.section}, key{f.key};
  return (sec.empty() && key == "closed")
         || (sec == "checkpoints" && key == "ram_only");
}

} // namespace

std::string metrics_text(const scrape& s) {
  using namespace prometheus;
  Registry reg;
  std::map<std::string, Family<Counter>*> counters;
  std::map<std::string, Family<Gauge>*> gauges;
  auto counter = [&](const std::string& name, const char* help) {
    auto& f = counters[name];
    if (!f)
      f = &BuildCounter().Name(name).Help(help).Register(reg);
    return f;
  };
  auto gauge = [&](const std::string& name, const char* help) {
    auto& f = gauges[name];
    if (!f)
      f = &BuildGauge().Name(name).Help(help).Register(reg);
    return f;
  };
  for (auto& f : fields()) {
    if (missing(s.report, f))
      continue; // absent, not 0: kvtier_tier_silent names the member
    Labels labels;
    if (f.label_name)
      labels.emplace(f.label_name, f.label_value);
    auto v = static_cast<double>(f.get(s.report));
    if (f.k == kind::counter)
      counter(f.metric, f.help)->Add(labels).Increment(v);
    else
      gauge(f.metric, f.help)->Add(labels).Set(v);
  }
  for (auto& t : s.report.silent_tiers)
    gauge("kvtier_tier_silent",
          "1 for each member that did not answer the report by its deadline "
          "(its figures are left out)")
      ->Add({{"tier", t}})
      .Set(1);
  // The declared counters of the other tiers: kvtier_<tier>_<name>.
  for (auto& t : s.report.tiers)
    for (auto& c : t.counters) {
      auto name = declared_metric(t.tier, c);
      auto v = static_cast<double>(c.value);
      if (c.gauge)
        gauge(name, c.help.c_str())->Add({}).Set(v);
      else
        counter(name, c.help.c_str())->Add({}).Increment(v);
    }
  for (auto& f : pending_fields())
    gauge(f.metric, f.help)
      ->Add({})
      .Set(static_cast<double>(s.persistence.*f.member));
  for (auto& f : latency_fields()) {
    auto& h = s.latency.*f.member;
    auto& fam = BuildHistogram().Name(f.metric).Help(f.help).Register(reg);
    Histogram::BucketBoundaries bounds(tiers::latency_histogram::bounds.begin(),
                                       tiers::latency_histogram::bounds.end());
    std::vector<double> counts(h.counts.begin(), h.counts.end());
    counts.resize(bounds.size() + 1);
    fam.Add({}, bounds).ObserveMultiple(counts, h.sum_seconds);
    counter("kvtier_call_failures_total",
            "calls that failed or missed their deadline, by the histogram "
            "they are left out of")
      ->Add({{"call", f.key}})
      .Increment(static_cast<double>(h.failed));
  }
  counter("kvtier_http_requests_total", "requests the HTTP endpoint answered")
    ->Add({})
    .Increment(static_cast<double>(s.http_requests));
  counter("kvtier_http_refused_busy_total",
          "connections refused over http.max-connections")
    ->Add({})
    .Increment(static_cast<double>(s.http_refused_busy));
  counter("kvtier_http_bad_requests_total",
          "requests refused as malformed or too large")
    ->Add({})
    .Increment(static_cast<double>(s.http_bad_requests));
  gauge("kvtier_build_info", "kvtier's version (the value is always 1)")
    ->Add({{"version", KVTIER_VERSION}})
    .Set(1);
  return TextSerializer{}.Serialize(reg.Collect());
}

nlohmann::json stats_json(const scrape& s) {
  using nlohmann::json;
  json report = json::object();
  for (auto& f : fields()) {
    std::string sec = f.section;
    json* at = &report;
    for (size_t start = 0; !sec.empty() && start <= sec.size();) {
      auto dot = sec.find('.', start);
      auto part = sec.substr(start, dot == std::string::npos ? std::string::npos
                                                             : dot - start);
      at = &(*at)[part];
      if (dot == std::string::npos)
        break;
      start = dot + 1;
    }
    if (missing(s.report, f))
      (*at)[f.key] = nullptr; // the member did not answer: unknown, not 0
    else if (is_flag(f))
      (*at)[f.key] = f.get(s.report) != 0;
    else
      (*at)[f.key] = f.get(s.report);
  }
  report["silent_tiers"] = s.report.silent_tiers; // the names, not a count
  for (auto& t : s.report.tiers) {
    auto& sec = report["tiers"][t.tier];
    for (auto& c : t.counters)
      sec[c.name] = c.value;
  }
  json pending = json::object();
  for (auto& f : pending_fields())
    pending[f.key] = s.persistence.*f.member;
  json latency = json::object();
  for (auto& f : latency_fields()) {
    auto& h = s.latency.*f.member;
    json buckets = json::array();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      if (i < tiers::latency_histogram::bounds.size())
        buckets.push_back({tiers::latency_histogram::bounds[i], cumulative});
      else
        buckets.push_back({"+Inf", cumulative});
    }
    latency[f.key] = {{"count", h.count},
                      {"failed", h.failed},
                      {"sum_seconds", h.sum_seconds},
                      {"buckets", std::move(buckets)}};
  }
  return {{"report", std::move(report)},
          {"persistence", std::move(pending)},
          {"latency", std::move(latency)},
          {"http",
           {{"requests", s.http_requests},
            {"refused_busy", s.http_refused_busy},
            {"bad_requests", s.http_bad_requests}}}};
}

nlohmann::json to_json(const runtime::durability_result& d) {
  return {{"durable", d.durable},
          {"pending", d.pending},
          {"dropped", d.dropped},
          {"failed", d.failed},
          {"entries", d.entries},
          {"longest_durable_prefix", d.longest_durable_prefix},
          {"removals_pending", d.removals_pending},
          {"errors", d.errors}};
}

nlohmann::json to_json(const runtime::reclaim_result& r) {
  return {{"released", r.released},
          {"released_bytes", r.released_bytes},
          {"dropped", r.dropped},
          {"dropped_bytes", r.dropped_bytes}};
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (auto& f : fields())
    if (std::find(out.begin(), out.end(), f.metric) == out.end())
      out.push_back(f.metric);
  for (auto& f : pending_fields())
    out.push_back(f.metric);
  for (auto& f : latency_fields())
    out.push_back(f.metric);
  for (auto* m :
       {"kvtier_http_requests_total", "kvtier_http_refused_busy_total",
        "kvtier_http_bad_requests_total", "kvtier_build_info"})
    out.push_back(m);
  return out;
}

} // namespace kvtier::http
