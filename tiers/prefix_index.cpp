#include "tiers/prefix_index.hpp"

#include <algorithm>

namespace kvtier::tiers {

uint64_t trim_floor(const entry& e) noexcept {
  uint64_t f = 0;
  for (auto& l : e.layers) {
    bool trims =
      l.kind == layer_kind::kv || (l.kind == layer_kind::ring && !l.wrapped());
    if (!trims || l.tokens != e.size())
      return e.size();
    f = std::max(f, l.min_offset);
  }
  return std::min<uint64_t>(f, e.size());
}

} // namespace kvtier::tiers
