#include "runtime/tools/report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvtier::runtime {

double call_timings::quantile(double q) const {
  if (us.empty())
    return 0;
  auto v = us;
  auto k = static_cast<size_t>(std::ceil(q * double(v.size())));
  k = std::clamp<size_t>(k, 1, v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(k), v.end());
  return v[k];
}

double replay_report::token_hit_ratio() const {
  return input_tokens ? double(ram_tokens + ssd_tokens + peer_tokens)
                          / double(input_tokens)
                      : 0.0;
}

double replay_report::prefill_saved_s() const {
  return prefill_tokens_per_s > 0
           ? double(ram_tokens + ssd_tokens + peer_tokens)
               / prefill_tokens_per_s
           : 0.0;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string num(uint64_t v) {
  auto s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string ratio(const std::optional<double>& v) {
  return v ? fmt("%.4f", *v) : "n/a";
}

std::string share(uint64_t part, uint64_t whole) {
  return whole ? fmt("%.1f %%", 100.0 * double(part) / double(whole)) : "-";
}

void row(std::ostringstream& o, const std::string& k, const std::string& v,
         const std::string& note = {}) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-28s %18s  %s\n", k.c_str(), v.c_str(),
                note.c_str());
  o << buf;
}

} // namespace

std::string render_table(const replay_report& r) {
  std::ostringstream o;
  o << "replay of " << r.trace << (r.replayed ? "" : " (--simulate)")
    << "\n  model " << r.model << ", RAM cap " << num(r.ram_cap_bytes)
    << " B, SSD cap " << num(r.ssd_cap_bytes) << " B"
    << (r.ssd_files_at_start
          ? ", warm start: the SSD held " + num(r.ssd_files_at_start) + " files"
          : std::string{})
    << "\n\n";
  row(o, "requests", num(r.requests),
      r.refused ? num(r.refused) + " refused" : "");
  row(o, "input tokens", num(r.input_tokens));
  if (r.replayed)
    row(o, "output tokens", num(r.output_tokens));
  row(o, "served from RAM", num(r.ram_tokens),
      share(r.ram_tokens, r.input_tokens));
  row(o, "served from SSD", num(r.ssd_tokens),
      share(r.ssd_tokens, r.input_tokens));
  if (r.peer_tokens > 0)
    row(o, "served from peers", num(r.peer_tokens),
        share(r.peer_tokens, r.input_tokens));
  row(o, "computed fresh", num(r.fresh_tokens),
      share(r.fresh_tokens, r.input_tokens));
  row(o, "token hit ratio", fmt("%.4f", r.token_hit_ratio()));
  row(o, "simulated LRU hit ratio", ratio(r.simulated_lru_hit_ratio),
      "ideal whole-prefix LRU, same caps");
  row(o, "infinite-cache hit ratio", ratio(r.infinite_hit_ratio));
  row(o, "prefill saved", fmt("%.1f s", r.prefill_saved_s()),
      fmt("at %.0f tokens/s (configured rate)", r.prefill_tokens_per_s));
  if (r.replayed) {
    row(o, "states verified", num(r.verified_states),
        r.verified ? "" : "(--no-verify)");
    row(o, "wrong states", num(r.wrong_states));
  }
  row(o, "spills to SSD", num(r.spills));
  row(o, "restores from SSD", num(r.restores));
  if (r.replayed) {
    row(o, "coalesced reads", num(r.coalesced_reads));
    row(o, "demotions", num(r.demotions));
    row(o, "admission waits", num(r.admission_waits));
    row(o, "drops", num(r.drops));
  }
  row(o, "RAM evictions", num(r.ram_evictions));
  row(o, "SSD evictions", num(r.ssd_evictions));
  if (r.replayed) {
    row(o, "SSD bytes written", num(r.ssd_bytes_written));
    row(o, "SSD bytes read", num(r.ssd_bytes_read));
  }
  row(o, "wall time", fmt("%.1f s", r.wall_s));
  if (!r.calls.empty()) {
    o << "\n  call latency (us)              p50        p99      calls\n";
    for (auto& [name, t] : r.calls) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "  %-24s %10.1f %10.1f %10zu\n",
                    name.c_str(), t.quantile(0.5), t.quantile(0.99),
                    t.us.size());
      o << buf;
    }
  }
  return o.str();
}

nlohmann::json to_json(const replay_report& r) {
  using nlohmann::json;
  auto opt = [](const std::optional<double>& v) {
    return v ? json(*v) : json(nullptr);
  };
  json calls = json::object();
  for (auto& [name, t] : r.calls)
    calls[name] = {{"count", t.us.size()},
                   {"p50_us", t.quantile(0.5)},
                   {"p99_us", t.quantile(0.99)}};
  return {{"trace", r.trace},
          {"model", r.model},
          {"simulate", !r.replayed},
          {"ram_cap_bytes", r.ram_cap_bytes},
          {"ssd_cap_bytes", r.ssd_cap_bytes},
          {"ssd_files_at_start", r.ssd_files_at_start},
          {"ssd_bytes_at_start", r.ssd_bytes_at_start},
          {"requests", r.requests},
          {"refused", r.refused},
          {"input_tokens", r.input_tokens},
          {"output_tokens", r.output_tokens},
          {"ram_tokens", r.ram_tokens},
          {"ssd_tokens", r.ssd_tokens},
          {"peer_tokens", r.peer_tokens},
          {"fresh_tokens", r.fresh_tokens},
          {"token_hit_ratio", r.token_hit_ratio()},
          {"simulated_lru_hit_ratio", opt(r.simulated_lru_hit_ratio)},
          {"infinite_hit_ratio", opt(r.infinite_hit_ratio)},
          {"prefill_tokens_per_s", r.prefill_tokens_per_s},
          {"prefill_saved_s", r.prefill_saved_s()},
          {"verified", r.verified},
          {"verified_states", r.verified_states},
          {"wrong_states", r.wrong_states},
          {"spills", r.spills},
          {"restores", r.restores},
          {"coalesced_reads", r.coalesced_reads},
          {"demotions", r.demotions},
          {"admission_waits", r.admission_waits},
          {"drops", r.drops},
          {"ram_evictions", r.ram_evictions},
          {"ssd_evictions", r.ssd_evictions},
          {"ssd_bytes_written", r.ssd_bytes_written},
          {"ssd_bytes_read", r.ssd_bytes_read},
          {"wall_s", r.wall_s},
          {"calls", calls}};
}

} // namespace kvtier::runtime
