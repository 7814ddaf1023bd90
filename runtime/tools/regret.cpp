#include "runtime/tools/regret.hpp"
#include "runtime/tools/svg.hpp"

#include "messages/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace kvtier::runtime {

double regret_point::ratio() const {
  return lru > 0 ? policy / lru : 0;
}

std::optional<double> regret_point::gap_closed() const {
  if (!(ceiling > lru))
    return std::nullopt;
  return (policy - lru) / (ceiling - lru);
}

bool regret_point::never_below() const {
  return policy >= lru - regret_tolerance;
}

bool regret_point::gain_owed() const {
  return ceiling >= regret_gain_where * lru && ceiling > 0;
}

bool regret_point::gain_met() const {
  return !gain_owed() || policy >= regret_gain * lru;
}

bool regret_report::holds() const {
  return std::all_of(points.begin(), points.end(),
                     [](auto& p) { return p.never_below() && p.gain_met(); });
}

namespace {

/// Per request, where its blocks start in a flat list of next uses: the
/// index of the next request using each block (never_used when none).
struct next_uses {
  std::vector<uint64_t> flat;
  std::vector<size_t> offset; // requests + 1 entries

  std::span<const uint64_t> of(size_t request) const {
    return {flat.data() + offset[request],
            offset[request + 1] - offset[request]};
  }
};

next_uses compute_next_uses(const trace& t) {
  next_uses out;
  out.offset.resize(t.requests.size() + 1, 0);
  for (size_t i = 0; i < t.requests.size(); ++i)
    out.offset[i + 1] = out.offset[i] + t.requests[i].blocks.size();
  out.flat.resize(out.offset.back(), tiers::never_used);
  std::unordered_map<uint64_t, uint64_t> later;
  for (size_t i = t.requests.size(); i-- > 0;) {
    auto& blocks = t.requests[i].blocks;
    for (size_t j = 0; j < blocks.size(); ++j)
      if (auto it = later.find(blocks[j]); it != later.end())
        out.flat[out.offset[i] + j] = it->second;
    for (auto b : blocks)
      later[b] = i;
  }
  return out;
}

double run(const trace& t, std::unique_ptr<tiers::eviction_policy> policy,
           uint64_t capacity_blocks, const next_uses* future) {
  tiers::block_cache cache(std::move(policy), capacity_blocks, t.block_size);
  for (size_t i = 0; i < t.requests.size(); ++i) {
    auto& r = t.requests[i];
    cache.request(r.blocks, r.input_tokens,
                  future ? future->of(i) : std::span<const uint64_t>{});
  }
  return cache.counts().token_ratio();
}

caf::error bad(const std::string& what) {
  return make_error(ec::invalid_argument, what);
}

/// The capacities to run, sorted and distinct: the caller's, or the sweep
/// (at least one block each).
caf::expected<std::vector<uint64_t>> capacities_of(const regret_report& r,
                                                   const regret_options& o) {
  auto out = o.capacities_tokens;
  if (out.empty())
    for (double s : regret_sweep)
      out.push_back(std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(
                                            s * double(r.distinct_blocks))))
                    * r.block_size);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (auto c : out)
    if (c < r.block_size)
      return bad("capacity " + std::to_string(c)
                 + " tokens is less than one block of "
                 + std::to_string(r.block_size) + " tokens");
  return out;
}

/// Fills every point's three ratios: each (point, policy) run is
/// independent, and `jobs` threads take them in turn.
void run_points(const trace& t, const regret_options& o, regret_report& r) {
  auto future = compute_next_uses(t);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next++) < 3 * r.points.size();) {
      auto& pt = r.points[k / 3];
      auto blocks = pt.capacity_blocks;
      switch (k % 3) {
        case 0: pt.lru = run(t, tiers::make_lru(), blocks, nullptr); break;
        case 1:
          pt.policy =
            run(t, tiers::make_gdsf_radix(blocks, o.policy), blocks, nullptr);
          break;
        default: pt.ceiling = run(t, tiers::make_belady(), blocks, &future);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < std::max(1u, o.jobs); ++i)
    threads.emplace_back(worker);
  worker();
  for (auto& th : threads)
    th.join();
}

} // namespace

caf::expected<regret_report> regret(const trace& t, const regret_options& o) {
  regret_report r;
  r.trace = t.name;
  r.policy = tiers::make_gdsf_radix(1, o.policy)->name();
  r.block_size = std::max<uint32_t>(t.block_size, 1);
  r.requests = t.requests.size();
  std::unordered_set<uint64_t> distinct;
  for (auto& q : t.requests)
    distinct.insert(q.blocks.begin(), q.blocks.end());
  r.distinct_blocks = distinct.size();
  r.working_set_tokens = r.distinct_blocks * r.block_size;
  r.infinite = infinite_cache_hits(t).token_ratio();
  if (r.infinite == 0)
    return bad(t.name
               + ": no request reuses a block of another (lengths "
                 "only?): every policy hits nothing, there is no regret");
  auto capacities = capacities_of(r, o);
  if (!capacities)
    return capacities.error();
  for (auto c : *capacities) {
    regret_point pt;
    pt.capacity_tokens = c;
    pt.capacity_blocks = c / r.block_size;
    pt.share = double(pt.capacity_blocks) / double(r.distinct_blocks);
    r.points.push_back(pt);
  }
  run_points(t, o, r);
  return r;
}

caf::expected<std::vector<uint64_t>> parse_capacities(const std::string& list) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= list.size()) {
    auto end = std::min(list.find(',', start), list.size());
    auto item = list.substr(start, end - start);
    uint64_t v = 0;
    auto [p, err] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || err != std::errc{} || p != item.data() + item.size()
        || v == 0)
      return bad("capacity '" + item
                 + "' is not a whole number of tokens above 0");
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

namespace {

std::string flag(const regret_point& p) {
  std::string s;
  if (!p.never_below())
    s += " BELOW-LRU";
  if (!p.gain_met())
    s += " GAIN<1.25x";
  return s.empty() ? "ok" : s.substr(1);
}

} // namespace

std::string render_table(const regret_report& r) {
  std::string o = "regret of " + r.policy + " on " + r.trace + ": "
                  + std::to_string(r.requests) + " requests, working set "
                  + std::to_string(r.distinct_blocks) + " blocks x "
                  + std::to_string(r.block_size) + " = "
                  + std::to_string(r.working_set_tokens)
                  + " tokens, infinite cache " + svg::fixed(r.infinite, 4)
                  + "\n";
  char line[200];
  std::snprintf(line, sizeof line, "%12s %6s %7s %7s %7s %7s %6s  %s\n",
                "capacity", "share", "lru", "policy", "ceiling", "pol/lru",
                "gap", "rules");
  o += line;
  for (auto& p : r.points) {
    auto gap = p.gap_closed();
    std::string gap_text = gap ? svg::fixed(*gap * 100, 1) + "%" : "-";
    std::snprintf(
      line, sizeof line, "%12llu %5.1f%% %7.4f %7.4f %7.4f %6.3fx %6s  %s%s\n",
      static_cast<unsigned long long>(p.capacity_tokens), p.share * 100, p.lru,
      p.policy, p.ceiling, p.ratio(), gap_text.c_str(), flag(p).c_str(),
      p.gain_owed() ? " (gain owed)" : "");
    o += line;
  }
  o += r.holds() ? "rules hold at every capacity\n"
                 : "a rule fails (flagged above)\n";
  return o;
}

std::string render_json(const regret_report& r) {
  using json = nlohmann::json;
  json points = json::array();
  for (auto& p : r.points)
    points.push_back(
      {{"capacity_tokens", p.capacity_tokens},
       {"capacity_blocks", p.capacity_blocks},
       {"share", p.share},
       {"lru", p.lru},
       {"policy", p.policy},
       {"ceiling", p.ceiling},
       {"policy_over_lru", p.ratio()},
       {"gap_closed", p.gap_closed() ? json(*p.gap_closed()) : json(nullptr)},
       {"never_below", p.never_below()},
       {"gain_owed", p.gain_owed()},
       {"gain_met", p.gain_met()}});
  json j = {{"trace", r.trace},
            {"policy", r.policy},
            {"block_size", r.block_size},
            {"requests", r.requests},
            {"distinct_blocks", r.distinct_blocks},
            {"working_set_tokens", r.working_set_tokens},
            {"infinite", r.infinite},
            {"tolerance", regret_tolerance},
            {"holds", r.holds()},
            {"points", points}};
  return j.dump(2) + "\n";
}

} // namespace kvtier::runtime
