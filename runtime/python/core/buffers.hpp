// State crossing between Python and kvtier without a copy, both ways.
//
// In: `to_entry` turns what `publish`/`checkpoint` are handed (per layer a
// C-contiguous CPU buffer: numpy array, torch tensor, bytes, a Segment, or
// a list of them) into kvtier views. A buffer is adopted, not copied: the
// view's buffer holds the Python buffer export (and so the exporting
// object) until kvtier drops its last reference, then lets go of it under
// the GIL. A Segment kvtier lent (or a numpy view into one) is reused as
// the view it already is, so shared bytes stay shared.
//
// Out: a `segment` is one lent view with the buffer protocol (read-only,
// the layer's dtype and shape): numpy and torch view its bytes with no
// copy, and the segment (so the donor buffer) lives as long as anything
// viewing it does: after eviction, close, and the service object.
//
// Everything here runs with the GIL held; segments are immutable and may
// be shared between threads.
#pragma once

#include "runtime/python/core/common.hpp"

#include "runtime/service_types.hpp"

namespace kvtier::python {

/// One lent view (kvtier.Segment).
struct segment {
  view bytes;
  /// The layer it belongs to (null: raw bytes, an attachment or object).
  std::shared_ptr<const layer_desc> layer;
  std::string format;
  size_t itemsize = 1;
  std::vector<py::ssize_t> shape;

  segment(view v, std::shared_ptr<const layer_desc> l);

  const std::byte* data() const noexcept {
    return bytes.buf ? bytes.buf->data() + bytes.offset : nullptr;
  }
};

/// The entry `layers` describe (one item per model layer) for `tokens` in
/// `ns`; ValueError/TypeError naming the layer and what was wrong (then
/// nothing is kept: every buffer adopted so far is let go).
tiers::entry to_entry(const model_desc& model, tiers::token_seq tokens,
                      py::handle layers, const std::string& ns);

/// Attachments or object tensors from a dict name -> buffer (or a list of
/// buffers), taken as raw bytes.
std::vector<tiers::attachment> to_attachments(py::handle tensors,
                                              const char* what);

/// name -> list of Segments (raw bytes).
py::dict attachments_dict(const std::vector<tiers::attachment>& a);

/// A kvtier.Acquired holding `st` (its layers lent as LayerViews).
py::object make_acquired(runtime::acquired_state st, model_desc model);

} // namespace kvtier::python
