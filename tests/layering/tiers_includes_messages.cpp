// Compiled as a tiers/ source (tests/layering/check.cmake): the layer's own
// headers and those of the layer below are in its view.
#include "messages/error.hpp"
#include "tiers/state.hpp"

namespace kvtier::tiers {

/// Uses what it includes, so the probe is a real translation unit.
ec layering_probe_down() {
  return ec::invalid_argument;
}

} // namespace kvtier::tiers
