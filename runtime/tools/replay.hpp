// Trace replay (`kvtier replay`, `kvtier demo`): drives the embedded
// service with the oracle engine doing every prefill and decode, the way an
// engine's scheduler would, one trace request after another:
//
//   prepare   expand the prompt, peek RAM, prefetch (cold reads start)
//   admit     hold the projected KV bytes; when the budget says wait, the
//             oldest running request finishes first (an admission wait)
//   acquire   take the longest usable prefix; verify it byte for byte
//   prefill   extend the reused state by the tokens not reused
//   publish   offer the prompt's state; end the prefetch lease
//   decode    generate the output tokens (checkpointing when configured)
//   release   once more than `batch` requests run, the oldest completes
//
// The prompt's state is what gets published: a trace names the next turn's
// prompt by block hashes, so decoded tokens never recur in a later prompt
// and their state could not be reused.
//
// With `settle`, the driver waits after the prefetch and after the publish
// until no spill is pending, so the SSD tier sees the same sequence of
// writes on every run; that is what lets the `--simulate` reference agree
// exactly (docs/replay.md). Single-threaded driver; the service's actors
// run beside it.
#pragma once

#include "runtime/service.hpp"
#include "runtime/tools/report.hpp"
#include "runtime/tools/trace.hpp"
#include "tiers/geometry.hpp"

#include <functional>

namespace kvtier::runtime {

struct replay_options {
  /// Verify every served state with the oracle (`--no-verify` clears it).
  bool verify = true;
  /// Wait for pending spills after each prefetch and publish.
  bool settle = true;
  /// 0: as fast as possible; x > 0: arrivals at trace time divided by x.
  double speed = 0;
  /// Requests admitted at once (their decodes overlap).
  uint32_t batch = 1;
  /// Prefill rate the saved time is computed at (an input, not measured).
  double prefill_tokens_per_s = 0;
  /// Called about once a second with the report so far.
  std::function<void(const replay_report&, uint64_t total, double elapsed_s)>
    progress;
};

/// Replays `t` through `svc`, whose model geometry is `geometry`. Service
/// errors other than "never admissible" abort the replay with that error.
caf::expected<replay_report> replay(const trace& t, service& svc,
                                    const tiers::model_geometry& geometry,
                                    const replay_options& opts);

} // namespace kvtier::runtime
