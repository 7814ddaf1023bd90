// Model geometry: the per-layer shape of a model's state, which the oracle
// engine produces and admission projects. Plain values, copy freely.
//
// Presets are named after real model shapes with their real per-token sizes
// (numbers from each model's published config; see preset comments in
// geometry.cpp). `scale` shrinks every byte size by the same factor (at least
// one byte per token / state survives), so a workload keeps its shape — the
// same layer mix, ring windows and token counts — at a size this machine can
// hold. Token counts and windows are never scaled. An engine whose model is
// none of the presets describes its layers in text (`parse_layers`, the
// `[model] layers=` option).
//
// The running geometry is checked at every door state comes in by (publish,
// checkpoint, SSD scan and restore): `check` compares a stored layer's
// shape with the model's and names the first layer and field that differ.
// What the bytes mean beyond their shape (weights, tokenizer, KV dtype) is
// the engine's identity string; both together are a `model_identity`
// (tiers/model_identity.hpp).
#pragma once

#include "state.hpp"

#include <string>
#include <string_view>
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

  /// Bytes this layer holds after `tokens` tokens (docs/state-model.md
  /// "Byte accounting"):
  /// kv tokens × bpt; ring min(tokens, window) × bpt; recurrent/object fixed.
  uint64_t bytes_at(uint64_t tokens) const noexcept;

  bool operator==(const layer_spec&) const = default;
};

/// The shape of one stored layer, as an entry or a file header gives it.
struct layer_shape {
  layer_kind kind = layer_kind::kv;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  /// Tokens the layer encodes (0 for object).
  uint64_t tokens = 0;
  /// Bytes the layer holds.
  uint64_t byte_length = 0;

  static layer_shape of(const layer_state& l) noexcept {
    return {l.kind, l.bytes_per_token, l.window, l.tokens, l.byte_length()};
  }
};

struct model_geometry {
  std::string name;
  std::vector<layer_spec> layers;

  bool operator==(const model_geometry&) const = default;

  /// Checks stored layer `i` against layer `i` of this geometry: the kind;
  /// kv: bytes per token equal, window 0; ring: bytes per token and window
  /// equal; recurrent, object: bytes per token and window 0 and exactly
  /// `state_bytes` bytes; object: 0 tokens. `ec::invalid_argument` naming
  /// the layer and the field ("layer 3 (ring): window 16, the model's is
  /// 32"). A layer index past the geometry is refused too.
  caf::error check(size_t i, const layer_shape& l) const;

  /// Checks `e`'s layer count and every layer (attachments are defined by
  /// the producing method, not by the model, and are not checked).
  caf::error check(const entry& e) const;

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

  /// An engine's own layer description, named `custom`:
  ///   layers := group (',' group)*     group := [count '*'] item
  ///   item   := '(' layers ')' | 'kv:' BPT | 'ring:' BPT ':' WINDOW
  ///           | 'recurrent:' BYTES | 'object:' BYTES
  /// e.g. "8*(5*ring:8192:1024,kv:8192)" or "32*kv:4096". Every number is
  /// a positive decimal; at most `max_layers` layers. Errors are
  /// `ec::invalid_config` naming the character position and what was
  /// expected there.
  static caf::expected<model_geometry> parse_layers(std::string_view text);

  /// The layers in `parse_layers`' syntax, runs and a repeated period
  /// folded ("32*kv:4096"); parses back to the same layers.
  std::string layers_text() const;

  /// Most layers a description may give.
  static constexpr size_t max_layers = 65536;
};

} // namespace kvtier::tiers
