#include "tiers/stored_state.hpp"

#include "messages/assert.hpp"
#include "messages/small_pool.hpp"

#include <algorithm>
#include <atomic>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kvtier::tiers {

namespace {

/// Which of a layer's values its body stores (the rest follow from the
/// entry's length and the layer's geometry).
enum rule : uint8_t {
  tokens_stored = 1, // its token count is not the entry's length
  min_stored = 2,    // its min_offset is neither 0 nor the entry's length
  min_at_length = 4, // its min_offset is the entry's length
  last_stored = 8,   // its last segment's length is not derived
};

/// A layer's shape: what every body of the layout shares.
struct layer_form {
  layer_kind kind = layer_kind::kv;
  uint8_t rules = 0;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  uint32_t segments = 0;

  friend bool operator==(const layer_form&, const layer_form&) = default;
};

/// The bytes a kv or ring layer of `tokens` holds (what its segments sum to,
/// `layer_state::validate`).
uint64_t expected_bytes(const layer_form& f, uint64_t tokens) noexcept {
  auto rows =
    f.kind == layer_kind::ring ? std::min<uint64_t>(tokens, f.window) : tokens;
  return rows * f.bytes_per_token;
}

/// Words a body stores for a layer of form `f`.
uint32_t words_of(const layer_form& f) noexcept {
  uint32_t n = 2 * f.segments;
  if (f.segments > 0 && !(f.rules & last_stored))
    --n;
  return n + ((f.rules & tokens_stored) ? 1 : 0)
         + ((f.rules & min_stored) ? 1 : 0);
}

layer_form form_of(const layer_state& l, uint64_t length) {
  KVTIER_ASSERT(l.segments.size() < UINT32_MAX);
  layer_form f{l.kind, 0, l.bytes_per_token, l.window,
               static_cast<uint32_t>(l.segments.size())};
  if (l.tokens != length)
    f.rules |= tokens_stored;
  if (l.min_offset == length && length != 0)
    f.rules |= min_at_length;
  else if (l.min_offset != 0)
    f.rules |= min_stored;
  if (l.kind != layer_kind::kv && l.kind != layer_kind::ring)
    f.rules |= last_stored;
  return f;
}

/// What most entries lack.
struct rare {
  std::vector<attachment> attachments;
  std::optional<std::string> session;
};

const std::vector<attachment> no_attachments;
const std::optional<std::string> no_session;

} // namespace

/// A shape bodies share: immutable once made, counted by its bodies and
/// the `body_layouts` that interned it.
struct body_layout {
  mutable std::atomic<uint32_t> refs{1};
  bool rare = false;
  uint32_t words = 0;    // stored per body
  uint32_t segments = 0; // buffer references per body
  std::vector<layer_form> forms;
  std::vector<uint32_t> word_at; // per layer: its first word
  std::vector<uint32_t> seg_at;  // per layer: its first buffer

  body_layout(std::vector<layer_form> f, bool r)
    : rare(r)
    , forms(std::move(f)) {
    for (auto& x : forms) {
      word_at.push_back(words);
      seg_at.push_back(segments);
      words += words_of(x);
      segments += x.segments;
    }
  }

  void hold() const noexcept {
    refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop() const noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete this;
  }
};

struct body_layouts::impl {
  std::unordered_multimap<uint64_t, const body_layout*> by_hash;
  const body_layout* last = nullptr; // the one the previous body took
  std::vector<layer_form> scratch;
  size_t prune_at = 64;

  ~impl() {
    for (auto& [h, l] : by_hash)
      l->drop();
  }

  static uint64_t hash_of(const std::vector<layer_form>& forms, bool rare) {
    uint64_t h = rare ? 0x9e3779b97f4a7c15u : 0x2545f4914f6cdd1du;
    for (auto& f : forms) {
      for (uint64_t w : {uint64_t{static_cast<uint8_t>(f.kind)},
                         uint64_t{f.rules}, uint64_t{f.bytes_per_token},
                         uint64_t{f.window}, uint64_t{f.segments}}) {
        h ^= w + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
      }
    }
    return h;
  }

  /// Drops layouts only this cache holds, once it has doubled.
  void prune() {
    if (by_hash.size() < prune_at)
      return;
    for (auto it = by_hash.begin(); it != by_hash.end();) {
      if (it->second->refs.load(std::memory_order_acquire) == 1) {
        if (last == it->second)
          last = nullptr;
        it->second->drop();
        it = by_hash.erase(it);
      } else {
        ++it;
      }
    }
    prune_at = std::max<size_t>(64, 2 * by_hash.size());
  }

  /// The layout of `e`'s shape, held once more for the caller.
  const body_layout* intern(const entry& e) {
    bool rare = !e.attachments.empty() || e.session.has_value();
    scratch.clear();
    for (auto& l : e.layers)
      scratch.push_back(form_of(l, e.tokens.size()));
    if (last && last->rare == rare && last->forms == scratch) {
      last->hold();
      return last;
    }
    auto h = hash_of(scratch, rare);
    auto [lo, hi] = by_hash.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (it->second->rare == rare && it->second->forms == scratch) {
        last = it->second;
        last->hold();
        return last;
      }
    prune();
    auto* made = new body_layout(scratch, rare); // the cache's reference
    by_hash.emplace(h, made);
    last = made;
    made->hold();
    return made;
  }
};

body_layouts::body_layouts()
  : impl_(std::make_unique<impl>()) {}
body_layouts::~body_layouts() = default;
body_layouts::body_layouts(body_layouts&&) noexcept = default;
body_layouts& body_layouts::operator=(body_layouts&&) noexcept = default;

size_t body_layouts::size() const noexcept {
  return impl_ ? impl_->by_hash.size() : 0;
}

/// The single allocation: this header, then [a `rare*` when the layout
/// says so], the layout's words, then its buffer references.
struct stored_state::body {
  std::atomic<uint32_t> refs{1};
  uint32_t length = 0;
  const body_layout* layout = nullptr;

  static size_t footprint(const body_layout& l) noexcept {
    return sizeof(body) + (l.rare ? sizeof(rare*) : 0)
           + l.words * sizeof(uint64_t) + l.segments * sizeof(buffer_ref);
  }
  rare*& more() noexcept {
    KVTIER_ASSERT(layout->rare);
    return *reinterpret_cast<rare**>(this + 1);
  }
  const rare* more_or_null() const noexcept {
    return layout->rare ? *reinterpret_cast<rare* const*>(this + 1) : nullptr;
  }
  uint64_t* words() noexcept {
    return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(this + 1)
                                       + (layout->rare ? sizeof(rare*) : 0));
  }
  const uint64_t* words() const noexcept {
    return const_cast<body*>(this)->words();
  }
  buffer_ref* bufs() noexcept {
    return reinterpret_cast<buffer_ref*>(words() + layout->words);
  }
  const buffer_ref* bufs() const noexcept {
    return const_cast<body*>(this)->bufs();
  }
};

static_assert(sizeof(stored_state) == sizeof(void*));
static_assert(alignof(buffer_ref) <= alignof(uint64_t));
static_assert(sizeof(buffer_ref) % sizeof(uint64_t) == 0);

view stored_layer::segment(size_t j) const {
  KVTIER_ASSERT(j < count_);
  return view{bufs_[j], segment_offset(j), segment_length(j)};
}

uint64_t stored_layer::segment_length(size_t j) const noexcept {
  return j + 1 < count_ ? words_[2 * j + 1] : last_length_;
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

template <class Ref>
layer_state stored_layer::cut_with(uint64_t n, Ref&& ref) const {
  KVTIER_ASSERT(can_trim_to(n));
  layer_state out{kind, bytes_per_token, window, n, min_offset, {}};
  // The first n token rows (all of them at the full length), as
  // `layer_state::trimmed`.
  uint64_t left = n == tokens ? UINT64_MAX : n * bytes_per_token;
  out.segments.reserve(count_);
  for (size_t j = 0; j < count_ && left > 0; ++j) {
    auto len = segment_length(j);
    auto take = std::min(left, len);
    out.segments.push_back(view{ref(j), segment_offset(j), take});
    if (n != tokens)
      left -= take;
  }
  return out;
}

layer_state stored_layer::cut(uint64_t n) const {
  return cut_with(n,
                  [this](size_t j) -> const buffer_ref& { return bufs_[j]; });
}

stored_state stored_state::of(entry&& e, body_layouts& layouts) {
  KVTIER_ASSERT(e.tokens.size() < UINT32_MAX);
  auto length = e.tokens.size();
  auto* layout = layouts.impl_->intern(e);
  auto size = body::footprint(*layout);
  void* raw;
  try {
    raw = small_allocate(size);
  } catch (...) {
    layout->drop();
    throw;
  }
  auto* b = new (raw) body;
  b->length = static_cast<uint32_t>(length);
  b->layout = layout;
  if (layout->rare)
    b->more() = nullptr;
  auto* w = b->words();
  auto* bufs = b->bufs();
  for (size_t i = 0; i < e.layers.size(); ++i) {
    auto& l = e.layers[i];
    auto& f = layout->forms[i];
    if (f.rules & tokens_stored)
      *w++ = l.tokens;
    if (f.rules & min_stored)
      *w++ = l.min_offset;
    for (size_t j = 0; j < l.segments.size(); ++j) {
      auto& s = l.segments[j];
      *w++ = s.offset;
      if (j + 1 < l.segments.size() || (f.rules & last_stored))
        *w++ = s.length;
      new (bufs++) buffer_ref(std::move(s.buf)); // noexcept
    }
  }
  KVTIER_ASSERT(w == b->words() + layout->words);
  stored_state out(b);
  if (layout->rare)
    b->more() = new rare{std::move(e.attachments), std::move(e.session)};
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
  auto* layout = body_->layout;
  auto* bufs = body_->bufs();
  for (uint32_t i = 0; i < layout->segments; ++i)
    bufs[i].~buffer_ref();
  if (layout->rare)
    delete body_->more();
  auto size = body::footprint(*layout);
  body_->~body();
  small_free(body_, size);
  layout->drop();
}

uint64_t stored_state::length() const noexcept {
  return body_ ? body_->length : 0;
}

size_t stored_state::layer_count() const noexcept {
  return body_ ? body_->layout->forms.size() : 0;
}

stored_layer stored_state::layer(size_t i) const noexcept {
  KVTIER_ASSERT(i < layer_count());
  auto& layout = *body_->layout;
  auto& f = layout.forms[i];
  auto* w = body_->words() + layout.word_at[i];
  stored_layer out;
  out.kind = f.kind;
  out.bytes_per_token = f.bytes_per_token;
  out.window = f.window;
  out.tokens = (f.rules & tokens_stored) ? *w++ : body_->length;
  out.min_offset = (f.rules & min_stored)      ? *w++
                   : (f.rules & min_at_length) ? body_->length
                                               : 0;
  out.bufs_ = body_->bufs() + layout.seg_at[i];
  out.words_ = w;
  out.count_ = f.segments;
  if (f.segments > 0) {
    if (f.rules & last_stored) {
      out.last_length_ = w[2 * f.segments - 1];
    } else {
      // The layer's bytes less its other segments' (it validated).
      uint64_t others = 0;
      for (uint32_t j = 0; j + 1 < f.segments; ++j)
        others += w[2 * j + 1];
      out.last_length_ = expected_bytes(f, out.tokens) - others;
    }
  }
  return out;
}

const std::vector<attachment>& stored_state::attachments() const noexcept {
  auto* r = body_ ? body_->more_or_null() : nullptr;
  return r ? r->attachments : no_attachments;
}

const std::optional<std::string>& stored_state::session() const noexcept {
  auto* r = body_ ? body_->more_or_null() : nullptr;
  return r ? r->session : no_session;
}

uint64_t stored_state::layer_bytes() const noexcept {
  uint64_t n = 0;
  for (size_t i = 0; i < layer_count(); ++i) {
    auto l = layer(i);
    for (size_t j = 0; j < l.segment_count(); ++j)
      n += l.segment_length(j);
  }
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
  // The only handle: the views take the body's references (the body goes
  // below), in its order: layer by layer, segment by segment.
  entry out;
  out.ns = std::move(ns);
  out.tokens = std::move(key);
  out.layers.reserve(layer_count());
  auto* bufs = body_->bufs();
  for (size_t i = 0; i < layer_count(); ++i) {
    auto l = layer(i);
    out.layers.push_back(
      l.cut_with(l.tokens, [bufs](size_t j) { return std::move(bufs[j]); }));
    bufs += l.segment_count();
  }
  if (auto* r = body_->layout->rare ? body_->more() : nullptr) {
    out.attachments = std::move(r->attachments);
    out.session = std::move(r->session);
  }
  *this = stored_state{};
  return out;
}

void stored_state::collect_buffers(std::vector<buffer_ref>& out) const {
  std::unordered_set<uint64_t> seen;
  for (auto& b : out)
    seen.insert(b->id());
  auto add = [&](const buffer_ref& b) {
    if (b && seen.insert(b->id()).second)
      out.push_back(b);
  };
  if (body_)
    for (uint32_t i = 0; i < body_->layout->segments; ++i)
      add(body_->bufs()[i]);
  for (auto& a : attachments())
    for (auto& v : a.segments)
      add(v.buf);
}

long stored_state::use_count() const noexcept {
  return body_ ? static_cast<long>(body_->refs.load(std::memory_order_acquire))
               : 0;
}

size_t stored_state::footprint() const noexcept {
  return body_ ? body::footprint(*body_->layout) : 0;
}

} // namespace kvtier::tiers
