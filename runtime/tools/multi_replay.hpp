// The multi-node replay (`kvtier replay --nodes N`, docs/replay.md "Several
// nodes"): one trace driven through N local `kvtier node --replay-agent`
// processes, every served state verified by the agents' oracles, under four
// placements of the same trace in the same run:
//
//   routed       N joined nodes; node 0's router (cluster::query_route)
//                names the node of each request
//   single       one node with N times the per-node RAM and SSD caps
//   random       N isolated nodes (not joined: no peer sharing), each
//                request on a node drawn from a seeded generator
//   round-robin  N joined nodes, request i on node i mod N
//
// Per-node caps are the [replay] caps divided by N, so every scenario has
// the same total capacity and `single` is exactly the one-node replay's.
// For each scenario the driver writes one configuration per node into a
// work directory (port 0, loopback, fast heartbeats, the node's own SSD
// directory, the driver's [replay] trace and max-requests), starts the
// processes (runtime/tools/node_spawn.hpp), waits until a joined cluster's
// membership is full, connects to every node actor and sends each request
// in trace order to the chosen node's agent (ReplayStep), then asks every
// agent to finish (ReplayFinish), stops the processes (SIGTERM, then
// SIGKILL) and sums the nodes' reports.
//
// Every wait is bounded: a start by 15 s, a full membership by 20 s, a
// step by `step_deadline`, a finish by `finish_deadline`, a stop by the
// node's storage deadline plus its down-after plus 5 s. A failed step or a
// node that dies ends the run with that error (processes stopped). One
// thread calls `multi_replay`.
#pragma once

#include "runtime/config.hpp"
#include "runtime/tools/trace.hpp"

#include <nlohmann/json.hpp>

#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvtier::runtime {

struct multi_replay_options {
  uint32_t nodes = 3;
  /// Seed of `random`'s placement.
  uint64_t seed = 1;
  /// The kvtier program the nodes run (empty: this process's executable).
  std::string program;
  /// Where configurations, SSD directories and logs go (empty: a fresh
  /// temporary directory, removed afterwards unless `keep_dir`).
  std::string work_dir;
  bool keep_dir = false;
  /// Scenarios to run, by name, in this order.
  std::vector<std::string> scenarios{"routed", "single", "random",
                                     "round-robin"};
  /// scheduler.policy written into the nodes' configurations.
  std::string scheduler_policy = "affine";
  std::chrono::milliseconds step_deadline{120000};
  std::chrono::milliseconds finish_deadline{300000};
  /// Called about once a second: scenario, requests done, total.
  std::function<void(const std::string&, uint64_t, uint64_t)> progress;
};

/// One node's share of a scenario.
struct node_figures {
  std::string node_id;
  uint64_t requests = 0;
  uint64_t input_tokens = 0;
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  uint64_t peer_tokens = 0;
  uint64_t fresh_tokens = 0;
  uint64_t verified_states = 0;
  uint64_t wrong_states = 0;
  uint64_t refused = 0;
  /// Entries this node fetched from peers, and served to them.
  uint64_t remote_fetches = 0;
  uint64_t served_to_peers = 0;
  /// The agent's whole report (runtime/tools/report.hpp to_json, with the
  /// peer-tier counters under "peer").
  nlohmann::json report;
};

struct placement_result {
  std::string name;
  /// False when it could not run here (`why` says so).
  bool ran = false;
  std::string why;
  uint32_t nodes = 0;
  uint64_t ram_cap_bytes_per_node = 0;
  uint64_t ssd_cap_bytes_per_node = 0;
  std::vector<node_figures> per_node;
  /// Cumulative hit ratio after every request (the chart's lines).
  std::vector<double> series;
  double wall_s = 0;

  node_figures total() const;
  double token_hit_ratio() const;
  /// Most requests on one node over the mean (1: perfectly even).
  double balance() const;
};

struct multi_replay_result {
  std::string trace;
  std::string model;
  uint64_t requests = 0;
  uint32_t nodes = 0;
  uint64_t seed = 0;
  std::vector<placement_result> scenarios;

  uint64_t wrong_states() const;
  const placement_result* find(const std::string& name) const;
};

/// Runs the scenarios of `mo` on `t` (loaded from `rs.trace` with
/// `rs.max_requests`), nodes configured from `o` and `rs`.
/// `ec::invalid_argument` for 0 nodes (or over 64) or an unknown scenario
/// name; a node that fails to start, a step or finish that fails: that
/// error.
caf::expected<multi_replay_result> multi_replay(const trace& t,
                                                const service_options& o,
                                                const replay_settings& rs,
                                                const multi_replay_options& mo);

/// The readable comparison table.
std::string render_table(const multi_replay_result& r);

/// The JSON document (docs/replay.md "Several nodes").
nlohmann::json to_json(const multi_replay_result& r);

/// An SVG chart: per scenario, grouped bars of the hit ratio and the RAM,
/// SSD and peer shares of the prompt tokens, and each node's share of the
/// requests.
std::string render_svg(const multi_replay_result& r);

} // namespace kvtier::runtime
