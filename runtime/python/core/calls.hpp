// The two ways kvtier._core calls the service (service.hpp's rules): a
// blocking call inside the gate with the GIL released, and the callback
// form, whose completion converts the answer under the GIL on an actor
// thread. Internal to the module's sources.
#pragma once

#include "runtime/python/core/service.hpp"
#include "runtime/python/core/values.hpp"

#include <stdexcept>

namespace kvtier::python {

inline caf::error shut_down_error() {
  return make_error(ec::closed, "the service was shut down (its Python "
                                "object went, or the interpreter is exiting)");
}

/// The gate left when it goes.
struct gate_exit {
  std::shared_ptr<call_gate> gate;
  ~gate_exit() {
    if (gate)
      gate->leave();
  }
};

inline void refuse_in_callback() {
  if (in_kvtier_callback())
    throw std::runtime_error(
      "kvtier: a blocking call from a kvtier callback (an actor thread) "
      "would stall the service: use subscribe_events' iterator or the "
      "*_async calls");
}

/// `f(service)` inside the gate with the GIL released: f answers a
/// caf::expected, raised after the GIL is back when it is an error.
template <class F>
auto blocking(py_service& s, F f) {
  using answer = decltype(f(std::declval<runtime::service&>()));
  refuse_in_callback();
  auto out = [&]() -> answer {
    py::gil_scoped_release nogil;
    auto gate = s.registry->gate;
    if (!gate->enter())
      return answer{shut_down_error()};
    gate_exit leave{gate};
    return f(*s.svc());
  }();
  return take(std::move(out));
}

/// The callback handed to the service's callback form of a call, entered
/// in the gate by `start_then`: converts the answer with `conv` under the
/// GIL and calls `done(True, value)` or `done(False, error)`.
template <class T, class Conv>
runtime::callback<T> then_callback(std::shared_ptr<call_gate> gate,
                                   py::handle done, Conv conv) {
  return [gate, ref = shared_pyref{done}, conv](caf::expected<T> x) {
    gate_exit leave{gate};
    auto answer = std::move(x); // dropped before the gate is left
    if (!python_alive())
      return;
    py::gil_scoped_acquire gil;
    callback_scope scope;
    try {
      if (answer)
        ref.get()(true, conv(std::move(*answer)));
      else
        ref.get()(false, error_object(answer.error()));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("kvtier: completing an async call");
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      PyErr_WriteUnraisable(nullptr);
    }
  };
}

/// Starts the callback form `start(service, callback)` (with the GIL held:
/// it returns at once) or settles `done` as closed after a shutdown.
template <class T, class Start, class Conv>
void start_then(py_service& s, py::handle done, Start start, Conv conv) {
  auto gate = s.registry->gate;
  if (!gate->enter()) {
    done(false, error_object(shut_down_error()));
    return;
  }
  start(*s.svc(), then_callback<T>(gate, done, conv));
}

template <class T>
py::object as_py(T&& x) {
  return py::cast(std::forward<T>(x));
}

/// A Python Lease for `l`, registered with the service (handles.cpp).
py::object lease_object(std::shared_ptr<service_registry> reg,
                        runtime::prefetch_lease&& l);

/// admit_queued's and relieve_pressure's blocking forms (handles.cpp).
py::object admit_queued_blocking(py_service& s, const request& q,
                                 py::handle timeout);
py::object relieve_blocking(py_service& s, py::object check);

/// kvtier._core.Lease and kvtier._core.ObjectCache (handles.cpp).
void register_lease(py::module_& m);
void register_objects(py::module_& m);

} // namespace kvtier::python
