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
//
// A `replay_session` is the same engine loop one request at a time, by
// trace index: `kvtier node --replay-agent` runs one per node and the
// multi-node driver (runtime/tools/multi_replay.hpp) chooses which node
// serves each request. A hit is counted by where its tokens came from:
// RAM held them before the prefetch (RAM), a peer fetch during the
// prefetch or the acquire brought them (peers: the service's peer-tier
// fetch count moved), else the SSD tier restored them (SSD).
#pragma once

#include "runtime/service.hpp"
#include "runtime/tools/report.hpp"
#include "runtime/tools/trace.hpp"
#include "tiers/geometry.hpp"

#include <functional>
#include <memory>

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

/// What one request of a session was served.
struct replay_step {
  uint64_t input_tokens = 0;
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  uint64_t peer_tokens = 0;
  uint64_t fresh_tokens = 0;
  /// The oracle checked the served state (0 or 1) and rejected it.
  uint32_t verified = 0;
  uint32_t wrong = 0;
  /// Never admissible: served nothing.
  bool refused = false;
  state_source source = state_source::none;
};

/// The replay's engine loop, one trace request at a time. `t`, `svc` and
/// `opts` must outlive it; one thread calls it.
class replay_session {
public:
  replay_session(const trace& t, service& svc,
                 const tiers::model_geometry& geometry,
                 const replay_options& opts);
  ~replay_session();

  replay_session(const replay_session&) = delete;
  replay_session& operator=(const replay_session&) = delete;

  /// Runs request `i` of the trace (any order; a session's last request
  /// by index closes it). `ec::invalid_argument` for an index past the
  /// trace; other errors are the service's.
  caf::expected<replay_step> step(size_t i);

  /// Completes the running requests, settles and returns the report (with
  /// the service's counters). Call once, after the last step.
  caf::expected<replay_report> finish();

  /// The report so far (counters of the steps run).
  const replay_report& so_far() const;

private:
  class driver;
  std::unique_ptr<driver> d_;
};

/// Replays `t` through `svc`, whose model geometry is `geometry`. Service
/// errors other than "never admissible" abort the replay with that error.
caf::expected<replay_report> replay(const trace& t, service& svc,
                                    const tiers::model_geometry& geometry,
                                    const replay_options& opts);

} // namespace kvtier::runtime
