// Scripted engine scenarios (`kvtier scenario FILE`, conf/scenarios/*.scn;
// the format is in docs/scenarios.md). A scenario is a list of steps an
// engine would take against the service — requests with prompts built from
// named token runs, restarts, flushes, memory pressure, a disk that fills up —
// and the outcomes it expects, checked after the run. A failed expectation
// names its line, what it expected and what happened.
//
// This header is the format: parsing and checking are plain functions on
// values (no service); `run_scenario` (runtime/tools/scenario_run.cpp) drives
// the service. Single-threaded.
#pragma once

#include "runtime/config.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// One step of a scenario, as written: a verb and its arguments.
struct scenario_step {
  /// 1-based line in the file.
  size_t line = 0;
  /// request, restart, flush, boundary, pressure, demote-idle,
  /// close-session, disk-full, disk-ok, expect.
  std::string verb;
  /// Positional words after the verb.
  std::vector<std::string> words;
  /// key=value arguments.
  std::map<std::string, std::string> args;
};

struct scenario {
  std::string name;
  std::string file;
  /// `set` options: service options (`ram-cap-bytes`, `model`, ...).
  std::map<std::string, std::string> settings;
  std::vector<scenario_step> steps;
};

/// Parses a scenario. `ec::invalid_argument` names file, line and problem.
caf::expected<scenario> parse_scenario(const std::string& text,
                                       const std::string& file = "");

/// Reads and parses a scenario file.
caf::expected<scenario> load_scenario(const std::string& path);

/// What a run observed, by name (`t3.reused`, `t3.source`,
/// `report.ram.evictions`, `flush.durable`, `wrong_states`, ...): numbers
/// and words as text.
using scenario_facts = std::map<std::string, std::string>;

/// One expectation that did not hold.
struct scenario_failure {
  size_t line = 0;
  std::string expected; // "t3.reused_pct >= 90"
  std::string actual;   // "t3.reused_pct = 12.5"
};

/// Checks `expect` step `s` against `facts`; nullopt when it holds.
/// An unknown fact fails, naming the facts it could have meant.
std::optional<scenario_failure> check_expectation(const scenario_step& s,
                                                  const scenario_facts& facts);

struct scenario_result {
  std::string name;
  std::string file;
  scenario_facts facts;
  std::vector<scenario_failure> failures;
  /// A step that could not run (service error, bad argument), with line.
  std::string error;

  bool passed() const {
    return failures.empty() && error.empty();
  }
};

/// The result as text: "PASS name" or "FAIL name" and one line per
/// failure: `file:line: expected X, got Y`.
std::string render_result(const scenario_result& r);

/// Runs `s` against a fresh service (in-memory SSD unless the scenario
/// says otherwise) and checks every expectation. `base` supplies the
/// options the scenario does not set.
scenario_result run_scenario(const scenario& s, const service_options& base);

} // namespace kvtier::runtime
