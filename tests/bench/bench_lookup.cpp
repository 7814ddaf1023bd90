// bench_lookup: longest-usable-prefix lookup time of the radix prefix index
// against the number of stored entries and the prompt length, next to the
// naive linear scan over the same entries (the simplest store) and a floor
// pass (memcmp of the prompt against a copy of itself).
//
// Data (docs/ram-tier.md, "Benchmark"): one namespace of conversations.
// 32 system prompts of 1k-3k random tokens; 8 long conversations of 64
// turns of 2.5k tokens (~162k tokens each, an entry per turn: 512 entries)
// so every prompt length has a deep path; the rest are filler
// conversations of 4-16 turns of 32-256 tokens on a random system prompt,
// an entry per turn. Three in four entries trim to any length (floor 0),
// one in four is exact-only. The same generator feeds every size, so a
// smaller set is a prefix of a larger one. A prompt of length L is the
// first L - 64 tokens of a long conversation plus 64 fresh tokens; the 8
// long conversations take turns so the caches see different paths.
//
// Then three parts the targets are checked against (PASS / FAIL
// lines; with --check a FAIL makes the exit status 1):
// - Puts at high fan-out: N conversations (1k, 10k, 100k) on one shared
//   system prompt of 1k tokens, each one turn of 32-256 tokens with its own
//   first token, so the node at the end of the system prompt has N
//   children. Timed: a batch of fresh conversations put into the
//   index, then erased again (N stays put), with first tokens at random
//   and with first tokens that sort after every other (the cheap case of
//   a sorted array). Target: a put at 100k within 1.3x of a put at 1k,
//   each size timed alone after two untimed rounds (the index's own
//   scaling). Printed beside, not checked: the same with the sizes taking
//   turns round by round, each finding its data pushed out of the CPU
//   caches by the others.
// - The same puts through `ram_tier::put` / `ram_tier::remove`.
// - A full RAM hit (`ram_tier::lookup`, what an acquire does in the RAM
//   tier) for a 1k-token prompt with 32 and 80 kv layers, next to one pass
//   over the prompt (memcmp against a copy), split into the index walk
//   (`peek_prefix_len`) and the rest; exact donors (prompt = donor + 64
//   fresh tokens) and trimmed ones (the prompt leaves a 2k-token donor at
//   960). Targets: <= 3x the pass at 32 layers, and the 80-layer figure
//   <= 1.5x the 32-layer one. Beside them, for the record: the lookup
//   plus `ram_hit::state(prompt)` (the lent views cut out as an entry, which
//   the RAM actor no longer builds: it writes the cut as it goes).
//
// Usage: bench_lookup [--quick] [--check] [--json FILE] [--only PART]
//   PART: index, fanout, hit (default: all three)
#include "tiers/peer_directory.hpp"
#include "tiers/prefix_index.hpp"
#include "tiers/ram_tier.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <limits>
#include <malloc.h>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace kvtier;
using namespace kvtier::tiers;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int system_prompts = 32;
constexpr int long_convs = 8;
constexpr int long_turns = 64;
constexpr int long_turn_tokens = 2500;
constexpr int prompts_per_size = long_convs;
constexpr int fresh_tail = 64;

/// One stored entry: a prefix of a conversation (system prompt + turns).
struct bench_entry {
  uint32_t conv;
  uint32_t len; // tokens, system prompt included
  uint32_t floor;
};

struct conversation {
  uint32_t system;
  token_seq own; // tokens after the system prompt
};

struct dataset {
  std::vector<token_seq> systems;
  std::vector<conversation> convs;
  std::vector<bench_entry> entries;
};

token_seq random_run(std::mt19937_64& rng, size_t n) {
  token_seq t(n);
  for (auto& x : t)
    x = static_cast<token>(rng() % 128000);
  return t;
}

void add_conv(dataset& d, std::mt19937_64& rng, uint32_t sys, int turns,
              int min_turn, int max_turn, size_t max_entries) {
  conversation c{sys, {}};
  auto id = static_cast<uint32_t>(d.convs.size());
  auto base = d.systems[sys].size();
  for (int t = 0; t < turns && d.entries.size() < max_entries; ++t) {
    auto n = min_turn + rng() % (max_turn - min_turn + 1);
    auto more = random_run(rng, n);
    c.own.insert(c.own.end(), more.begin(), more.end());
    auto len = static_cast<uint32_t>(base + c.own.size());
    d.entries.push_back({id, len, rng() % 4 == 0 ? len : 0});
  }
  d.convs.push_back(std::move(c));
}

dataset make_dataset(size_t entries) {
  std::mt19937_64 rng(42);
  dataset d;
  for (int s = 0; s < system_prompts; ++s)
    d.systems.push_back(random_run(rng, 1000 + rng() % 2001));
  for (int c = 0; c < long_convs; ++c) {
    add_conv(d, rng, c % system_prompts, long_turns, long_turn_tokens,
             long_turn_tokens, entries);
    for (auto i = d.entries.size() - long_turns; i < d.entries.size(); ++i)
      d.entries[i].floor = 0; // long conversations trim (dense model)
  }
  while (d.entries.size() < entries)
    add_conv(d, rng, rng() % system_prompts, 4 + rng() % 13, 32, 256, entries);
  return d;
}

/// The whole key of conversation `c` (system prompt + own tokens).
token_seq full_key(const dataset& d, uint32_t c) {
  auto k = d.systems[d.convs[c].system];
  k.insert(k.end(), d.convs[c].own.begin(), d.convs[c].own.end());
  return k;
}

size_t lcp(const token* a, const token* b, size_t n) {
  size_t i = 0;
  while (i + 64 <= n && std::memcmp(a + i, b + i, 64 * sizeof(token)) == 0)
    i += 64;
  while (i < n && a[i] == b[i])
    ++i;
  return i;
}

/// The simplest way: every entry, compared with the prompt, one by one.
struct linear_answer {
  uint64_t length = 0;
  uint32_t entry = 0;
  bool needs_trim = false;
};

/// Over the first `n` entries of `d`.
std::optional<linear_answer> linear_lookup(const dataset& d, size_t n_entries,
                                           std::span<const token> pr) {
  std::optional<linear_answer> best;
  for (uint32_t i = 0; i < n_entries; ++i) {
    auto& e = d.entries[i];
    auto& c = d.convs[e.conv];
    auto& sys = d.systems[c.system];
    auto n = std::min<size_t>(e.len, pr.size());
    auto m = lcp(sys.data(), pr.data(), std::min(n, sys.size()));
    if (m == sys.size() && n > m)
      m += lcp(c.own.data(), pr.data() + m, n - m);
    auto p = std::min<uint64_t>(m, pr.size() - 1);
    bool exact = p == e.len;
    if (p == 0 || (!exact && p < e.floor))
      continue;
    // Later entries carry higher stamps: >= keeps the most recent.
    if (!best || p > best->length
        || (p == best->length && (exact || best->needs_trim)))
      best = linear_answer{p, i, !exact};
  }
  return best;
}

template <class F>
double ns_per_call(F&& f, double budget_s, int min_rounds) {
  std::vector<double> rounds;
  auto stop = clock_type::now() + std::chrono::duration<double>(budget_s);
  f(); // warm
  do {
    auto t0 = clock_type::now();
    f();
    auto t1 = clock_type::now();
    rounds.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  } while (static_cast<int>(rounds.size()) < min_rounds
           || clock_type::now() < stop);
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2] / prompts_per_size; // median
}

struct row {
  size_t entries;
  size_t prompt_tokens;
  double lookup_ns;
  std::optional<double> linear_ns;
  double floor_ns;
  double bytes_per_token;
  double bytes_per_token_heap;
};

} // namespace

namespace {

using index_t = prefix_index<uint32_t>;

void build(index_t& ix, const dataset& d, size_t entries) {
  token_seq key;
  uint32_t conv = UINT32_MAX;
  for (uint32_t i = 0; i < entries; ++i) {
    auto& e = d.entries[i];
    if (e.conv != conv) {
      conv = e.conv;
      key = full_key(d, conv);
    }
    ix.insert("bench", std::span{key}.first(e.len), i, e.floor);
  }
}

std::vector<token_seq> make_prompts(const dataset& d, size_t len) {
  std::mt19937_64 rng(len);
  std::vector<token_seq> out;
  for (uint32_t c = 0; c < prompts_per_size; ++c) {
    auto k = full_key(d, c);
    k.resize(len - fresh_tail);
    auto tail = random_run(rng, fresh_tail);
    k.insert(k.end(), tail.begin(), tail.end());
    out.push_back(std::move(k));
  }
  return out;
}

/// Checks the index against the scan (when given) and the data's shape.
void check(const index_t& ix, const dataset& d, size_t n, const token_seq& pr,
           bool against_scan) {
  auto m = ix.longest_usable("bench", pr);
  if (!m || m->length != pr.size() - fresh_tail) {
    std::fprintf(stderr, "bench_lookup: unexpected answer for %zu tokens\n",
                 pr.size());
    std::exit(1);
  }
  if (!against_scan)
    return;
  auto l = linear_lookup(d, n, pr);
  if (!l || l->length != m->length || l->entry != ix.handle(m->ref)
      || l->needs_trim != m->needs_trim) {
    std::fprintf(stderr,
                 "bench_lookup: index and scan disagree on %zu tokens: "
                 "index %u@%llu%s, scan %u@%llu%s\n",
                 pr.size(), ix.handle(m->ref),
                 static_cast<unsigned long long>(m->length),
                 m->needs_trim ? "~" : "", l ? l->entry : 0,
                 static_cast<unsigned long long>(l ? l->length : 0),
                 l && l->needs_trim ? "~" : "");
    std::exit(1);
  }
}

void write_json(const std::string& file, const std::vector<row>& rows) {
  std::ofstream out(file);
  out << std::fixed << std::setprecision(1) << "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    out << "  {\"entries\": " << r.entries
        << ", \"prompt_tokens\": " << r.prompt_tokens
        << ", \"lookup_ns\": " << r.lookup_ns << ", \"linear_ns\": ";
    if (r.linear_ns)
      out << *r.linear_ns;
    else
      out << "null";
    out << ", \"floor_ns\": " << r.floor_ns
        << ", \"index_bytes_per_token\": " << r.bytes_per_token << "}"
        << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "]\n";
}

volatile int sink;

/// The floor: one memcmp pass of each prompt's first `len` tokens over a
/// copy of it, ns per prompt (median of at least `min_rounds` rounds).
template <class Prompts>
double one_pass_ns(const Prompts& prompts, const Prompts& copies, size_t len,
                   double budget_s, int min_rounds) {
  return ns_per_call(
    [&] {
      for (size_t k = 0; k < prompts.size(); ++k)
        sink = sink
               + std::memcmp(prompts[k].data(), copies[k].data(),
                             len * sizeof(token));
    },
    budget_s, min_rounds);
}

const std::vector<size_t> sizes{1000, 10000, 100000, 1000000};
const std::vector<size_t> lens{1024, 8192, 32768, 131072};

struct options {
  size_t scan_limit; // entries up to which the linear scan runs
  double budget_s;   // timing budget per measurement
};

/// Times the three passes for prompts of `len` tokens on `ix`.
row measure(const index_t& ix, const dataset& d, size_t n, size_t len,
            const options& o) {
  auto prompts = make_prompts(d, len);
  auto copies = prompts;
  bool scan = n <= o.scan_limit;
  for (auto& p : prompts)
    check(ix, d, n, p, scan);
  row r{n, len, 0, std::nullopt, 0, 0, 0};
  r.lookup_ns = ns_per_call(
    [&] {
      for (auto& p : prompts)
        sink = sink + static_cast<int>(ix.longest_usable("bench", p)->length);
    },
    o.budget_s, 5);
  if (scan)
    r.linear_ns = ns_per_call(
      [&] {
        for (auto& p : prompts)
          sink = sink + static_cast<int>(linear_lookup(d, n, p)->length);
      },
      0, 3);
  r.floor_ns = one_pass_ns(prompts, copies, len, o.budget_s, 5);
  return r;
}

/// Builds the index over the first `n` entries and measures every length.
void run_size(const dataset& d, size_t n, const options& o,
              std::vector<row>& rows) {
  index_t ix;
  auto heap0 = mallinfo2().uordblks;
  auto t0 = clock_type::now();
  build(ix, d, n);
  auto build_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  auto heap = static_cast<double>(mallinfo2().uordblks - heap0);
  auto tokens = static_cast<double>(ix.token_count());
  for (auto len : lens) {
    auto r = measure(ix, d, n, len, o);
    r.bytes_per_token = static_cast<double>(ix.memory_bytes()) / tokens;
    r.bytes_per_token_heap = heap / tokens;
    rows.push_back(r);
    char lin[32] = "skipped";
    if (r.linear_ns)
      std::snprintf(lin, sizeof lin, "%.0f", *r.linear_ns);
    std::printf("%9zu %8zu %11.0f %13s %10.0f %7.2f %9.1f %9.1f %8.2f\n", n,
                len, r.lookup_ns, lin, r.floor_ns, r.lookup_ns / r.floor_ns,
                r.bytes_per_token, r.bytes_per_token_heap, build_s);
    std::fflush(stdout);
  }
  double key_tokens = 0;
  for (size_t i = 0; i < n; ++i)
    key_tokens += d.entries[i].len;
  std::printf("  %zu entries: %zu nodes, %.0f tree tokens (%.1f key tokens "
              "per tree token), index %.1f MiB\n",
              n, ix.node_count(), tokens, key_tokens / tokens,
              static_cast<double>(ix.memory_bytes()) / (1 << 20));
}

/// Lookup time at the most entries over the fewest, per prompt length.
void print_flatness(const std::vector<row>& rows) {
  for (auto len : lens) {
    double small = 0, big = 0;
    for (auto& r : rows) {
      if (r.prompt_tokens == len && r.entries == sizes.front())
        small = r.lookup_ns;
      if (r.prompt_tokens == len && r.entries == sizes.back())
        big = r.lookup_ns;
    }
    std::printf("prompt %6zu: %zu entries / %zu entries = %.2fx\n", len,
                sizes.back(), sizes.front(), big / small);
  }
}

/// The peer directory (tiers/peer_directory.hpp) over the first `n`
/// entries spread over four nodes, each also on a second tier: lookup time
/// per prompt length against one pass over the prompt.
void run_directory(const dataset& d, size_t n, const options& o) {
  peer_directory dir;
  const std::string nodes[] = {"node-1", "node-2", "node-3", "node-4"};
  token_seq key;
  uint32_t conv = UINT32_MAX;
  for (uint32_t i = 0; i < n; ++i) {
    auto& e = d.entries[i];
    if (e.conv != conv) {
      conv = e.conv;
      key = full_key(d, conv);
    }
    auto k = std::span{key}.first(e.len);
    dir.put(nodes[i % 4], "bench", k, peer_tier::ram, e.len, e.floor == 0);
    dir.put(nodes[(i + 1) % 4], "bench", k, peer_tier::ssd, e.len,
            e.floor == 0);
  }
  for (auto len : lens) {
    auto prompts = make_prompts(d, len);
    auto copies = prompts;
    auto lookup = ns_per_call(
      [&] {
        for (auto& p : prompts)
          sink =
            sink + static_cast<int>(dir.longest_usable("bench", p)->length);
      },
      o.budget_s, 5);
    auto floor = one_pass_ns(prompts, copies, len, o.budget_s, 5);
    std::printf("directory %9zu entries x 2 holders, prompt %6zu: %9.0f ns, "
                "one pass %7.0f ns, %6.2fx\n",
                n, len, lookup, floor, lookup / floor);
  }
}

bool check_mode = false;
int failures = 0;

/// One PASS / FAIL line: `got` against `limit` (both ratios).
void verdict(const std::string& what, double got, double limit) {
  bool ok = got <= limit;
  failures += ok ? 0 : 1;
  std::printf("%s %s: %.2fx (limit %.2fx)\n", ok ? "PASS" : "FAIL",
              what.c_str(), got, limit);
  std::fflush(stdout);
}

/// The best round: the other builds sharing the machine only ever add.
constexpr double inf_ns = std::numeric_limits<double>::infinity();

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

// ---- puts at high fan-out ------------------------------------------------

constexpr size_t fan_system_tokens = 1000;
constexpr size_t fan_batch = 1000;
const std::vector<size_t> fan_sizes{1000, 10000, 100000};

/// Conversations on one system prompt: `base` ones stored, and a batch of
/// fresh ones put and erased while timed.
struct fan_data {
  token_seq system;
  std::vector<token_seq> base;  // own tokens of the stored conversations
  std::vector<token_seq> fresh; // own tokens of the timed batch (random)
  std::vector<token_seq> last;  // the same, first tokens sorting last

  token_seq key(const token_seq& own) const {
    auto k = system;
    k.insert(k.end(), own.begin(), own.end());
    return k;
  }
};

fan_data make_fan_data(size_t n) {
  std::mt19937_64 rng(15);
  fan_data d;
  d.system = random_run(rng, fan_system_tokens);
  // First tokens: distinct, so each conversation is a child of the system
  // prompt's node (a shared one would split an edge instead: another
  // operation); stored ones even, fresh ones odd, so a fresh one sorts
  // anywhere among them.
  auto turn = [&](token first) {
    auto t = random_run(rng, 32 + rng() % 225);
    t[0] = first;
    return t;
  };
  std::vector<token> firsts(n + fan_batch);
  std::iota(firsts.begin(), firsts.end(), token{0});
  std::shuffle(firsts.begin(), firsts.end(), rng);
  for (size_t i = 0; i < n; ++i)
    d.base.push_back(turn(2 * firsts[i]));
  for (size_t i = 0; i < fan_batch; ++i) {
    d.fresh.push_back(turn(2 * firsts[n + i] + 1));
    auto l = d.fresh.back();
    l[0] = static_cast<token>(4 * (n + fan_batch) + i); // after every other
    d.last.push_back(std::move(l));
  }
  return d;
}

/// An entry of `layers` kv layers (`bpt` bytes per token each) over `key`,
/// all of it in one buffer.
entry make_entry(std::string ns, token_seq key, size_t layers, uint32_t bpt) {
  auto n = key.size();
  buffer_builder b(std::max<size_t>(1, layers * n * bpt));
  std::memset(b.data(), 7, b.size());
  auto buf = std::move(b).freeze();
  entry e;
  e.ns = std::move(ns);
  e.tokens = std::move(key);
  for (size_t l = 0; l < layers; ++l)
    e.layers.push_back(
      layer_state::kv(bpt, n, {view{buf, l * n * bpt, uint64_t{n} * bpt}}));
  return e;
}

struct fan_times {
  double put_ns = 0, erase_ns = 0;
};

/// Median per-put and per-erase time of `batch` on a prefix_index.
fan_times time_index_batch(index_t& ix, const fan_data& d,
                           const std::vector<token_seq>& batch, int rounds) {
  std::vector<token_seq> keys;
  for (auto& own : batch)
    keys.push_back(d.key(own));
  std::vector<double> puts, erases;
  std::vector<entry_ref> refs(keys.size());
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock_type::now();
    for (size_t i = 0; i < keys.size(); ++i)
      refs[i] = ix.insert("bench", keys[i], 1u, 0).ref;
    auto t1 = clock_type::now();
    for (auto ref : refs) // oldest first, as LRU eviction goes
      ix.erase(ref);
    auto t2 = clock_type::now();
    puts.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count()
                   / keys.size());
    erases.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count()
                     / keys.size());
  }
  return {best(puts), best(erases)};
}

/// The same through ram_tier::put and ram_tier::remove (one 16-byte kv
/// layer per entry: the bookkeeping, not the bytes).
fan_times time_tier_batch(ram_tier& t, const fan_data& d,
                          const std::vector<token_seq>& batch, int rounds) {
  std::vector<entry> entries;
  std::vector<ram_key> keys;
  for (auto& own : batch) {
    entries.push_back(make_entry("bench", d.key(own), 1, 16));
    keys.push_back({false, "bench", entries.back().tokens});
  }
  std::vector<double> puts, erases;
  for (int r = 0; r < rounds; ++r) {
    auto copies = entries; // views only
    auto t0 = clock_type::now();
    for (auto& e : copies)
      if (!t.put(std::move(e), 1)->kept)
        std::exit(1);
    auto t1 = clock_type::now();
    for (auto& k : keys)
      if (!t.remove(k))
        std::exit(1);
    auto t2 = clock_type::now();
    puts.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count()
                   / keys.size());
    erases.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count()
                     / keys.size());
  }
  return {best(puts), best(erases)};
}

/// The better of `a` and `b`, field by field.
fan_times better(fan_times a, fan_times b) {
  return {std::min(a.put_ns, b.put_ns), std::min(a.erase_ns, b.erase_ns)};
}

/// One size of the fan-out: its index and tier, filled with `n`
/// conversations, and the best times seen so far.
struct fan_case {
  size_t n = 0;
  size_t nodes = 0;
  index_t ix;
  std::unique_ptr<ram_tier> tier;
  fan_times rnd{inf_ns, inf_ns}, last{inf_ns, inf_ns}, in_tier{inf_ns, inf_ns};
};

void run_fanout(bool quick, size_t only_n, int rounds_asked) {
  auto sizes = only_n ? std::vector<size_t>{only_n} : fan_sizes;
  auto d = make_fan_data(sizes.back());
  int rounds = rounds_asked ? rounds_asked : quick ? 9 : 31;
  bool index_only = getenv("FAN_INDEX_ONLY") != nullptr;
  std::printf("\nputs at high fan-out: N conversations on one %zu-token "
              "system prompt, a batch of %zu fresh ones put then erased "
              "(oldest first), best of %d rounds (the sizes take turns "
              "round by round), ns per operation\n",
              fan_system_tokens, fan_batch, rounds);
  std::printf("%8s %9s %11s %11s %11s %11s %11s %11s\n", "N", "nodes", "ix_put",
              "ix_erase", "ix_put_last", "ix_erase_l", "tier_put",
              "tier_remove");
  std::vector<fan_case> cases(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    auto& c = cases[k];
    c.n = sizes[k];
    for (size_t i = 0; i < c.n; ++i)
      c.ix.insert("bench", d.key(d.base[i]), 0u, 0);
    c.nodes = c.ix.node_count();
    if (index_only)
      continue;
    c.tier = std::make_unique<ram_tier>(uint64_t{1} << 40);
    for (size_t i = 0; i < c.n; ++i)
      if (!c.tier->put(make_entry("bench", d.key(d.base[i]), 1, 16), 0)->kept)
        std::exit(1);
  }
  // Hot: each size alone, after two untimed rounds (its first round pays
  // page faults and a cold cache, which made the first size measured the
  // slowest); the targets are checked on these, the index's own scaling.
  auto time_case = [&](fan_case& c, int n) {
    for (int r = 0; r < n; ++r) {
      c.rnd = better(c.rnd, time_index_batch(c.ix, d, d.fresh, 1));
      c.last = better(c.last, time_index_batch(c.ix, d, d.last, 1));
      if (c.tier)
        c.in_tier = better(c.in_tier, time_tier_batch(*c.tier, d, d.fresh, 1));
    }
  };
  for (auto& c : cases) {
    time_case(c, 2);
    c.rnd = c.last = c.in_tier = fan_times{inf_ns, inf_ns};
    time_case(c, rounds);
  }
  auto print = [](const fan_case& c, const fan_times& t) {
    std::printf("%8zu %9zu %11.0f %11.0f %11.0f %11.0f %11.0f %11.0f\n", c.n,
                c.nodes, c.rnd.put_ns, c.rnd.erase_ns, c.last.put_ns,
                c.last.erase_ns, t.put_ns, t.erase_ns);
  };
  std::vector<fan_times> rnd, last, tier;
  for (auto& c : cases) {
    rnd.push_back(c.rnd);
    last.push_back(c.last);
    tier.push_back(c.tier ? c.in_tier : fan_times{});
    print(c, tier.back());
  }
  // Shared: the sizes take turns round by round, so each finds its data
  // pushed out of the CPU caches by the others (as a service's index is
  // by the state it moves). Printed beside, not checked.
  std::printf("the same with the sizes taking turns round by round "
              "(caches shared):\n");
  std::vector<double> shared_put, shared_last;
  for (auto& c : cases)
    c.rnd = c.last = c.in_tier = fan_times{inf_ns, inf_ns};
  for (int r = 0; r < rounds; ++r)
    for (auto& c : cases)
      time_case(c, 1);
  for (auto& c : cases)
    print(c, c.tier ? c.in_tier : fan_times{});
  std::fflush(stdout);
  if (cases.size() > 1)
    std::printf("note: taking turns, index put 100k / 1k: %.2fx, of a key "
                "sorting last %.2fx\n",
                cases.back().rnd.put_ns / cases.front().rnd.put_ns,
                cases.back().last.put_ns / cases.front().last.put_ns);
  if (only_n)
    return; // one size: nothing to compare
  auto ratio = [](const std::vector<fan_times>& v, bool put) {
    return put ? v.back().put_ns / v.front().put_ns
               : v.back().erase_ns / v.front().erase_ns;
  };
  verdict("index put, 100k / 1k conversations on one system prompt",
          ratio(rnd, true), 1.3);
  verdict("index put of a key sorting last, 100k / 1k", ratio(last, true), 1.3);
  verdict("index put, random key / key sorting last at 100k",
          rnd.back().put_ns / last.back().put_ns, 1.3);
  verdict("ram_tier put, 100k / 1k", ratio(tier, true), 1.3);
  // Erases: no target in the issue; printed beside the puts. The batch is
  // the newest of the index, so each erase recombines its groups of the
  // wide node's summary tree, out of cache at 100k children.
  std::printf("note: index erase, 100k / 1k: %.2fx; ram_tier remove, "
              "100k / 1k: %.2fx\n",
              ratio(rnd, false), ratio(tier, false));
}

// ---- the full RAM hit ----------------------------------------------------

/// One tier of `layers`-layer entries and its exact and trimmed prompts.
struct hit_setup {
  size_t layers;
  ram_tier tier{uint64_t{1} << 40};
  std::vector<token_seq> exact, trimmed;
  uint64_t now = 1;

  const std::vector<token_seq>& prompts(bool exact_donor) const {
    return exact_donor ? exact : trimmed;
  }
};

/// 1000 conversations on one system prompt: exact donors of 960 tokens
/// (prompt = donor + 64 fresh) and trim donors of 2048 tokens (prompt =
/// first 960 + 64 fresh: served trimmed).
void fill_hit(hit_setup& h, size_t prompt_len, size_t conversations) {
  std::mt19937_64 rng(3);
  auto system = random_run(rng, 512);
  for (size_t c = 0; c < conversations; ++c) {
    auto k = system;
    auto own = random_run(rng, 2048 - system.size());
    k.insert(k.end(), own.begin(), own.end());
    bool exact = c % 2 == 0;
    auto key = exact ? token_seq(k.begin(), k.begin() + 960) : k;
    if (!h.tier.put(make_entry("bench", key, h.layers, 16), 0)->kept)
      std::exit(1);
    if (c < 2 * prompts_per_size) {
      auto pr = token_seq(k.begin(), k.begin() + 960);
      auto tail = random_run(rng, prompt_len - 960);
      pr.insert(pr.end(), tail.begin(), tail.end());
      (exact ? h.exact : h.trimmed).push_back(std::move(pr));
    }
  }
  for (bool exact : {true, false})
    for (auto& p : h.prompts(exact)) {
      auto hit = h.tier.lookup(p, "bench", std::nullopt, h.now);
      if (!hit || hit->size() != 960 || hit->state(p).layers.size() != h.layers
          || (hit->donor_length == 960) != exact) {
        std::fprintf(stderr, "bench_lookup: unexpected RAM hit\n");
        std::exit(1);
      }
    }
}

/// One lookup of every prompt (of `exact` donors) in `h`.
void lookups(hit_setup& h, bool exact) {
  ++h.now;
  for (auto& p : h.prompts(exact))
    sink = sink
           + static_cast<int>(
             h.tier.lookup(p, "bench", std::nullopt, h.now)->donor_length);
}

void run_hit(const options& o) {
  constexpr size_t prompt_len = 1024;
  constexpr size_t conversations = 1000;
  constexpr int rounds = 7;
  std::printf("\nfull RAM hit: ram_tier::lookup of a %zu-token prompt, "
              "%zu entries held, ns per lookup (lookup and one_pass: the "
              "least of %d medians, the four cases timed in turn; walk "
              "and +state(): one median)\n",
              prompt_len, conversations, rounds);
  std::printf("%7s %6s %10s %10s %10s %10s %8s %8s %10s\n", "layers", "kind",
              "lookup", "walk", "rest", "one_pass", "x_pass", "rest/l",
              "+state()");
  // Both tiers are held at once and the four (layers, donor) cases are
  // timed in turn, round after round, so a slow moment of the machine
  // falls on every case alike; each case keeps its best round.
  std::vector<std::unique_ptr<hit_setup>> setups;
  for (size_t layers : {32, 80}) {
    setups.push_back(std::make_unique<hit_setup>());
    setups.back()->layers = layers;
    fill_hit(*setups.back(), prompt_len, conversations);
  }
  for (auto& h : setups)
    for (bool exact : {true, false})
      for (int w = 0; w < 1000; ++w) // warm: the first rows ran cold
        lookups(*h, exact);
  // Per case: the best round of the lookup and of one pass over its
  // prompts (timed in the same turn).
  std::map<std::pair<size_t, bool>, std::pair<double, double>> best;
  for (int r = 0; r < rounds; ++r)
    for (auto& h : setups)
      for (bool exact : {true, false}) {
        auto& prompts = h->prompts(exact);
        auto copies = prompts;
        auto ns = ns_per_call([&] { lookups(*h, exact); }, o.budget_s / 2, 10);
        auto pass =
          one_pass_ns(prompts, copies, prompt_len, o.budget_s / 2, 10);
        auto [at, fresh] =
          best.try_emplace({h->layers, exact}, std::pair{ns, pass});
        if (!fresh)
          at->second = {std::min(at->second.first, ns),
                        std::min(at->second.second, pass)};
      }
  for (auto& h : setups)
    for (bool exact : {true, false}) {
      auto& prompts = h->prompts(exact);
      auto with_views = ns_per_call(
        [&] {
          ++h->now;
          for (auto& p : prompts)
            sink = sink
                   + static_cast<int>(
                     h->tier.lookup(p, "bench", std::nullopt, h->now)
                       ->state(p)
                       .layers.size());
        },
        o.budget_s, 20);
      auto walk = ns_per_call(
        [&] {
          for (auto& p : prompts)
            sink = sink + static_cast<int>(h->tier.peek_prefix_len(p, "bench"));
        },
        o.budget_s, 20);
      auto [lookup, pass] = best[{h->layers, exact}];
      std::printf("%7zu %6s %10.0f %10.0f %10.0f %10.0f %8.2f %8.2f %10.0f\n",
                  h->layers, exact ? "exact" : "trim", lookup, walk,
                  lookup - walk, pass, lookup / pass,
                  (lookup - walk) / h->layers, with_views);
      std::fflush(stdout);
      if (h->layers == 32)
        verdict(std::string{"full RAM hit ("} + (exact ? "exact" : "trimmed")
                  + "), 1k tokens x 32 layers / one pass over the prompt",
                lookup / pass, 3.0);
      else
        verdict(std::string{"full RAM hit ("} + (exact ? "exact" : "trimmed")
                  + "), 80 layers / 32 layers",
                lookup / best[{32, exact}].first, 1.5);
    }
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json, only;
  size_t fan_n = 0; // --fan-size: one size only (for a profiler)
  int rounds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--check") {
      check_mode = true;
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (a == "--fan-size" && i + 1 < argc) {
      fan_n = std::stoul(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::stoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_lookup [--quick] [--check] "
                           "[--json FILE] [--only index|fanout|hit]\n");
      return 2;
    }
  }
  // Quick: every size, but the scan only up to 100k and shorter rounds.
  auto o = quick ? options{100000, 0.03} : options{sizes.back(), 0.25};
  if (only.empty() || only == "index") {
    auto d = make_dataset(sizes.back());
    std::vector<row> rows;
    std::printf("%9s %8s %11s %13s %10s %7s %9s %9s %8s\n", "entries", "prompt",
                "lookup_ns", "linear_ns", "floor_ns", "x_floor", "B/token",
                "heap_B/t", "build_s");
    for (auto n : sizes)
      run_size(d, n, o, rows);
    print_flatness(rows);
    run_directory(d, 100000, o);
    if (!json.empty())
      write_json(json, rows);
  }
  if (only.empty() || only == "fanout")
    run_fanout(quick, fan_n, rounds);
  if (only.empty() || only == "hit")
    run_hit(o);
  std::printf("%s\n", failures == 0 ? "bench_lookup: all checks PASS"
                                    : "bench_lookup: some checks FAIL");
  return check_mode && failures > 0 ? 1 : 0;
}
