// The eviction regret report (`kvtier regret TRACE`, docs/eviction.md):
// the block-level token hit ratio of LRU, of gdsf-radix and of the
// foresight ceiling (Belady's MIN over prefix-respecting blocks) on one
// trace at a list of capacities, in one run, with the rules of the
// eviction policy checked at every point:
//   never below  policy >= LRU - 0.002;
//   gain         policy >= 1.25 × LRU wherever ceiling >= 2 × LRU.
// Hit ratios as tests/traces/README.md defines them (tiers/eviction_policy.hpp
// runs the caches). Plain values; `regret` runs its caches on up to `jobs`
// threads of its own and returns when all are done.
#pragma once

#include "runtime/tools/trace.hpp"
#include "tiers/eviction_policy.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// How far the policy may fall below LRU, and the gain it owes where the
/// ceiling is at least `gain_where` times LRU.
inline constexpr double regret_tolerance = 0.002;
inline constexpr double regret_gain = 1.25;
inline constexpr double regret_gain_where = 2.0;

/// The sweep's capacities, as shares of the working set.
inline constexpr double regret_sweep[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};

struct regret_point {
  uint64_t capacity_tokens = 0;
  uint64_t capacity_blocks = 0;
  /// capacity / working set.
  double share = 0;
  double lru = 0, policy = 0, ceiling = 0; // token hit ratios
  /// policy / LRU (0 when LRU is 0).
  double ratio() const;
  /// (policy - LRU) / (ceiling - LRU): the gap closed; nullopt when there
  /// is no gap (the ceiling is LRU's).
  std::optional<double> gap_closed() const;
  bool never_below() const;
  /// Whether the gain rule applies here (ceiling >= 2 × LRU).
  bool gain_owed() const;
  /// The gain rule holds (trivially where it does not apply).
  bool gain_met() const;
};

struct regret_report {
  std::string trace;
  std::string policy; // its name
  uint32_t block_size = 0;
  uint64_t requests = 0;
  uint64_t distinct_blocks = 0;
  /// distinct blocks × block size.
  uint64_t working_set_tokens = 0;
  /// The infinite cache's token hit ratio.
  double infinite = 0;
  std::vector<regret_point> points; // by capacity
  /// Both rules hold at every point.
  bool holds() const;
};

struct regret_options {
  /// Capacities in tokens; empty: the sweep over the working set.
  std::vector<uint64_t> capacities_tokens;
  tiers::gdsf_options policy;
  /// Threads running caches at once (at least 1).
  unsigned jobs = 2;
};

/// Runs LRU, gdsf-radix and Belady over `t` at each capacity. Refused
/// (`ec::invalid_argument`, naming what): a capacity below one block; a
/// trace in which no block is used twice (azure: lengths only), where
/// every policy hits nothing and there is no regret to show.
caf::expected<regret_report> regret(const trace& t, const regret_options& o);

/// "N,N,..." as token capacities; refused naming the bad item.
caf::expected<std::vector<uint64_t>> parse_capacities(const std::string& list);

/// The table: capacity, LRU, policy, ceiling, policy/LRU, gap closed and
/// a flag where a rule fails.
std::string render_table(const regret_report& r);

/// The report as JSON text.
std::string render_json(const regret_report& r);

/// An SVG chart of hit ratio against capacity (log scale), three curves.
std::string render_svg(const regret_report& r);

} // namespace kvtier::runtime
