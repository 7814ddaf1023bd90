#include "tiers/stored_state.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <new>
#include <unordered_set>
#include <utility>

namespace kvtier::tiers {

namespace {

/// A layer's kind and geometry, and where its views end in the body.
struct descriptor {
  uint64_t tokens = 0;
  uint64_t min_offset = 0;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  uint32_t segments_end = 0; // its views: [previous end, this end)
  layer_kind kind = layer_kind::kv;
};

/// What most entries lack.
struct rare {
  std::vector<attachment> attachments;
  std::optional<std::string> session;
};

const std::vector<attachment> no_attachments;
const std::optional<std::string> no_session;

} // namespace

/// The single allocation: this header, `layers` descriptors, then
/// `segments` views.
struct stored_state::body {
  std::atomic<uint32_t> refs{1};
  uint32_t layers = 0;
  uint32_t length = 0;
  uint32_t segments = 0;
  rare* more = nullptr;

  descriptor* descriptors() noexcept {
    return reinterpret_cast<descriptor*>(this + 1);
  }
  const descriptor* descriptors() const noexcept {
    return reinterpret_cast<const descriptor*>(this + 1);
  }
  view* views() noexcept {
    return reinterpret_cast<view*>(descriptors() + layers);
  }
  const view* views() const noexcept {
    return reinterpret_cast<const view*>(descriptors() + layers);
  }
};

static_assert(sizeof(stored_state) == sizeof(void*));
static_assert(sizeof(descriptor) % alignof(view) == 0);

size_t stored_state::footprint(size_t layers, size_t segments) noexcept {
  static_assert(sizeof(body) % alignof(descriptor) == 0);
  static_assert(alignof(descriptor) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  return sizeof(body) + layers * sizeof(descriptor) + segments * sizeof(view);
}

bool stored_layer::can_trim_to(uint64_t n) const noexcept {
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

layer_state stored_layer::cut(uint64_t n) const {
  KVTIER_ASSERT(can_trim_to(n));
  layer_state out{kind, bytes_per_token, window, n, min_offset, {}};
  if (n == tokens) {
    out.segments.assign(segments.begin(), segments.end());
    return out;
  }
  // The first n token rows, as `layer_state::trimmed`.
  uint64_t left = n * bytes_per_token;
  for (auto& s : segments) {
    if (left == 0)
      break;
    auto take = std::min(left, s.length);
    out.segments.push_back(s.sub(0, take));
    left -= take;
  }
  return out;
}

stored_state stored_state::of(entry&& e) {
  KVTIER_ASSERT(e.tokens.size() < UINT32_MAX);
  size_t segs = 0;
  for (auto& l : e.layers)
    segs += l.segments.size();
  KVTIER_ASSERT(segs < UINT32_MAX && e.layers.size() < UINT32_MAX);
  auto* raw = ::operator new(footprint(e.layers.size(), segs));
  auto* b = new (raw) body;
  b->layers = static_cast<uint32_t>(e.layers.size());
  b->length = static_cast<uint32_t>(e.tokens.size());
  b->segments = static_cast<uint32_t>(segs);
  auto* d = b->descriptors();
  auto* v = b->views();
  uint32_t at = 0;
  for (uint32_t i = 0; i < b->layers; ++i) {
    auto& l = e.layers[i];
    for (auto& s : l.segments)
      new (v + at++) view(std::move(s)); // noexcept: nothing to undo
    new (d + i) descriptor{l.tokens, l.min_offset, l.bytes_per_token,
                           l.window, at,           l.kind};
  }
  stored_state out(b);
  if (!e.attachments.empty() || e.session)
    b->more = new rare{std::move(e.attachments), std::move(e.session)};
  e.layers.clear();
  return out;
}

stored_state::stored_state(const stored_state& other) noexcept
  : body_(other.body_) {
  if (body_)
    body_->refs.fetch_add(1, std::memory_order_relaxed);
}

stored_state::stored_state(stored_state&& other) noexcept
  : body_(std::exchange(other.body_, nullptr)) {}

stored_state& stored_state::operator=(const stored_state& other) noexcept {
  stored_state copy(other);
  std::swap(body_, copy.body_);
  return *this;
}

stored_state& stored_state::operator=(stored_state&& other) noexcept {
  stored_state moved(std::move(other));
  std::swap(body_, moved.body_);
  return *this;
}

stored_state::~stored_state() {
  if (!body_ || body_->refs.fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;
  auto* v = body_->views();
  for (uint32_t i = 0; i < body_->segments; ++i)
    v[i].~view();
  delete body_->more;
  body_->~body();
  ::operator delete(static_cast<void*>(body_));
}

uint64_t stored_state::length() const noexcept {
  return body_ ? body_->length : 0;
}

size_t stored_state::layer_count() const noexcept {
  return body_ ? body_->layers : 0;
}

stored_layer stored_state::layer(size_t i) const noexcept {
  KVTIER_ASSERT(i < layer_count());
  auto& d = body_->descriptors()[i];
  uint32_t begin = i == 0 ? 0 : body_->descriptors()[i - 1].segments_end;
  return {
    d.kind,       d.bytes_per_token,
    d.window,     d.tokens,
    d.min_offset, {body_->views() + begin, body_->views() + d.segments_end}};
}

const std::vector<attachment>& stored_state::attachments() const noexcept {
  return body_ && body_->more ? body_->more->attachments : no_attachments;
}

const std::optional<std::string>& stored_state::session() const noexcept {
  return body_ && body_->more ? body_->more->session : no_session;
}

uint64_t stored_state::layer_bytes() const noexcept {
  uint64_t n = 0;
  if (body_)
    for (uint32_t i = 0; i < body_->segments; ++i)
      n += body_->views()[i].length;
  return n;
}

entry stored_state::keyed(std::string ns, std::span<const token> key) const {
  return keyed_cut(std::move(ns), token_seq(key.begin(), key.end()));
}

entry stored_state::keyed(std::string ns, token_seq&& key) const {
  return keyed_cut(std::move(ns), std::move(key));
}

entry stored_state::keyed_cut(std::string ns, token_seq key) const {
  auto n = key.size();
  KVTIER_ASSERT(body_ && n <= length());
  entry out;
  out.ns = std::move(ns);
  out.tokens = std::move(key);
  out.session = session();
  out.layers.reserve(layer_count());
  for (size_t i = 0; i < layer_count(); ++i) {
    auto l = layer(i);
    // At the full length every layer is whole (an object layer too); below
    // it the index offers only lengths every layer trims to.
    out.layers.push_back(l.cut(n == length() ? l.tokens : n));
  }
  if (n == length())
    out.attachments = attachments(); // exact-boundary: only at full length
  return out;
}

entry stored_state::release(std::string ns, token_seq&& key) && {
  KVTIER_ASSERT(body_ && key.size() == length());
  if (use_count() != 1) {
    auto out = keyed(std::move(ns), std::move(key));
    *this = stored_state{};
    return out;
  }
  entry out;
  out.ns = std::move(ns);
  out.tokens = std::move(key);
  out.layers.reserve(layer_count());
  auto* v = body_->views();
  uint32_t at = 0;
  for (size_t i = 0; i < layer_count(); ++i) {
    auto& d = body_->descriptors()[i];
    layer_state l{d.kind,   d.bytes_per_token, d.window,
                  d.tokens, d.min_offset,      {}};
    l.segments.reserve(d.segments_end - at);
    for (; at < d.segments_end; ++at)
      l.segments.push_back(std::move(v[at]));
    out.layers.push_back(std::move(l));
  }
  if (body_->more) {
    out.attachments = std::move(body_->more->attachments);
    out.session = std::move(body_->more->session);
  }
  *this = stored_state{};
  return out;
}

void stored_state::collect_buffers(std::vector<buffer_ref>& out) const {
  std::unordered_set<uint64_t> seen;
  for (auto& b : out)
    seen.insert(b->id());
  for_each_view([&](const view& s) {
    if (s.buf && seen.insert(s.buf->id()).second)
      out.push_back(s.buf);
  });
}

long stored_state::use_count() const noexcept {
  return body_ ? static_cast<long>(body_->refs.load(std::memory_order_acquire))
               : 0;
}

} // namespace kvtier::tiers
