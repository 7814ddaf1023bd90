// Compiled as a tiers/ source (tests/layering/check.cmake): an actors/
// header is a layer above, outside the tiers view, so this must not
// compile.
#include "actors/interfaces.hpp"

namespace kvtier::tiers {

void layering_probe_up() {}

} // namespace kvtier::tiers
