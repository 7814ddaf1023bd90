// bench_peer: the peer tier's real path on loopback, in one run, next to
// the network floors of the same bytes on the same loopback and a local SSD
// restore of the same entry.
//
//   iperf3     Debian's iperf3 on 127.0.0.1 (one-off server on an
//              ephemeral port, client with -J, 1 MiB writes, the same byte
//              count; tests/bench/raw_tcp.hpp): the network's own figure.
//              Without iperf3 installed the program says so in that row.
//   raw        the entry's flat bytes through one loopback TCP connection
//              (tests/bench/raw_tcp.hpp; 1 MiB socket buffers and ops, no
//              allocation in the timed region): from and into memory of
//              the whole length in kvtier's own huge-page buffers, touched
//              before (memory: what a fetch moves), and from and into one
//              reused 4 MiB buffer (sockets: both ends in cache).
//   fetch      B's peer tier answers RestoreEntry for an entry node A holds
//              in RAM: FetchEntry over the middleman, A's RAM export and
//              transfer table (the message laid out once per request, its
//              payloads sent from A's RAM as they lie), the bytes over A's
//              bulk lane (XXH3 as A writes and as B reads) on a thread of
//              B's, verified, decoded and shape-checked (tiers::read_entry,
//              the model geometry).
//   remote hit acquire on B served from Tier::PEER (the fetch, then the
//              facade's install attempt and reply; B's RAM is too small to
//              keep the entry, so every acquire fetches).
//   ssd hit    acquire on C served from its SSD (POSIX files in a temp dir,
//              page cache warm; C's RAM is too small to keep the entry).
//
// Three embedded services (A, B in a cluster; C alone), llama-3.1-8b shape
// (128 KiB per token): --mib 64 is 512 tokens. Usage:
//   bench_peer [--mib N] [--reps N] [--fetch-only] [--check]
// Every round times the fetch, then each floor on the same bytes (each
// floor the best of 5 tries: one slow try on a shared machine does not
// lower it). It prints the best of each figure and the fetch beside each
// floor, and for the steady rounds (all but the first) the fetch against the
// floors of the same round: min, median, max; whether the median meets the
// 0.70x sockets target (#12); and a NOTE naming the reason for any median above
// 1.00x of a floor (a floor the fetch beats is not a floor, unless the
// reason is known). --check makes the exit status 1 when the target is not
// met, iperf3 gave no figure or the fetch beat a floor. --fetch-only runs
// the fetches alone (for a profiler).
#include "actors/interfaces.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/bench/raw_tcp.hpp"
#include "tiers/entry_message.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace kvtier;
using clk = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_peer: %s\n", what.c_str());
  std::exit(1);
}

double seconds_since(clk::time_point t0) {
  return std::chrono::duration<double>(clk::now() - t0).count();
}

/// Tries per round of each floor: a floor is the best its tool did, so
/// one slow try on this shared machine does not lower it.
constexpr int floor_tries = 5;

/// Seconds to move `bytes` through a loopback TCP connection
/// (tests/bench/raw_tcp.hpp), the best of `floor_tries`: memory to memory
/// (the default) or through one reused buffer at each end (the sockets).
double raw_tcp(uint64_t bytes,
               bench::raw_receive mode = bench::raw_receive::whole_memory) {
  double best = 0;
  for (int i = 0; i < floor_tries; ++i) {
    std::string err;
    auto s = bench::raw_tcp(bytes, mode, err);
    if (!s)
      die("raw tcp: " + err);
    best = i == 0 ? *s : std::min(best, *s);
  }
  return best;
}

/// iperf3's bytes per second for `bytes` on 127.0.0.1, the best of
/// `floor_tries`, or nullopt with `error` saying why there is none.
std::optional<double> iperf3(uint64_t bytes, std::string& error) {
  std::optional<double> best;
  for (int i = 0; i < floor_tries; ++i) {
    auto bps = bench::iperf3_loopback(bytes, error);
    if (!bps)
      return std::nullopt;
    best = std::max(best.value_or(0.0), *bps);
  }
  return best;
}

runtime::service_options base(uint64_t ram_cap) {
  runtime::service_options o;
  o.model = "llama-3.1-8b";
  o.model_scale = 1.0;
  o.model_identity = "bench-model";
  o.ram_cap_bytes = ram_cap;
  o.kv_budget_bytes = uint64_t{8} << 30;
  o.write_behind = false;
  o.idle_demotion_ms = 0;
  o.storage_deadline_ms = 20000;
  return o;
}

std::unique_ptr<runtime::service> start(runtime::service_options o) {
  auto s = std::make_unique<runtime::service>(std::move(o));
  if (auto err = s->start_error())
    die("start: " + describe(err));
  return s;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

} // namespace

int main(int argc, char** argv) {
  uint64_t mib = 64;
  int reps = 20;
  bool fetch_only = false; // for a profiler: the fetches alone
  bool check = false;      // exit 1 unless every floor held and the target
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--fetch-only"))
      fetch_only = true;
    else if (!std::strcmp(argv[i], "--check"))
      check = true;
    else
      die("usage: bench_peer [--mib N] [--reps N] [--fetch-only] [--check]");
  }
  auto geo = runtime::running_geometry(base(0));
  if (!geo)
    die("geometry");
  runtime::oracle_engine oracle{*geo};
  uint64_t per_token = uint64_t{128} << 10;
  size_t tokens = static_cast<size_t>((mib << 20) / per_token);
  tiers::token_seq key(tokens);
  std::iota(key.begin(), key.end(), 1);
  tiers::token_seq prompt;
  uint64_t cap_small = (mib << 20) / 2; // cannot keep the entry

  // A holds the entry in RAM; B fetches it; C restores it from its SSD.
  auto oa = base((mib << 22));
  oa.cluster_enabled = true;
  oa.cluster_node_id = "a";
  oa.cluster_fetch_deadline_ms = 9000;
  auto a = start(oa);
  auto ob = base(cap_small);
  ob.cluster_enabled = true;
  ob.cluster_node_id = "b";
  ob.cluster_fetch_deadline_ms = 9000;
  ob.cluster_fetched_to_ssd = false;
  ob.cluster_peers = {a->cluster()->address()};
  auto b = start(ob);
  auto dir = std::filesystem::temp_directory_path()
             / ("bench_peer." + std::to_string(::getpid()));
  auto oc = base(cap_small);
  oc.ssd_dir = dir.string();
  oc.ssd_cap_bytes = mib << 22;
  oc.write_behind_cap_bytes = mib << 22;
  auto c = start(oc);

  runtime::state_request req{1, key, 16, std::nullopt};
  if (auto r = a->publish(req, oracle.prefill("n", key)); !r || !r->kept)
    die("publish on A");
  if (auto r = c->publish(req, oracle.prefill("n", key)); !r)
    die("publish on C");
  if (auto f = c->flush(); !f || !f->durable)
    die("flush on C");
  if (auto saved = c->saved_prefixes(); !saved || saved->empty())
    die("C's SSD holds nothing");
  for (int i = 0; i < 500; ++i) {
    auto r = b->report();
    if (r && r->peer.peers_up == 1)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  actors::directory_batch batch;
  batch.node = "a";
  batch.items.push_back({"n", key, 0, mib << 20, true, true});
  caf::send_as(b->peer_tier(), b->peer_tier(), batch);

  caf::scoped_actor self{b->system()};
  auto peer = caf::actor_cast<actors::peer_tier_actor>(b->peer_tier());
  double sockets_best = 0, whole_best = 0, iperf_best = 0, fetch_best = 0;
  std::vector<double> fetch_round, by_sockets, by_whole, by_iperf; // rounds
  std::string iperf_error; // why iperf3 gave no figure (empty: it did)
  double fetch_first = 0;  // the first fetch: nothing in the buffer pool yet
  auto gbs = [](uint64_t bytes, double s) { return bytes / s / 1e9; };
  uint64_t flat = 0, counted = 0;
  std::vector<double> remote, ssd;
  for (int i = 0; i < reps; ++i) {
    // Each round's prompt is one token longer than the last, so B's RAM
    // (which keeps the previous round's state) never beats the peer.
    size_t usable = tokens - static_cast<size_t>(reps) + i;
    prompt.assign(key.begin(), key.begin() + usable);
    prompt.push_back(999999);
    msg::draft<msg::FindPrefix> fq;
    fq.root().setNs("n");
    tiers::write_tokens(fq.root().initPrompt(prompt.size()), prompt);
    auto find = std::move(fq).seal();
    // fetch: FindPrefix (index), then the timed RestoreEntry.
    msg::sealed<msg::FindPrefixReply> found;
    self->request(peer, std::chrono::seconds(10), find)
      .receive([&](const msg::sealed<msg::FindPrefixReply>& r) { found = r; },
               [&](caf::error& e) { die("find: " + to_string(e)); });
    if (found.root().getUsableTokens() != usable)
      die("the peer tier has no candidate");
    msg::draft<msg::RestoreEntry> rq;
    rq.root().setKey(found.root().getKey());
    rq.root().setUsableTokens(usable);
    auto restore = std::move(rq).seal();
    auto t0 = clk::now();
    self->request(peer, std::chrono::seconds(10), restore)
      .receive(
        [&](const msg::sealed<msg::RestoreEntryReply>& r) {
          if (!r.root().isEntry())
            die("fetch failed");
        },
        [&](caf::error& e) { die("restore: " + to_string(e)); });
    auto fetch_s = seconds_since(t0);
    // The flat bytes the lane moved (the peer tier counts them).
    auto after = b->report();
    if (!after)
      die("report");
    flat = after->peer.bytes - counted;
    fetch_best = std::max(fetch_best, gbs(flat, fetch_s));
    if (i == 0)
      fetch_first = gbs(flat, fetch_s);
    fetch_round.push_back(gbs(flat, fetch_s));
    if (fetch_only) {
      counted = after->peer.bytes;
      continue;
    }
    // The floors of this round, right after its fetch, on its bytes.
    auto sockets = gbs(flat, raw_tcp(flat, bench::raw_receive::reused_buffer));
    auto whole = gbs(flat, raw_tcp(flat));
    sockets_best = std::max(sockets_best, sockets);
    whole_best = std::max(whole_best, whole);
    by_sockets.push_back(fetch_round.back() / sockets);
    by_whole.push_back(fetch_round.back() / whole);
    if (iperf_error.empty()) {
      if (auto bps = iperf3(flat, iperf_error)) {
        iperf_best = std::max(iperf_best, *bps / 1e9);
        by_iperf.push_back(fetch_round.back() / (*bps / 1e9));
      }
    }
    // remote hit and SSD hit, interleaved.
    t0 = clk::now();
    auto rb = b->acquire({10u + i, prompt, 16, std::nullopt}, "n");
    remote.push_back(seconds_since(t0) * 1e3);
    if (!rb || rb->source != runtime::state_source::peer)
      die("B's acquire was not served by the peer");
    if (auto r = b->report())
      counted = r->peer.bytes;
    if (!c->boundary()) // C's RAM lets its durable copy go: no I/O
      die("boundary on C");
    t0 = clk::now();
    auto rc = c->acquire({10u + i, prompt, 16, std::nullopt}, "n");
    ssd.push_back(seconds_since(t0) * 1e3);
    if (!rc || rc->source != runtime::state_source::ssd)
      die(std::string{"C's acquire was not served by its SSD: "}
          + (rc ? to_string(rc->source) : describe(rc.error())));
  }
  std::printf("bench_peer: entry %llu MiB (%zu tokens of llama-3.1-8b), "
              "flat %llu bytes, best of %d\n",
              static_cast<unsigned long long>(mib), tokens,
              static_cast<unsigned long long>(flat), reps);
  // "0.52x", or "-" where the floor has no figure (never a silent 0).
  auto ratio = [](double fetch, double floor) {
    char out[32] = "-";
    if (floor > 0)
      std::snprintf(out, sizeof out, "%.2fx", fetch / floor);
    return std::string{out};
  };
  if (iperf_error.empty())
    std::printf("iperf3           %8.2f GB/s (iperf3 -J on 127.0.0.1, 1 MiB "
                "writes, the same bytes)\n",
                iperf_best);
  else
    std::printf("iperf3           no figure: %s\n", iperf_error.c_str());
  std::printf("raw tcp memory   %8.2f GB/s (from and into memory of the "
              "whole length, huge pages, touched before)\n",
              whole_best);
  std::printf("raw tcp sockets  %8.2f GB/s (from and into one 4 MiB buffer, "
              "in cache)\n",
              sockets_best);
  std::printf("peer fetch       %8.2f GB/s  %s iperf3, %s memory, %s "
              "sockets (best of each; FetchEntry, export, lane + XXH3, "
              "verify, decode)\n",
              fetch_best, ratio(fetch_best, iperf_best).c_str(),
              ratio(fetch_best, whole_best).c_str(),
              ratio(fetch_best, sockets_best).c_str());
  std::printf("peer fetch first %8.2f GB/s  %s iperf3, %s memory (the first "
              "of the run: fresh pages, no reused buffer, no block hash "
              "known yet)\n",
              fetch_first, ratio(fetch_first, iperf_best).c_str(),
              ratio(fetch_first, whole_best).c_str());
  // The steady rounds (all but the first), each fetch against the floors
  // of the same round.
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char out[64];
    std::snprintf(out, sizeof out, "min %.2fx median %.2fx max %.2fx",
                  v.front(), v[v.size() / 2], v.back());
    return std::string{out};
  };
  auto steady_median = [](const std::vector<double>& all) {
    std::vector<double> v(all.begin() + 1, all.end());
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  bool floors_hold = true, target_met = false;
  if (by_sockets.size() > 1) {
    std::vector<double> s(by_sockets.begin() + 1, by_sockets.end());
    std::vector<double> w(by_whole.begin() + 1, by_whole.end());
    std::vector<double> f(fetch_round.begin() + 1, fetch_round.end());
    std::sort(f.begin(), f.end());
    std::printf("steady fetch     median %.2f GB/s (rounds 2..%d)\n",
                f[f.size() / 2], reps);
    if (by_iperf.size() > 1) {
      std::vector<double> ip(by_iperf.begin() + 1, by_iperf.end());
      std::printf("steady / iperf3  %s per round\n", spread(ip).c_str());
    }
    std::printf("steady / memory  %s per round\n", spread(w).c_str());
    std::printf("steady / sockets %s per round\n", spread(s).c_str());
    target_met = steady_median(by_sockets) >= 0.70;
    std::printf("target 0.70x sockets (median of the rounds): %s\n",
                target_met ? "met" : "not met");
    // A floor the fetch beats is not a floor, unless the reason is known:
    // none is known for these, so a median above 1.00x is named as such.
    auto above = [&](const char* floor, const std::vector<double>& by) {
      // Above it as printed (two decimals): equal is no finding.
      if (by.size() > 1 && steady_median(by) > 1.005) {
        floors_hold = false;
        std::printf("NOTE fetch median %.2fx %s: above its floor, reason "
                    "not known (the floor is not a floor)\n",
                    steady_median(by), floor);
      }
    };
    above("iperf3", by_iperf);
    above("raw tcp memory", by_whole);
    above("raw tcp sockets", by_sockets);
  }
  if (!remote.empty())
    std::printf("remote hit       p50 %7.2f ms  p99 %7.2f ms (acquire on B, "
                "from the peer)\n",
                pct(remote, 0.5), pct(remote, 0.99));
  if (!ssd.empty())
    std::printf("local ssd hit    p50 %7.2f ms  p99 %7.2f ms (acquire on C, "
                "from its SSD)\n",
                pct(ssd, 0.5), pct(ssd, 0.99));
  auto rep = b->report();
  if (rep)
    std::printf("peer counters    fetched %llu coalesced %llu failed %llu\n",
                static_cast<unsigned long long>(rep->peer.fetched),
                static_cast<unsigned long long>(rep->peer.coalesced),
                static_cast<unsigned long long>(
                  rep->peer.failed_none + rep->peer.failed_unreachable
                  + rep->peer.failed_timeout + rep->peer.failed_corrupt
                  + rep->peer.failed_other));
  auto pool = populated_pool_now();
  std::printf("buffer pool      reused %llu kept %llu unmapped %llu (large "
              "buffers taken back instead of fresh, zeroed pages)\n",
              static_cast<unsigned long long>(pool.reused),
              static_cast<unsigned long long>(pool.kept),
              static_cast<unsigned long long>(pool.unmapped));
  c.reset();
  std::filesystem::remove_all(dir);
  // --check: exit 1 when the target was not met, iperf3 gave no figure or
  // the fetch beat a floor.
  if (!check || fetch_only)
    return 0;
  return target_met && iperf_error.empty() && floors_hold ? 0 : 1;
}
