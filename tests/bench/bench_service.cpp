// bench_service: the embedded API's round trips next to CAF's floor.
//
//   echo      a bare CAF request/response from a client thread to an actor
//             (one scoped_actor reused), under the default work-stealing
//             scheduler, the sharing policy and kvtier's `affine` policy
//             (runtime/affine_sharing.hpp, what conf/kvtier.conf
//             ships), in this run; the floor is the fastest of the three (none
//             spins while idle).
//   echo, new scoped  the sharing echo with a scoped_actor made per call
//             (what the embedded API avoids with its pool of them).
//   hit       acquire of a prompt whose prefix is in RAM (views lent),
//             under the configuration kvtier ships (conf/kvtier.conf,
//             with the SSD directory moved to a temporary one).
//   miss      acquire in a namespace with nothing in it (RAM and SSD asked).
//   publish   publish of a fresh 64-token prefill.
//   1mib/1gib hit acquire of a 1 MiB and a 1 GiB entry of the same token
//             count: zero-copy makes them cost the same. The two are
//             called in one loop, in a shuffled order, their two services
//             on one actor system (both see the same machine and workers);
//             pending spills are flushed before this row and the
//             throughput row.
//   acquires/s  RAM hits from two client threads for a second, before
//             the publish row's burst and again after it and its flush
//             (the service then holds a full RAM of entries).
//   during flush  RAM-hit acquires timed while the flush after the publish
//             burst runs: it writes every entry of the burst RAM still
//             holds (16,384 of 22,000 in a full run: the RAM cap), far
//             more than the write-behind cap holds at once. The flush
//             must answer with nothing pending or failed (its evidence is
//             checked); its duration, entries written and the burst's
//             dropped spills are printed.
//   while publishing  RAM-hit acquires timed while another thread
//             publishes fresh entries without pause (each evicts one,
//             spilled to SSD) for 2 s (0.5 s with --quick).
//   idle      CPU the process used while the started service sat idle for
//             2 s (1 s with --quick): nothing spins.
//
// The service runs with a storage deadline of ten minutes so that the
// flush of the burst (fsynced files on the bench's temporary directory,
// $TMPDIR or /tmp) can finish however slow the disk is.
//
// Each timed row also says how many context switches the whole process
// made per call (every thread: caller, workers, CAF's clock thread): a
// round trip costs about what its thread wake-ups cost on this kind of VM.
// It also says the CPU time the whole process used per call: wall time
// grows with whatever else runs on the machine, CPU per call much less.
//
// --hits-only: after the hit row, RAM hits alone for 5 s, then exit (a
// profiler's run: `perf record -g bench_service --quick --hits-only`),
// printing the hits of those 5 s with their CPU and switches per hit.
// --sized-only: the 1 MiB / 1 GiB rows alone, then exit.
//
// Usage: bench_service [--quick] [--json] [--hits-only | --sized-only]
#include "runtime/affine_sharing.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/resource.h>

using namespace kvtier;
using clk = std::chrono::steady_clock;

namespace {

struct percentiles {
  double p50 = 0, p99 = 0;
  /// Context switches of the whole process (every thread: the caller,
  /// the workers, CAF's clock) per timed call, voluntary and not.
  double switches = 0;
  /// CPU microseconds the whole process used per timed call (a cost that
  /// other processes on the machine do not inflate as they do wall time).
  double cpu_us = 0;
};

/// Context switches of the whole process so far.
double switches_now() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_nvcsw + u.ru_nivcsw);
}

/// CPU milliseconds the whole process (every thread) used so far.
double cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3
           + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

percentiles summarize(std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return ns[std::min(ns.size() - 1, static_cast<size_t>(q * ns.size()))];
  };
  return {at(0.50), at(0.99)};
}

/// Runs `f` `n` times after `n / 10` warm-up runs; nanoseconds per run.
template <class F>
percentiles time_each(size_t n, F&& f) {
  for (size_t i = 0; i < n / 10; ++i)
    f(i);
  std::vector<double> out;
  out.reserve(n);
  auto sw0 = switches_now();
  auto cpu0 = cpu_ms();
  for (size_t i = 0; i < n; ++i) {
    auto t0 = clk::now();
    f(i);
    out.push_back(
      std::chrono::duration<double, std::nano>(clk::now() - t0).count());
  }
  auto sw = (switches_now() - sw0) / static_cast<double>(n);
  auto cpu = (cpu_ms() - cpu0) * 1e3 / static_cast<double>(n);
  auto p = summarize(std::move(out));
  p.switches = sw;
  p.cpu_us = cpu;
  return p;
}

// A spawn argument: CAF 0.17 binds a null tuple for argument-less spawns.
caf::behavior echo_actor(caf::event_based_actor*, int /* spawn argument */) {
  return {[](int x) { return x; }};
}

/// Sets scheduler `policy` on `cfg`: CAF's own, or kvtier's `affine`
/// (runtime/affine_sharing.hpp), which CAF loads as a module.
void use_policy(caf::actor_system_config& cfg, caf::atom_value policy) {
  if (policy == caf::atom("affine"))
    cfg.load<caf::scheduler::coordinator<runtime::affine_sharing>>();
  else
    cfg.set("scheduler.policy", policy);
}

/// A blocking echo round trip under scheduler `policy`.
percentiles echo(caf::atom_value policy, size_t n) {
  caf::actor_system_config cfg;
  use_policy(cfg, policy);
  caf::actor_system sys{cfg};
  auto a = sys.spawn(echo_actor, 0);
  caf::scoped_actor self{sys};
  return time_each(n, [&](size_t i) {
    self->request(a, caf::infinite, static_cast<int>(i))
      .receive([](int) {}, [](caf::error&) { std::abort(); });
  });
}

/// The same with a scoped_actor made per call (as the embedded API does).
percentiles echo_fresh(caf::atom_value policy, size_t n) {
  caf::actor_system_config cfg;
  use_policy(cfg, policy);
  caf::actor_system sys{cfg};
  auto a = sys.spawn(echo_actor, 0);
  return time_each(n, [&](size_t i) {
    caf::scoped_actor self{sys};
    self->request(a, caf::infinite, static_cast<int>(i))
      .receive([](int) {}, [](caf::error&) { std::abort(); });
  });
}

runtime::state_request request(uint64_t id, tiers::token_seq prompt) {
  return {id, std::move(prompt), 16, std::nullopt};
}

tiers::token_seq seq(size_t n, tiers::token first) {
  tiers::token_seq t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

/// A geometry of 4 kv layers holding `bytes` at `tokens` tokens.
tiers::model_geometry sized(uint64_t bytes, uint64_t tokens) {
  tiers::model_geometry g{"bench", {}};
  auto bpt = static_cast<uint32_t>(bytes / (4 * tokens));
  g.layers.assign(4, tiers::layer_spec{tiers::layer_kind::kv, bpt, 0, 0});
  return g;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_service: %s failed\n", what);
    std::exit(1);
  }
}

template <class T>
void require(const caf::expected<T>& r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "bench_service: %s failed: %s\n", what,
                 describe(r.error()).c_str());
    std::exit(1);
  }
}

/// Publishes an entry of 1 MiB and one of 1 GiB (same token count), each
/// in a service of its own whose model is that entry's geometry (a service
/// refuses another model's shape), and times hit acquires of both, mixed
/// call by call so that both see the same machine: {1 MiB, 1 GiB}. Both
/// services run on one actor system (`sys`, the shipped scheduler): with
/// a system each, their workers slept on different cores, and whichever
/// shared its core with another process lost every wake-up (one row 4x
/// the other, in either direction, whatever the entry's size).
std::pair<percentiles, percentiles>
sized_hits(caf::actor_system& sys, const runtime::service_options& base,
           size_t n) {
  constexpr uint64_t tokens = 1024;
  auto prompt = seq(tokens, 7);
  const std::pair<const char*, uint64_t> sizes[] = {{"1mib", 1ull << 20},
                                                    {"1gib", 1ull << 30}};
  std::unique_ptr<runtime::service> svcs[2];
  for (int i = 0; i < 2; ++i) {
    auto [ns, bytes] = sizes[i];
    auto g = sized(bytes, tokens);
    auto opts = base;
    opts.ssd_dir.clear(); // RAM hits only
    opts.model_layers = g.layers_text();
    opts.ram_cap_bytes = std::max<uint64_t>(opts.ram_cap_bytes, 2 * bytes);
    svcs[i] = std::make_unique<runtime::service>(sys, opts);
    require(!svcs[i]->start_error(), "start a sized service");
    runtime::oracle_engine big{g};
    require(svcs[i]->publish(request(1, prompt), big.prefill(ns, prompt)),
            "publish sized");
  }
  prompt.push_back(1);
  auto r = request(2, prompt);
  // Which entry each call asks for: half each, in a fixed pseudo-random
  // order. A strict alternation lined up with the scheduler waking its two
  // workers in turn and gave one row every slow wake-up.
  std::vector<uint8_t> order(2 * (n + n / 10));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i % 2;
  std::shuffle(order.begin(), order.end(), std::mt19937{42});
  std::vector<double> ns_of[2];
  size_t warm[2] = {0, 0};
  for (auto which : order) {
    auto t0 = clk::now();
    auto got = svcs[which]->acquire(r, sizes[which].first);
    auto t = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
    require(got && got->usable_tokens == tokens, "sized hit");
    if (warm[which] < n / 10)
      ++warm[which]; // a warm-up call
    else
      ns_of[which].push_back(t);
  }
  return {summarize(std::move(ns_of[0])), summarize(std::move(ns_of[1]))};
}

/// `sized_hits` on a system of its own under the shipped configuration.
std::pair<percentiles, percentiles> sized_hits(size_t n) {
  runtime::kvtier_config cfg;
  char arg0[] = "bench_service";
  char* args[] = {arg0, nullptr};
  require(!cfg.load(1, args), "load the shipped configuration");
  caf::actor_system sys{cfg};
  return sized_hits(sys, cfg.options, n);
}

/// CPU milliseconds the whole process used while idle for `span` (the
/// service started, no call made): a scheduler that spins shows here.
double idle_cpu(std::chrono::milliseconds span) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // start-up
  auto before = cpu_ms();
  std::this_thread::sleep_for(span);
  return cpu_ms() - before;
}

/// RAM-hit acquires of `r` (512 tokens) timed one after another until
/// `done` says stop; nanoseconds each.
template <class Done>
percentiles hits_until(runtime::service& svc, const runtime::state_request& r,
                       Done done) {
  std::vector<double> out;
  while (!done()) {
    auto t0 = clk::now();
    auto got = svc.acquire(r, "ns");
    out.push_back(
      std::chrono::duration<double, std::nano>(clk::now() - t0).count());
    require(got && got->usable_tokens == 512, "hit during background work");
  }
  require(!out.empty(), "hits during background work");
  return summarize(std::move(out));
}

double throughput(runtime::service& svc, const runtime::state_request& r,
                  std::chrono::milliseconds span) {
  std::atomic<uint64_t> count{0};
  auto until = clk::now() + span;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      uint64_t mine = 0;
      while (clk::now() < until) {
        require(svc.acquire(r, "ns"), "throughput acquire");
        ++mine;
      }
      count += mine;
    });
  for (auto& t : threads)
    t.join();
  return static_cast<double>(count)
         / std::chrono::duration<double>(span).count();
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false, json = false, hits_only = false, sized_only = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::strcmp(argv[i], "--quick") == 0;
    json = json || std::strcmp(argv[i], "--json") == 0;
    hits_only = hits_only || std::strcmp(argv[i], "--hits-only") == 0;
    sized_only = sized_only || std::strcmp(argv[i], "--sized-only") == 0;
  }
  size_t n = quick ? 2000 : 20000;
  if (sized_only) {
    auto [a, b] = sized_hits(n);
    std::printf("1 MiB p50 %.1f us p99 %.1f; 1 GiB p50 %.1f us p99 %.1f; "
                "1 GiB / 1 MiB: %.2fx\n",
                a.p50 / 1e3, a.p99 / 1e3, b.p50 / 1e3, b.p99 / 1e3,
                b.p50 / a.p50);
    return 0;
  }
  auto stealing = echo(caf::atom("stealing"), n);
  auto sharing = echo(caf::atom("sharing"), n);
  auto affine = echo(caf::atom("affine"), n);
  auto floor = std::min({stealing.p50, sharing.p50, affine.p50});
  auto fresh_sharing = echo_fresh(caf::atom("sharing"), n);

  auto dir = std::filesystem::temp_directory_path()
             / ("bench_service." + std::to_string(::getpid()));
  runtime::kvtier_config cfg;
  char arg0[] = "bench_service";
  std::string dir_arg = "--ssd-tier.dir=" + dir.string();
  char deadline_arg[] = "--service.storage-deadline-ms=600000";
  char* args[] = {arg0, dir_arg.data(), deadline_arg, nullptr};
  require(!cfg.load(3, args), "load the shipped configuration");
  percentiles hit, miss, pub, hit_1mib, hit_1gib, in_flush, in_publish;
  double idle_cpu_ms = 0;
  double per_s = 0, per_s_before = 0;
  double flush_s = 0;
  uint64_t flushed = 0, flush_dropped = 0;
  {
    runtime::service svc{cfg};
    require(!svc.start_error(), "start");
    idle_cpu_ms = idle_cpu(std::chrono::seconds(quick ? 1 : 2));
    auto g =
      tiers::model_geometry::preset(cfg.options.model, cfg.options.model_scale);
    runtime::oracle_engine oracle{*g};
    auto prompt = seq(512, 1);
    require(svc.publish(request(1, prompt), oracle.prefill("ns", prompt)),
            "publish");
    auto hit_req = request(2, seq(600, 1));
    hit = time_each(n, [&](size_t) {
      auto got = svc.acquire(hit_req, "ns");
      require(got && got->usable_tokens == 512, "hit");
    });
    if (hits_only) {
      // For a profiler: RAM hits alone for 5 s more, nothing else. The
      // process's CPU time and context switches per hit of those 5 s say
      // what a hit costs when wall time is noisy (other processes).
      auto until = clk::now() + std::chrono::seconds(5);
      size_t calls = 0;
      auto cpu0 = cpu_ms();
      auto sw0 = switches_now();
      auto p = hits_until(svc, hit_req, [&] {
        ++calls;
        return clk::now() >= until;
      });
      auto hits = static_cast<double>(calls - 1);
      std::printf("acquire, RAM hit: %.1f us p50 (%.1f us for 5 s, %.0f "
                  "hits, %.1f us CPU and %.2f switches per hit); echo "
                  "floor %.1f us; the hit row %.2f switches per hit\n",
                  hit.p50 / 1e3, p.p50 / 1e3, hits,
                  (cpu_ms() - cpu0) * 1e3 / hits, (switches_now() - sw0) / hits,
                  floor / 1e3, hit.switches);
      std::filesystem::remove_all(dir);
      return 0;
    }
    miss = time_each(
      n, [&](size_t) { require(svc.acquire(hit_req, "empty"), "miss"); });
    auto span = std::chrono::milliseconds(quick ? 300 : 1000);
    per_s_before = throughput(svc, hit_req, span);
    std::vector<tiers::entry> fresh;
    for (size_t i = 0; i < n + n / 10; ++i)
      fresh.push_back(oracle.prefill("pub", seq(64, 1000000 + 64 * i)));
    size_t next = 0;
    pub = time_each(n, [&](size_t) {
      auto& e = fresh[next++];
      require(svc.publish(request(3, e.tokens), std::move(e)), "publish");
    });
    fresh.clear();
    // The hit row's entry again (the burst evicted it): RAM hits below.
    require(svc.publish(request(1, prompt), oracle.prefill("ns", prompt)),
            "publish again");
    auto before = svc.report();
    require(before, "report");
    // The burst's flush, timed, with RAM hits timed meanwhile.
    auto t0 = clk::now();
    auto flushing = svc.flush_async();
    in_flush = hits_until(svc, hit_req, [&] {
      return flushing.wait_for(std::chrono::seconds(0))
             == std::future_status::ready;
    });
    auto f = flushing.get();
    flush_s = std::chrono::duration<double>(clk::now() - t0).count();
    require(f, "flush");
    // Every entry the flush ordered is on disk: nothing pending or failed.
    // `dropped` counts the burst's own spills of evicted entries that the
    // write-behind queue had no room for (since the previous flush; a
    // future miss, never a wrong state): printed, not an error.
    if (f->pending != 0 || f->failed != 0) {
      for (auto& e : f->errors)
        std::fprintf(stderr, "bench_service: flush: %s\n", e.c_str());
      require(false, "a flush with nothing pending or failed");
    }
    flush_dropped = f->dropped;
    auto after = svc.report();
    require(after, "report");
    flushed = after->ssd.writes_ok - before->ssd.writes_ok;
    per_s = throughput(svc, hit_req, span);
    // Steady publishing beside the hits.
    std::atomic<bool> stop{false};
    std::thread publisher([&] {
      runtime::oracle_engine own{*g};
      for (uint64_t i = 0; !stop; ++i) {
        auto e = own.prefill("pub", seq(64, 500000000 + 64 * i));
        require(svc.publish(request(4, e.tokens), std::move(e)),
                "steady publish");
      }
    });
    auto until = clk::now() + std::chrono::milliseconds(quick ? 500 : 2000);
    in_publish = hits_until(svc, hit_req, [&] { return clk::now() >= until; });
    stop = true;
    publisher.join();
  }
  std::tie(hit_1mib, hit_1gib) = sized_hits(n);
  std::filesystem::remove_all(dir);
  if (json) {
    std::printf("{\"echo_p50_ns\": %.0f, \"echo_stealing_p50_ns\": %.0f, "
                "\"echo_sharing_p50_ns\": %.0f, \"echo_affine_p50_ns\": %.0f, "
                "\"hit_p50_ns\": %.0f, "
                "\"hit_p99_ns\": %.0f, \"echo_affine_switches\": %.2f, "
                "\"hit_switches\": %.2f, \"miss_p50_ns\": %.0f, "
                "\"publish_p50_ns\": %.0f, \"hit_1mib_p50_ns\": %.0f, "
                "\"hit_1gib_p50_ns\": %.0f, \"acquires_per_s\": %.0f, "
                "\"acquires_per_s_before_burst\": %.0f, "
                "\"flush_hit_p50_ns\": %.0f, \"flush_hit_p99_ns\": %.0f, "
                "\"flush_s\": %.2f, \"flush_writes\": %llu, "
                "\"flush_dropped\": %llu, "
                "\"publishing_hit_p50_ns\": %.0f, "
                "\"publishing_hit_p99_ns\": %.0f, "
                "\"idle_cpu_ms\": %.1f}\n",
                floor, stealing.p50, sharing.p50, affine.p50, hit.p50, hit.p99,
                affine.switches, hit.switches, miss.p50, pub.p50, hit_1mib.p50,
                hit_1gib.p50, per_s, per_s_before, in_flush.p50, in_flush.p99,
                flush_s, static_cast<unsigned long long>(flushed),
                static_cast<unsigned long long>(flush_dropped), in_publish.p50,
                in_publish.p99, idle_cpu_ms);
    return 0;
  }
  std::printf("%-28s %10s %10s %12s %10s\n", "round trip", "p50 us", "p99 us",
              "switches", "CPU us");
  auto row = [](const char* what, percentiles p) {
    std::printf("%-28s %10.1f %10.1f", what, p.p50 / 1e3, p.p99 / 1e3);
    if (p.switches > 0)
      std::printf(" %12.2f %10.1f", p.switches, p.cpu_us);
    std::printf("\n");
  };
  row("echo, work-stealing", stealing);
  row("echo, sharing", sharing);
  row("echo, affine (shipped)", affine);
  row("echo, sharing, new scoped", fresh_sharing);
  row("acquire, RAM hit", hit);
  row("acquire, miss", miss);
  row("publish (64 tokens)", pub);
  row("acquire, 1 MiB entry", hit_1mib);
  row("acquire, 1 GiB entry", hit_1gib);
  row("acquire, RAM hit, in flush", in_flush);
  row("acquire, RAM hit, publishing", in_publish);
  std::printf("hit / echo floor: %.2fx; 1 GiB / 1 MiB: %.2fx; CPU per "
              "call, hit / echo affine: %.2fx\n",
              hit.p50 / floor, hit_1gib.p50 / hit_1mib.p50,
              hit.cpu_us / affine.cpu_us);
  std::printf("RAM-hit acquires/s (2 threads): %.0f before the publish "
              "burst, %.0f after it and its flush (%.2fx)\n",
              per_s_before, per_s, per_s / per_s_before);
  std::printf("flush after the burst: %llu entries written in %.1f s, "
              "nothing pending or failed (%llu spills of the burst's "
              "evicted entries dropped over the write-behind cap before it)\n",
              static_cast<unsigned long long>(flushed), flush_s,
              static_cast<unsigned long long>(flush_dropped));
  std::printf("idle service (shipped scheduler): %.1f ms CPU in %d s\n",
              idle_cpu_ms, quick ? 1 : 2);
  return 0;
}
