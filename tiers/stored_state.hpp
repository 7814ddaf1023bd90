// stored_state: how the RAM tier (tiers/ram_tier.hpp) holds a prefix
// entry's state, and what a RAM hit lends (`ram_hit::donor`): the layers'
// segment views of one entry in a single small allocation, described by a
// *layout* that every entry of the same shape shares (`body_layouts`).
// It holds no tokens and no namespace: the tier keeps an entry's key once,
// in its index, and keys a body again when it hands one out (`keyed`).
//
// What a body holds (docs/ram-tier.md "How an entry holds its key"):
// - a header: a reference count, the entry's length, its layout;
// - per layer only what its layout cannot say: its token count when it is
//   not the entry's length (an object layer), its minimum offset unless it
//   is 0 or the entry's length, and per segment the offset in its buffer
//   and the length, except the last segment's length of a kv or ring
//   layer, which is the layer's bytes less the others';
// - one buffer reference per segment;
// - a pointer to the rarely-used parts (attachments, a session tag), only
//   when its layout says there are some.
// The layout holds each layer's kind, bytes per token, window, segment
// count and which of those values the body stores: a model's geometry is
// held once per shape, not once per entry. One kv layer in one view, the
// commonest small entry, is a 40-byte body. Bodies come from the small
// block pool (messages/small_pool.hpp).
//
// A `stored_state` is a reference-counted handle (one pointer; the count
// is atomic), immutable once made: copies share one body, and each
// segment in it keeps its buffer alive, so a lent hit keeps the donor's
// bytes alive however long it is held, as lent views do. Safe to hand
// across threads (layouts are immutable and counted atomically too).
// Cutting follows `layer_state::trimmed` and `entry::trimmed` exactly:
// shorter views, never a copy of bytes; attachments only at the full
// length.
#pragma once

#include "tiers/state.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// The layouts bodies share, interned by the one owner that makes bodies
/// (a RAM tier). Not thread-safe; bodies keep their layouts alive after
/// this is gone. Layouts no body uses any more are dropped as new ones
/// come in.
class body_layouts {
public:
  body_layouts();
  ~body_layouts();
  body_layouts(body_layouts&&) noexcept;
  body_layouts& operator=(body_layouts&&) noexcept;

  /// Layouts held now (each shared by the bodies of one shape).
  size_t size() const noexcept;

  struct impl;

private:
  friend class stored_state;
  std::unique_ptr<impl> impl_;
};

/// One layer of a stored body, read in place.
struct stored_layer {
  layer_kind kind = layer_kind::kv;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  uint64_t tokens = 0;
  uint64_t min_offset = 0;

  size_t segment_count() const noexcept {
    return count_;
  }
  /// Segment `j` as a view (its buffer reference copied).
  view segment(size_t j) const;
  uint64_t segment_offset(size_t j) const noexcept {
    return words_[2 * j];
  }
  uint64_t segment_length(size_t j) const noexcept;

  /// As `layer_state::can_trim_to`.
  bool can_trim_to(uint64_t n) const noexcept;
  /// The layer as a `layer_state`, cut to `n` tokens (`can_trim_to(n)`
  /// must hold), as `layer_state::trimmed(n)` would.
  layer_state cut(uint64_t n) const;

private:
  friend class stored_state;
  /// `cut(n)`, segment j's buffer reference made by `ref(j)` (a copy, or
  /// the body's own when the body goes: `stored_state::release`).
  template <class Ref>
  layer_state cut_with(uint64_t n, Ref&& ref) const;

  const buffer_ref* bufs_ = nullptr;
  const uint64_t* words_ = nullptr; // offset, length per segment
  uint32_t count_ = 0;
  uint64_t last_length_ = 0;
};

class stored_state {
public:
  /// A null handle.
  stored_state() noexcept = default;

  /// The body of `e`: its layers, attachments and session (its views moved
  /// in), not its tokens or namespace, in a layout interned in `layouts`.
  /// `e` must validate and be shorter than 2^32 tokens.
  static stored_state of(entry&& e, body_layouts& layouts);

  stored_state(const stored_state& other) noexcept;
  stored_state(stored_state&& other) noexcept;
  stored_state& operator=(const stored_state& other) noexcept;
  stored_state& operator=(stored_state&& other) noexcept;
  ~stored_state();

  explicit operator bool() const noexcept {
    return body_ != nullptr;
  }

  /// Tokens the state encodes (the entry's length).
  uint64_t length() const noexcept;
  size_t layer_count() const noexcept;
  stored_layer layer(size_t i) const noexcept;
  const std::vector<attachment>& attachments() const noexcept;
  const std::optional<std::string>& session() const noexcept;

  /// Bytes of the layers' segments (what a fetch of the entry moves).
  uint64_t layer_bytes() const noexcept;

  /// The entry keyed by `key` in `ns`: whole (attachments included) when
  /// `key.size() == length()`, else cut to `key.size()` tokens without
  /// attachments (every layer must trim to it).
  entry keyed(std::string ns, std::span<const token> key) const;
  entry keyed(std::string ns, token_seq&& key) const;

  /// The whole entry keyed by `key` in `ns`, moving the buffer references
  /// out when this is the body's only handle (else copying them); null
  /// afterwards.
  entry release(std::string ns, token_seq&& key) &&;

  /// Calls `f(const view&)` for every view: layers', then attachments'.
  template <class F>
  void for_each_view(F&& f) const {
    for (size_t i = 0; i < layer_count(); ++i) {
      auto l = layer(i);
      for (size_t j = 0; j < l.segment_count(); ++j)
        f(l.segment(j));
    }
    for (auto& a : attachments())
      for (auto& v : a.segments)
        f(v);
  }

  /// Appends every distinct buffer the body references (by id) to `out`,
  /// as `collect_buffers` does for an entry.
  void collect_buffers(std::vector<buffer_ref>& out) const;

  /// Handles sharing this body (0 for a null handle).
  long use_count() const noexcept;

  /// Bytes of the body's allocation (0 for a null handle); its layout and
  /// rarely-used parts are apart.
  size_t footprint() const noexcept;

private:
  struct body;
  explicit stored_state(body* b) noexcept
    : body_(b) {}
  entry keyed_cut(std::string ns, token_seq key) const;
  body* body_ = nullptr;
};

} // namespace kvtier::tiers
