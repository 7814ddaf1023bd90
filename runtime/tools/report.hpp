// The replay report (docs/replay.md "The report"): what a trace replay or
// its `--simulate` reference measured, rendered as a terminal table, as
// JSON (`--json FILE`) and as an SVG chart of the hit ratio over the run
// (`--plot FILE.svg`). Owned by the replay driver; plain values, built on
// one thread and read-only afterwards.
//
// Every figure is counted or timed during the run, except the prefill time
// saved, which is the reused tokens divided by the configured prefill rate
// (`replay.prefill-tokens-per-s`, an input the report names as such).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// Latencies of one service call, in microseconds.
struct call_timings {
  std::vector<double> us;

  void add(double v) {
    us.push_back(v);
  }
  /// The q-quantile (0..1) by nearest rank; 0 when nothing was timed.
  double quantile(double q) const;
};

/// One point of the hit-ratio series: cumulative figures after a request.
struct replay_sample {
  uint64_t requests = 0;
  uint64_t input_tokens = 0;
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  uint64_t peer_tokens = 0;
};

struct replay_report {
  std::string trace;
  std::string model;
  uint64_t ram_cap_bytes = 0;
  uint64_t ssd_cap_bytes = 0;
  /// What the SSD directory held when the replay began: 0 for a cold start
  /// (`replay.clean-ssd`, and every `--simulate` run); a warm start serves
  /// from files an earlier run left.
  uint64_t ssd_files_at_start = 0;
  uint64_t ssd_bytes_at_start = 0;
  /// False for a `--simulate` run (no service, no tensors).
  bool replayed = true;
  bool verified = true;

  uint64_t requests = 0;
  /// Requests that can never be admitted (over the position limit or the
  /// whole budget): served nothing.
  uint64_t refused = 0;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  /// Prompt tokens served from another node's state (a peer fetch by the
  /// acquire or by the prefetch before it; 0 without a cluster).
  uint64_t peer_tokens = 0;
  /// Prompt tokens the engine had to prefill.
  uint64_t fresh_tokens = 0;
  uint64_t verified_states = 0;
  /// Served states the oracle rejected (must be 0).
  uint64_t wrong_states = 0;

  uint64_t spills = 0;
  uint64_t restores = 0;
  uint64_t coalesced_reads = 0;
  uint64_t demotions = 0;
  uint64_t admission_waits = 0;
  /// States offered but not kept: over the RAM cap, over the SSD cap or
  /// the write-behind queue, or failed writes.
  uint64_t drops = 0;
  uint64_t ram_evictions = 0;
  uint64_t ssd_evictions = 0;
  /// Bytes the SSD tier wrote and read (payloads and headers of entry
  /// files; the service report's SSD I/O counters).
  uint64_t ssd_bytes_written = 0;
  uint64_t ssd_bytes_read = 0;

  double prefill_tokens_per_s = 0;
  double wall_s = 0;

  std::optional<double> simulated_lru_hit_ratio;
  std::optional<double> infinite_hit_ratio;
  std::map<std::string, call_timings> calls;
  std::vector<replay_sample> series;

  double token_hit_ratio() const;
  /// Seconds of prefill the reused tokens saved at the configured rate.
  double prefill_saved_s() const;
};

/// The readable table.
std::string render_table(const replay_report& r);

/// The JSON document (`token_hit_ratio`, `simulated_lru_hit_ratio`,
/// `infinite_hit_ratio` as plain numbers or null, `wrong_states`, ...).
nlohmann::json to_json(const replay_report& r);

/// An SVG chart: cumulative token hit ratio over the run, total and per
/// tier, with the reference figures as horizontal lines; the caps and the
/// start (cold or warm) in its subtitle, a legend with line samples.
std::string render_svg(const replay_report& r);

/// The chart's subtitle: "MODEL · RAM cap 256 MiB · SSD cap 4 GiB · cold
/// start (SSD empty)" (or "warm start: SSD held N files (SIZE)").
std::string chart_subtitle(const replay_report& r);

/// An even tick step for `span` in about `ticks` steps: 1, 2 or 5 times a
/// power of ten (0.05, 0.1, 2000, ...), the one nearest span / ticks.
double nice_step(double span, int ticks);

/// Bytes in binary units: "256 MiB", "2.5 GiB", "4 GiB", "512 B".
std::string size_text(uint64_t bytes);

} // namespace kvtier::runtime
