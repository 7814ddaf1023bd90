#include "tiers/state.hpp"

#include <algorithm>
#include <unordered_set>

namespace kvtier::tiers {

const char* to_string(layer_kind k) {
  switch (k) {
    case layer_kind::kv: return "kv";
    case layer_kind::ring: return "ring";
    case layer_kind::recurrent: return "recurrent";
    case layer_kind::object: return "object";
  }
  return "unknown";
}

layer_state layer_state::kv(uint32_t bytes_per_token, uint64_t tokens,
                            std::vector<view> segments, uint64_t min_offset) {
  return {layer_kind::kv, bytes_per_token, 0,
          tokens,         min_offset,      std::move(segments)};
}

layer_state layer_state::ring(uint32_t bytes_per_token, uint32_t window,
                              uint64_t tokens, std::vector<view> segments,
                              uint64_t min_offset) {
  return {layer_kind::ring, bytes_per_token, window,
          tokens,           min_offset,      std::move(segments)};
}

layer_state layer_state::recurrent(uint64_t tokens, std::vector<view> segs) {
  return {layer_kind::recurrent, 0, 0, tokens, 0, std::move(segs)};
}

layer_state layer_state::object(std::vector<view> segments) {
  return {layer_kind::object, 0, 0, 0, 0, std::move(segments)};
}

uint64_t layer_state::byte_length() const noexcept {
  return total_length(segments);
}

bool layer_state::wrapped() const noexcept {
  return kind == layer_kind::ring && tokens >= window;
}

bool layer_state::can_trim_to(uint64_t n) const noexcept {
  if (n == tokens)
    return true;
  if (n > tokens || n < min_offset)
    return false;
  switch (kind) {
    case layer_kind::kv: return true;
    case layer_kind::ring: return tokens < window;
    default: return false;
  }
}

namespace {

/// The first `len` bytes of `segs`, as views of the same buffers.
std::vector<view> prefix_views(const std::vector<view>& segs, uint64_t len) {
  std::vector<view> out;
  for (auto& s : segs) {
    if (len == 0)
      break;
    auto take = std::min(len, s.length);
    out.push_back(s.sub(0, take));
    len -= take;
  }
  return out;
}

} // namespace

caf::expected<layer_state> layer_state::trimmed(uint64_t n) const {
  if (n == tokens)
    return *this;
  if (!can_trim_to(n)) {
    std::string why;
    if (n > tokens)
      why = "cannot extend " + std::to_string(tokens) + " tokens to "
            + std::to_string(n);
    else if (n < min_offset)
      why = std::to_string(n) + " is below the minimum reusable offset "
            + std::to_string(min_offset);
    else if (kind == layer_kind::ring)
      why = "ring of window " + std::to_string(window) + " has wrapped at "
            + std::to_string(tokens) + " tokens";
    else
      why = std::string{to_string(kind)} + " state is valid only at its "
            + "exact offset " + std::to_string(tokens);
    return make_error(ec::not_trimmable, std::move(why));
  }
  auto out = *this;
  out.tokens = n;
  out.segments = prefix_views(segments, n * bytes_per_token);
  return out;
}

caf::error layer_state::validate() const {
  auto have = byte_length();
  uint64_t want = 0;
  switch (kind) {
    case layer_kind::kv: want = tokens * bytes_per_token; break;
    case layer_kind::ring:
      if (window == 0)
        return make_error(ec::invalid_argument, "window: ring layer with "
                                                "window 0");
      want = std::min<uint64_t>(tokens, window) * bytes_per_token;
      break;
    case layer_kind::recurrent:
    case layer_kind::object: return {};
  }
  if (have != want)
    return make_error(ec::invalid_argument,
                      "segments: " + std::string{to_string(kind)}
                        + " layer holds " + std::to_string(have)
                        + " bytes, geometry says " + std::to_string(want));
  if (min_offset > tokens)
    return make_error(ec::invalid_argument,
                      "minOffset: minimum reusable offset "
                        + std::to_string(min_offset) + " beyond the layer's "
                        + std::to_string(tokens) + " tokens");
  return {};
}

bool entry::can_trim_to(uint64_t n) const noexcept {
  if (n > tokens.size())
    return false;
  // An object layer encodes no tokens: it is exact, valid only at the
  // entry's own length.
  return std::all_of(layers.begin(), layers.end(), [&](const layer_state& l) {
    return l.kind == layer_kind::object ? n == tokens.size() : l.can_trim_to(n);
  });
}

bool entry::trimmable() const noexcept {
  return !tokens.empty() && can_trim_to(tokens.size() - 1);
}

caf::expected<entry> entry::trimmed(uint64_t n) const {
  if (n > tokens.size())
    return make_error(ec::not_trimmable, "entry of " + std::to_string(size())
                                           + " tokens cannot grow to "
                                           + std::to_string(n));
  entry out;
  out.ns = ns;
  out.session = session;
  out.tokens.assign(tokens.begin(), tokens.begin() + n);
  out.layers.reserve(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].kind == layer_kind::object && n == tokens.size()) {
      out.layers.push_back(layers[i]);
      continue;
    }
    auto l = layers[i].trimmed(n);
    if (!l)
      return make_error(ec::not_trimmable, "layer " + std::to_string(i) + ": "
                                             + describe(l.error()));
    out.layers.push_back(std::move(*l));
  }
  if (n == tokens.size())
    out.attachments = attachments;
  return out;
}

uint64_t entry::byte_length() const noexcept {
  uint64_t n = 0;
  for (auto& l : layers)
    n += l.byte_length();
  for (auto& a : attachments)
    n += total_length(a.segments);
  return n;
}

caf::error entry::validate() const {
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& l = layers[i];
    if (l.kind != layer_kind::object && l.tokens != tokens.size())
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(i) + ": tokens: encodes "
                          + std::to_string(l.tokens) + " tokens, entry has "
                          + std::to_string(tokens.size()));
    if (auto err = l.validate())
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(i) + ": " + context_of(err));
  }
  return {};
}

void collect_buffers(const entry& e, std::vector<buffer_ref>& out) {
  std::unordered_set<uint64_t> seen;
  for (auto& b : out)
    seen.insert(b->id());
  auto add = [&](const std::vector<view>& segs) {
    for (auto& s : segs)
      if (s.buf && seen.insert(s.buf->id()).second)
        out.push_back(s.buf);
  };
  for (auto& l : e.layers)
    add(l.segments);
  for (auto& a : e.attachments)
    add(a.segments);
}

size_t common_prefix(std::span<const token> a, std::span<const token> b) {
  auto n = std::min(a.size(), b.size());
  auto mm = std::mismatch(a.begin(), a.begin() + n, b.begin());
  return static_cast<size_t>(mm.first - a.begin());
}

std::optional<uint64_t> usable_prefix(const entry& e,
                                      std::span<const token> prompt) {
  if (prompt.empty())
    return std::nullopt;
  uint64_t p =
    std::min<uint64_t>(common_prefix(e.tokens, prompt), prompt.size() - 1);
  if (p == 0)
    return std::nullopt;
  if (p == e.tokens.size() || e.can_trim_to(p))
    return p;
  return std::nullopt;
}

} // namespace kvtier::tiers
