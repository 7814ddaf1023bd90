// bench_peer: the peer tier's real path on loopback, in one run, next to a
// raw TCP transfer of the same bytes and a local SSD restore of the same
// entry.
//
//   raw        the entry's flat bytes written to a loopback TCP socket in
//              4 MiB writes and read by another thread: into one fresh
//              buffer, into one reused 4 MiB buffer (sockets: both ends in
//              cache, the floor the target is set against), and from and
//              into memory of the whole length (memory: what a fetch
//              moves, neither end in cache, no page fault).
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
//   bench_peer [--mib N] [--reps N] [--fetch-only]
// It prints the best of each figure, and for the steady rounds (all but
// the first) the fetch against the raw transfers of the same round: min,
// median, max, and whether the median meets the 0.70x target (#12).
// --fetch-only runs the fetches alone (for a profiler).
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

/// Seconds to move `bytes` through a loopback TCP connection
/// (tests/bench/raw_tcp.hpp): into one fresh buffer, as the lane reads, or
/// (the sockets' own floor) into one reused buffer.
double raw_tcp(uint64_t bytes,
               bench::raw_receive mode = bench::raw_receive::fresh_buffer) {
  std::string err;
  auto s = bench::raw_tcp(bytes, mode, err);
  if (!s)
    die("raw tcp: " + err);
  return *s;
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
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--fetch-only"))
      fetch_only = true;
    else
      die("usage: bench_peer [--mib N] [--reps N] [--fetch-only]");
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
  double raw_best = 0, sockets_best = 0, whole_best = 0, fetch_best = 0; // GB/s
  std::vector<double> fetch_round, by_sockets, by_whole; // per round
  double fetch_first = 0; // the first fetch: nothing in the buffer pool yet
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
    raw_best = std::max(raw_best, gbs(flat, raw_tcp(flat)));
    auto sockets = gbs(flat, raw_tcp(flat, bench::raw_receive::reused_buffer));
    auto whole = gbs(flat, raw_tcp(flat, bench::raw_receive::whole_memory));
    sockets_best = std::max(sockets_best, sockets);
    whole_best = std::max(whole_best, whole);
    // The ratios of this round: the fetch against the sockets right after.
    by_sockets.push_back(fetch_round.back() / sockets);
    by_whole.push_back(fetch_round.back() / whole);
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
  std::printf("raw tcp          %8.2f GB/s (into one fresh buffer, as the "
              "lane)\n",
              raw_best);
  std::printf("raw tcp sockets  %8.2f GB/s (from and into one 4 MiB buffer, "
              "in cache)\n",
              sockets_best);
  std::printf("raw tcp memory   %8.2f GB/s (from and into memory of the "
              "whole length, touched before)\n",
              whole_best);
  std::printf("peer fetch       %8.2f GB/s  %.2fx raw, %.2fx sockets, %.2fx "
              "memory (best of each; FetchEntry, export, lane + XXH3, "
              "verify, decode)\n",
              fetch_best, fetch_best / raw_best, fetch_best / sockets_best,
              fetch_best / whole_best);
  std::printf("peer fetch first %8.2f GB/s  %.2fx raw, %.2fx sockets (the "
              "first of the run: fresh pages, no reused buffer, no block "
              "hash known yet)\n",
              fetch_first, fetch_first / raw_best, fetch_first / sockets_best);
  // The steady rounds (all but the first), each fetch against the raw
  // transfers of the same round.
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char out[64];
    std::snprintf(out, sizeof out, "min %.2fx median %.2fx max %.2fx",
                  v.front(), v[v.size() / 2], v.back());
    return std::string{out};
  };
  if (by_sockets.size() > 1) {
    std::vector<double> s(by_sockets.begin() + 1, by_sockets.end());
    std::vector<double> w(by_whole.begin() + 1, by_whole.end());
    std::vector<double> f(fetch_round.begin() + 1, fetch_round.end());
    std::sort(f.begin(), f.end());
    std::printf("steady fetch     median %.2f GB/s (rounds 2..%d)\n",
                f[f.size() / 2], reps);
    std::printf("steady / sockets %s per round\n", spread(s).c_str());
    std::printf("steady / memory  %s per round\n", spread(w).c_str());
    std::sort(s.begin(), s.end());
    std::printf("target 0.70x sockets (median of the rounds): %s\n",
                s[s.size() / 2] >= 0.70 ? "met" : "not met");
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
  return 0;
}
