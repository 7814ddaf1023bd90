// The correctness oracle: a synthetic engine whose state for a token prefix is
// a pure function of (namespace, layer, the prefix), so any state kvtier
// serves can be checked byte for byte against what a fresh prefill would
// have produced (docs/oracle.md).
//
// How bytes are made: a chain hash h_i = mix(h_{i-1}, token_i) starting from
// a hash of the namespace. Row i of a kv/ring layer L is a pseudo-random
// expansion of mix(h_i, L); a recurrent layer holds an expansion of
// mix(h_{N-1}, L) of its fixed size; an object layer an expansion of
// mix(hash(ns), L). A ring keeps token i in slot i % window. Prefill of N
// tokens costs O(N) (hashing plus writing each row once); `extend` reuses a
// shorter state's segments (kv and unwrapped ring layers keep the donor's
// views and add one new segment) and writes only the new rows.
//
// The engine is stateless after construction: every call is const and safe
// from any number of threads.
#pragma once

#include "tiers/geometry.hpp"
#include "tiers/state.hpp"

#include <span>
#include <string_view>

namespace kvtier::runtime {

class oracle_engine {
public:
  /// `attachment_bytes` > 0 adds one exact-boundary attachment ("draft") of
  /// that size to every state produced. A non-zero `salt` stands for the
  /// rest of a model's identity (weights, KV dtype): engines with other
  /// salts produce other bytes for the same geometry, so a test can tell
  /// two models of one shape apart. Generated tokens do not depend on it.
  explicit oracle_engine(tiers::model_geometry geometry,
                         uint32_t attachment_bytes = 0, uint64_t salt = 0);

  const tiers::model_geometry& geometry() const noexcept {
    return geometry_;
  }

  /// A fresh prefill of `tokens` in `ns`: the reference state.
  tiers::entry prefill(std::string_view ns,
                       std::span<const tiers::token> tokens) const;

  /// Extends `reused` (a state for a prefix of `tokens`, e.g. what the cache
  /// lent) to all of `tokens`, sharing its segments where the layout allows.
  /// Fails with `ec::invalid_argument` when `reused` is not a prefix state
  /// of `tokens` in the same namespace or does not match the geometry.
  caf::expected<tiers::entry>
  extend(const tiers::entry& reused,
         std::span<const tiers::token> tokens) const;

  /// Checks every byte of `e` (layers and attachments) against a fresh
  /// prefill of `e.tokens` in `e.ns`, without materializing the prefill.
  /// Returns `ec::corrupt_data` naming the first layer, token and byte that
  /// differ, or `ec::invalid_argument` for a shape that does not match.
  caf::error verify(const tiers::entry& e) const;

  /// `verify`, plus whether `served` is state for a request with `prompt`
  /// in `ns` at all: the same namespace, and either a prefix of the prompt
  /// leaving at least one token to forward (a prefix hit) or, when
  /// `checkpoint`, a generation whose tokens begin with the whole prompt.
  /// `ec::corrupt_data` names what does not belong.
  caf::error verify_served(const tiers::entry& served, std::string_view ns,
                           std::span<const tiers::token> prompt,
                           bool checkpoint) const;

  /// `count` deterministic "generated" tokens continuing `tokens` (a pure
  /// function of the prefix), drawn from [0, vocab).
  tiers::token_seq generate(std::string_view ns,
                            std::span<const tiers::token> tokens, size_t count,
                            uint32_t vocab = 32000) const;

private:
  /// The chain's starting hash for `ns` (the salt mixed in).
  uint64_t seed(std::string_view ns) const;

  tiers::model_geometry geometry_;
  uint32_t attachment_bytes_;
  uint64_t salt_;
};

} // namespace kvtier::runtime
