// bench_memory: the RAM tier's metadata per stored token against a bare
// `prefix_index` holding the same keys (issue #15 item 2: "RAM tier bytes
// per stored token at most 1.1x the index's own").
//
// Each figure is the resident set growth of one fill, in a fresh forked
// child per fill (so a fill never reuses what an earlier one freed):
// /proc/self/statm's resident pages before and after, divided by the
// tokens the tree stores (distinct (ns, prefix) positions). RSS because it
// is what the issue asks and what a node pays, allocator overhead and
// fragmentation included; beside it, for the record, the allocator's own
// count of bytes in use (mallinfo2 `uordblks`), which is what the RSS
// figure is made of without page granularity.
//
// The states are only metadata: every entry has one kv layer of 16 bytes
// per token whose single view lies in one buffer allocated before the
// fill, so the figure is what the tier spends per entry and per token on
// keys, records, index and the state's description, not tensor bytes. A
// real entry also has a view per segment and layer and its own buffers
// (a byte-ledger slot each): per-entry costs that grow with the model, not
// with the key.
//
// Key mixes (one namespace each; every entry exact-only, so no put
// supersedes another and both sides hold the same key set):
// - chat: conversations growing on one shared system prompt of 1000
//   tokens, 8 turns of 32-256 tokens each, an entry per turn (the fan-out
//   data of bench_lookup, grown turn by turn).
// - long: the same with turns of 1000-3000 tokens (long answers, tool
//   output, documents).
// - distinct: prompts of 500-4000 random tokens sharing nothing.
// - mixed: chat and distinct in one namespace, entries interleaved.
// - chat32: the chat keys with a real model's shape: 32 kv layers, each in
//   two views (the rows the turn reused from the conversation's previous
//   turn and its own), as an engine extending a donor publishes them.
//   Printed for the record, not checked: here the state's description
//   (2 x 32 views) outweighs the key, whatever the tier does with keys.
//
// Every mix is filled twice, under `ram-tier.policy` lru and gdsf (rows
// "MIX/gdsf"); the 1.1x limit holds lru to it, gdsf's rows print the
// ratio with its ranking's 64 bytes an entry on top.
//
// Also checked per mix and policy: the tier's own O(1) estimate of its
// bookkeeping (`ram_tier::bookkeeping_bytes`, what
// `ram-tier.bookkeeping-share` bounds) against the allocator's bytes in
// use, within 0.9x .. 1.5x: an estimate short of the real one would let
// the process outgrow its documented bound.
//
// Usage: bench_memory [--check] [--quick] [--baseline BIN]
//   --baseline BIN: also runs BIN (this bench built from another tree,
//   e.g. main's) with --raw and prints its figures beside these.
//   --raw: one line per mix, "mix index_B/t tier_B/t" (for --baseline).
#include "tiers/prefix_index.hpp"
#include "tiers/ram_tier.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <map>
#include <random>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

constexpr uint32_t bpt = 16;

token_seq random_run(std::mt19937_64& rng, size_t n) {
  token_seq t(n);
  for (auto& x : t)
    x = static_cast<token>(rng() % 128000);
  return t;
}

/// The kv layers of each entry of `mix` (see the opening comment).
uint32_t layers_of(const std::string& mix) {
  return mix == "chat32" ? 32 : 1;
}

/// Calls f(key) for every entry of `mix`, in put order; the same keys for
/// the same mix and scale. The key is a working buffer: callers copy it.
template <class F>
void for_each_key(const std::string& name, size_t scale, F&& f) {
  auto mix = name == "chat32" ? std::string{"chat"} : name;
  std::mt19937_64 rng(std::hash<std::string>{}(mix));
  auto system = random_run(rng, 1000);
  auto conversation = [&](size_t turns, size_t lo, size_t hi) {
    auto key = system;
    for (size_t t = 0; t < turns; ++t) {
      auto more = random_run(rng, lo + rng() % (hi - lo + 1));
      key.insert(key.end(), more.begin(), more.end());
      f(key);
    }
  };
  auto distinct = [&] { f(random_run(rng, 500 + rng() % 3501)); };
  if (mix == "chat") {
    for (size_t c = 0; c < 2000 * scale; ++c)
      conversation(8, 32, 256);
  } else if (mix == "long") {
    for (size_t c = 0; c < 100 * scale; ++c)
      conversation(8, 1000, 3000);
  } else if (mix == "distinct") {
    for (size_t c = 0; c < 2000 * scale; ++c)
      distinct();
  } else { // mixed: a conversation, then a distinct prompt
    for (size_t c = 0; c < 1000 * scale; ++c) {
      conversation(8, 32, 256);
      distinct();
    }
  }
}

uint64_t rss_bytes() {
  long pages = 0, resident = 0;
  if (auto f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    std::fclose(f);
  }
  return static_cast<uint64_t>(resident) * sysconf(_SC_PAGESIZE);
}

struct figure {
  double rss = 0;  // RSS growth
  double heap = 0; // allocator bytes in use, growth
  double est = 0;  // the tier's own estimate (bookkeeping_bytes), growth
  double tokens = 0;
  double entries = 0;
};

/// One fill in this process: the index alone, or the RAM tier.
figure fill(const std::string& mix, size_t scale, bool tier,
            const buffer_ref& shared, ram_policy policy) {
  figure out;
  prefix_index<uint32_t> ix;
  ram_tier t(uint64_t{1} << 50, false, policy);
  // A first put of each kind, so a fill's growth holds no one-time setup.
  {
    token_seq k{1, 2, 3};
    ix.insert("warm", k, 0u, 3);
    entry e;
    e.ns = "warm";
    e.tokens = k;
    e.layers.push_back(layer_state::kv(bpt, 3, {view{shared, 0, 3 * bpt}}, 3));
    if (!t.put(std::move(e), 0))
      std::exit(1);
  }
  malloc_trim(0);
  auto book0 = t.bookkeeping_bytes();
  auto rss0 = rss_bytes();
  auto heap0 = mallinfo2().uordblks;
  uint32_t i = 0;
  token_seq previous; // a turn reuses its previous turn's rows
  for_each_key(mix, scale, [&](const token_seq& key) {
    auto n = key.size();
    if (!tier) {
      token_seq copy = key; // what a caller hands in
      ix.insert("bench", copy, i++, n);
      return;
    }
    entry e;
    e.ns = "bench";
    e.tokens = key;
    // Exact-only (min_offset = length): no put supersedes another.
    uint64_t bytes = uint64_t{n} * bpt;
    if (layers_of(mix) == 1) {
      e.layers.push_back(layer_state::kv(bpt, n, {view{shared, 0, bytes}}, n));
    } else {
      auto reused =
        previous.size() < n
            && std::equal(previous.begin(), previous.end(), key.begin())
          ? previous.size() * bpt
          : std::min<uint64_t>(1000, n - 1) * bpt; // the system prompt
      for (uint32_t l = 0; l < layers_of(mix); ++l)
        e.layers.push_back(layer_state::kv(
          bpt, n,
          {view{shared, 0, reused}, view{shared, reused, bytes - reused}}, n));
      previous = key;
    }
    auto r = t.put(std::move(e), ++i);
    if (!r || !r->kept || !r->evicted.empty())
      std::exit(1);
  });
  out.rss = static_cast<double>(rss_bytes() - rss0);
  out.heap = static_cast<double>(mallinfo2().uordblks - heap0);
  out.est = static_cast<double>(t.bookkeeping_bytes() - book0);
  out.entries = i;
  return out;
}

/// The tree's tokens and entries for `mix` (a fill of the index, uncounted).
std::pair<double, double> tree_size(const std::string& mix, size_t scale) {
  prefix_index<uint32_t> ix;
  for_each_key(mix, scale,
               [&](const token_seq& key) { ix.insert("b", key, 0u, 0); });
  return {static_cast<double>(ix.token_count()),
          static_cast<double>(ix.size())};
}

/// `fill` in a forked child, its figure back over a pipe.
figure fill_apart(const std::string& mix, size_t scale, bool tier,
                  ram_policy policy = ram_policy::lru) {
  int fd[2];
  if (pipe(fd) != 0)
    std::exit(1);
  auto pid = fork();
  if (pid == 0) {
    close(fd[0]);
    buffer_builder b(size_t{32768} * bpt); // the longest key, at most
    std::memset(b.data(), 7, b.size());
    auto shared = std::move(b).freeze();
    auto f = fill(mix, scale, tier, shared, policy);
    auto w = write(fd[1], &f, sizeof f);
    _exit(w == sizeof f ? 0 : 1);
  }
  close(fd[1]);
  figure f;
  auto r = read(fd[0], &f, sizeof f);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (r != sizeof f || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench_memory: the %s fill failed\n", mix.c_str());
    std::exit(1);
  }
  return f;
}

struct result {
  double index_bpt = 0, tier_bpt = 0;
  double index_heap = 0, tier_heap = 0, tier_est = 0;
  double tokens = 0, entries = 0;
};

result measure(const std::string& mix, size_t scale,
               ram_policy policy = ram_policy::lru) {
  result r;
  auto [tokens, entries] = tree_size(mix, scale);
  r.tokens = tokens;
  r.entries = entries;
  auto ix = fill_apart(mix, scale, false);
  auto t = fill_apart(mix, scale, true, policy);
  r.index_bpt = ix.rss / tokens;
  r.tier_bpt = t.rss / tokens;
  r.index_heap = ix.heap / tokens;
  r.tier_heap = t.heap / tokens;
  r.tier_est = t.est / tokens;
  return r;
}

const std::vector<std::string> mixes{"chat", "long", "distinct", "mixed",
                                     "chat32"};

/// Another build's figures (`--raw` lines), by mix.
std::map<std::string, std::pair<double, double>>
run_baseline(const std::string& bin, bool quick) {
  std::map<std::string, std::pair<double, double>> out;
  auto cmd = bin + " --raw" + (quick ? " --quick" : "");
  auto p = popen(cmd.c_str(), "r");
  if (!p) {
    std::fprintf(stderr, "bench_memory: cannot run %s\n", bin.c_str());
    std::exit(1);
  }
  char name[64];
  double a = 0, b = 0;
  while (std::fscanf(p, "%63s %lf %lf", name, &a, &b) == 3)
    out[name] = {a, b};
  // An older build may lack the newest mixes (they print without a base).
  if (pclose(p) != 0 || out.size() < 4) {
    std::fprintf(stderr, "bench_memory: %s failed\n", bin.c_str());
    std::exit(1);
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  bool check = false, quick = false, raw = false;
  std::string baseline;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--check") {
      check = true;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--raw") {
      raw = true;
    } else if (a == "--baseline" && i + 1 < argc) {
      baseline = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_memory [--check] [--quick] "
                           "[--baseline BIN] [--raw]\n");
      return 2;
    }
  }
  size_t scale = quick ? 1 : 4;
  if (raw) {
    for (auto& m : mixes) {
      auto r = measure(m, scale);
      std::printf("%s %.3f %.3f\n", m.c_str(), r.index_bpt, r.tier_bpt);
    }
    return 0;
  }
  std::map<std::string, std::pair<double, double>> base;
  if (!baseline.empty())
    base = run_baseline(baseline, quick);
  std::printf("RAM tier metadata per stored token (RSS growth of a fill in a "
              "fresh child / tokens on the tree's edges); heap: the "
              "allocator's bytes in use, for the record\n");
  std::printf("%-13s %8s %10s %7s %9s %9s %7s %9s %9s", "mix", "entries",
              "tokens", "key/tok", "index_B/t", "tier_B/t", "ratio", "ix_heap",
              "tier_heap");
  if (!baseline.empty())
    std::printf(" %11s %11s %8s", "base_ix_B/t", "base_tier", "base_rt");
  std::printf("\n");
  int failures = 0;
  for (auto policy : {ram_policy::lru, ram_policy::gdsf})
    for (auto& mix : mixes) {
      bool gdsf = policy == ram_policy::gdsf;
      auto m = gdsf ? mix + "/gdsf" : mix;
      auto r = measure(mix, scale, policy);
      double key_tokens = 0;
      for_each_key(mix, scale,
                   [&](const token_seq& k) { key_tokens += k.size(); });
      auto ratio = r.tier_bpt / r.index_bpt;
      std::printf("%-13s %8.0f %10.0f %7.1f %9.2f %9.2f %7.3f %9.2f %9.2f",
                  m.c_str(), r.entries, r.tokens, key_tokens / r.tokens,
                  r.index_bpt, r.tier_bpt, ratio, r.index_heap, r.tier_heap);
      if (auto b = base.find(m); b != base.end()) { // lru only
        auto [bi, bt] = b->second;
        std::printf(" %11.2f %11.2f %8.3f", bi, bt, bt / bi);
      }
      std::printf("\n");
      std::printf(
        "              per entry beyond the index: %.0f bytes (RSS), %.0f "
        "(heap)\n",
        (r.tier_bpt - r.index_bpt) * r.tokens / r.entries,
        (r.tier_heap - r.index_heap) * r.tokens / r.entries);
      // The estimate the bookkeeping budget is charged with must not fall
      // short of what the allocator holds (else RSS outgrows the bound).
      auto est_ratio = r.tier_est / r.tier_heap;
      bool est_ok = est_ratio >= 0.9 && est_ratio <= 1.5;
      failures += est_ok ? 0 : 1;
      std::printf("%s %s: bookkeeping estimate %.2f B/t against the heap's "
                  "%.2f: %.3fx (within 0.90x .. 1.50x)\n",
                  est_ok ? "PASS" : "FAIL", m.c_str(), r.tier_est, r.tier_heap,
                  est_ratio);
      std::fflush(stdout);
      if (layers_of(mix) > 1) {
        std::printf("NOTE %s: %u layers of two views, not checked (the "
                    "state's description, not the key, is what costs)\n",
                    m.c_str(), layers_of(mix));
        continue;
      }
      if (gdsf) {
        // gdsf's ranking slot and heap place (64 bytes an entry) come on top
        // of what lru spends; the operator chooses it (ram-tier.policy), and
        // the estimate above, which the bookkeeping budget is charged with,
        // is what bounds it.
        std::printf("NOTE %s: RAM tier / bare index bytes per stored token: "
                    "%.3fx, not held to 1.10x (the ranking's 64 bytes an "
                    "entry)\n",
                    m.c_str(), ratio);
        continue;
      }
      bool ok = ratio <= 1.1;
      failures += ok ? 0 : 1;
      std::printf("%s %s: RAM tier / bare index bytes per stored token: %.3fx "
                  "(limit 1.10x)\n",
                  ok ? "PASS" : "FAIL", m.c_str(), ratio);
    }
  std::printf("%s\n", failures == 0 ? "bench_memory: all checks PASS"
                                    : "bench_memory: some checks FAIL");
  return check && failures > 0 ? 1 : 0;
}
