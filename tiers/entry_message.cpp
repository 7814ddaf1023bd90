#include "tiers/entry_message.hpp"

#include "messages/assert.hpp"

#include <capnp/any.h>

#include <bit>
#include <cstring>
#include <functional>

namespace kvtier::tiers {

namespace {

capnp::Text::Reader text(const std::string& s) {
  return {s.c_str(), s.size()};
}

std::string text(capnp::Text::Reader t) {
  return {t.cStr(), t.size()};
}

/// Bytes that are not a valid message (a side index out of range, an
/// unknown enum value): `malformed_message`.
caf::error malformed(const std::string& where, const caf::error& why) {
  return make_error(ec::malformed_message, where + ": " + describe(why));
}

/// A well-formed message whose entry does not hold together (lengths that
/// disagree, geometry `entry::validate()` rejects): `invalid_argument`.
caf::error invalid(const std::string& where, const std::string& why) {
  return make_error(ec::invalid_argument, where + ": " + why);
}

void write_segments(msg::draft_base& d, capnp::List<msg::Payload>::Builder out,
                    const std::vector<view>& segments) {
  for (uint32_t i = 0; i < segments.size(); ++i)
    d.set_payload(out[i], segments[i]);
}

/// Names the part being read, for an error only (built when one occurs).
using where_fn = std::function<std::string()>;

caf::expected<std::vector<view>>
read_segments(const msg::carrier& c, capnp::List<msg::Payload>::Reader in,
              const where_fn& where) {
  std::vector<view> out;
  out.reserve(in.size());
  for (auto p : in) {
    auto v = c.payload(p);
    if (!v)
      return malformed(where(), v.error());
    out.push_back(std::move(*v));
  }
  return out;
}

caf::expected<layer_state> read_layer(const msg::carrier& c,
                                      msg::Layer::Reader in,
                                      const where_fn& where) {
  auto l = read_descriptor(in.getDescriptor());
  if (!l)
    return malformed(where(), l.error());
  auto segs = read_segments(c, in.getSegments(), where);
  if (!segs)
    return std::move(segs.error());
  auto want = in.getDescriptor().getByteLength();
  if (total_length(*segs) != want)
    return invalid(where(), "byteLength: descriptor says "
                              + std::to_string(want) + " bytes, segments hold "
                              + std::to_string(total_length(*segs)));
  l->segments = std::move(*segs);
  return l;
}

} // namespace

void write_tokens(capnp::List<uint32_t>::Builder out,
                  std::span<const token> tokens) {
  KVTIER_ASSERT(out.size() == tokens.size());
  if (tokens.empty())
    return;
  if constexpr (std::endian::native == std::endian::little) {
    // A freshly initialized UInt32 list is packed 4-byte elements in our
    // own builder: one copy instead of a bounds-checked set per token.
    auto raw = capnp::AnyList::Builder{kj::mv(out)}.asReader().getRawBytes();
    KVTIER_ASSERT(raw.size() == tokens.size_bytes());
    std::memcpy(const_cast<kj::byte*>(raw.begin()), tokens.data(),
                tokens.size_bytes());
  } else {
    for (uint32_t i = 0; i < tokens.size(); ++i)
      out.set(i, tokens[i]);
  }
}

std::optional<std::span<const token>>
token_view(capnp::List<uint32_t>::Reader in) {
  if constexpr (std::endian::native == std::endian::little) {
    capnp::AnyList::Reader any{in};
    // A list encoded with another element layout (Cap'n Proto lets a
    // struct list stand in for a primitive one) has another stride.
    if (any.getElementSize() != capnp::ElementSize::FOUR_BYTES)
      return std::nullopt;
    auto raw = any.getRawBytes();
    if (raw.size() != size_t{in.size()} * sizeof(token)
        || reinterpret_cast<uintptr_t>(raw.begin()) % alignof(token) != 0)
      return std::nullopt;
    return std::span<const token>{reinterpret_cast<const token*>(raw.begin()),
                                  in.size()};
  } else {
    return std::nullopt;
  }
}

token_seq read_tokens(capnp::List<uint32_t>::Reader in) {
  if (auto v = token_view(in))
    return token_seq(v->begin(), v->end());
  token_seq out;
  out.reserve(in.size());
  for (auto t : in)
    out.push_back(t);
  return out;
}

void write_key(msg::EntryKey::Builder out, std::string_view ns,
               std::span<const token> tokens) {
  auto name = std::string{ns};
  out.setNs(text(name));
  write_tokens(out.initTokens(tokens.size()), tokens);
}

void write_owner(msg::CheckpointKey::Builder out, const storage_key& key) {
  out.setRequest(key.request);
  out.setAttempt(key.attempt);
}

void write_key(msg::EntryKey::Builder out, const storage_key& key) {
  write_key(out, key.ns, key.tokens);
  if (key.kind == key_kind::checkpoint)
    write_owner(out.getKind().initCheckpoint(), key);
  else if (key.kind == key_kind::object)
    out.getKind().setObject();
}

storage_key read_key(msg::EntryKey::Reader in) {
  storage_key k;
  k.ns = in.getNs().cStr();
  k.tokens = read_tokens(in.getTokens());
  if (in.getKind().isCheckpoint()) {
    auto c = in.getKind().getCheckpoint();
    k.kind = key_kind::checkpoint;
    k.request = c.getRequest();
    k.attempt = c.getAttempt();
  } else if (in.getKind().isObject()) {
    k.kind = key_kind::object;
  }
  return k;
}

void write_descriptor(msg::LayerDescriptor::Builder out, const layer_state& l) {
  out.setKind(static_cast<msg::LayerKind>(l.kind));
  out.setBytesPerToken(l.bytes_per_token);
  out.setWindow(l.window);
  out.setTokens(l.tokens);
  out.setMinOffset(l.min_offset);
  out.setByteLength(l.byte_length());
}

caf::expected<layer_state> read_descriptor(msg::LayerDescriptor::Reader in) {
  layer_state l;
  switch (in.getKind()) {
    case msg::LayerKind::KV: l.kind = layer_kind::kv; break;
    case msg::LayerKind::RING: l.kind = layer_kind::ring; break;
    case msg::LayerKind::RECURRENT: l.kind = layer_kind::recurrent; break;
    case msg::LayerKind::OBJECT: l.kind = layer_kind::object; break;
    default:
      return make_error(ec::malformed_message,
                        "unknown layer kind "
                          + std::to_string(static_cast<int>(in.getKind())));
  }
  l.bytes_per_token = in.getBytesPerToken();
  l.window = in.getWindow();
  l.tokens = in.getTokens();
  l.min_offset = in.getMinOffset();
  return l;
}

void write_attachments(msg::draft_base& d,
                       capnp::List<msg::Attachment>::Builder out,
                       const std::vector<attachment>& in) {
  KVTIER_ASSERT(out.size() == in.size());
  for (uint32_t i = 0; i < in.size(); ++i) {
    out[i].setName(text(in[i].name));
    write_segments(d, out[i].initSegments(in[i].segments.size()),
                   in[i].segments);
  }
}

caf::expected<std::vector<attachment>>
read_attachments(const msg::carrier& c,
                 capnp::List<msg::Attachment>::Reader in) {
  std::vector<attachment> out;
  out.reserve(in.size());
  for (auto a : in) {
    auto segs = read_segments(
      c, a.getSegments(), [&] { return "attachment " + text(a.getName()); });
    if (!segs)
      return std::move(segs.error());
    out.push_back({text(a.getName()), std::move(*segs)});
  }
  return out;
}

namespace {

/// Everything of `e` but its key: layers, attachments, session.
void write_state(msg::draft_base& d, msg::Entry::Builder out, const entry& e) {
  auto layers = out.initLayers(e.layers.size());
  for (uint32_t i = 0; i < e.layers.size(); ++i) {
    auto& l = e.layers[i];
    write_descriptor(layers[i].initDescriptor(), l);
    write_segments(d, layers[i].initSegments(l.segments.size()), l.segments);
  }
  write_attachments(d, out.initAttachments(e.attachments.size()),
                    e.attachments);
  if (e.session)
    out.getSession().setId(text(*e.session));
  else
    out.getSession().setNone();
  out.setPriority(std::min(e.priority, max_priority));
}

} // namespace

void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& e) {
  out.setNs(text(e.ns));
  write_tokens(out.initTokens(e.tokens.size()), e.tokens);
  write_state(d, out, e);
}

void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& e,
                 uint64_t n) {
  KVTIER_ASSERT(e.can_trim_to(n));
  write_entry(d, out, e, e.size(), std::span{e.tokens}.first(n));
}

void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& e,
                 uint64_t length, std::span<const token> key) {
  auto n = key.size();
  KVTIER_ASSERT(n <= length);
  if (n == length) {
    out.setNs(text(e.ns));
    write_tokens(out.initTokens(n), key);
    write_state(d, out, e);
    return;
  }
  // Below its length every layer is kv or an unwrapped ring (the only
  // kinds that trim): its first n token rows, as `layer_state::trimmed`.
  out.setNs(text(e.ns));
  write_tokens(out.initTokens(n), key);
  auto layers = out.initLayers(e.layers.size());
  for (uint32_t i = 0; i < e.layers.size(); ++i) {
    auto& l = e.layers[i];
    KVTIER_ASSERT(l.can_trim_to(n));
    auto bytes = n * l.bytes_per_token;
    auto desc = layers[i].initDescriptor();
    desc.setKind(static_cast<msg::LayerKind>(l.kind));
    desc.setBytesPerToken(l.bytes_per_token);
    desc.setWindow(l.window);
    desc.setTokens(n);
    desc.setMinOffset(l.min_offset);
    desc.setByteLength(bytes);
    uint32_t k = 0;
    for (uint64_t left = bytes; left > 0 && k < l.segments.size(); ++k)
      left -= std::min(left, l.segments[k].length);
    auto segs = layers[i].initSegments(k);
    uint64_t left = bytes;
    for (uint32_t j = 0; j < k; ++j) {
      auto take = std::min(left, l.segments[j].length);
      d.set_payload(segs[j], l.segments[j].sub(0, take));
      left -= take;
    }
  }
  out.initAttachments(0); // exact-boundary: not below the full length
  if (e.session)
    out.getSession().setId(text(*e.session));
  else
    out.getSession().setNone();
  out.setPriority(std::min(e.priority, max_priority));
}

void write_entry(msg::draft_base& d, msg::Entry::Builder out,
                 const stored_state& body, const std::string& ns,
                 std::span<const token> key) {
  auto n = key.size();
  KVTIER_ASSERT(n <= body.length());
  bool whole = n == body.length();
  out.setNs(text(ns));
  write_tokens(out.initTokens(n), key);
  auto layers = out.initLayers(body.layer_count());
  for (uint32_t i = 0; i < body.layer_count(); ++i) {
    auto l = body.layer(i);
    auto desc = layers[i].initDescriptor();
    desc.setKind(static_cast<msg::LayerKind>(l.kind));
    desc.setBytesPerToken(l.bytes_per_token);
    desc.setWindow(l.window);
    desc.setMinOffset(l.min_offset);
    if (whole) { // as `write_descriptor` and `write_segments`
      uint64_t bytes = 0;
      for (size_t j = 0; j < l.segment_count(); ++j)
        bytes += l.segment_length(j);
      desc.setTokens(l.tokens);
      desc.setByteLength(bytes);
      auto segs = layers[i].initSegments(l.segment_count());
      for (uint32_t j = 0; j < l.segment_count(); ++j)
        d.set_payload(segs[j], l.segment(j));
      continue;
    }
    // Below its length every layer is kv or an unwrapped ring (the only
    // kinds that trim): its first n token rows, as `layer_state::trimmed`.
    KVTIER_ASSERT(l.can_trim_to(n));
    auto bytes = n * l.bytes_per_token;
    desc.setTokens(n);
    desc.setByteLength(bytes);
    uint32_t k = 0;
    for (uint64_t left = bytes; left > 0 && k < l.segment_count(); ++k)
      left -= std::min(left, l.segment_length(k));
    auto segs = layers[i].initSegments(k);
    uint64_t left = bytes;
    for (uint32_t j = 0; j < k; ++j) {
      auto take = std::min(left, l.segment_length(j));
      d.set_payload(segs[j], l.segment(j).sub(0, take));
      left -= take;
    }
  }
  if (whole) // exact-boundary: only at the full length
    write_attachments(d, out.initAttachments(body.attachments().size()),
                      body.attachments());
  else
    out.initAttachments(0);
  if (body.session())
    out.getSession().setId(text(*body.session()));
  else
    out.getSession().setNone();
}

caf::error check_layers(const model_geometry& g, msg::Entry::Reader in) {
  auto layers = in.getLayers();
  if (layers.size() != g.layers.size())
    return make_error(ec::invalid_argument,
                      "the state has " + std::to_string(layers.size())
                        + " layers, the model (" + g.name + ") has "
                        + std::to_string(g.layers.size()));
  for (uint32_t i = 0; i < layers.size(); ++i) {
    auto d = layers[i].getDescriptor();
    auto l = read_descriptor(d);
    if (!l)
      return malformed("layer " + std::to_string(i), l.error());
    layer_shape shape{l->kind, l->bytes_per_token, l->window, l->tokens,
                      d.getByteLength()};
    if (auto err = g.check(i, shape))
      return err;
  }
  return {};
}

caf::expected<entry> read_entry(const msg::carrier& c, msg::Entry::Reader in) {
  entry e;
  e.ns = text(in.getNs());
  e.tokens = read_tokens(in.getTokens());
  auto layers = in.getLayers();
  e.layers.reserve(layers.size());
  for (uint32_t i = 0; i < layers.size(); ++i) {
    auto l =
      read_layer(c, layers[i], [i] { return "layer " + std::to_string(i); });
    if (!l)
      return std::move(l.error());
    e.layers.push_back(std::move(*l));
  }
  auto atts = read_attachments(c, in.getAttachments());
  if (!atts)
    return std::move(atts.error());
  e.attachments = std::move(*atts);
  if (in.getSession().isId())
    e.session = text(in.getSession().getId());
  e.priority = std::min(in.getPriority(), max_priority);
  if (auto err = e.validate())
    return invalid("entry", context_of(err));
  return e;
}

} // namespace kvtier::tiers
