// The untyped half of a sealed message: one built, immutable, flat Cap'n
// Proto message (an `Envelope` naming its body's type) plus the side views
// that hold its tensor bytes by reference. `sealed<Root>` (sealed.hpp) adds
// the typed reader; most code should use that.
//
// Ownership and threads: a carrier shares one immutable frame (the message
// words, a reader over them, the side views) through a reference count.
// Copying a carrier copies a pointer; any number of threads may read one
// carrier's frame at once (the reader's arena is set up before the frame is
// shared, and Cap'n Proto's read limiter is safe to race).
//
// Policy: side views are an in-process shortcut and never leave the
// process. `to_flat()` turns every side reference into inline `Data` and
// returns the flat bytes (`to_pieces()` the same message with its large
// payloads by reference, for a sender that writes pieces); `decode` reads
// untrusted flat bytes under explicit `reader_limits`, checks the envelope
// (type, protocol), walks every field a reader could touch, and reports failure
// as `ec::malformed_message`, `ec::message_limit_exceeded` or
// `ec::incompatible_format`. Inline Data of a decoded message stays in the flat
// buffer: payload views point into it.
#pragma once

#include <optional>

#include "messages/buffer.hpp"
#include "messages/common.capnp.h"
#include "messages/error.hpp"

#include <capnp/message.h>
#include <capnp/schema.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::msg {

/// Bounds for decoding untrusted flat bytes.
struct reader_limits {
  /// Words a reader may traverse in total (also caps the flat size).
  /// The default admits a 1 GiB message; transfers are chunked well below.
  uint64_t traversal_words = uint64_t{1} << 27;
  /// Depth of nested pointers (structs, lists) a reader may follow.
  int nesting = 32;
};

/// Largest payload one inline `Data` can hold (Cap'n Proto list limit).
inline constexpr uint64_t max_inline_payload = (uint64_t{1} << 29) - 1;

namespace detail {
struct frame;
} // namespace detail

/// A sealed message of any root type. Empty (`!valid()`) when default-made.
class carrier {
public:
  carrier() = default;

  /// Whether this carrier holds a message.
  bool valid() const noexcept {
    return frame_ != nullptr;
  }

  /// Cap'n Proto type id of the body (0 when empty).
  uint64_t root_type() const noexcept;

  /// Display name of the body's struct ("" when empty).
  std::string root_name() const;

  /// The views payloads refer to by index (tensor bytes, not copied).
  const std::vector<view>& sides() const noexcept;

  /// Whether any payload rides beside the message (it then cannot be sent
  /// to another node as it is: use `to_flat()`).
  bool has_side_buffers() const noexcept;

  /// The message words alone: flat bytes of the envelope (side bytes not
  /// included). Shared, never copied.
  const buffer_ref& words() const noexcept;

  /// The bytes of `p`: its side view, or a view of inline Data inside the
  /// words. Fails with `malformed_message` for an out-of-range side index
  /// or a length that disagrees with the bytes.
  caf::expected<view> payload(Payload::Reader p) const;

  /// Flat bytes of this message with every side payload turned into inline
  /// Data; the words themselves when there are no side buffers. Fails with
  /// `message_limit_exceeded` for a payload too large for one Data.
  caf::expected<buffer_ref> to_flat() const;

  /// The same message as `to_flat()` in pieces whose concatenation is one
  /// flat message: its segment table, its own words, and each side payload
  /// of at least `by_reference` bytes (word-aligned, whole words) as a
  /// segment of its own that is the side's memory itself, not a copy;
  /// smaller payloads are inline Data. For a sender that writes pieces one
  /// after another (the bulk lane): the receiver decodes their bytes as it
  /// decodes `to_flat()`'s. The pieces keep all they refer to alive. Fails
  /// as `to_flat()` does.
  caf::expected<std::vector<view>>
  to_pieces(uint64_t by_reference = uint64_t{64} << 10) const;

protected:
  explicit carrier(std::shared_ptr<const detail::frame> f)
    : frame_(std::move(f)) {}

  /// The body as an untyped pointer (valid carriers only).
  capnp::AnyPointer::Reader body() const;

  /// Reads flat bytes whose body must be a `root`.
  static caf::expected<std::shared_ptr<const detail::frame>>
  decode(buffer_ref flat, capnp::StructSchema root,
         const reader_limits& limits);

  std::shared_ptr<const detail::frame> frame_;

private:
  /// `to_flat` of a large message into populated memory without a copy
  /// (nullopt: it did not fit one segment; build as usual).
  std::optional<caf::expected<buffer_ref>>
  to_flat_in_place(uint64_t want) const;
};

/// The untyped half of `draft<Root>`: a message being built and its side
/// views. Single owner, single thread, until sealed.
class draft_base {
public:
  draft_base(const draft_base&) = delete;
  draft_base& operator=(const draft_base&) = delete;

  /// Appends `v` to the side views; returns its index.
  uint32_t add_side(view v);

  /// Makes `p` refer to `v` by reference (no byte copied).
  void set_payload(Payload::Builder p, view v);

  /// Side views added so far.
  const std::vector<view>& sides() const noexcept {
    return sides_;
  }

protected:
  explicit draft_base(capnp::StructSchema root);
  ~draft_base() = default;

  /// The envelope's body pointer, to init as the root struct.
  capnp::AnyPointer::Builder body();

  /// Flattens the message and shares it; the draft is spent afterwards.
  std::shared_ptr<const detail::frame> seal_frame();

private:
  capnp::StructSchema root_;
  capnp::MallocMessageBuilder builder_;
  std::vector<view> sides_;
  bool sealed_ = false;
};

} // namespace kvtier::msg
