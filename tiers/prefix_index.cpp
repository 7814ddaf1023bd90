#include "tiers/prefix_index.hpp"

#include <algorithm>

namespace kvtier::tiers {

uint64_t trim_floor(const entry& e) noexcept {
  return trim_floor(e.size(), e.layers);
}

uint64_t trim_floor(uint64_t length,
                    std::span<const layer_state> layers) noexcept {
  uint64_t f = 0;
  for (auto& l : layers) {
    bool trims =
      l.kind == layer_kind::kv || (l.kind == layer_kind::ring && !l.wrapped());
    if (!trims || l.tokens != length)
      return length;
    f = std::max(f, l.min_offset);
  }
  return std::min(f, length);
}

} // namespace kvtier::tiers
