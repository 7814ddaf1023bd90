#include "tiers/ssd/ssd_jobs.hpp"

#include "messages/log.hpp"

namespace kvtier::tiers::ssd {

io_op call_op(uint64_t job, std::function<caf::error()> fn, uint64_t sub) {
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(job, sub);
  op.call = std::move(fn);
  return op;
}

tier_io::tier_io(file_system& fs, io_engine& engine, std::string root,
                 std::function<void(const std::string&)> log_sink)
  : fs(fs)
  , engine(engine)
  , root(std::move(root))
  , log_sink_(std::move(log_sink)) {}

uint64_t tier_io::chore(std::string what, std::function<caf::error()> fn) {
  auto tag = next_tag();
  chores_[tag] = std::move(what);
  submit(call_op(tag, std::move(fn)));
  return tag;
}

bool tier_io::end_chore(uint64_t tag, const io_completion& c) {
  auto i = chores_.find(tag);
  if (i == chores_.end())
    return false;
  if (c.err && c.err != ec::not_found)
    log("ssd: " + i->second + ": " + reason(c.err));
  chores_.erase(i);
  return true;
}

std::string tier_io::path(const std::string& name) const {
  return join_path(root, name);
}

void tier_io::log(const std::string& line) const {
  if (log_sink_)
    log_sink_(line);
  else
    log::warn("kvtier " + line);
}

caf::error check_header(const model_geometry& g, const std::string& fingerprint,
                        const entry_header& h) {
  if (h.fingerprint != fingerprint)
    return make_error(ec::incompatible_format,
                      "the header names fingerprint " + h.fingerprint);
  if (h.kind == key_kind::object)
    return {}; // attachments only (the decoder refuses layers): no geometry
  if (h.layers.size() != g.layers.size())
    return make_error(ec::incompatible_format,
                      "the file has " + std::to_string(h.layers.size())
                        + " layers, the model (" + g.name + ") has "
                        + std::to_string(g.layers.size()));
  for (size_t i = 0; i < h.layers.size(); ++i) {
    auto& l = h.layers[i];
    // A delta holds rows past its parent; its layer is the whole state.
    auto length =
      h.parent.empty() ? l.payload.length : l.tokens * l.bytes_per_token;
    layer_shape shape{l.kind, l.bytes_per_token, l.window, l.tokens, length};
    if (auto err = g.check(i, shape))
      return make_error(ec::incompatible_format, context_of(err));
  }
  return {};
}

caf::expected<entry_header> read_header(file& f) {
  std::vector<std::byte> buf(fixed_header_size);
  auto n = f.read_at(0, buf);
  if (!n)
    return n.error();
  buf.resize(*n);
  auto len = decode_header_length(buf);
  if (!len)
    return len.error();
  buf.resize(*len);
  n = f.read_at(0, buf);
  if (!n)
    return n.error();
  buf.resize(*n);
  auto h = decode(buf);
  if (!h)
    return h.error();
  auto size = f.size();
  if (!size)
    return size.error();
  if (*size < h->file_length)
    return make_error(ec::corrupt_data,
                      "truncated: " + std::to_string(*size) + " of "
                        + std::to_string(h->file_length) + " bytes");
  return h;
}

} // namespace kvtier::tiers::ssd
