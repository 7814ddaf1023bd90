// The replay agent of `kvtier node --replay-agent` (docs/replay.md "Several
// nodes"): an actor in the node process holding the trace (the node's own
// [replay] trace and max-requests, which the multi-node driver sets to its
// own), the oracle and a `replay_session` on the node's service. It answers
// ReplayStep (run one trace request by index, verified) and ReplayFinish
// (complete, settle, and the node's report as JSON text with its peer-tier
// counters) from messages/replay.capnp, which the node actor forwards to it
// (node_delegates::agent) from any sender.
//
// A tool, not a service feature: it runs only when the flag asks for it,
// and refuses a step past the trace or after the finish (invalid_argument)
// instead of trusting the index. Detached: every handler blocks in the
// service's calls on the agent's own thread, never on a scheduler worker.
// The agent keeps `svc` referenced; the owner stops the agent (it exits
// with the actor system) before the service goes.
#pragma once

#include "runtime/service.hpp"
#include "runtime/tools/replay.hpp"
#include "runtime/tools/trace.hpp"

#include <caf/actor.hpp>

namespace kvtier::runtime {

/// Spawns the agent replaying `t` through `svc` (model `geometry`) with
/// `opts` (no progress callback is called).
caf::actor spawn_replay_agent(service& svc, trace t,
                              const tiers::model_geometry& geometry,
                              replay_options opts);

} // namespace kvtier::runtime
