// Shared by the crash writer (a separate process the crash test SIGKILLs)
// and the crash test that checks what it left: the geometry, the tier
// configuration and how the writer derives its entries. Tests only.
#pragma once

#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <random>

namespace kvtier::tiers::ssd::crash {

/// Every layer kind, with rows big enough that a write takes a while.
inline model_geometry geometry() {
  model_geometry g{"crash", {}};
  g.layers.push_back({layer_kind::kv, 2048, 0, 0});
  g.layers.push_back({layer_kind::ring, 1024, 64, 0});
  g.layers.push_back({layer_kind::kv, 1024, 0, 0});
  g.layers.push_back({layer_kind::recurrent, 0, 0, 8192});
  return g;
}

inline const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{geometry(), 64};
  return o;
}

/// The tier as both processes configure it (small cap: evictions happen).
inline ssd_config config(const std::string& dir) {
  ssd_config cfg;
  cfg.dir = dir;
  cfg.fingerprint = "crash-model";
  cfg.byte_cap = 6u << 20;
  cfg.queue_cap = 2u << 20;
  cfg.checksum_chunk = 64u << 10;
  cfg.log = [](const std::string&) {};
  return cfg;
}

/// The i-th entry a writer with `seed` offers: prompts of a few families
/// sharing prefixes, sometimes repeating a key (a rewrite of the same file).
inline entry entry_for(uint64_t seed, uint64_t i) {
  std::mt19937_64 rng{seed * 1000003 + i};
  auto family = static_cast<token>(rng() % 4);
  auto len = 4 + rng() % 300;
  token_seq t(len);
  for (size_t k = 0; k < len; ++k)
    t[k] = family * 1000 + static_cast<token>(k % 97);
  return oracle().prefill(rng() % 2 ? "a" : "b", t);
}

} // namespace kvtier::tiers::ssd::crash
