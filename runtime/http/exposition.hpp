// What the operator's endpoint says about a service (docs/operations.md):
// its counters, pending persistence and latency histograms as Prometheus
// text (through prometheus-cpp's registry and text serializer, never
// hand-formatted) and as the JSON of GET /stats.
//
// One table (exposition.cpp) names every field of `service_report` once:
// its JSON section and key, its metric name (counters end in `_total`,
// byte figures in `_bytes`, per Prometheus' naming conventions), whether
// it is a counter or a gauge, and its help line. A field missing from the
// table is missing from both outputs; the tests compare the table with the
// report's JSON keys.
//
// Plain functions on values; any thread.
#pragma once

#include "runtime/service_types.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace kvtier::http {

/// What one scrape reads from the service.
struct scrape {
  runtime::service_report report;
  runtime::persistence_stats persistence;
  runtime::latency_report latency;
  /// The endpoint's own counters.
  uint64_t http_requests = 0, http_refused_busy = 0, http_bad_requests = 0;
};

/// The Prometheus text exposition (format 0.0.4) of `s`.
std::string metrics_text(const scrape& s);

/// GET /stats: {"report": {section: {key: value}}, "persistence": {...},
/// "latency": {name: {count, sum_seconds, buckets: [[le, cumulative]...]}}}.
nlohmann::json stats_json(const scrape& s);

/// The JSON of a flush's evidence and of a boundary's result.
nlohmann::json to_json(const runtime::durability_result& d);
nlohmann::json to_json(const runtime::reclaim_result& r);

/// Every metric family name `metrics_text` writes for every report (for
/// the tests); not those it writes only for some: `kvtier_tier_silent` (a
/// member that did not answer) and the declared counters of added stores.
std::vector<std::string> metric_names();

} // namespace kvtier::http
