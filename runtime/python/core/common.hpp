// What the sources of the Python extension module `kvtier._core` share:
// the GIL rules, the layer descriptions Python gives, errors, tokens.
//
// Threads: kvtier calls back on its actor threads (buffer releases, event
// callbacks, the callback forms of the async calls). Such code takes the
// GIL first, and only while Python is alive (`python_alive`): once the
// interpreter began to exit it leaves Python objects alone (a reference is
// leaked rather than dropped into a dying interpreter). Code that holds the
// GIL never waits on an actor: every call into the service releases it.
#pragma once

#include "runtime/service.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::python {

namespace py = pybind11;

/// Whether a kvtier thread may still take the GIL and touch Python
/// objects: false once the interpreter began to exit (atexit) or is gone.
bool python_alive() noexcept;

/// Called from the module's atexit hook.
void mark_python_exiting() noexcept;

/// Whether the current thread is running a Python callback for kvtier (an
/// actor thread): blocking calls refuse there.
bool in_kvtier_callback() noexcept;

/// Marks the current thread as running a kvtier callback while alive.
struct callback_scope {
  callback_scope() noexcept;
  ~callback_scope();
  bool outer;
};

/// Runs `f` under the GIL from any thread, or not at all once Python is
/// exiting (a leaked reference beats a crash at exit). On a thread that did
/// not hold the GIL (one of kvtier's) what `f` runs counts as a callback.
template <class F>
void with_python(F&& f) {
  if (!python_alive())
    return;
  bool foreign = !PyGILState_Check();
  py::gil_scoped_acquire gil;
  std::optional<callback_scope> scope;
  if (foreign)
    scope.emplace();
  f();
}

/// A Python reference any thread may drop: it takes the GIL to let go (or
/// leaks the reference when Python is exiting). Copies share one reference.
class shared_pyref {
public:
  shared_pyref() = default;
  /// Takes a new reference to `obj` (the GIL must be held).
  explicit shared_pyref(py::handle obj);

  /// The object (the GIL must be held to use it).
  py::handle get() const noexcept {
    return ref_ ? py::handle{ref_.get()} : py::handle{};
  }

  explicit operator bool() const noexcept {
    return static_cast<bool>(ref_);
  }

private:
  std::shared_ptr<PyObject> ref_;
};

/// One model layer as the Python side describes it (kvtier.Layer).
struct layer_desc {
  tiers::layer_kind kind = tiers::layer_kind::kv;
  /// kv, ring: bytes of one token row; recurrent, object: of the state.
  uint64_t row_bytes = 0;
  uint32_t window = 0;
  /// The dtype's name ("float32", "bfloat16").
  std::string dtype;
  /// The buffer format segments are lent with ("f", "H").
  std::string format;
  size_t itemsize = 1;
  /// One token row (kv, ring) or the whole state (recurrent, object).
  std::vector<py::ssize_t> shape;

  bool per_token() const noexcept {
    return kind == tiers::layer_kind::kv || kind == tiers::layer_kind::ring;
  }
};

/// Every layer of the running model, shared by all that lend its views.
using model_desc = std::shared_ptr<const std::vector<layer_desc>>;

/// The exception object (a kvtier.Error subclass) for `err`.
py::object error_object(const caf::error& err);

/// Raises `err` as its kvtier.Error subclass.
[[noreturn]] void raise(const caf::error& err);

/// The value of `x`, or raises its error.
template <class T>
T take(caf::expected<T>&& x) {
  if (!x)
    raise(x.error());
  return std::move(*x);
}

/// Tokens from a list of ints, a numpy integer array or a torch integer
/// tensor: ValueError/TypeError naming `what` and the bad value otherwise.
tiers::token_seq to_tokens(py::handle obj, const char* what);

/// A read-only numpy uint32 view of `tokens`, kept alive by `owner`.
py::array tokens_view(const tiers::token_seq& tokens, py::handle owner);

/// A new numpy uint32 array owning a moved-in copy of `tokens`.
py::array tokens_array(tiers::token_seq tokens);

/// Buffer format `f` without byte-order prefixes, with `l`/`L` as the
/// 8-byte `q`/`Q` they are here; empty for a non-native byte order.
std::string normalized_format(const char* f);

/// The dtype name numpy gives a normalized buffer format ("float32"), for
/// messages.
std::string format_name(const std::string& f);

/// Registration of each part of the module (each in its own source).
void register_values(py::module_& m);
void register_buffers(py::module_& m);
void register_service(py::module_& m);
void register_events(py::module_& m);

} // namespace kvtier::python
