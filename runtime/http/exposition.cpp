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
#include <functional>
#include <map>
#include <string_view>

namespace kvtier::http {

namespace {

using runtime::io_counters;
using runtime::service_report;

/// One figure of the report: where /stats puts it, what /metrics calls
/// it (with at most one label), and how to read it.
struct field {
  std::string section; // "" for top-level figures
  std::string key;
  std::string metric;
  std::string label_name; // "": no label
  std::string label_value;
  tiers::report::kind kind;
  std::string help;
  std::function<uint64_t(const service_report&)> get;
};

using tiers::report::kind;

/// Every declared counter of the built-in part `member` of the report
/// (tiers/report_parts.hpp): the part's name is its /stats section.
template <class Part>
void add_part(std::vector<field>& out, Part service_report::*member) {
  for (auto& f : Part::fields()) {
    auto& i = f.info;
    std::string lname, lvalue;
    if (auto eq = i.label.find('='); eq != std::string_view::npos) {
      lname = i.label.substr(0, eq);
      lvalue = i.label.substr(eq + 1);
    }
    out.push_back({std::string{Part::name}, std::string{i.name},
                   tiers::report::metric_of(Part::name, i), lname, lvalue,
                   i.kind, std::string{i.help},
                   [member, m = f.member](const service_report& r) {
                     return r.*member.*m;
                   }});
  }
}

/// The counters of one tier's storage operations, labeled by tier.
void add_io(std::vector<field>& out, const char* tier,
            io_counters service_report::*member) {
  struct io_field {
    const char* key;
    const char* metric;
    const char* help;
    uint64_t io_counters::*m;
  };
  static const io_field all[] = {
    {"reads", "kvtier_io_reads_total", "storage reads by tier",
     &io_counters::reads},
    {"writes", "kvtier_io_writes_total", "storage writes by tier",
     &io_counters::writes},
    {"bytes_read", "kvtier_io_read_bytes_total",
     "bytes read from storage by tier", &io_counters::bytes_read},
    {"bytes_written", "kvtier_io_written_bytes_total",
     "bytes written to storage by tier", &io_counters::bytes_written},
    {"failures", "kvtier_io_failures_total",
     "failed storage operations by tier", &io_counters::failures},
    {"submitted", "kvtier_io_submitted_total",
     "operations handed to the I/O engine by tier", &io_counters::submitted},
  };
  for (auto& f : all)
    out.push_back(
      {std::string{"io."} + tier, f.key, f.metric, "tier", tier, kind::total,
       f.help,
       [member, m = f.m](const service_report& r) { return r.*member.*m; }});
}

/// The facade's own top-level figure `member`.
template <class T>
field top(const char* key, const char* metric, kind k, const char* help,
          T service_report::*member) {
  return {"", key, metric, "", "", k, help, [member](const service_report& r) {
            return static_cast<uint64_t>(r.*member);
          }};
}

const std::vector<field>& fields() {
  static const std::vector<field> all = [] {
    std::vector<field> out;
    service_report::each_member([&](auto member) { add_part(out, member); });
    add_io(out, "ram", &service_report::ram_io);
    add_io(out, "ssd", &service_report::ssd_io);
    out.push_back(top("demotions", "kvtier_demotions_total", kind::total,
                      "entries idle demotion moved to SSD",
                      &service_report::demotions));
    out.push_back(top("cold_tiers", "kvtier_cold_tiers", kind::gauge,
                      "cold tiers lookups consult now",
                      &service_report::cold_tiers));
    out.push_back(top("dead_tiers", "kvtier_dead_tiers_total", kind::total,
                      "cold tiers seen going down",
                      &service_report::dead_tiers));
    out.push_back(
      top("cold_late", "kvtier_acquire_cold_late_total", kind::total,
          "RAM hits served without a cold tier that answered too late",
          &service_report::cold_late));
    out.push_back(top("closed", "kvtier_closed", kind::flag,
                      "1 once close began (new work is refused)",
                      &service_report::closed));
    out.push_back({"", "silent_tiers", "kvtier_silent_tiers", "", "",
                   kind::gauge,
                   "tiers that did not answer the report by their deadline "
                   "(their figures read 0)",
                   [](const service_report& r) -> uint64_t {
                     return r.silent_tiers.size();
                   }});
    return out;
  }();
  return all;
}

// clang-format off
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

/// The metric of an added tier's counter: kvtier_<tier>_<name>, a running
/// total ending in _total.
std::string declared_metric(const std::string& tier,
                            const service_report::tier_section::counter& c) {
  return tiers::report::metric_of(
    tier, {c.name, c.gauge ? kind::gauge : kind::total, "", "", ""});
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
    if (!f.label_name.empty())
      labels.emplace(f.label_name, f.label_value);
    auto v = static_cast<double>(f.get(s.report));
    if (f.kind == kind::total)
      counter(f.metric, f.help.c_str())->Add(labels).Increment(v);
    else
      gauge(f.metric, f.help.c_str())->Add(labels).Set(v);
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
    else if (f.kind == kind::flag)
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
