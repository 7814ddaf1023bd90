// bench_policy: time per block access of the eviction policies
// (tiers/eviction_policy.hpp) run by a block_cache at 10k, 100k and 1M
// cached blocks, to see the O(log n) cost grow slowly with the size.
//
// Data: N / 16 conversations under 64 shared system prompts, each request
// the conversation so far plus 1-8 new blocks (a quarter of requests
// one-offs of 1-8 blocks on a system prompt), with conversations ending
// past 64 blocks: about 2N blocks live at once, so at every size hits,
// inserts and evictions all happen (the evictions per block are printed). The
// cache is first filled (untimed: requests until 2N blocks were referenced),
// then requests are timed until another 4N blocks were referenced. Printed: ns
// per block referenced (a hit, an insert, the evictions over the request
// averaged in) for lru and gdsf-radix; belady needs the future and is
// left out. Figures only: no pass or fail.
//
// Usage: bench_policy [--quick]   (--quick: 10k and 100k only)
#include "tiers/eviction_policy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

using namespace kvtier::tiers;

namespace {

struct workload {
  std::mt19937_64 rng{42};
  std::vector<std::vector<uint64_t>> sessions;
  uint64_t next = 1000;

  explicit workload(uint64_t n)
    : sessions(std::max<uint64_t>(64, n / 16)) {
    for (auto& s : sessions)
      s = {rng() % 64};
  }

  std::vector<uint64_t> request() {
    auto& s = sessions[rng() % sessions.size()];
    bool one_off = rng() % 4 == 0;
    auto r = one_off ? std::vector<uint64_t>{s.front()} : s;
    for (size_t k = 1 + rng() % 8; k > 0; --k)
      r.push_back(next++);
    if (!one_off)
      s = r;
    if (s.size() > 64)
      s.resize(1);
    return r;
  }
};

struct figures {
  double ns_per_block;
  double evictions_per_block;
};

figures measure(std::unique_ptr<eviction_policy> p, uint64_t n) {
  block_cache c(std::move(p), n, 64);
  workload w(n);
  uint64_t referenced = 0;
  while (referenced < 2 * n) {
    auto r = w.request();
    referenced += r.size();
    c.request(r, r.size() * 64);
  }
  // Requests made up front: the generator stays out of the timing.
  std::vector<std::vector<uint64_t>> timed;
  uint64_t blocks = 0;
  while (blocks < 4 * n) {
    timed.push_back(w.request());
    blocks += timed.back().size();
  }
  auto evicted = c.counts().evictions;
  auto t0 = std::chrono::steady_clock::now();
  for (auto& r : timed)
    c.request(r, r.size() * 64);
  auto t1 = std::chrono::steady_clock::now();
  double ns = double(
    std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  return {ns / double(blocks),
          double(c.counts().evictions - evicted) / double(blocks)};
}

} // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("%10s %14s %20s %18s\n", "blocks", "lru ns/block",
              "gdsf-radix ns/block", "evictions/block");
  for (uint64_t n : {10'000ull, 100'000ull, 1'000'000ull}) {
    if (quick && n > 100'000)
      break;
    auto lru = measure(make_lru(), n);
    auto gdsf = measure(make_gdsf_radix(n), n);
    std::printf("%10llu %14.0f %20.0f %18.2f\n",
                static_cast<unsigned long long>(n), lru.ns_per_block,
                gdsf.ns_per_block, lru.evictions_per_block);
  }
  return 0;
}
