// bench_delta: SSD bytes written per new token, whole files against delta
// files, on the Mooncake conversation trace (issue #15, item 4;
// docs/ssd-format.md, "Delta files").
//
// The trace is replayed twice through the embedded service, as `kvtier
// replay` does with its [replay] defaults (llama-3.1-8b at scale 1/4096,
// 32 B per token; RAM cap 256 MiB, below the trace's working set, so RAM
// evicts and every eviction is spilled; SSD cap 1 GiB; every served state
// verified by the oracle; spills settled), first with
// `ssd-tier.delta-files = false` (every file whole, the figure before
// format 3), then with it true. The SSD files live on the in-memory file
// system: what is measured is the bytes the SSD tier hands its engine for
// prefix files (headers, payloads, padding), which does not depend on the
// disk, and two runs take about a minute instead of several.
//
// "New token" (the ideal): for each prefix write, when it starts, its
// tokens beyond the longest prefix of it already on SSD, counting any
// prefix file that holds those rows, also one that serves it trimmed,
// times the model's bytes per token (`ssd_stats::new_token_bytes`). The
// figure is bytes written / ideal: 1.0 would be writing each new token's
// KV once and nothing else. The target: delta files <= 1.2x.
//
// Usage: bench_delta [--requests N] [--ram-cap-bytes B] [--check]
//   --requests 0 replays the whole trace (12,031 requests); default 6,000.
//   --check: exit status 1 when the delta figure is over 1.2x.
#include "runtime/config.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/replay.hpp"
#include "runtime/tools/trace.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace kvtier;
using namespace kvtier::runtime;

namespace {

struct figures {
  bool ok = false;
  double hit_ratio = 0;
  uint64_t wrong = 0, verified = 0, spills = 0, deltas = 0, refused = 0,
           cascades = 0, written = 0, ideal = 0, evicted = 0;
  double wall_s = 0;

  double ratio() const {
    return ideal == 0 ? 0 : static_cast<double>(written) / ideal;
  }
};

figures run(const trace& t, service_options o, bool deltas) {
  figures out;
  o.ssd_dir = "/bench-delta";
  o.io_engine = "threads";
  o.delta_files = deltas;
  auto g = running_geometry(o);
  if (!g) {
    std::fprintf(stderr, "bench_delta: %s\n", reason(g.error()).c_str());
    return out;
  }
  tiers::ssd::memory_file_system fs;
  service svc(o, service_parts{&fs});
  if (auto err = svc.start_error()) {
    std::fprintf(stderr, "bench_delta: cannot start: %s\n",
                 reason(err).c_str());
    return out;
  }
  replay_options ro;
  ro.verify = true;
  ro.settle = true;
  auto t0 = std::chrono::steady_clock::now();
  auto rep = replay(t, svc, *g, ro);
  out.wall_s =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
  if (!rep) {
    std::fprintf(stderr, "bench_delta: replay failed: %s\n",
                 reason(rep.error()).c_str());
    return out;
  }
  auto r = svc.report();
  if (!r) {
    std::fprintf(stderr, "bench_delta: %s\n", reason(r.error()).c_str());
    return out;
  }
  out.ok = true;
  out.hit_ratio = rep->token_hit_ratio();
  out.wrong = rep->wrong_states;
  out.verified = rep->verified_states;
  out.spills = r->ssd.writes_ok;
  out.deltas = r->ssd.delta_files;
  out.refused = r->ssd.delta_refused;
  out.cascades = r->ssd.chain_cascades;
  out.written = r->ssd.prefix_bytes_written;
  out.ideal = r->ssd.new_token_bytes;
  out.evicted = r->ssd.evicted;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  uint64_t requests = 6000;
  uint64_t ram_cap = 0;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check")
      check = true;
    else if (a == "--requests" && i + 1 < argc)
      requests = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ram-cap-bytes" && i + 1 < argc)
      ram_cap = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: bench_delta [--requests N] [--ram-cap-bytes B] "
                   "[--check]\n");
      return 2;
    }
  }
  kvtier_config cfg;
  if (ram_cap > 0)
    cfg.replay.ram_cap_bytes = ram_cap;
  trace_options to;
  to.max_requests = requests;
  auto t = load_trace(cfg.replay.trace, to);
  if (!t) {
    std::fprintf(stderr, "bench_delta: %s (run from the repository root)\n",
                 reason(t.error()).c_str());
    return 2;
  }
  auto applied = cfg.replay.apply(cfg.options);
  std::printf("bench_delta: %s, %zu requests, RAM cap %llu B, SSD cap %llu "
              "B, model %s at scale %g\n",
              cfg.replay.trace.c_str(), t->requests.size(),
              static_cast<unsigned long long>(applied.ram_cap_bytes),
              static_cast<unsigned long long>(applied.ssd_cap_bytes),
              applied.model.c_str(), applied.model_scale);
  auto whole = run(*t, applied, false);
  auto delta = run(*t, applied, true);
  if (!whole.ok || !delta.ok)
    return 1;
  std::printf("%-12s %9s %7s %7s %7s %8s %15s %15s %7s %7s %7s\n", "files",
              "hit", "wrong", "spills", "deltas", "refused", "bytes written",
              "ideal bytes", "ratio", "evicted", "wall s");
  for (auto [name, f] : {std::pair{"whole", whole}, {"delta", delta}})
    std::printf("%-12s %9.4f %7llu %7llu %7llu %8llu %15llu %15llu %6.3fx "
                "%7llu %7.1f\n",
                name, f.hit_ratio, static_cast<unsigned long long>(f.wrong),
                static_cast<unsigned long long>(f.spills),
                static_cast<unsigned long long>(f.deltas),
                static_cast<unsigned long long>(f.refused),
                static_cast<unsigned long long>(f.written),
                static_cast<unsigned long long>(f.ideal), f.ratio(),
                static_cast<unsigned long long>(f.evicted), f.wall_s);
  bool pass = delta.ratio() <= 1.2 && delta.wrong == 0 && whole.wrong == 0;
  std::printf("%s: delta files write %.3fx the ideal bytes (target <= "
              "1.2x; whole files %.3fx), %llu + %llu wrong states\n",
              pass ? "PASS" : "FAIL", delta.ratio(), whole.ratio(),
              static_cast<unsigned long long>(whole.wrong),
              static_cast<unsigned long long>(delta.wrong));
  return check && !pass ? 1 : 0;
}
