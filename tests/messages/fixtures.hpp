// Helpers shared by the message tests: patterned buffers, content hashes,
// and small entries of every layer kind. Test code only.
#pragma once

#include "messages/buffer.hpp"
#include "tiers/state.hpp"

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvtier::test {

/// The kvtier code of `err` (`ec::none` for no error or another category).
inline ec code_of(const caf::error& err) {
  if (!err || err.category() != caf::atom("kvtier"))
    return ec::none;
  return static_cast<ec>(err.code());
}

/// A buffer of `size` bytes whose content depends on `seed` and position.
inline buffer_ref pattern(uint64_t size, uint64_t seed) {
  buffer_builder b(size);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < size; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(b.data() + i, &x, std::min<uint64_t>(8, size - i));
  }
  return std::move(b).freeze();
}

/// XXH3-64 of the concatenation of `segments`.
inline uint64_t content_hash(const std::vector<view>& segments) {
  auto* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (auto& s : segments)
    if (s.length > 0)
      XXH3_64bits_update(st, s.bytes().data(), s.length);
  auto h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

/// An entry over `tokens` tokens with one layer of `kind` (two segments for
/// token-major kinds, so segment lists survive too) and an attachment.
inline tiers::entry sample_entry(tiers::layer_kind kind, uint32_t tokens,
                                 uint64_t seed) {
  using tiers::layer_state;
  tiers::entry e;
  e.ns = "model-a/adapter-" + std::to_string(seed);
  for (uint32_t i = 0; i < tokens; ++i)
    e.tokens.push_back(1000 + i * 7 + static_cast<uint32_t>(seed));
  const uint32_t bpt = 64, window = 8;
  auto rows = [&](uint64_t n) {
    auto b = pattern(n * bpt, seed);
    auto half = (n / 2) * bpt;
    return std::vector<view>{view{b, 0, half}, view{b, half, n * bpt - half}};
  };
  switch (kind) {
    case tiers::layer_kind::kv:
      e.layers.push_back(layer_state::kv(bpt, tokens, rows(tokens), 1));
      break;
    case tiers::layer_kind::ring:
      e.layers.push_back(layer_state::ring(
        bpt, window, tokens, rows(std::min<uint64_t>(tokens, window))));
      break;
    case tiers::layer_kind::recurrent:
      e.layers.push_back(
        layer_state::recurrent(tokens, {view::of(pattern(4096, seed))}));
      break;
    case tiers::layer_kind::object:
      e.layers.push_back(layer_state::object({view::of(pattern(300, seed))}));
      break;
  }
  e.attachments.push_back({"vision-encoder", {view::of(pattern(96, seed))}});
  e.session = "conversation-" + std::to_string(seed);
  return e;
}

} // namespace kvtier::test
