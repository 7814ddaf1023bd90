// Conversions between the state model (`tiers::entry`, state.hpp) and its
// message form (`msg::Entry`, messages/common.capnp). Owned by tiers/; used
// by every actor that sends or receives state.
//
// Writing never copies tensor bytes: each segment becomes a side view of
// the draft (a reference to the same buffer). Reading turns each payload
// back into a view: of the carrier's side buffer in-process, or of the
// flat message's inline Data after `from_flat` (the view keeps the flat
// bytes alive). Reading validates what the schema cannot: known layer
// kinds and side indices (else `malformed_message`: not a valid message),
// descriptor lengths that match the segments and the geometry rules of
// `entry::validate()` (else `invalid_argument`: a valid message carrying
// an entry that does not hold together). Plain functions, no state; a
// carrier may be read from any thread.
#pragma once

#include "messages/sealed.hpp"
#include "tiers/geometry.hpp"
#include "tiers/state.hpp"
#include "tiers/storage_key.hpp"
#include "tiers/stored_state.hpp"

#include <optional>
#include <span>

namespace kvtier::tiers {

/// Writes `e` into `out`; its segments become side views of `d`.
void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& e);

/// Writes `e` cut to its first `n` tokens (`e.can_trim_to(n)` must hold),
/// as `write_entry(d, out, *e.trimmed(n))` would, without building the
/// trimmed entry first: what a RAM hit lends (tiers/ram_types.hpp).
void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& e,
                 uint64_t n);

/// Writes the stored state `body` (what a RAM hit lends: `ram_hit::donor`)
/// in `ns`, cut to `key.size()` tokens and keyed by `key`, as the
/// 4-argument form would for the same state held as an entry keyed by a
/// key that starts with `key`. Every layer must trim to `key.size()`
/// (`key.size() <= body.length()`).
void write_entry(msg::draft_base& d, msg::Entry::Builder out,
                 const stored_state& body, const std::string& ns,
                 std::span<const token> key);

/// Writes `body`, a state of `length` tokens whose own `tokens` are not
/// read, cut to
/// `key.size()` tokens and keyed by `key`, as the 4-argument form would
/// for the same state keyed by a key that starts with `key`. Every layer
/// must trim to `key.size()` (`key.size() <= length`).
void write_entry(msg::draft_base& d, msg::Entry::Builder out, const entry& body,
                 uint64_t length, std::span<const token> key);

/// Reads an entry out of carrier `c`. Bytes that are not a valid message
/// fail with `ec::malformed_message` (an unknown layer kind, an
/// out-of-range side index); an entry that does not hold together fails
/// with `ec::invalid_argument` naming the layer and field (a descriptor's
/// byteLength that disagrees with its segments, geometry
/// `entry::validate()` rejects).
caf::expected<entry> read_entry(const msg::carrier& c, msg::Entry::Reader in);

/// Checks the layers `in` describes against the running geometry `g`
/// (`model_geometry::check`: count, kinds, bytes per token, windows, state
/// sizes) from their descriptors alone, without reading a payload: the
/// door check for state an engine hands in (publish, checkpoint). A
/// descriptor's byte length stands for its layer's bytes; `read_entry`
/// later refuses one that disagrees with its segments. Errors:
/// `ec::invalid_argument` naming the layer and the field,
/// `ec::malformed_message` for an unknown kind. A malformed message may
/// throw `kj::Exception` (callers run inside `decoding`).
caf::error check_layers(const model_geometry& g, msg::Entry::Reader in);

/// Writes `in` into `out` (initialized with `in.size()` elements); the
/// segments become side views of `d`. Also the form of a stored object.
void write_attachments(msg::draft_base& d,
                       capnp::List<msg::Attachment>::Builder out,
                       const std::vector<attachment>& in);

/// Reads attachments back as views; fails like `read_entry`.
caf::expected<std::vector<attachment>>
read_attachments(const msg::carrier& c,
                 capnp::List<msg::Attachment>::Reader in);

/// Writes a layer's kind and geometry (no bytes).
void write_descriptor(msg::LayerDescriptor::Builder out, const layer_state& l);

/// Reads a layer's kind and geometry; segments stay empty. Fails with
/// `ec::malformed_message` on an unknown kind.
caf::expected<layer_state> read_descriptor(msg::LayerDescriptor::Reader in);

/// Writes a prefix entry's key (namespace and tokens).
void write_key(msg::EntryKey::Builder out, std::string_view ns,
               std::span<const token> tokens);

/// Writes a storage key of any kind (prefix, checkpoint, object).
void write_key(msg::EntryKey::Builder out, const storage_key& key);

/// Reads a key with its kind.
storage_key read_key(msg::EntryKey::Reader in);

/// Writes a checkpoint's request and attempt.
void write_owner(msg::CheckpointKey::Builder out, const storage_key& key);

/// The tokens of a token list.
token_seq read_tokens(capnp::List<uint32_t>::Reader in);

/// The tokens of `in` in place, without a copy, valid while the message
/// lives; nullopt when the list is not packed 4-byte elements on this
/// (little-endian) host, in which case `read_tokens` copies them.
std::optional<std::span<const token>>
token_view(capnp::List<uint32_t>::Reader in);

/// The tokens of a message's token list for a lookup: in place when
/// `token_view` can, else a copy it holds. Valid while the message lives.
class tokens_of {
public:
  explicit tokens_of(capnp::List<uint32_t>::Reader in) {
    if (auto v = token_view(in))
      view_ = *v;
    else
      view_ = copy_ = read_tokens(in);
  }
  tokens_of(const tokens_of&) = delete;
  tokens_of& operator=(const tokens_of&) = delete;

  std::span<const token> span() const noexcept {
    return view_;
  }

private:
  token_seq copy_;
  std::span<const token> view_;
};

/// Copies `tokens` into `out`, initialized with `tokens.size()` elements.
void write_tokens(capnp::List<uint32_t>::Builder out,
                  std::span<const token> tokens);

} // namespace kvtier::tiers
