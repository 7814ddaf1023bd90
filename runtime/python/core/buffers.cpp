// Python buffers into kvtier views and kvtier views out as Segments
// (buffers.hpp): adoption, checks against the layer, and the lent side
// (Segment, LayerView, Acquired).
#include "runtime/python/core/buffers.hpp"

#include <cstring>
#include <numeric>

namespace kvtier::python {

namespace {

/// Whether a buffer of (normalized) format `f` may hold layer `l`.
bool accepts(const layer_desc& l, const std::string& f) {
  if (l.dtype == "bfloat16")
    return f == "H" || f == "h"; // 16-bit words: numpy has no bfloat16
  return f == normalized_format(l.format.c_str());
}

std::string shape_text(const py::ssize_t* shape, size_t n) {
  std::string out = "(";
  for (size_t i = 0; i < n; ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (n == 1 ? ",)" : ")");
}

std::string describe(const layer_desc& l) {
  return std::string{tiers::to_string(l.kind)} + " " + l.dtype
         + shape_text(l.shape.data(), l.shape.size());
}

/// Lets go of an adopted buffer export (common.hpp `with_python`).
void let_go(Py_buffer* pb) noexcept {
  with_python([pb] {
    PyBuffer_Release(pb);
    delete pb;
  });
}

/// The torch module when a tensor may exist (torch imported), else none.
py::object torch_module() {
  auto modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch"))
    return py::none();
  return modules["torch"];
}

/// `obj` as a numpy array sharing its memory when it is a torch tensor
/// (checked: on the CPU, contiguous, of `layer`'s dtype); else `obj`.
py::object untorch(py::handle obj, const layer_desc* layer,
                   const std::string& where) {
  auto torch = torch_module();
  if (torch.is_none() || !py::isinstance(obj, torch.attr("Tensor")))
    return py::reinterpret_borrow<py::object>(obj);
  auto device = py::str(obj.attr("device")).cast<std::string>();
  if (device != "cpu")
    throw py::value_error(where + ": a tensor on " + device
                          + ": kvtier holds CPU memory (move it with "
                            ".cpu() first)");
  if (!obj.attr("is_contiguous")().cast<bool>())
    throw py::value_error(where + ": not C-contiguous (strides "
                          + py::str(obj.attr("stride")()).cast<std::string>()
                          + "): make it contiguous first (a copy)");
  auto dtype = py::str(obj.attr("dtype")).cast<std::string>();
  if (dtype.rfind("torch.", 0) == 0)
    dtype.erase(0, 6);
  auto t = obj.attr("detach")();
  if (layer == nullptr) // raw bytes: any dtype, viewed as bytes
    return t.attr("reshape")(-1)
      .attr("view")(torch.attr("uint8"))
      .attr("numpy")();
  if (dtype != layer->dtype)
    throw py::value_error(where + ": dtype " + dtype + ", the layer's is "
                          + layer->dtype);
  if (dtype == "bfloat16")
    return t.attr("view")(torch.attr("int16")).attr("numpy")();
  return t.attr("numpy")();
}

/// ndarray.base as a borrowed handle (`arr` keeps it alive), or null.
py::handle array_base(py::handle arr) {
  auto base = arr.attr("base");
  return base.is_none() ? py::handle{} : py::handle{base.ptr()};
}

/// The lent segment whose bytes `[data, data + len)` lie in, when `obj` is
/// one or a numpy array or memoryview over one (followed through bases).
const segment* lent_origin(py::handle obj, const std::byte* data, size_t len) {
  py::handle h = obj;
  for (int depth = 0; depth < 16 && h && !h.is_none(); ++depth) {
    if (py::isinstance<segment>(h)) {
      auto& s = h.cast<const segment&>();
      auto* begin = s.data();
      if (begin && data >= begin && data + len <= begin + s.bytes.length)
        return &s;
      return nullptr;
    }
    if (py::isinstance<py::array>(h))
      h = array_base(h);
    else if (PyMemoryView_Check(h.ptr()))
      h = PyMemoryView_GET_BUFFER(h.ptr())->obj;
    else
      return nullptr;
  }
  return nullptr;
}

struct piece {
  view v;
  uint64_t rows = 0;
};

/// Rows a piece of `layer` holds, checking its shape ("rows" of a
/// recurrent/object layer are its bytes).
uint64_t checked_rows(const layer_desc& l, const py::ssize_t* shape,
                      size_t ndim, uint64_t len, const std::string& where) {
  auto want = l.shape.size() + (l.per_token() ? 1 : 0);
  bool ok = ndim == want;
  for (size_t i = 0; ok && i < l.shape.size(); ++i)
    ok = shape[i + (l.per_token() ? 1 : 0)] == l.shape[i];
  if (!ok) {
    auto rows = l.per_token() ? "(rows, " : "(";
    auto row = shape_text(l.shape.data(), l.shape.size());
    throw py::value_error(where + ": shape " + shape_text(shape, ndim)
                          + ", the layer takes " + rows + row.substr(1));
  }
  return l.per_token() ? static_cast<uint64_t>(shape[0]) : len;
}

/// One piece of layer `layer` (raw bytes when null), adopted or reused.
piece take_piece(py::handle given, const layer_desc* layer,
                 const std::string& where) {
  if (py::isinstance<segment>(given)) {
    auto& s = given.cast<const segment&>();
    if (layer) {
      auto f = normalized_format(s.format.c_str());
      if (!accepts(*layer, f) || (s.layer && s.layer->shape != layer->shape))
        throw py::value_error(where + ": a Segment of "
                              + (s.layer ? describe(*s.layer) : "raw bytes")
                              + ", the layer is " + describe(*layer));
      if (layer->per_token() && s.bytes.length % layer->row_bytes != 0)
        throw py::value_error(
          where + ": a Segment of " + std::to_string(s.bytes.length)
          + " bytes, not whole rows of " + std::to_string(layer->row_bytes));
      return {s.bytes, layer->per_token() ? s.bytes.length / layer->row_bytes
                                          : s.bytes.length};
    }
    return {s.bytes, 0};
  }
  auto obj = untorch(given, layer, where);
  auto* pb = new Py_buffer{};
  if (PyObject_GetBuffer(obj.ptr(), pb, PyBUF_RECORDS_RO) != 0) {
    delete pb;
    PyErr_Clear();
    throw py::type_error(where + ": a "
                         + std::string{Py_TYPE(obj.ptr())->tp_name}
                         + " is not a buffer (a numpy array, a torch CPU "
                           "tensor, bytes or a kvtier.Segment)");
  }
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> guard{pb, [](Py_buffer* p) {
                                                           PyBuffer_Release(p);
                                                           delete p;
                                                         }};
  if (!PyBuffer_IsContiguous(pb, 'C'))
    throw py::value_error(where + ": not C-contiguous (strides "
                          + shape_text(pb->strides, pb->ndim)
                          + "): make it contiguous first (a copy)");
  auto len = static_cast<uint64_t>(pb->len);
  uint64_t rows = 0;
  if (layer) {
    auto f = normalized_format(pb->format ? pb->format : "B");
    if (!accepts(*layer, f))
      throw py::value_error(where + ": dtype " + format_name(f)
                            + ", the layer's is " + layer->dtype);
    if (pb->ndim == 0)
      throw py::value_error(where + ": a scalar, not an array");
    rows = checked_rows(*layer, pb->shape, pb->ndim, len, where);
  }
  if (len == 0)
    return {};
  auto* data = static_cast<const std::byte*>(pb->buf);
  if (auto* s = lent_origin(obj, data, len))
    return {s->bytes.sub(static_cast<uint64_t>(data - s->data()), len), rows};
  guard.release();
  auto buf = buffer::adopt(data, len, [pb] { let_go(pb); });
  return {view::of(std::move(buf)), rows};
}

/// The pieces of one layer or attachment: a list/tuple of them or one.
std::vector<piece> take_pieces(py::handle item, const layer_desc* layer,
                               const std::string& where) {
  std::vector<piece> out;
  if (py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item)) {
    auto seq = py::reinterpret_borrow<py::sequence>(item);
    for (size_t j = 0; j < seq.size(); ++j) {
      auto p =
        take_piece(seq[j], layer, where + ", buffer " + std::to_string(j));
      if (p.v.length > 0)
        out.push_back(std::move(p));
    }
  } else {
    auto p = take_piece(item, layer, where);
    if (p.v.length > 0)
      out.push_back(std::move(p));
  }
  return out;
}

tiers::layer_state layer_of(const layer_desc& l, std::vector<piece> pieces,
                            uint64_t tokens, const std::string& where) {
  uint64_t rows = 0, bytes = 0;
  std::vector<view> segs;
  for (auto& p : pieces) {
    rows += p.rows;
    bytes += p.v.length;
    segs.push_back(std::move(p.v));
  }
  using tiers::layer_state;
  switch (l.kind) {
    case tiers::layer_kind::kv:
    case tiers::layer_kind::ring: {
      auto want = l.kind == tiers::layer_kind::kv
                    ? tokens
                    : std::min<uint64_t>(tokens, l.window);
      if (rows != want)
        throw py::value_error(where + ": " + std::to_string(rows)
                              + " rows, the layer takes " + std::to_string(want)
                              + " for " + std::to_string(tokens) + " tokens"
                              + (l.kind == tiers::layer_kind::ring
                                   ? " (a ring holds min(tokens, window) rows)"
                                   : ""));
      auto bpt = static_cast<uint32_t>(l.row_bytes);
      return l.kind == tiers::layer_kind::kv
               ? layer_state::kv(bpt, tokens, std::move(segs))
               : layer_state::ring(bpt, l.window, tokens, std::move(segs));
    }
    case tiers::layer_kind::recurrent:
    case tiers::layer_kind::object:
      if (bytes != l.row_bytes)
        throw py::value_error(where + ": " + std::to_string(bytes)
                              + " bytes, the layer's state is "
                              + std::to_string(l.row_bytes));
      return l.kind == tiers::layer_kind::recurrent
               ? layer_state::recurrent(tokens, std::move(segs))
               : layer_state::object(std::move(segs));
  }
  return {};
}

} // namespace

tiers::entry to_entry(const model_desc& model, tiers::token_seq tokens,
                      py::handle layers, const std::string& ns) {
  if (!py::isinstance<py::list>(layers) && !py::isinstance<py::tuple>(layers))
    throw py::type_error("layers: a list with one item per model layer, not "
                         "a "
                         + std::string{Py_TYPE(layers.ptr())->tp_name});
  auto seq = py::reinterpret_borrow<py::sequence>(layers);
  if (seq.size() != model->size())
    throw py::value_error("layers: " + std::to_string(seq.size())
                          + " given, the model has "
                          + std::to_string(model->size()));
  tiers::entry e;
  e.ns = ns;
  auto n = tokens.size();
  e.tokens = std::move(tokens);
  for (size_t i = 0; i < model->size(); ++i) {
    auto& l = (*model)[i];
    auto where = "layer " + std::to_string(i) + " (" + describe(l) + ")";
    e.layers.push_back(layer_of(l, take_pieces(seq[i], &l, where), n, where));
  }
  return e;
}

std::vector<tiers::attachment> to_attachments(py::handle tensors,
                                              const char* what) {
  std::vector<tiers::attachment> out;
  if (tensors.is_none())
    return out;
  if (!py::isinstance<py::dict>(tensors))
    throw py::type_error(std::string{what} + ": a dict name -> buffer, not a "
                         + Py_TYPE(tensors.ptr())->tp_name);
  for (auto [k, v] : py::reinterpret_borrow<py::dict>(tensors)) {
    if (!py::isinstance<py::str>(k))
      throw py::type_error(std::string{what} + ": names are strings");
    tiers::attachment a;
    a.name = k.cast<std::string>();
    for (auto& p :
         take_pieces(v, nullptr, std::string{what} + " '" + a.name + "'"))
      a.segments.push_back(std::move(p.v));
    out.push_back(std::move(a));
  }
  return out;
}

// --- the lent side -----------------------------------------------------------

segment::segment(view v, std::shared_ptr<const layer_desc> l)
  : bytes(std::move(v))
  , layer(std::move(l)) {
  auto len = static_cast<py::ssize_t>(bytes.length);
  if (layer) {
    auto row = static_cast<py::ssize_t>(layer->row_bytes);
    auto item = static_cast<py::ssize_t>(layer->itemsize);
    format = layer->format;
    itemsize = layer->itemsize;
    if (layer->per_token() && len % row == 0) {
      shape.push_back(len / row);
      shape.insert(shape.end(), layer->shape.begin(), layer->shape.end());
      return;
    }
    if (!layer->per_token() && len == row) {
      shape = layer->shape;
      return;
    }
    if (len % item == 0) {
      shape = {len / item};
      return;
    }
  }
  format = "B";
  itemsize = 1;
  shape = {len};
}

namespace {

/// A lent layer (kvtier.LayerView).
struct layer_view {
  tiers::layer_state state;
  std::shared_ptr<const layer_desc> layer;
};

/// What `acquire` answered (kvtier.Acquired); its layers and attachments
/// become Python objects when first asked for.
struct acquired {
  runtime::acquired_state st;
  model_desc model;
  py::object layers;
  py::object attachments;
};

std::vector<py::ssize_t> c_strides(const std::vector<py::ssize_t>& shape,
                                   size_t itemsize) {
  std::vector<py::ssize_t> out(shape.size());
  auto step = static_cast<py::ssize_t>(itemsize);
  for (size_t i = shape.size(); i-- > 0;) {
    out[i] = step;
    step *= shape[i];
  }
  return out;
}

py::list segment_list(const std::vector<view>& segs,
                      const std::shared_ptr<const layer_desc>& l) {
  py::list out;
  for (auto& v : segs)
    out.append(py::cast(segment{v, l}));
  return out;
}

/// The layer's bytes as one numpy array of shape (rows, *shape) (or the
/// state's shape): the lent segment itself when there is one, else a copy.
py::object layer_array(const layer_view& lv) {
  auto np = py::module_::import("numpy");
  auto& segs = lv.state.segments;
  if (segs.size() == 1) {
    auto seg = py::cast(segment{segs[0], lv.layer});
    return np.attr("asarray")(seg);
  }
  auto& l = *lv.layer;
  auto total = total_length(segs);
  std::vector<py::ssize_t> shape;
  if (l.per_token())
    shape.push_back(static_cast<py::ssize_t>(total / l.row_bytes));
  shape.insert(shape.end(), l.shape.begin(), l.shape.end());
  py::array out{py::dtype{l.format}, shape, c_strides(shape, l.itemsize)};
  auto* at = static_cast<std::byte*>(out.mutable_data());
  for (auto& v : segs) {
    std::memcpy(at, v.bytes().data(), v.length);
    at += v.length;
  }
  return out;
}

/// `arr` as a torch tensor sharing its memory, of `dtype`.
py::object as_tensor(py::object arr, const std::string& dtype) {
  auto torch = py::module_::import("torch");
  auto t = torch.attr("from_numpy")(arr);
  if (dtype == "bfloat16")
    t = t.attr("view")(torch.attr("bfloat16"));
  return t;
}

/// Layer `i` of the model, or raw bytes of `l`'s geometry when the model
/// has no such layer (never for a state the service checked).
std::shared_ptr<const layer_desc> layer_at(const model_desc& m, size_t i,
                                           const tiers::layer_state& l) {
  if (m && i < m->size())
    return {m, &(*m)[i]};
  auto raw = std::make_shared<layer_desc>();
  raw->kind = l.kind;
  raw->row_bytes = l.bytes_per_token ? l.bytes_per_token : l.byte_length();
  raw->window = l.window;
  raw->dtype = "uint8";
  raw->format = "B";
  raw->shape = {
    static_cast<py::ssize_t>(std::max<uint64_t>(raw->row_bytes, 1))};
  return raw;
}

} // namespace

py::dict attachments_dict(const std::vector<tiers::attachment>& a) {
  py::dict out;
  for (auto& x : a)
    out[py::str(x.name)] = segment_list(x.segments, nullptr);
  return out;
}

py::object make_acquired(runtime::acquired_state st, model_desc model) {
  return py::cast(acquired{std::move(st), std::move(model), {}, {}});
}

void register_buffers(py::module_& m) {
  py::class_<segment>(m, "Segment", py::buffer_protocol(), R"(
One lent view of bytes the service holds (read-only buffer protocol, the
layer's dtype and shape). numpy and torch view it without a copy; it keeps
the bytes alive as long as anything views it.)")
    .def_buffer([](const segment& s) {
      return py::buffer_info(const_cast<std::byte*>(s.data()),
                             static_cast<py::ssize_t>(s.itemsize), s.format,
                             static_cast<py::ssize_t>(s.shape.size()), s.shape,
                             c_strides(s.shape, s.itemsize), true);
    })
    .def_property_readonly("nbytes",
                           [](const segment& s) { return s.bytes.length; })
    .def_property_readonly(
      "shape", [](const segment& s) { return py::tuple(py::cast(s.shape)); })
    .def_property_readonly("dtype",
                           [](const segment& s) {
                             return s.layer && s.format == s.layer->format
                                      ? s.layer->dtype
                                      : format_name(s.format);
                           })
    .def_property_readonly("format", [](const segment& s) { return s.format; })
    .def_property_readonly(
      "data_ptr",
      [](const segment& s) { return reinterpret_cast<uintptr_t>(s.data()); },
      "Address of the first byte (compare with numpy's or torch's).")
    .def_property_readonly(
      "buffer_id", [](const segment& s) { return s.bytes.buf->id(); },
      "kvtier's id of the buffer the bytes belong to (shared buffers share "
      "it).")
    .def("__len__", [](const segment& s) { return s.shape[0]; })
    .def(
      "array",
      [](py::object self) {
        return py::module_::import("numpy").attr("asarray")(self);
      },
      "A read-only numpy view (no copy).")
    .def(
      "tensor",
      [](py::object self) {
        auto& s = self.cast<const segment&>();
        return as_tensor(py::module_::import("numpy").attr("asarray")(self),
                         s.layer ? s.layer->dtype : "uint8");
      },
      "A torch tensor viewing the bytes (no copy; never write into it).")
    .def("tobytes",
         [](const segment& s) {
           return py::bytes(reinterpret_cast<const char*>(s.data()),
                            s.bytes.length);
         })
    .def("__repr__", [](const segment& s) {
      return "<kvtier.Segment " + format_name(s.format)
             + shape_text(s.shape.data(), s.shape.size()) + " "
             + std::to_string(s.bytes.length) + " bytes>";
    });

  py::class_<layer_view>(m, "LayerView",
                         "One lent layer of an acquired "
                         "state.")
    .def_property_readonly(
      "kind",
      [](const layer_view& l) { return tiers::to_string(l.state.kind); })
    .def_property_readonly("tokens",
                           [](const layer_view& l) { return l.state.tokens; })
    .def_property_readonly(
      "min_offset", [](const layer_view& l) { return l.state.min_offset; })
    .def_property_readonly(
      "nbytes", [](const layer_view& l) { return l.state.byte_length(); })
    .def_property_readonly("dtype",
                           [](const layer_view& l) { return l.layer->dtype; })
    .def_property_readonly(
      "shape",
      [](const layer_view& l) { return py::tuple(py::cast(l.layer->shape)); })
    .def_property_readonly("segments",
                           [](const layer_view& l) {
                             return segment_list(l.state.segments, l.layer);
                           })
    .def("array", &layer_array,
         "The layer as one numpy array: a view of the lent segment when "
         "there is one, else a concatenated copy.")
    .def(
      "tensor",
      [](const layer_view& l) {
        return as_tensor(layer_array(l), l.layer->dtype);
      },
      "The layer as one torch tensor (as array(): no copy for one segment).")
    .def("__repr__", [](const layer_view& l) {
      return "<kvtier.LayerView " + describe(*l.layer)
             + " tokens=" + std::to_string(l.state.tokens)
             + " segments=" + std::to_string(l.state.segments.size()) + ">";
    });

  py::class_<acquired>(m, "Acquired", R"(
What acquire answered: the state is the caller's (its segments keep the
donor's bytes alive). source "none" is a miss (no layers), never an error.)")
    .def_property_readonly(
      "source",
      [](const acquired& a) { return runtime::to_string(a.st.source); })
    .def_property_readonly("hit",
                           [](const acquired& a) {
                             return a.st.source != runtime::state_source::none;
                           })
    .def_property_readonly("usable_tokens",
                           [](const acquired& a) { return a.st.usable_tokens; })
    .def_property_readonly(
      "stale_checkpoint_tokens",
      [](const acquired& a) { return a.st.stale_checkpoint_tokens; })
    .def_property_readonly("ns",
                           [](const acquired& a) { return a.st.state.ns; })
    .def_property_readonly("tokens",
                           [](py::object self) {
                             auto& a = self.cast<const acquired&>();
                             return tokens_view(a.st.state.tokens, self);
                           })
    .def_property_readonly("layers",
                           [](acquired& a) {
                             if (!a.layers) {
                               py::list out;
                               auto& ls = a.st.state.layers;
                               for (size_t i = 0; i < ls.size(); ++i)
                                 out.append(py::cast(layer_view{
                                   ls[i], layer_at(a.model, i, ls[i])}));
                               a.layers = std::move(out);
                             }
                             return a.layers;
                           })
    .def_property_readonly("attachments",
                           [](acquired& a) {
                             if (!a.attachments)
                               a.attachments =
                                 attachments_dict(a.st.state.attachments);
                             return a.attachments;
                           })
    .def("__repr__", [](const acquired& a) {
      return "<kvtier.Acquired source="
             + std::string{runtime::to_string(a.st.source)}
             + " usable_tokens=" + std::to_string(a.st.usable_tokens)
             + " layers=" + std::to_string(a.st.state.layers.size()) + ">";
    });
}

} // namespace kvtier::python
