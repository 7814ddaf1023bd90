// The hit-ratio reference for trace replay (`kvtier replay --simulate`):
// what an ideal whole-prefix LRU of the service's RAM and SSD capacities
// reaches on a trace, computed from token sequences and byte counts alone
// (no tensors), plus the infinite-cache ratio. Owned by the replay; plain
// single-threaded values.
//
// What it models (docs/replay.md "The reference" has the full list): the
// replay driver runs requests one at a time and lets every SSD write finish
// before the next request. Per request with prompt P (n tokens):
// - refused (never admitted) when n + output > position limit or its
//   projected KV bytes exceed the budget: no lookup, no publish;
// - lookup: RAM best usable prefix r, SSD best usable prefix s (the same
//   `prefix_index` rules: p = min(lcp, n - 1)); the cold tier wins only when
//   s > r: the file is touched, its first s tokens are read into fresh
//   buffers (whole checksum chunks per layer) and put into RAM as durable;
//   else a RAM hit touches its donor;
// - publish of P: its buffers are the served prefix's buffers plus one new
//   buffer of n - p rows (what the oracle's `extend` makes); the RAM rules
//   of docs/ram-tier.md then apply: replace the same key, supersede
//   ancestors, evict by `ram-tier.policy` (the tier's entry_ranking) by bytes
//   (each buffer counted once, whole) over the cap, an open session's newest
//   entry last (its publish pins it; the previous newest is unpinned after the
//   put; restored entries are not pinned), spilling what is not on SSD; an
//   entry larger than the cap is spilled instead of kept;
// - SSD: a spill becomes a file of the entry format's exact length, most
//   recently used; it supersedes the files of its strict prefixes in its
//   namespace (a kv file trims to any of them); files leave over the cap in
//   `ssd-tier.policy`'s order (the SSD index's entry_ranking), never the
//   file just written. From the next request
//   on (the replay lets writes finish in between), RAM entries a removed
//   file backed (its key, prefixes restored from it) are no longer
//   durable: written again when evicted.
// - SSD admission (`ssd-tier.admission`): before a spill is written (after
//   the already-durable check, before the too-large one, as the SSD tier
//   decides) the same `tiers::ssd::spill_admission` the tier uses decides,
//   with the memory it is sized to; a skipped spill leaves RAM unwritten.
//   The write budget is not modelled (it follows the wall clock).
// Only kv geometries are modelled (ring and recurrent layers change which
// entries trim); `simulate` refuses others.
#pragma once

#include "runtime/config.hpp"
#include "runtime/tools/trace.hpp"
#include "tiers/entry_ranking.hpp"
#include "tiers/geometry.hpp"
#include "tiers/ssd/write_admission.hpp"

#include <cstdint>
#include <string>

namespace kvtier::runtime {

/// The capacities and shapes the reference uses; the replay fills them from
/// the same `service_options` it starts the service with.
struct simulate_options {
  tiers::model_geometry geometry;
  uint64_t ram_cap_bytes = 0;
  /// RAM's eviction order (`ram-tier.policy`), decided by the tier's own
  /// `entry_ranking`.
  tiers::ram_policy ram_policy = tiers::ram_policy::lru;
  /// 0: no SSD tier.
  uint64_t ssd_cap_bytes = 0;
  /// The SSD tier's eviction order (`ssd-tier.policy`), decided by the
  /// same `entry_ranking` its index keeps.
  tiers::ram_policy ssd_policy = tiers::ram_policy::lru;
  uint32_t alignment = 4096;
  uint32_t checksum_chunk = 1u << 20;
  std::string fingerprint;
  uint64_t position_limit = 131072;
  uint64_t kv_budget_bytes = 0;
  /// Tag entries with the trace's sessions (and close each after its last
  /// request), as the replay does.
  bool sessions = true;
  /// The SSD tier's admission rule and the keys its memory holds.
  tiers::ssd::admission_rule admission = tiers::ssd::admission_rule::all;
  uint64_t admission_memory_keys = 1024;
};

/// What the reference counted.
struct simulate_result {
  uint64_t requests = 0;
  /// Requests that could never be admitted (skipped).
  uint64_t refused = 0;
  uint64_t input_tokens = 0;
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  /// Tokens an infinite whole-prefix cache would serve.
  uint64_t infinite_tokens = 0;
  uint64_t spills = 0;
  /// Bytes of the files spills wrote; spills the admission rule skipped
  /// and the bytes of their files.
  uint64_t spill_bytes = 0;
  uint64_t skipped_spills = 0;
  uint64_t skipped_bytes = 0;
  uint64_t restores = 0;
  uint64_t ram_evictions = 0;
  uint64_t ssd_evictions = 0;

  /// (RAM + SSD tokens) / input tokens.
  double token_hit_ratio() const;
  double infinite_hit_ratio() const;
};

/// Runs the reference over `t`. `ec::invalid_argument` for a geometry with
/// a layer that is not kv.
caf::expected<simulate_result> simulate(const trace& t,
                                        const simulate_options& opts);

/// The reference's options for a service started with `o` (its caps,
/// alignment, the 1 MiB checksum chunk, the model's fingerprint, limits).
simulate_options reference_options(const service_options& o,
                                   const tiers::model_geometry& g);

/// The namespace the replay (and the reference) files a request under.
std::string request_ns(const trace& t, const trace_request& r);

/// Bytes of the SSD entry file for `tokens` tokens of a kv `geometry` in
/// `ns` (docs/ssd-format.md: header, checksums, aligned payloads).
uint64_t entry_file_bytes(const tiers::model_geometry& geometry,
                          uint64_t tokens, const std::string& ns,
                          const std::optional<std::string>& session,
                          const std::string& fingerprint, uint32_t alignment,
                          uint32_t checksum_chunk);

} // namespace kvtier::runtime
