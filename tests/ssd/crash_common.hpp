// Shared by the crash writer (a separate process the crash test SIGKILLs)
// and the crash test that checks what it left: the geometry, the tier
// configuration and how the writer derives its entries. Tests only.
#pragma once

#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <optional>
#include <random>
#include <string_view>

namespace kvtier::tiers::ssd::crash {

/// What a writer writes: whole files of every layer kind, or delta files
/// (kv layers only, `ssd_config::delta_files`): growing prompts then
/// extend durable files of their family and are written as chains.
enum class mode { every_kind, delta };

/// Rows big enough that a write takes a while; every layer kind, or kv
/// only (delta files need every layer kv).
inline model_geometry geometry(mode m) {
  model_geometry g{"crash", {}};
  g.layers.push_back({layer_kind::kv, 2048, 0, 0});
  if (m == mode::every_kind)
    g.layers.push_back({layer_kind::ring, 1024, 64, 0});
  g.layers.push_back({layer_kind::kv, 1024, 0, 0});
  if (m == mode::every_kind)
    g.layers.push_back({layer_kind::recurrent, 0, 0, 8192});
  return g;
}

inline const runtime::oracle_engine& oracle(mode m) {
  static const runtime::oracle_engine every{geometry(mode::every_kind), 64};
  static const runtime::oracle_engine delta{geometry(mode::delta), 64};
  return m == mode::delta ? delta : every;
}

/// The tier as both processes configure it (small cap: evictions happen;
/// with deltas, cascades too).
inline ssd_config config(const std::string& dir, mode m = mode::every_kind) {
  ssd_config cfg;
  cfg.dir = dir;
  cfg.fingerprint = "crash-model";
  cfg.byte_cap = 6u << 20;
  cfg.queue_cap = 2u << 20;
  cfg.checksum_chunk = 64u << 10;
  cfg.delta_files = m == mode::delta;
  cfg.log = [](const std::string&) {};
  return cfg;
}

/// "every-kind" or "delta" (the writer's third argument); nullopt else.
inline std::optional<mode> parse_mode(std::string_view s) {
  if (s == "every-kind")
    return mode::every_kind;
  if (s == "delta")
    return mode::delta;
  return std::nullopt;
}

/// The i-th entry a writer with `seed` offers: prompts of a few families
/// sharing prefixes (a family's tokens depend on the position only, so a
/// longer prompt of it extends every shorter one), sometimes repeating a
/// key (a rewrite of the same file). With deltas, a family's prompts
/// mostly grow, as a conversation does, and now and then start over.
inline entry entry_for(uint64_t seed, uint64_t i, mode m = mode::every_kind) {
  std::mt19937_64 rng{seed * 1000003 + i};
  auto family = static_cast<token>(rng() % 4);
  uint64_t len = 4 + rng() % 300;
  if (m == mode::delta && rng() % 5 != 0)
    len = 20 + 24 * (i / 4 % 12) + rng() % 24; // grows with i, per family
  token_seq t(len);
  for (size_t k = 0; k < len; ++k)
    t[k] = family * 1000 + static_cast<token>(k % 97);
  return oracle(m).prefill(rng() % 2 ? "a" : "b", t);
}

/// Checkpoint `j` of generation `request` (prompt plus generated tokens,
/// 24 + 16 j of them): a function of the request alone, so a later
/// checkpoint extends an earlier one, and a retry of the request (a new
/// attempt) writes the same keys again, under the same file names.
inline entry checkpoint_for(uint64_t request, uint32_t j, mode m) {
  token_seq t(24 + 16 * static_cast<size_t>(j));
  for (size_t k = 0; k < t.size(); ++k)
    t[k] = 5000 + static_cast<token>((request * 31 + k) % 4000);
  return oracle(m).prefill(request % 2 ? "a" : "b", t);
}

/// The index `j` of a checkpoint of `tokens` tokens (`checkpoint_for`).
inline uint32_t checkpoint_index(size_t tokens) {
  return static_cast<uint32_t>((tokens - 24) / 16);
}

} // namespace kvtier::tiers::ssd::crash
