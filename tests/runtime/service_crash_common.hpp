// Shared by the service crash writer (a separate process the service crash
// test SIGKILLs) and the test that checks, after a restart, every entry the
// writer reported durable: the service options and the conversations'
// tokens. Tests only.
#pragma once

#include "runtime/config.hpp"
#include "tiers/state.hpp"

#include <random>
#include <string>

namespace kvtier::testing::service_crash {

inline constexpr int conversations = 6;

/// The options both processes use over `dir`: write-behind on, a short
/// delay, a RAM cap the conversations outgrow (evictions spill).
inline runtime::service_options options(const std::string& dir) {
  runtime::service_options o;
  o.ssd_dir = dir;
  o.model = "tiny-dense"; // 256 bytes per token
  o.model_scale = 1.0;
  o.ram_cap_bytes = 1ull << 20;
  o.ssd_cap_bytes = 1ull << 30;
  o.write_behind = true;
  o.write_behind_delay_ms = 5;
  o.write_behind_bytes_per_s = 256ull << 20;
  o.kv_budget_bytes = 64ull << 20;
  return o;
}

/// The tokens of conversation `c`'s turn `k` in run `seed`: the turns
/// before it, then 50..250 tokens of its own.
inline tiers::token_seq prompt(uint64_t seed, int c, int k) {
  tiers::token_seq out;
  for (int i = 0; i <= k; ++i) {
    std::mt19937_64 rng{seed * 7919 + static_cast<uint64_t>(c) * 104729
                        + static_cast<uint64_t>(i)};
    auto n = 50 + rng() % 200;
    for (uint64_t j = 0; j < n; ++j)
      out.push_back(static_cast<tiers::token>(1 + rng() % 50000));
  }
  return out;
}

/// The namespace of run `seed`'s entries (runs never share keys).
inline std::string ns(uint64_t seed) {
  return "run-" + std::to_string(seed);
}

} // namespace kvtier::testing::service_crash
