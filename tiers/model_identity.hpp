// What stored model state means, and the name it is stored under. A
// `model_identity` is the model's full geometry (every layer's kind, bytes
// per token, window and state size) plus the identity string the engine
// gives (weights, tokenizer, KV dtype, quantisation: whatever changes the
// bytes without changing their shape). Two services whose identities
// differ in any of these never read each other's files: the SSD tier keeps
// its files in `<dir>/<fingerprint>/` and checks the fingerprint in every
// header (docs/state-model.md, "Model identity").
//
// Plain values; copy freely, use from any thread.
#pragma once

#include "geometry.hpp"

#include <string>

namespace kvtier::tiers {

struct model_identity {
  model_geometry geometry;
  /// The engine's own words for what its state bytes mean; may be empty
  /// (then only the geometry and the geometry's name tell models apart).
  std::string identity;

  bool operator==(const model_identity&) const = default;

  /// "<slug>-<32 hex digits>": the geometry's name made file-name safe
  /// (at most 40 of [a-z0-9._-]), then the XXH3-128 of a canonical
  /// encoding of the name, every layer (kind, bytes per token, window,
  /// state bytes; fields a kind does not use count as 0) and the identity
  /// string. Any change to any of these changes the digits.
  std::string fingerprint() const;

  /// The identity in words, as the SSD tier writes it to `<dir>/<fp>/MODEL`
  /// for operators and `kvtier inspect`: fingerprint, name, identity
  /// string, layers (in `model_geometry::parse_layers` syntax) and bytes
  /// per token, one `key: value` line each.
  std::string describe() const;
};

} // namespace kvtier::tiers
