// The shared parts of kvtier._core (common.hpp): Python's liveness for
// kvtier's threads, errors as kvtier.Error subclasses, tokens.
#include "runtime/python/core/common.hpp"

#include <atomic>
#include <limits>

namespace kvtier::python {

namespace {

std::atomic<bool> exiting{false};

thread_local bool in_callback = false;

} // namespace

bool python_alive() noexcept {
  return !exiting.load(std::memory_order_acquire) && Py_IsInitialized()
         && !_Py_IsFinalizing();
}

void mark_python_exiting() noexcept {
  exiting.store(true, std::memory_order_release);
}

bool in_kvtier_callback() noexcept {
  return in_callback;
}

callback_scope::callback_scope() noexcept
  : outer(std::exchange(in_callback, true)) {}

callback_scope::~callback_scope() {
  in_callback = outer;
}

shared_pyref::shared_pyref(py::handle obj) {
  obj.inc_ref();
  ref_ = std::shared_ptr<PyObject>(
    obj.ptr(), [](PyObject* p) { with_python([p] { Py_DECREF(p); }); });
}

py::object error_object(const caf::error& err) {
  std::string code = "unknown";
  auto text = reason(err);
  if (err.category() == caf::atom("kvtier")) {
    code = to_string(static_cast<ec>(err.code()));
    // reason() is "<code>: <context>": the message is the context.
    if (text.rfind(code, 0) == 0) {
      text.erase(0, code.size());
      if (text.rfind(": ", 0) == 0)
        text.erase(0, 2);
    }
  }
  auto errors = py::module_::import("kvtier.errors");
  return errors.attr("from_ec")(code, text);
}

void raise(const caf::error& err) {
  auto e = error_object(err);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(e.ptr())), e.ptr());
  throw py::error_already_set();
}

std::string normalized_format(const char* f) {
  std::string s{f ? f : "B"};
  if (!s.empty() && (s[0] == '>' || s[0] == '!'))
    return {};
  while (!s.empty() && (s[0] == '@' || s[0] == '=' || s[0] == '<'))
    s.erase(0, 1);
  static_assert(sizeof(long) == 8, "l and L are 8-byte here");
  if (s == "l" || s == "n")
    return "q";
  if (s == "L" || s == "N")
    return "Q";
  return s;
}

std::string format_name(const std::string& f) {
  static const std::pair<const char*, const char*> names[] = {
    {"?", "bool"},       {"b", "int8"},       {"B", "uint8"},
    {"h", "int16"},      {"H", "uint16"},     {"i", "int32"},
    {"I", "uint32"},     {"q", "int64"},      {"Q", "uint64"},
    {"e", "float16"},    {"f", "float32"},    {"d", "float64"},
    {"Zf", "complex64"}, {"Zd", "complex128"}};
  for (auto& [fmt, name] : names)
    if (f == fmt)
      return name;
  return "format '" + f + "'";
}

namespace {

[[noreturn]] void bad_token(const char* what, size_t i, const std::string& v) {
  throw py::value_error(std::string{what} + "[" + std::to_string(i) + "]: " + v
                        + " is not a token (0 .. 4294967295)");
}

template <class T>
void read_ints(const Py_buffer& b, const char* what, tiers::token_seq& out) {
  auto n = static_cast<size_t>(b.shape[0]);
  auto stride = b.strides ? b.strides[0] : static_cast<py::ssize_t>(sizeof(T));
  out.reserve(n);
  auto* at = static_cast<const char*>(b.buf);
  for (size_t i = 0; i < n; ++i, at += stride) {
    T v;
    std::memcpy(&v, at, sizeof(T));
    if constexpr (std::is_signed_v<T>) {
      if (v < 0)
        bad_token(what, i, std::to_string(v));
    }
    if (static_cast<uint64_t>(v) > std::numeric_limits<uint32_t>::max())
      bad_token(what, i, std::to_string(v));
    out.push_back(static_cast<uint32_t>(v));
  }
}

bool tokens_from_buffer(py::handle obj, const char* what,
                        tiers::token_seq& out) {
  if (!PyObject_CheckBuffer(obj.ptr()))
    return false;
  Py_buffer b{};
  if (PyObject_GetBuffer(obj.ptr(), &b, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> guard{&b, PyBuffer_Release};
  if (b.ndim != 1)
    throw py::value_error(std::string{what} + ": a " + std::to_string(b.ndim)
                          + "-dimensional array; tokens are one row");
  auto f = normalized_format(b.format);
  if (f == "b")
    read_ints<int8_t>(b, what, out);
  else if (f == "B")
    read_ints<uint8_t>(b, what, out);
  else if (f == "h")
    read_ints<int16_t>(b, what, out);
  else if (f == "H")
    read_ints<uint16_t>(b, what, out);
  else if (f == "i")
    read_ints<int32_t>(b, what, out);
  else if (f == "I")
    read_ints<uint32_t>(b, what, out);
  else if (f == "q")
    read_ints<int64_t>(b, what, out);
  else if (f == "Q")
    read_ints<uint64_t>(b, what, out);
  else
    throw py::type_error(std::string{what} + ": an array of " + format_name(f)
                         + "; tokens are integers 0 .. 4294967295");
  return true;
}

} // namespace

tiers::token_seq to_tokens(py::handle obj, const char* what) {
  tiers::token_seq out;
  auto modules = py::module_::import("sys").attr("modules");
  if (modules.contains("torch")
      && py::isinstance(obj, modules["torch"].attr("Tensor"))) {
    auto arr = obj.attr("detach")().attr("cpu")().attr("numpy")();
    tokens_from_buffer(arr, what, out);
    return out;
  }
  if (py::isinstance<py::str>(obj))
    throw py::type_error(std::string{what} + ": a string; tokens are integers");
  if (tokens_from_buffer(obj, what, out))
    return out;
  PyObject* seq = PySequence_Fast(obj.ptr(), "");
  if (seq == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string{what} + ": a "
                         + Py_TYPE(obj.ptr())->tp_name
                         + "; tokens are a list of ints, a numpy integer "
                           "array or a torch integer tensor");
  }
  auto guard = py::reinterpret_steal<py::object>(seq);
  auto n = static_cast<size_t>(PySequence_Fast_GET_SIZE(seq));
  auto** items = PySequence_Fast_ITEMS(seq);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    PyObject* item = items[i];
    py::object index;
    if (!PyLong_Check(item)) {
      PyObject* x = PyNumber_Index(item);
      if (x == nullptr) {
        PyErr_Clear();
        throw py::type_error(std::string{what} + "[" + std::to_string(i)
                             + "]: a " + Py_TYPE(item)->tp_name
                             + ", not an integer token");
      }
      index = py::reinterpret_steal<py::object>(x);
      item = x;
    }
    int overflow = 0;
    auto v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow != 0 || v < 0
        || v > static_cast<long long>(std::numeric_limits<uint32_t>::max()))
      bad_token(what, i, py::str(item).cast<std::string>());
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

py::array tokens_view(const tiers::token_seq& tokens, py::handle owner) {
  py::array_t<uint32_t> out({static_cast<py::ssize_t>(tokens.size())},
                            {static_cast<py::ssize_t>(sizeof(uint32_t))},
                            tokens.data(), owner);
  py::detail::array_proxy(out.ptr())->flags &=
    ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

py::array tokens_array(tiers::token_seq tokens) {
  auto* held = new tiers::token_seq(std::move(tokens));
  py::capsule owner(held,
                    [](void* p) { delete static_cast<tiers::token_seq*>(p); });
  return tokens_view(*held, owner);
}

} // namespace kvtier::python
