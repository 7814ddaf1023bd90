// Compiled as a runtime/http/ source (tests/layering/check.cmake): the
// embedded API is the floor above (it owns the endpoint), outside the
// http view, so this must not compile.
#include "runtime/service.hpp"

namespace kvtier::http {

void layering_probe_up() {}

} // namespace kvtier::http
