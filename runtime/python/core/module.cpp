// kvtier._core: the extension module of the Python package `kvtier`
// (runtime/python/kvtier/ wraps it; docs/python.md).
#include "runtime/python/core/common.hpp"
#include "runtime/python/core/service.hpp"

#include "messages/buffer.hpp"

PYBIND11_MODULE(_core, m) {
  using namespace kvtier::python;
  m.doc() = "kvtier's embedded C++ API for Python (use the kvtier package)";
  register_values(m);
  register_buffers(m);
  register_events(m);
  register_service(m);
  m.def(
    "live_buffers",
    [] {
      return py::make_tuple(kvtier::buffer::live_count(),
                            kvtier::buffer::live_bytes());
    },
    "(count, bytes) of kvtier buffers alive in this process.");
  m.attr("version") = KVTIER_VERSION;
  // Services never closed are closed (and their actors stopped) before
  // the interpreter goes, and kvtier's threads leave Python alone after.
  py::module_::import("atexit").attr("register")(
    py::cpp_function([] { shutdown_all_services(); }));
}
