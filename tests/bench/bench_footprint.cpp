// bench_footprint: does the RAM cap bound the process? (issue #32 item 1:
// "RSS stays within cap plus a documented constant at the demo's 32 B per
// token and at a real model's 128 KiB per token".)
//
// Per state size, in a fresh forked child (so one run's heap never serves
// the next): the shipped configuration with the conversation trace's first
// requests, the model preset at scale 1/4096 (32 B per token, the demo's)
// or 1 (128 KiB per token, an 8B-class model's), replayed through an
// embedded service with every served state verified, while a thread reads
// the process's VmRSS every 2 ms. Printed per run:
// - `driver`: RSS with the trace loaded, before the service starts (the
//   replay's own: the trace, the oracle);
// - `started`: RSS once the service runs, nothing stored (the runtime:
//   CAF's threads, the SSD tier's ring and buffers, the library's code);
// - `peak`: the most RSS reached during the replay;
// - `bookkeeping`: the RAM tier's bookkeeping at the end (its estimate);
// - `feed`: the event feed's ring and table at the end (the report's
//   `process` part), `ssd_ix`: the SSD tier's index in RAM (`ssd`);
// - `bound`: started + cap x (1 + 2 x ram-tier.bookkeeping-share) (the
//   state, the RAM tier's bookkeeping, and the feed's copy of the RAM
//   index's keys, no larger than that index) + cluster.feed-ring-bytes +
//   2 x the SSD index (its own, and the feed's copy of its keys) + the SSD
//   tier's write-behind cap (leaving entries, outside the cap until their
//   writes settle) + 2 x the largest request's state (the engine's own
//   buffer of the request in flight and the oracle's copy that checks it),
//   the formula docs/operations.md ("Memory") documents;
// - `peak / bound` and PASS when peak <= bound;
// - on a second line, what holds the heap at the end: the state, the RAM
//   tier's bookkeeping, the feed's ring and table, the SSD index, and the
//   rest of what the allocator reports in use (the driver's trace and
//   oracle, CAF, buffers not yet returned).
// The RAM cap is set below each trace slice's working set, so RAM evicts.
//
// Usage: bench_footprint [--quick] [--check] [--trace FILE]
//   --quick: fewer requests (a minute or two); --check: exit 1 on a FAIL.
#include "runtime/config.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/replay.hpp"
#include "runtime/tools/trace.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <malloc.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace kvtier;

namespace {

uint64_t vm_rss() {
  auto* f = std::fopen("/proc/self/status", "r");
  if (!f)
    return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1)
      break;
  std::fclose(f);
  return kb * 1024;
}

struct run_case {
  const char* name;
  double scale;
  uint64_t ram_cap;
  uint64_t ssd_cap; // 0: no SSD tier
  uint64_t requests;
  /// Requests longer than this many tokens are left out (0: none): at
  /// 128 KiB per token the trace's longest prompts are 10 GB, states the
  /// engine holds, not the cache.
  uint64_t max_tokens;
};

double mib(uint64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_footprint: %s\n", what.c_str());
  std::_Exit(2);
}

/// One run, in this (child) process; exit status 0 PASS, 1 FAIL, 2 error.
int run(const run_case& c, const std::string& trace_path,
        const std::string& dir) {
  runtime::kvtier_config cfg;
  char arg0[] = "bench_footprint";
  char* args[] = {arg0, nullptr};
  if (auto err = cfg.load(1, args))
    fail("cannot load the shipped configuration");
  auto& o = cfg.options;
  o.model_scale = c.scale;
  o.ram_cap_bytes = c.ram_cap;
  o.ssd_dir = c.ssd_cap ? dir : std::string{};
  o.ssd_cap_bytes = c.ssd_cap ? c.ssd_cap : o.ssd_cap_bytes;
  o.write_behind = false; // as the replay reference (docs/replay.md)
  runtime::trace_options to;
  to.max_requests = c.requests;
  auto t = runtime::load_trace(trace_path, to);
  if (!t)
    fail("cannot load " + trace_path);
  if (c.max_tokens > 0)
    std::erase_if(t->requests, [&](const runtime::trace_request& r) {
      return r.input_tokens > c.max_tokens;
    });
  auto g = runtime::running_geometry(o);
  if (!g)
    fail("no geometry");
  uint64_t longest = 0;
  for (auto& r : t->requests)
    longest = std::max<uint64_t>(longest, r.input_tokens);
  auto request_bytes = longest * g->bytes_per_token();
  auto driver = vm_rss();
  std::atomic<uint64_t> peak{driver};
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      auto r = vm_rss();
      if (r > peak.load())
        peak.store(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  uint64_t started = 0, bookkeeping = 0, book_evictions = 0, evictions = 0;
  uint64_t wrong = 0, verified = 0, ram_bytes = 0, end_rss = 0;
  uint64_t ring_bytes = 0, table_bytes = 0, ssd_index = 0, ring_events = 0;
  size_t heap_used = 0, heap_held = 0;
  {
    runtime::service svc(cfg);
    if (svc.start_error())
      fail("cannot start the service");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    started = vm_rss();
    runtime::replay_options ro;
    auto rep = runtime::replay(*t, svc, *g, ro);
    if (!rep)
      fail("the replay failed");
    wrong = rep->wrong_states;
    verified = rep->verified_states;
    if (auto r = svc.report()) {
      bookkeeping = r->ram.bookkeeping_bytes;
      book_evictions = r->ram.bookkeeping_evictions;
      evictions = r->ram.evictions;
      ram_bytes = r->ram.bytes;
      ring_bytes = r->process.feed_ring_bytes;
      ring_events = r->process.feed_ring_events;
      table_bytes = r->process.feed_table_bytes;
      ssd_index = r->ssd.index_bytes;
    }
    auto mi = mallinfo2();
    heap_used = mi.uordblks + mi.hblkhd;
    heap_held = mi.arena + mi.hblkhd;
    end_rss = vm_rss();
    done.store(true);
    sampler.join();
  }
  auto share = o.bookkeeping_share;
  auto wb = c.ssd_cap ? o.write_behind_cap_bytes : 0;
  auto bound =
    started
    + static_cast<uint64_t>(static_cast<double>(c.ram_cap) * (1 + 2 * share))
    + o.cluster_feed_ring_bytes + 2 * ssd_index + wb + 2 * request_bytes;
  bool pass = peak.load() <= bound && wrong == 0;
  std::printf(
    "%-9s %6llu %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f %7.2f %9llu "
    "%6llu %s\n",
    c.name, static_cast<unsigned long long>(c.requests), mib(c.ram_cap),
    mib(driver), mib(started), mib(peak.load()), mib(bookkeeping),
    mib(2 * request_bytes + wb), mib(bound),
    static_cast<double>(peak.load()) / static_cast<double>(bound),
    static_cast<unsigned long long>(evictions),
    static_cast<unsigned long long>(book_evictions), pass ? "PASS" : "FAIL");
  std::printf("          verified %llu states, %llu wrong; at the end: RSS "
              "%.0f, heap in use %.0f, heap held by the allocator %.0f "
              "(main arena and mmaps)\n",
              static_cast<unsigned long long>(verified),
              static_cast<unsigned long long>(wrong), mib(end_rss),
              mib(heap_used), mib(heap_held));
  auto known = ram_bytes + bookkeeping + ring_bytes + table_bytes + ssd_index;
  std::printf("          heap holders: RAM state %.1f, RAM bookkeeping %.1f, "
              "feed ring %.1f (%llu events), feed table %.1f, SSD index "
              "%.1f, the rest of the heap in use %.1f\n",
              mib(ram_bytes), mib(bookkeeping), mib(ring_bytes),
              static_cast<unsigned long long>(ring_events), mib(table_bytes),
              mib(ssd_index), heap_used > known ? mib(heap_used - known) : 0.0);
  std::fflush(stdout);
  return pass ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false, check = false;
  std::string trace_path = KVTIER_SOURCE_DIR
    "/tests/traces/mooncake-fast25/conversation_trace.jsonl.gz";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--check")
      check = true;
    else if (a == "--trace" && i + 1 < argc)
      trace_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_footprint [--quick] [--check] "
                           "[--trace FILE]\n");
      return 2;
    }
  }
  const run_case cases[] = {
    {"32B/tok", 1.0 / 4096, 256ull << 20, 1ull << 30, quick ? 1500u : 6000u, 0},
    {"32B/ram", 1.0 / 4096, 256ull << 20, 0, quick ? 1500u : 6000u, 0},
    {"128KiB/tok", 1.0, 4ull << 30, 0, quick ? 120u : 400u, 8192},
  };
  std::printf("RAM cap against the process's resident set (MiB); bound = "
              "started + cap x (1 + 2 x bookkeeping-share) + feed-ring-bytes "
              "+ 2 x SSD index + transient (write-behind cap + 2 x largest "
              "request)\n");
  std::printf("%-9s %6s %8s %8s %8s %8s %8s %8s %8s %7s %9s %6s\n", "state",
              "reqs", "cap", "driver", "started", "peak", "bookkp", "transnt",
              "bound", "pk/bnd", "evictions", "bk_ev");
  bool all = true;
  for (auto& c : cases) {
    auto dir = std::filesystem::temp_directory_path()
               / ("bench_footprint." + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::fflush(stdout);
    auto pid = fork();
    if (pid == 0)
      std::_Exit(run(c, trace_path, dir.string()));
    int status = 0;
    waitpid(pid, &status, 0);
    std::filesystem::remove_all(dir);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      all = false;
      if (!WIFEXITED(status) || WEXITSTATUS(status) == 2)
        std::printf("%-9s did not finish (status %d)\n", c.name, status);
    }
  }
  std::printf("bench_footprint: %s\n", all ? "all PASS" : "some FAIL");
  return check && !all ? 1 : 0;
}
