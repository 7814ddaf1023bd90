#include "runtime/tools/oracle.hpp"

#include "runtime/tools/mix.hpp"

#include <algorithm>
#include <cstring>

namespace kvtier::runtime {

using tiers::entry;
using tiers::layer_kind;
using tiers::layer_spec;
using tiers::layer_state;
using tiers::token;

namespace {

/// Alignment of the engine's state buffers: a cache line. Not the
/// builder's default (a page, for buffers I/O reads into), which would pad
/// every layer's rows to 4 KiB: at the demo's 32 B per token (1 B per
/// token and layer) a turn's rows are a few KB, and the padding cost the
/// process as much as a quarter of the state again (bench_footprint).
constexpr size_t row_alignment = 64;

uint64_t ns_seed(std::string_view ns) {
  return fmix64(fnv1a(ns) ^ ns.size());
}

uint64_t step(uint64_t h, token t) {
  return fmix64(h + golden * (static_cast<uint64_t>(t) + 1));
}

/// h_i for every position i of `tokens`, starting from `seed` (the
/// namespace's, see `oracle_engine::seed`).
std::vector<uint64_t> chain(uint64_t seed, std::span<const token> t) {
  std::vector<uint64_t> out(t.size());
  uint64_t h = seed;
  for (size_t i = 0; i < t.size(); ++i)
    out[i] = h = step(h, t[i]);
  return out;
}

uint64_t layer_seed(uint64_t h, uint64_t layer) {
  return fmix64(h ^ ((layer + 1) * 0xC2B2AE3D27D4EB4Full));
}

constexpr uint64_t attachment_salt = 0xA77AC4ull;

/// Seed of the "draft" attachment: the last chain hash (the namespace's
/// seed for an empty prefix), salted.
uint64_t attachment_seed(const std::vector<uint64_t>& h, uint64_t nsh) {
  return (h.empty() ? nsh : h.back()) ^ attachment_salt;
}

/// Writes `len` pseudo-random bytes determined by `seed` to `dst`.
void fill(std::byte* dst, size_t len, uint64_t seed) {
  uint64_t s = seed;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    s += golden;
    uint64_t z = fmix64(s);
    std::memcpy(dst + i, &z, 8);
  }
  if (i < len) {
    s += golden;
    uint64_t z = fmix64(s);
    std::memcpy(dst + i, &z, len - i);
  }
}

/// The token index held by ring slot `slot` after `n` tokens.
uint64_t ring_token(uint64_t slot, uint64_t n, uint64_t window) {
  if (n <= window)
    return slot;
  uint64_t base = n - window; // oldest token still held
  uint64_t off = (slot + window - base % window) % window;
  return base + off;
}

/// Rows [from, to) of a kv/ring layer in token order, one new buffer.
view rows(const std::vector<uint64_t>& h, uint64_t layer, uint32_t bpt,
          uint64_t from, uint64_t to) {
  buffer_builder b((to - from) * bpt, row_alignment);
  for (uint64_t i = from; i < to; ++i)
    fill(b.data() + (i - from) * bpt, bpt, layer_seed(h[i], layer));
  return view::of(std::move(b).freeze());
}

/// A whole ring after `n` tokens in slot order (n > window).
view ring_slots(const std::vector<uint64_t>& h, uint64_t layer,
                const layer_spec& s, uint64_t n) {
  buffer_builder b(uint64_t{s.window} * s.bytes_per_token, row_alignment);
  for (uint64_t slot = 0; slot < s.window; ++slot)
    fill(b.data() + slot * s.bytes_per_token, s.bytes_per_token,
         layer_seed(h[ring_token(slot, n, s.window)], layer));
  return view::of(std::move(b).freeze());
}

view blob(uint64_t size, uint64_t seed) {
  buffer_builder b(size, row_alignment);
  fill(b.data(), size, seed);
  return view::of(std::move(b).freeze());
}

/// Walks a segment list as one byte string, comparing against expectations.
class segment_cursor {
public:
  explicit segment_cursor(const std::vector<view>& segs)
    : segs_(segs) {}

  /// Compares the next `want.size()` bytes; returns the index of the first
  /// differing byte, or `want.size()` when all match.
  size_t compare(std::span<const std::byte> want) {
    size_t done = 0;
    while (done < want.size()) {
      if (seg_ == segs_.size())
        return done;
      auto have = segs_[seg_].bytes().subspan(pos_);
      auto n = std::min(have.size(), want.size() - done);
      auto mm =
        std::mismatch(have.begin(), have.begin() + n, want.begin() + done);
      if (mm.first != have.begin() + n)
        return done + static_cast<size_t>(mm.first - have.begin());
      done += n;
      pos_ += n;
      if (pos_ == segs_[seg_].length) {
        ++seg_;
        pos_ = 0;
      }
    }
    return done;
  }

private:
  const std::vector<view>& segs_;
  size_t seg_ = 0;
  uint64_t pos_ = 0;
};

caf::error mismatch(size_t layer, uint64_t row, size_t byte) {
  return make_error(ec::corrupt_data,
                    "layer " + std::to_string(layer) + " differs from a "
                      + "fresh prefill at row " + std::to_string(row)
                      + ", byte " + std::to_string(byte));
}

} // namespace

oracle_engine::oracle_engine(tiers::model_geometry geometry,
                             uint32_t attachment_bytes, uint64_t salt)
  : geometry_(std::move(geometry))
  , attachment_bytes_(attachment_bytes)
  , salt_(salt) {}

uint64_t oracle_engine::seed(std::string_view ns) const {
  return salt_ == 0 ? ns_seed(ns) : fmix64(ns_seed(ns) ^ salt_);
}

namespace {

layer_state make_layer(const layer_spec& s, uint64_t layer,
                       const std::vector<uint64_t>& h, uint64_t nsh) {
  uint64_t n = h.size();
  switch (s.kind) {
    case layer_kind::kv:
      return layer_state::kv(s.bytes_per_token, n,
                             {rows(h, layer, s.bytes_per_token, 0, n)});
    case layer_kind::ring: {
      auto v = n <= s.window ? rows(h, layer, s.bytes_per_token, 0, n)
                             : ring_slots(h, layer, s, n);
      return layer_state::ring(s.bytes_per_token, s.window, n, {v});
    }
    case layer_kind::recurrent:
      return layer_state::recurrent(
        n, {blob(s.state_bytes, layer_seed(n ? h.back() : nsh, layer))});
    case layer_kind::object:
      return layer_state::object({blob(s.state_bytes, layer_seed(nsh, layer))});
  }
  return {};
}

} // namespace

entry oracle_engine::prefill(std::string_view ns,
                             std::span<const token> tokens) const {
  auto nsh = seed(ns);
  auto h = chain(nsh, tokens);
  entry e;
  e.ns = std::string{ns};
  e.tokens.assign(tokens.begin(), tokens.end());
  for (size_t l = 0; l < geometry_.layers.size(); ++l)
    e.layers.push_back(make_layer(geometry_.layers[l], l, h, nsh));
  if (attachment_bytes_ > 0)
    e.attachments.push_back(
      {"draft", {blob(attachment_bytes_, attachment_seed(h, nsh))}});
  return e;
}

caf::expected<entry>
oracle_engine::extend(const entry& reused,
                      std::span<const token> tokens) const {
  auto p = reused.tokens.size();
  if (p > tokens.size()
      || !std::equal(reused.tokens.begin(), reused.tokens.end(),
                     tokens.begin()))
    return make_error(ec::invalid_argument,
                      "reused state is not a prefix of the tokens to extend");
  if (reused.layers.size() != geometry_.layers.size())
    return make_error(ec::invalid_argument,
                      "reused state has " + std::to_string(reused.layers.size())
                        + " layers, geometry "
                        + std::to_string(geometry_.layers.size()));
  auto nsh = seed(reused.ns);
  auto h = chain(nsh, tokens);
  uint64_t n = tokens.size();
  entry e;
  e.ns = reused.ns;
  e.session = reused.session;
  e.tokens.assign(tokens.begin(), tokens.end());
  for (size_t l = 0; l < geometry_.layers.size(); ++l) {
    auto& s = geometry_.layers[l];
    auto& old = reused.layers[l];
    if (old.kind != s.kind)
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(l) + " kind differs");
    bool token_major =
      s.kind == layer_kind::kv || (s.kind == layer_kind::ring && n <= s.window);
    if (token_major || s.kind == layer_kind::object) {
      auto out = old;
      out.tokens = s.kind == layer_kind::object ? 0 : n;
      if (n > p && s.kind != layer_kind::object)
        out.segments.push_back(rows(h, l, s.bytes_per_token, p, n));
      e.layers.push_back(std::move(out));
    } else {
      e.layers.push_back(make_layer(s, l, h, nsh));
    }
  }
  if (attachment_bytes_ > 0)
    e.attachments.push_back(
      {"draft", {blob(attachment_bytes_, attachment_seed(h, nsh))}});
  return e;
}

caf::error oracle_engine::verify_served(const entry& e, std::string_view ns,
                                        std::span<const token> prompt,
                                        bool checkpoint) const {
  if (e.ns != ns)
    return make_error(ec::corrupt_data, "served state of namespace '" + e.ns
                                          + "' for a request in '"
                                          + std::string{ns} + "'");
  auto n = e.tokens.size();
  bool fits = checkpoint ? n >= prompt.size() : n < prompt.size();
  auto m = std::min<size_t>(n, prompt.size());
  if (!fits
      || !std::equal(prompt.begin(), prompt.begin() + m, e.tokens.begin()))
    return make_error(ec::corrupt_data,
                      std::string{checkpoint ? "a checkpoint" : "a prefix"}
                        + " of " + std::to_string(n)
                        + " tokens served for another prompt of "
                        + std::to_string(prompt.size()) + " tokens");
  return verify(e);
}

caf::error oracle_engine::verify(const entry& e) const {
  if (e.layers.size() != geometry_.layers.size())
    return make_error(ec::invalid_argument,
                      "state has " + std::to_string(e.layers.size())
                        + " layers, geometry "
                        + std::to_string(geometry_.layers.size()));
  if (auto err = e.validate())
    return err;
  auto nsh = seed(e.ns);
  auto h = chain(nsh, e.tokens);
  uint64_t n = e.tokens.size();
  std::vector<std::byte> want;
  for (size_t l = 0; l < e.layers.size(); ++l) {
    auto& s = geometry_.layers[l];
    auto& got = e.layers[l];
    if (got.kind != s.kind || got.bytes_per_token != s.bytes_per_token
        || got.window != s.window)
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(l)
                          + " does not match the geometry");
    segment_cursor cur(got.segments);
    auto check = [&](uint64_t row, size_t len, uint64_t seed) -> caf::error {
      want.resize(len);
      fill(want.data(), len, seed);
      auto at = cur.compare(want);
      return at == len ? caf::error{} : mismatch(l, row, at);
    };
    caf::error err;
    switch (s.kind) {
      case layer_kind::kv:
      case layer_kind::ring: {
        uint64_t slots =
          s.kind == layer_kind::kv ? n : std::min<uint64_t>(n, s.window);
        for (uint64_t r = 0; r < slots && !err; ++r) {
          auto i = s.kind == layer_kind::kv ? r : ring_token(r, n, s.window);
          err = check(r, s.bytes_per_token, layer_seed(h[i], l));
        }
        break;
      }
      case layer_kind::recurrent:
        err = check(0, s.state_bytes, layer_seed(n ? h.back() : nsh, l));
        break;
      case layer_kind::object:
        err = check(0, s.state_bytes, layer_seed(nsh, l));
        break;
    }
    if (err)
      return err;
    if (got.byte_length() != s.bytes_at(n))
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(l) + " has extra bytes");
  }
  for (auto& a : e.attachments) {
    segment_cursor cur(a.segments);
    want.resize(attachment_bytes_);
    fill(want.data(), want.size(), attachment_seed(h, nsh));
    if (a.name != "draft" || total_length(a.segments) != want.size()
        || cur.compare(want) != want.size())
      return make_error(ec::corrupt_data,
                        "attachment '" + a.name + "' differs");
  }
  return {};
}

tiers::token_seq oracle_engine::generate(std::string_view ns,
                                         std::span<const token> tokens,
                                         size_t count, uint32_t vocab) const {
  uint64_t h = ns_seed(ns);
  for (auto t : tokens)
    h = step(h, t);
  tiers::token_seq out;
  out.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    auto t = static_cast<token>(fmix64(h ^ golden) % std::max(vocab, 1u));
    out.push_back(t);
    h = step(h, t);
  }
  return out;
}

} // namespace kvtier::runtime
