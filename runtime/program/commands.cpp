#include "runtime/program/commands.hpp"

#include "runtime/tools/inspect.hpp"
#include "runtime/tools/multi_replay.hpp"
#include "runtime/tools/replay.hpp"
#include "runtime/tools/scenario.hpp"
#include "runtime/tools/simulate.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>

namespace kvtier::runtime {

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

std::optional<flags> parse(const std::vector<std::string>& args,
                           const std::vector<std::string>& valued,
                           const std::vector<std::string>& bare) {
  flags out;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a.rfind("--", 0) != 0) {
      out.positional.push_back(a);
      continue;
    }
    auto eq = a.find('=');
    auto name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
    bool takes = std::find(valued.begin(), valued.end(), name) != valued.end();
    if (!takes && std::find(bare.begin(), bare.end(), name) == bare.end()) {
      std::fprintf(stderr, "kvtier: unknown option --%s\n", name.c_str());
      return std::nullopt;
    }
    if (!takes)
      out.named[name] = "";
    else if (eq != std::string::npos)
      out.named[name] = a.substr(eq + 1);
    else if (i + 1 < args.size())
      out.named[name] = args[++i];
    else {
      std::fprintf(stderr, "kvtier: --%s needs a value\n", name.c_str());
      return std::nullopt;
    }
  }
  return out;
}

bool write_file(const std::string& path, const std::string& text) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty())
    std::filesystem::create_directories(dir, ec);
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "kvtier: cannot write %s\n", path.c_str());
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
      std::fprintf(stderr, "kvtier: --%s \"%s\" is not a number\n", key.c_str(),
                   v.c_str());
      return false;
    }
    out = n;
    return true;
  };
  uint64_t nodes = 0;
  if (!number("nodes", nodes))
    return false;
  if (nodes == 0 || nodes > 64) {
    std::fprintf(stderr,
                 "kvtier: --nodes %llu: the node count must be 1 .. "
                 "64\n",
                 static_cast<unsigned long long>(nodes));
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
  if (f.has("no-verify") || f.has("no-settle") || f.has("simulate")) {
    std::fprintf(stderr, "kvtier: --nodes takes [replay] verify and settle "
                         "from the configuration; --simulate, --no-verify "
                         "and --no-settle do not apply\n");
    return false;
  }
  mo.scheduler_policy =
    to_string(caf::get_or(cfg, "scheduler.policy", caf::atom("affine")));
  if (!f.has("quiet"))
    mo.progress = [](const std::string& s, uint64_t done, uint64_t total) {
      std::fprintf(stderr, "\r[replay --nodes] %s: %llu/%llu requests   ",
                   s.c_str(), static_cast<unsigned long long>(done),
                   static_cast<unsigned long long>(total));
      std::fflush(stderr);
    };
  return true;
}

/// `kvtier replay --nodes N` (runtime/tools/multi_replay.hpp).
int run_multi_replay(kvtier_config& cfg, const multi_replay_options& mo,
                     const flags& f, const trace& t, const std::string& path) {
  auto rs = cfg.replay;
  rs.trace = path;
  auto r = multi_replay(t, cfg.options, rs, mo);
  if (mo.progress)
    std::fputs("\n", stderr);
  if (!r) {
    std::fprintf(stderr, "kvtier: replay --nodes failed: %s\n",
                 describe(r.error()).c_str());
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

int run_replay(kvtier_config& cfg, const flags& f) {
  auto& rs = cfg.replay;
  auto path = f.positional.empty() ? rs.trace : f.positional[0];
  multi_replay_options mo;
  if (f.has("nodes") && !multi_flags(cfg, f, mo))
    return 2;
  trace_options to;
  to.max_requests = rs.max_requests;
  auto t = load_trace(path, to);
  if (!t) {
    std::fprintf(stderr, "kvtier: %s\n", describe(t.error()).c_str());
    return 2;
  }
  if (f.has("nodes"))
    return run_multi_replay(cfg, mo, f, *t, path);
  cfg.options = rs.apply(cfg.options);
  auto& o = cfg.options;
  auto g = running_geometry(o);
  if (!g) {
    std::fprintf(stderr, "kvtier: %s\n", describe(g.error()).c_str());
    return 2;
  }
  if (f.has("simulate")) {
    auto t0 = std::chrono::steady_clock::now();
    auto sim = simulate(*t, reference_options(o, *g));
    if (!sim) {
      std::fprintf(stderr, "kvtier: %s\n", describe(sim.error()).c_str());
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
    std::fprintf(stderr, "kvtier: %s\n", describe(err).c_str());
    return 2;
  }
  replay_options ro;
  ro.verify = rs.verify && !f.has("no-verify");
  ro.settle = rs.settle && !f.has("no-settle");
  ro.speed = rs.speed;
  ro.batch = static_cast<uint32_t>(rs.batch);
  ro.prefill_tokens_per_s = rs.prefill_tokens_per_s;
  if (!f.has("quiet"))
    ro.progress = [](const replay_report& r, uint64_t total, double s) {
      std::fprintf(stderr, "\r%s", progress_line(r, total, s).c_str());
      std::fflush(stderr);
    };
  auto rep = replay(*t, svc, *g, ro);
  if (ro.progress)
    std::fputs("\n", stderr);
  if (!rep) {
    std::fprintf(stderr, "kvtier: replay failed: %s\n",
                 describe(rep.error()).c_str());
    return 1;
  }
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
  auto f =
    parse(args, {"json", "plot", "nodes", "seed", "work-dir", "scenarios"},
          {"simulate", "no-verify", "no-settle", "quiet", "close"});
  if (!f || f->positional.size() > 1)
    return 2;
  return run_replay(cfg, *f);
}

int demo_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto f =
    parse(args, {"json", "plot"}, {"no-verify", "no-settle", "quiet", "close"});
  if (!f || !f->positional.empty())
    return 2;
  if (!f->has("json"))
    f->named["json"] = "demo-data/replay.json";
  if (!f->has("plot"))
    f->named["plot"] = "demo-data/replay.svg";
  return run_replay(cfg, *f);
}

int inspect_command(kvtier_config&, const std::vector<std::string>& args) {
  auto f = parse(args, {}, {"verify"});
  if (!f || f->positional.size() != 1) {
    std::fprintf(stderr, "usage: kvtier inspect DIR [--verify]\n");
    return 2;
  }
  tiers::ssd::posix_file_system fs;
  auto r = inspect(fs, f->positional[0], f->has("verify"));
  if (!r) {
    std::fprintf(stderr, "kvtier: %s\n", describe(r.error()).c_str());
    return 2;
  }
  std::fputs(render_inspect(*r).c_str(), stdout);
  return r->problems() == 0 ? 0 : 1;
}

} // namespace kvtier::runtime

namespace kvtier::runtime {

int scenario_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  auto f = parse(args, {}, {});
  if (!f || f->positional.empty()) {
    std::fprintf(stderr, "usage: kvtier scenario FILE...\n");
    return 2;
  }
  int rc = 0;
  for (auto& path : f->positional) {
    auto s = load_scenario(path);
    if (!s) {
      std::fprintf(stderr, "kvtier: %s\n", describe(s.error()).c_str());
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
