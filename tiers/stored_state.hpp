// stored_state: how the RAM tier (tiers/ram_tier.hpp) holds a prefix
// entry's state, and what a RAM hit lends (`ram_hit::donor`): the layers'
// kinds, geometry and segment views of one entry in a single allocation
// (a header, one descriptor per layer, then every layer's views in
// order), with the rarely-used parts (attachments, a session tag) behind
// one pointer that is null when there are none. It holds no tokens and no
// namespace: the tier keeps an entry's key once, in its index, and keys a
// body again when it hands one out (`keyed`). This replaces an `entry`
// behind a `std::shared_ptr` (a control block, the 144-byte entry, a
// vector of layers, a vector of views per layer: four allocations); see
// docs/ram-tier.md "How an entry holds its key".
//
// A `stored_state` is a reference-counted handle (one pointer; the count
// is atomic), immutable once made: copies share one body, and each view in
// it keeps its buffer alive, so a lent hit keeps the donor's bytes alive
// however long it is held, as lent views do. Safe to hand across threads.
// Cutting follows `layer_state::trimmed` and `entry::trimmed` exactly:
// shorter views, never a copy of bytes; attachments only at the full
// length.
#pragma once

#include "tiers/state.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::tiers {

/// One layer of a stored body, read in place (its views stay in the body).
struct stored_layer {
  layer_kind kind = layer_kind::kv;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  uint64_t tokens = 0;
  uint64_t min_offset = 0;
  std::span<const view> segments;

  /// As `layer_state::can_trim_to`.
  bool can_trim_to(uint64_t n) const noexcept;
  /// The layer as a `layer_state`, cut to `n` tokens (`can_trim_to(n)`
  /// must hold), as `layer_state::trimmed(n)` would.
  layer_state cut(uint64_t n) const;
};

class stored_state {
public:
  /// A null handle.
  stored_state() noexcept = default;

  /// The body of `e`: its layers, attachments and session (its views moved
  /// in), not its tokens or namespace. `e` must validate and be shorter
  /// than 2^32 tokens.
  static stored_state of(entry&& e);

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

  /// The whole entry keyed by `key` in `ns`, moving the views out when this
  /// is the body's only handle (else copying them); null afterwards.
  entry release(std::string ns, token_seq&& key) &&;

  /// Calls `f(const view&)` for every view: layers', then attachments'.
  template <class F>
  void for_each_view(F&& f) const {
    for (size_t i = 0; i < layer_count(); ++i)
      for (auto& v : layer(i).segments)
        f(v);
    for (auto& a : attachments())
      for (auto& v : a.segments)
        f(v);
  }

  /// Appends every distinct buffer the body references (by id) to `out`,
  /// as `collect_buffers` does for an entry.
  void collect_buffers(std::vector<buffer_ref>& out) const;

  /// Handles sharing this body (0 for a null handle).
  long use_count() const noexcept;

  /// Heap bytes of one body with these counts (its single allocation).
  static size_t footprint(size_t layers, size_t segments) noexcept;

private:
  struct body;
  explicit stored_state(body* b) noexcept
    : body_(b) {}
  entry keyed_cut(std::string ns, token_seq key) const;
  body* body_ = nullptr;
};

} // namespace kvtier::tiers
