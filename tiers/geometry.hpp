// Model geometry: the per-layer shape of a model's state, which the oracle
// engine produces and admission projects. Plain values, copy freely.
//
// Presets are named after real model shapes with their real per-token sizes
// (numbers from each model's published config; see preset comments in
// geometry.cpp). `scale` shrinks every byte size by the same factor (at least
// one byte per token / state survives), so a workload keeps its shape — the
// same layer mix, ring windows and token counts — at a size this machine can
// hold. Token counts and windows are never scaled.
#pragma once

#include "tiers/state.hpp"

#include <string>
#include <vector>

namespace kvtier::tiers {

/// The shape of one layer's state.
struct layer_spec {
  layer_kind kind = layer_kind::kv;
  /// kv, ring: bytes per token row.
  uint32_t bytes_per_token = 0;
  /// ring: window in tokens.
  uint32_t window = 0;
  /// recurrent, object: fixed state size in bytes.
  uint64_t state_bytes = 0;

  /// Bytes this layer holds after `tokens` tokens (DESIGN.md "Admission"):
  /// kv tokens × bpt; ring min(tokens, window) × bpt; recurrent/object fixed.
  uint64_t bytes_at(uint64_t tokens) const noexcept;
};

struct model_geometry {
  std::string name;
  std::vector<layer_spec> layers;

  /// Bytes all layers hold after `tokens` tokens.
  uint64_t bytes_at(uint64_t tokens) const noexcept;

  /// Projected bytes of a request: prompt + max new tokens.
  uint64_t projected_bytes(uint64_t prompt_tokens,
                           uint64_t max_new_tokens) const noexcept {
    return bytes_at(prompt_tokens + max_new_tokens);
  }

  /// Bytes per token summed over kv and ring layers (unwrapped).
  uint64_t bytes_per_token() const noexcept;

  /// Number of layers of kind `k`.
  size_t count(layer_kind k) const noexcept;

  /// A preset by name, scaled by `scale` in (0, 1]. Unknown names and
  /// out-of-range scales are `ec::invalid_argument` naming the choices.
  static caf::expected<model_geometry> preset(const std::string& name,
                                              double scale = 1.0);

  /// Names accepted by `preset`.
  static std::vector<std::string> preset_names();
};

} // namespace kvtier::tiers
