// The `kvtier` program's commands beyond `config` and `version`: `replay`,
// `demo`, `regret`, `inspect`, `scenario` (docs/replay.md, docs/eviction.md,
// docs/scenarios.md), `node`
// and `members` (docs/cluster.md).
// Each takes the loaded configuration and the command's own arguments (the
// `--section.key=value` overrides are already applied) and returns the
// process exit code: 0 success, 1 the run found a problem (a wrong state, a
// failed expectation, a corrupt file), 2 bad usage or a start-up error.
// Called once from main on the main thread.
#pragma once

#include "runtime/config.hpp"

#include <functional>
#include <string>
#include <vector>

namespace kvtier::runtime {

class service;

/// Says what is wrong with a command, on stderr with one prefix: "kvtier
/// CMD: TEXT" ("kvtier: TEXT" for an empty CMD); TEXT names no "kvtier:"
/// itself (an error's text goes through `reason`, messages/error.hpp).
void complain(const std::string& cmd, const std::string& text);

/// `kvtier replay [TRACE] [--simulate] [--json FILE] [--plot FILE.svg]
/// [--no-verify] [--quiet]`; with `--nodes N [--seed S] [--scenarios
/// LIST] [--work-dir DIR]` the multi-node comparison
/// (runtime/tools/multi_replay.hpp); with `--simulate` and `--sweep` or
/// `--capacities=N,...` the eviction regret report, as `regret_command`.
int replay_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `kvtier demo`: the replay of [replay] trace, writing
/// demo-data/replay.json and demo-data/replay.svg.
int demo_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `kvtier regret [TRACE] [--capacities=N,N,...|--sweep] [--json FILE]
/// [--plot FILE.svg] [--max-requests N] [--conv-stagger S] [--frequency-cap
/// N] [--ghost-factor X] [--cost-weight X] [--fresh-weight X] [--duel-window
/// X] [--duel-edge X] [--unknown-interval X] [--slack X] [--no-inherit]
/// [--no-duel] [--no-frequency] [--no-reuse] [--no-lru2]` (the policy's knobs,
/// tiers::gdsf_options): LRU,
/// gdsf-radix and the foresight ceiling at each capacity (tokens; default
/// the sweep over the working set, runtime/tools/regret.hpp); 1 when a
/// rule of the policy fails at some capacity (docs/eviction.md).
int regret_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `kvtier inspect DIR [--verify]`.
int inspect_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `kvtier node [--join HOST:PORT]... [--replay-agent]`: boots the service
/// with `cluster.enabled`, prints "kvtier node listening HOST:PORT
/// node-id=NAME" and runs until SIGTERM or SIGINT; then closes (flush),
/// tells its peers it leaves and exits 0 (docs/cluster.md).
/// `--replay-agent` applies the [replay] section to the service and runs a
/// replay agent (runtime/tools/replay_agent.hpp) for `replay --nodes`;
/// refused (2) when the [replay] trace does not load.
int node_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `node_command` that runs `ready` on the started service before the
/// listening line (test programs publish state there); false from it ends
/// the command with 2.
int node_command(kvtier_config& cfg, const std::vector<std::string>& args,
                 const std::function<bool(service&)>& ready);

/// `kvtier members HOST:PORT`: prints the node's membership view.
int members_command(kvtier_config& cfg, const std::vector<std::string>& args);

/// `kvtier scenario FILE...`.
int scenario_command(kvtier_config& cfg, const std::vector<std::string>& args);

} // namespace kvtier::runtime
