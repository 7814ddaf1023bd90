// bench_policy: time per block access of the eviction policies
// (tiers/eviction_policy.hpp) run by a block_cache at 10k, 100k and 1M
// cached blocks, to see the O(log n) cost grow slowly with the size.
//
// Data: conversations under 64 shared system prompts, each request the
// conversation so far plus 1-8 new blocks (a quarter of requests one-offs
// of 1-8 blocks on a system prompt), with conversations ending past 64
// blocks; so hits, inserts and evictions all happen. The cache is first
// filled (untimed: requests until 2N blocks were referenced), then
// requests are timed until another 4N blocks were referenced. Printed: ns
// per block referenced (a hit, an insert, the evictions over the request
// averaged in) for lru and gdsf-radix; belady needs the future and is
// left out. Figures only: no pass or fail.
//
// Usage: bench_policy [--quick]   (--quick: 10k and 100k only)
#include "tiers/eviction_policy.hpp"

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

  workload()
    : sessions(4096) {
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

double ns_per_block(std::unique_ptr<eviction_policy> p, uint64_t n) {
  block_cache c(std::move(p), n, 64);
  workload w;
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
  auto t0 = std::chrono::steady_clock::now();
  for (auto& r : timed)
    c.request(r, r.size() * 64);
  auto t1 = std::chrono::steady_clock::now();
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0)
                  .count())
         / double(blocks);
}

} // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::printf("%10s %14s %14s\n", "blocks", "lru ns/block",
              "gdsf-radix ns/block");
  for (uint64_t n : {10'000ull, 100'000ull, 1'000'000ull}) {
    if (quick && n > 100'000)
      break;
    double lru = ns_per_block(make_lru(), n);
    double gdsf = ns_per_block(make_gdsf_radix(n), n);
    std::printf("%10llu %14.0f %14.0f\n", static_cast<unsigned long long>(n),
                lru, gdsf);
  }
  return 0;
}
