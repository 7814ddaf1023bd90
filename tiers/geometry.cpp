#include "tiers/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace kvtier::tiers {

uint64_t layer_spec::bytes_at(uint64_t tokens) const noexcept {
  switch (kind) {
    case layer_kind::kv: return tokens * bytes_per_token;
    case layer_kind::ring:
      return std::min<uint64_t>(tokens, window) * bytes_per_token;
    case layer_kind::recurrent:
    case layer_kind::object: return state_bytes;
  }
  return 0;
}

uint64_t model_geometry::bytes_at(uint64_t tokens) const noexcept {
  uint64_t n = 0;
  for (auto& l : layers)
    n += l.bytes_at(tokens);
  return n;
}

uint64_t model_geometry::bytes_per_token() const noexcept {
  uint64_t n = 0;
  for (auto& l : layers)
    if (l.kind == layer_kind::kv || l.kind == layer_kind::ring)
      n += l.bytes_per_token;
  return n;
}

size_t model_geometry::count(layer_kind k) const noexcept {
  return static_cast<size_t>(
    std::count_if(layers.begin(), layers.end(),
                  [k](const layer_spec& l) { return l.kind == k; }));
}

namespace {

std::string field(size_t i, layer_kind k, const char* name, uint64_t have,
                  uint64_t want) {
  return "layer " + std::to_string(i) + " (" + to_string(k) + "): " + name + " "
         + std::to_string(have) + ", the model's is " + std::to_string(want);
}

} // namespace

caf::error model_geometry::check(size_t i, const layer_shape& l) const {
  if (i >= layers.size())
    return make_error(ec::invalid_argument,
                      "layer " + std::to_string(i) + ": the model has only "
                        + std::to_string(layers.size()) + " layers");
  auto& m = layers[i];
  auto bad = [&](const char* name, uint64_t have, uint64_t want) {
    return make_error(ec::invalid_argument, field(i, m.kind, name, have, want));
  };
  if (l.kind != m.kind)
    return make_error(ec::invalid_argument, "layer " + std::to_string(i)
                                              + ": kind " + to_string(l.kind)
                                              + ", the model's is "
                                              + to_string(m.kind));
  bool rows = m.kind == layer_kind::kv || m.kind == layer_kind::ring;
  uint32_t window = m.kind == layer_kind::ring ? m.window : 0;
  if (l.bytes_per_token != (rows ? m.bytes_per_token : 0))
    return bad("bytes per token", l.bytes_per_token,
               rows ? m.bytes_per_token : 0);
  if (l.window != window)
    return bad("window", l.window, window);
  if (!rows && l.byte_length != m.state_bytes)
    return bad("state bytes", l.byte_length, m.state_bytes);
  if (m.kind == layer_kind::object && l.tokens != 0)
    return bad("tokens", l.tokens, 0);
  return {};
}

caf::error model_geometry::check(const entry& e) const {
  if (e.layers.size() != layers.size())
    return make_error(ec::invalid_argument,
                      "the state has " + std::to_string(e.layers.size())
                        + " layers, the model (" + name + ") has "
                        + std::to_string(layers.size()));
  for (size_t i = 0; i < layers.size(); ++i)
    if (auto err = check(i, layer_shape::of(e.layers[i])))
      return err;
  return {};
}

namespace {

/// K and V rows of one attention layer: 2 × kv_heads × head_dim × dtype.
constexpr uint32_t attn_row(uint32_t kv_heads, uint32_t head_dim,
                            uint32_t dtype_bytes) {
  return 2 * kv_heads * head_dim * dtype_bytes;
}

// Llama 3.1 8B: 32 layers, 8 KV heads, head_dim 128, bf16 -> 4 KiB per layer
// per token, 128 KiB per token in all.
model_geometry llama_3_1_8b() {
  model_geometry g{"llama-3.1-8b", {}};
  g.layers.assign(32, layer_spec{layer_kind::kv, attn_row(8, 128, 2), 0, 0});
  return g;
}

// Llama 3.1 70B: 80 layers, 8 KV heads, head_dim 128, bf16 -> 320 KiB/token.
model_geometry llama_3_1_70b() {
  model_geometry g{"llama-3.1-70b", {}};
  g.layers.assign(80, layer_spec{layer_kind::kv, attn_row(8, 128, 2), 0, 0});
  return g;
}

// Gemma 3 12B: 48 layers, 8 KV heads, head_dim 256, bf16; five of every six
// layers are local attention over a 1024-token sliding window (a ring), the
// sixth global (kv).
model_geometry gemma_3_12b() {
  model_geometry g{"gemma-3-12b", {}};
  for (int i = 0; i < 48; ++i) {
    if (i % 6 == 5)
      g.layers.push_back({layer_kind::kv, attn_row(8, 256, 2), 0, 0});
    else
      g.layers.push_back({layer_kind::ring, attn_row(8, 256, 2), 1024, 0});
  }
  return g;
}

// Qwen3-Next 80B-A3B: 48 layers, three of every four Gated DeltaNet
// (recurrent: 32 value heads × 128 × 128 state in fp32 = 2 MiB, plus a
// 4-wide causal-conv state over 8192 channels in bf16 = 64 KiB), the fourth
// full attention with 2 KV heads of head_dim 256 in bf16.
model_geometry qwen3_next_80b() {
  model_geometry g{"qwen3-next-80b-a3b", {}};
  constexpr uint64_t ssm = 32ull * 128 * 128 * 4 + 4ull * 8192 * 2;
  for (int i = 0; i < 48; ++i) {
    if (i % 4 == 3)
      g.layers.push_back({layer_kind::kv, attn_row(2, 256, 2), 0, 0});
    else
      g.layers.push_back({layer_kind::recurrent, 0, 0, ssm});
  }
  return g;
}

// A tiny dense model for unit tests: 4 kv layers of 64 bytes per token.
model_geometry tiny_dense() {
  model_geometry g{"tiny-dense", {}};
  g.layers.assign(4, layer_spec{layer_kind::kv, 64, 0, 0});
  return g;
}

// A tiny sliding-window model: 2 rings of window 16, one kv layer.
model_geometry tiny_window() {
  model_geometry g{"tiny-window", {}};
  g.layers.push_back({layer_kind::ring, 32, 16, 0});
  g.layers.push_back({layer_kind::ring, 32, 16, 0});
  g.layers.push_back({layer_kind::kv, 32, 0, 0});
  return g;
}

// A tiny hybrid: three recurrent layers of 256 bytes, one kv layer.
model_geometry tiny_hybrid() {
  model_geometry g{"tiny-hybrid", {}};
  for (int i = 0; i < 4; ++i) {
    if (i % 4 == 3)
      g.layers.push_back({layer_kind::kv, 32, 0, 0});
    else
      g.layers.push_back({layer_kind::recurrent, 0, 0, 256});
  }
  return g;
}

const std::map<std::string, std::function<model_geometry()>>& presets() {
  static const std::map<std::string, std::function<model_geometry()>> m{
    {"llama-3.1-8b", llama_3_1_8b}, {"llama-3.1-70b", llama_3_1_70b},
    {"gemma-3-12b", gemma_3_12b},   {"qwen3-next-80b-a3b", qwen3_next_80b},
    {"tiny-dense", tiny_dense},     {"tiny-window", tiny_window},
    {"tiny-hybrid", tiny_hybrid},
  };
  return m;
}

template <class T>
T scaled(T bytes, double scale) {
  if (bytes == 0)
    return 0;
  auto v = static_cast<T>(std::llround(static_cast<double>(bytes) * scale));
  return std::max<T>(v, 1);
}

} // namespace

caf::expected<model_geometry> model_geometry::preset(const std::string& name,
                                                     double scale) {
  if (!(scale > 0.0 && scale <= 1.0))
    return make_error(ec::invalid_argument, "geometry scale "
                                              + std::to_string(scale)
                                              + " is outside (0, 1]");
  auto i = presets().find(name);
  if (i == presets().end()) {
    std::string names;
    for (auto& n : preset_names())
      names += (names.empty() ? "" : ", ") + n;
    return make_error(ec::invalid_argument, "unknown geometry preset '" + name
                                              + "' (known: " + names + ")");
  }
  auto g = i->second();
  for (auto& l : g.layers) {
    l.bytes_per_token = scaled(l.bytes_per_token, scale);
    l.state_bytes = scaled(l.state_bytes, scale);
  }
  return g;
}

std::vector<std::string> model_geometry::preset_names() {
  std::vector<std::string> out;
  for (auto& [k, v] : presets())
    out.push_back(k);
  return out;
}

} // namespace kvtier::tiers
