// Storage keys: what a stored entry *is*, beyond its namespace and tokens.
// A prefix entry (what `publish` offers, what a prompt lookup may serve), a
// generation checkpoint (one engine request's resumable point), or an
// exact tensor object (an encoder output, `objects()`). The kind is part of the
// key everywhere state is stored or named (SSD headers and file names, messages
// between actors), never a convention on the namespace string: no `publish` in
// any namespace can name, replace or be found as a checkpoint, and no prompt
// lookup can return one.
//
// A checkpoint's key is (request id, ns, tokens); `attempt` says which try
// of the request wrote it (the owner the checkpoint store remembers) and is
// recorded beside the key, not part of it: a retry that rewrites the same
// tokens replaces the same file. An object's key is the engine's exact
// object key, carried in `ns` with no tokens; it is found by that key
// only. Plain values; copy freely.
#pragma once

#include "tiers/state.hpp"

#include <compare>
#include <cstdint>
#include <string>

namespace kvtier::tiers {

/// The kinds of stored keys (the SSD header's key kind field).
enum class key_kind : uint8_t {
  /// A reusable prefix entry: found by prompt lookups in its namespace.
  prefix = 0,
  /// A generation checkpoint of one engine request: found only by its
  /// request's own lookup, never by a prompt lookup.
  checkpoint = 1,
  /// An exact tensor object (an encoder output): found only by its exact
  /// key (`ns` holds it; no tokens), never by a prompt lookup.
  object = 2,
};

const char* to_string(key_kind k);

struct storage_key {
  key_kind kind = key_kind::prefix;
  std::string ns;
  token_seq tokens;
  /// checkpoint: the engine request id (part of the key); 0 otherwise.
  uint64_t request = 0;
  /// checkpoint: the attempt that wrote it (not part of the key); 0
  /// otherwise.
  uint32_t attempt = 0;

  static storage_key prefix(std::string ns, token_seq tokens) {
    return {key_kind::prefix, std::move(ns), std::move(tokens), 0, 0};
  }

  static storage_key checkpoint(uint64_t request, uint32_t attempt,
                                std::string ns, token_seq tokens) {
    return {key_kind::checkpoint, std::move(ns), std::move(tokens), request,
            attempt};
  }

  /// The object stored under the engine's exact key `key`.
  static storage_key object(std::string key) {
    return {key_kind::object, std::move(key), {}, 0, 0};
  }

  /// Whether `o` names the same stored key (everything but the attempt).
  bool same_key(const storage_key& o) const noexcept {
    return kind == o.kind && request == o.request && ns == o.ns
           && tokens == o.tokens;
  }

  auto operator<=>(const storage_key&) const = default;
};

/// A checkpoint file a store holds, as its header says: the key (with the
/// attempt that wrote it) and the file's write id, which orders the files
/// of one directory by when they were written.
struct checkpoint_file {
  storage_key key;
  uint64_t write_id = 0;
};

} // namespace kvtier::tiers
