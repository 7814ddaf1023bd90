#include "runtime/program/commands.hpp"

#include "runtime/tools/inspect.hpp"
#include "runtime/tools/multi_replay.hpp"
#include "runtime/tools/progress.hpp"
#include "runtime/tools/regret.hpp"
#include "runtime/tools/replay.hpp"
#include "runtime/tools/scenario.hpp"
#include "runtime/tools/simulate.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <tuple>
#include <unistd.h>

namespace kvtier::runtime {

void complain(const std::string& cmd, const std::string& text) {
  // Deliberately plain stderr: a usage or start-up error is the command's
  // answer to its user, not a log line.
  if (cmd.empty())
    std::fprintf(stderr, "kvtier: %s\n", text.c_str());
  else
    std::fprintf(stderr, "kvtier %s: %s\n", cmd.c_str(), text.c_str());
}

namespace {

/// A command's own flags: `--name`, `--name VALUE` or `--name=VALUE`.
struct flags {
  std::vector<std::string> positional;
  std::map<std::string, std::string> named;

  bool has(const std::string& k) const {
    return named.count(k) > 0;
  }
  std::string get(const std::string& k) const {
    auto i = named.find(k);
    return i == named.end() ? std::string{} : i->second;
  }
};

/// The command's flags, or nullopt after saying what is wrong ("kvtier
/// CMD: unknown option --x", "kvtier CMD: --json needs a value", "kvtier
/// CMD: unexpected argument 'x'" past `max_positional`).
std::optional<flags> parse(const std::string& cmd,
                           const std::vector<std::string>& args,
                           const std::vector<std::string>& valued,
                           const std::vector<std::string>& bare,
                           size_t max_positional) {
  flags out;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a.rfind("--", 0) != 0) {
      if (out.positional.size() == max_positional) {
        complain(cmd, "unexpected argument '" + a + "'");
        return std::nullopt;
      }
      out.positional.push_back(a);
      continue;
    }
    auto eq = a.find('=');
    auto name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
    bool takes = std::find(valued.begin(), valued.end(), name) != valued.end();
    if (!takes && std::find(bare.begin(), bare.end(), name) == bare.end()) {
      complain(cmd, "unknown option --" + name);
      return std::nullopt;
    }
    if (!takes && eq != std::string::npos) {
      complain(cmd, "--" + name + " takes no value");
      return std::nullopt;
    }
    if (!takes)
      out.named[name] = "";
    else if (eq != std::string::npos)
      out.named[name] = a.substr(eq + 1);
    else if (i + 1 < args.size())
      out.named[name] = args[++i];
    else {
      complain(cmd, "--" + name + " needs a value");
      return std::nullopt;
    }
  }
  return out;
}

/// Whether progress goes to a terminal (one line rewritten) or not (a
/// plain line now and then: runtime/tools/progress.hpp). The progress
/// line is deliberately plain stderr, not the log: it is the command's
/// own display, rewritten in place on a terminal.
bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

bool write_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty())
    std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << text;
  if (!out) {
    complain("", "cannot write " + path);
    return false;
  }
  return true;
}

replay_report from_simulation(const trace& t, const simulate_result& s,
                              const service_options& o, double rate) {
  replay_report r;
  r.trace = t.name;
  auto g = running_geometry(o);
  r.model = g ? g->name : o.model;
  r.replayed = false;
  r.verified = false;
  r.ram_cap_bytes = o.ram_cap_bytes;
  r.ssd_cap_bytes = o.ssd_dir.empty() ? 0 : o.ssd_cap_bytes;
  r.requests = s.requests;
  r.refused = s.refused;
  r.input_tokens = s.input_tokens;
  r.ram_tokens = s.ram_tokens;
  r.ssd_tokens = s.ssd_tokens;
  r.fresh_tokens = s.input_tokens - s.ram_tokens - s.ssd_tokens;
  r.spills = s.spills;
  r.ssd_bytes_written = s.spill_bytes;
  r.restores = s.restores;
  r.ram_evictions = s.ram_evictions;
  r.ssd_evictions = s.ssd_evictions;
  r.prefill_tokens_per_s = rate;
  r.simulated_lru_hit_ratio = s.token_hit_ratio();
  r.infinite_hit_ratio = s.infinite_hit_ratio();
  return r;
}

/// Removes `<dir>/<fingerprint>/` (the service's own model's folder only).
void clean_ssd(const service_options& o) {
  auto model = running_model(o);
  if (o.ssd_dir.empty() || !model)
    return;
  std::error_code ec;
  std::filesystem::remove_all(
    std::filesystem::path(o.ssd_dir) / model->fingerprint(), ec);
}

int emit(const replay_report& r, const flags& f) {
  std::fputs(render_table(r).c_str(), stdout);
  if (f.has("json")) {
    if (!write_file(f.get("json"), to_json(r).dump(2) + "\n"))
      return 2;
    std::printf("wrote %s\n", f.get("json").c_str());
  }
  if (f.has("plot")) {
    if (!write_file(f.get("plot"), render_svg(r)))
      return 2;
    std::printf("wrote %s\n", f.get("plot").c_str());
  }
  return r.wrong_states == 0 ? 0 : 1;
}

/// `--nodes N` and its companions into `mo`; false (after saying why) for
/// bad ones.
bool multi_flags(kvtier_config& cfg, const flags& f, multi_replay_options& mo) {
  auto number = [&](const std::string& key, uint64_t& out) {
    auto v = f.get(key);
    char* end = nullptr;
    errno = 0;
    auto n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || v[0] == '-') {
      complain("replay", "--" + key + " \"" + v + "\" is not a number");
      return false;
    }
    out = n;
    return true;
  };
  uint64_t nodes = 0;
  if (!number("nodes", nodes))
    return false;
  if (nodes == 0 || nodes > 64) {
    complain("replay", "--nodes " + std::to_string(nodes)
                         + ": the node count must be 1 .. 64");
    return false;
  }
  mo.nodes = static_cast<uint32_t>(nodes);
  if (f.has("seed") && !number("seed", mo.seed))
    return false;
  if (f.has("work-dir")) {
    mo.work_dir = f.get("work-dir");
    mo.keep_dir = true;
  }
  if (f.has("scenarios")) {
    mo.scenarios.clear();
    std::stringstream in(f.get("scenarios"));
    for (std::string s; std::getline(in, s, ',');)
      if (!s.empty())
        mo.scenarios.push_back(s);
  }
  if (f.has("no-verify") || f.has("no-settle") || f.has("simulate")
      || f.has("close")) {
    complain("replay", "--nodes takes [replay] verify and settle from the "
                       "configuration; --simulate, --no-verify, --no-settle "
                       "and --close do not apply");
    return false;
  }
  mo.scheduler_policy =
    to_string(caf::get_or(cfg, "scheduler.policy", caf::atom("affine")));
  return true;
}

/// `kvtier replay --nodes N` (runtime/tools/multi_replay.hpp).
int run_multi_replay(kvtier_config& cfg, multi_replay_options mo,
                     const flags& f, const trace& t, const std::string& path) {
  auto rs = cfg.replay;
  rs.trace = path;
  // One meter, restarted per scenario: its rate and ETA are the
  // scenario's own.
  struct meter_state {
    progress_meter meter{stderr_is_terminal()};
    std::string scenario;
    std::chrono::steady_clock::time_point start;
  };
  auto m = std::make_shared<meter_state>();
  if (!f.has("quiet")) {
    mo.progress = [m](const std::string& s, uint64_t done, uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (s != m->scenario) {
        std::fputs(m->meter.finish().c_str(), stderr);
        m->meter.restart();
        m->scenario = s;
        m->start = now;
      }
      double elapsed = std::chrono::duration<double>(now - m->start).count();
      std::fputs(
        m->meter.update("[replay --nodes] " + s + ":", done, total, elapsed)
          .c_str(),
        stderr);
      std::fflush(stderr);
    };
  }
  auto r = multi_replay(t, cfg.options, rs, mo);
  std::fputs(m->meter.finish().c_str(), stderr);
  if (!r) {
    complain("replay", "--nodes failed: " + reason(r.error()));
    return 1;
  }
  std::fputs(render_table(*r).c_str(), stdout);
  if (f.has("json")) {
    if (!write_file(f.get("json"), to_json(*r).dump(2) + "\n"))
      return 2;
    std::printf("wrote %s\n", f.get("json").c_str());
  }
  if (f.has("plot")) {
    if (!write_file(f.get("plot"), render_svg(*r)))
      return 2;
    std::printf("wrote %s\n", f.get("plot").c_str());
  }
  return r->wrong_states() == 0 ? 0 : 1;
}

/// The flags of the regret report taking a value (the trace's and the
/// policy's knobs, tiers::gdsf_options), beside --json and --plot.
std::vector<std::string> regret_named_flags() {
  return {"capacities",   "max-requests", "conv-stagger", "frequency-cap",
          "ghost-factor", "cost-weight",  "duel-window",  "unknown-interval",
          "slack",        "fresh-weight", "duel-edge"};
}

/// Its bare flags.
std::vector<std::string> regret_toggles() {
  return {"sweep",        "no-inherit", "no-duel",
          "no-frequency", "no-reuse",   "no-lru2"};
}

/// The regret report of `kvtier regret` and `kvtier replay --simulate
/// --sweep|--capacities` (defined with the policy's flags below).
int run_regret(const std::string& cmd, kvtier_config& cfg, const flags& f);

int run_replay(const std::string& cmd, kvtier_config& cfg, const flags& f) {
  if (f.has("sweep") || f.has("capacities")) {
    if (!f.has("simulate") || f.has("nodes")) {
      complain(cmd, "--sweep and --capacities compare eviction policies "
                    "offline: they need --simulate (and no --nodes)");
      return 2;
    }
    return run_regret(cmd, cfg, f);
  }
  auto& rs = cfg.replay;
  auto path = f.positional.empty() ? rs.trace : f.positional[0];
  multi_replay_options mo;
  if (f.has("nodes") && !multi_flags(cfg, f, mo))
    return 2;
  trace_options to;
  to.max_requests = rs.max_requests;
  auto t = load_trace(path, to);
  if (!t) {
    complain(cmd, reason(t.error()));
    return 2;
  }
  if (f.has("nodes"))
    return run_multi_replay(cfg, mo, f, *t, path);
  cfg.options = rs.apply(cfg.options);
  auto& o = cfg.options;
  auto g = running_geometry(o);
  if (!g) {
    complain(cmd, reason(g.error()));
    return 2;
  }
  if (f.has("simulate")) {
    auto t0 = std::chrono::steady_clock::now();
    auto sim = simulate(*t, reference_options(o, *g));
    if (!sim) {
      complain(cmd, reason(sim.error()));
      return 2;
    }
    auto r = from_simulation(*t, *sim, o, rs.prefill_tokens_per_s);
    r.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
    return emit(r, f);
  }
  // The reference runs on the second core while the replay runs.
  auto reference = std::async(
    std::launch::async, [&] { return simulate(*t, reference_options(o, *g)); });
  if (rs.clean_ssd)
    clean_ssd(o);
  service svc(cfg);
  if (auto err = svc.start_error()) {
    complain(cmd, "cannot start the service: " + reason(err));
    return 2;
  }
  // A warm start (clean-ssd off, an earlier run's files) is said so.
  uint64_t files_at_start = 0, bytes_at_start = 0;
  if (auto rep = svc.report()) {
    files_at_start = rep->ssd.files;
    bytes_at_start = rep->ssd.file_bytes;
  }
  replay_options ro;
  ro.verify = rs.verify && !f.has("no-verify");
  ro.settle = rs.settle && !f.has("no-settle");
  ro.speed = rs.speed;
  ro.batch = static_cast<uint32_t>(rs.batch);
  ro.prefill_tokens_per_s = rs.prefill_tokens_per_s;
  auto meter = std::make_shared<progress_meter>(stderr_is_terminal());
  if (!f.has("quiet"))
    ro.progress = [meter](const replay_report& r, uint64_t total, double s) {
      char ratio[40];
      std::snprintf(ratio, sizeof ratio, "hit ratio %.4f", r.token_hit_ratio());
      std::fputs(meter->update("[replay]", r.requests, total, s, ratio).c_str(),
                 stderr);
      std::fflush(stderr);
    };
  auto rep = replay(*t, svc, *g, ro);
  std::fputs(meter->finish().c_str(), stderr);
  if (!rep) {
    complain(cmd, "replay failed: " + reason(rep.error()));
    return 1;
  }
  rep->ssd_files_at_start = files_at_start;
  rep->ssd_bytes_at_start = bytes_at_start;
  if (auto sim = reference.get()) {
    rep->simulated_lru_hit_ratio = sim->token_hit_ratio();
    rep->infinite_hit_ratio = sim->infinite_hit_ratio();
  }
  auto rc = emit(*rep, f);
  if (!f.has("close")) {
    // close() would first make every RAM entry durable: minutes of writes
    // the figures above do not need. Leave without it; what was spilled
    // is on disk whole (written, fsynced, renamed).
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}

} // namespace

int replay_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto named = regret_named_flags();
  named.insert(named.end(),
               {"json", "plot", "nodes", "seed", "work-dir", "scenarios"});
  auto toggles = regret_toggles();
  toggles.insert(toggles.end(),
                 {"simulate", "no-verify", "no-settle", "quiet", "close"});
  auto f = parse("replay", args, named, toggles, 1);
  if (!f)
    return 2;
  return run_replay("replay", cfg, *f);
}

int demo_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto f = parse("demo", args, {"json", "plot"},
                 {"no-verify", "no-settle", "quiet", "close"}, 0);
  if (!f)
    return 2;
  if (!f->has("json"))
    f->named["json"] = "demo-data/replay.json";
  if (!f->has("plot"))
    f->named["plot"] = "demo-data/replay.svg";
  return run_replay("demo", cfg, *f);
}

namespace {

/// A whole number of at most `max` from a flag, or nullopt after saying
/// what is wrong.
std::optional<uint64_t> whole_flag(const std::string& cmd, const flags& f,
                                   const std::string& key, uint64_t max) {
  auto v = f.get(key);
  uint64_t n = 0;
  auto [p, err] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || err != std::errc{} || p != v.data() + v.size() || n > max) {
    complain(cmd, "--" + key + " \"" + v + "\" is not a whole number 0 .. "
                    + std::to_string(max));
    return std::nullopt;
  }
  return n;
}

/// A number 0 .. `max` from a flag, or nullopt after saying what is wrong.
std::optional<double> number_flag(const std::string& cmd, const flags& f,
                                  const std::string& key, double max) {
  auto v = f.get(key);
  double x = 0;
  auto [p, err] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || err != std::errc{} || p != v.data() + v.size()
      || !(x >= 0 && x <= max)) {
    char range[32];
    std::snprintf(range, sizeof range, "%g", max);
    complain(cmd, "--" + key + " \"" + v + "\" is not a number 0 .. " + range);
    return std::nullopt;
  }
  return x;
}

/// gdsf-radix's knobs from `kvtier regret`'s flags (docs/eviction.md
/// "Ingredients" runs each one off); false after saying what is wrong.
bool policy_flags(const std::string& cmd, const flags& f,
                  tiers::gdsf_options& o) {
  if (f.has("frequency-cap")) {
    auto n = whole_flag(cmd, f, "frequency-cap", 1u << 20);
    if (!n || *n == 0) {
      if (n)
        complain(cmd, "--frequency-cap must be at least 1");
      return false;
    }
    o.frequency_cap = static_cast<uint32_t>(*n);
  }
  for (auto [key, field, max] :
       {std::tuple{"ghost-factor", &tiers::gdsf_options::ghost_factor, 1024.0},
        std::tuple{"cost-weight", &tiers::gdsf_options::cost_weight, 1024.0},
        std::tuple{"duel-window", &tiers::gdsf_options::duel_window, 1e6},
        std::tuple{"unknown-interval", &tiers::gdsf_options::unknown_interval,
                   1e6},
        std::tuple{"slack", &tiers::gdsf_options::slack, 1e6},
        std::tuple{"fresh-weight", &tiers::gdsf_options::fresh_weight, 1e6},
        std::tuple{"duel-edge", &tiers::gdsf_options::duel_edge, 1e6}})
    if (f.has(key)) {
      auto x = number_flag(cmd, f, key, max);
      if (!x)
        return false;
      o.*field = *x;
    }
  o.inherit_session = !f.has("no-inherit");
  o.duel = !f.has("no-duel");
  o.frequency = !f.has("no-frequency");
  o.reuse = !f.has("no-reuse");
  o.second_touch = !f.has("no-lru2");
  return true;
}

int run_regret(const std::string& cmd, kvtier_config& cfg, const flags& f) {
  regret_options ro;
  if (!policy_flags(cmd, f, ro.policy))
    return 2;
  if (f.has("capacities") && f.has("sweep")) {
    complain(cmd, "--capacities and --sweep exclude each other");
    return 2;
  }
  if (f.has("capacities")) {
    auto c = parse_capacities(f.get("capacities"));
    if (!c) {
      complain(cmd, "--capacities: " + reason(c.error()));
      return 2;
    }
    ro.capacities_tokens = std::move(*c);
  }
  trace_options to;
  if (cmd == "replay")
    to.max_requests = cfg.replay.max_requests;
  if (f.has("max-requests")) {
    auto n = whole_flag(cmd, f, "max-requests", UINT32_MAX);
    if (!n)
      return 2;
    to.max_requests = *n;
  }
  if (f.has("conv-stagger")) {
    auto n = whole_flag(cmd, f, "conv-stagger", 86400);
    if (!n)
      return 2;
    to.conv_stagger_s = double(*n);
  }
  auto path = f.positional.empty() ? cfg.replay.trace : f.positional[0];
  auto t = load_trace(path, to);
  if (!t) {
    complain(cmd, reason(t.error()));
    return 2;
  }
  auto r = regret(*t, ro);
  if (!r) {
    complain(cmd, reason(r.error()));
    return 2;
  }
  std::fputs(render_table(*r).c_str(), stdout);
  if (f.has("json") && !write_file(f.get("json"), render_json(*r)))
    return 2;
  if (f.has("plot") && !write_file(f.get("plot"), render_svg(*r)))
    return 2;
  return r->holds() ? 0 : 1;
}

} // namespace

int regret_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto named = regret_named_flags();
  named.insert(named.end(), {"json", "plot"});
  auto f = parse("regret", args, named, regret_toggles(), 1);
  if (!f)
    return 2;
  return run_regret("regret", cfg, *f);
}

int inspect_command(kvtier_config&, const std::vector<std::string>& args) {
  auto f = parse("inspect", args, {}, {"verify", "quarantine"}, 1);
  if (!f)
    return 2;
  if (f->positional.size() != 1) {
    complain("inspect", "which directory? usage: kvtier inspect DIR "
                        "[--verify] [--quarantine]");
    return 2;
  }
  tiers::ssd::posix_file_system fs;
  auto r = inspect(fs, f->positional[0], f->has("verify"));
  if (!r) {
    complain("inspect", reason(r.error()));
    return 2;
  }
  if (f->has("quarantine")) {
    auto moved = quarantine(fs, *r);
    if (!moved) {
      std::fputs(render_inspect(*r).c_str(), stdout);
      complain("inspect", "--quarantine: " + reason(moved.error()));
      return 2;
    }
  }
  std::fputs(render_inspect(*r).c_str(), stdout);
  return r->problems() == 0 ? 0 : 1;
}

} // namespace kvtier::runtime

namespace kvtier::runtime {

int scenario_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto f = parse("scenario", args, {}, {}, SIZE_MAX);
  if (!f)
    return 2;
  if (f->positional.empty()) {
    complain("scenario", "which file? usage: kvtier scenario FILE...");
    return 2;
  }
  int rc = 0;
  for (auto& path : f->positional) {
    auto s = load_scenario(path);
    if (!s) {
      complain("scenario", reason(s.error()));
      rc = 2;
      continue;
    }
    auto r = run_scenario(*s, cfg.options);
    std::fputs(render_result(r).c_str(), stdout);
    if (!r.passed() && rc == 0)
      rc = 1;
  }
  return rc;
}

} // namespace kvtier::runtime
