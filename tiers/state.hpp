// The state model: what a saved model state is, independent of any tier.
//
// A `layer_state` is one model layer's state: a kind, its geometry, the
// number of tokens it encodes (its offset) and its bytes as a list of segments
// (zero-copy views of immutable buffers). A state extended from a reused
// prefix lists the donor's segments followed by its own, so shared prefixes
// are stored once. An `entry` is a token prefix, its namespace and the layer
// states (plus method attachments and a session tag) that encode exactly that
// prefix.
//
// Trimming policy (docs/state-model.md "Layer states"), per kind:
//   kv         token-major; trimmable to any n >= min_offset: a shorter view.
//   ring       a sliding window of `window` token slots (slot = pos % window);
//              token-major and trimmable like kv only while not wrapped,
//              i.e. while offset < window.
//   recurrent  fixed-size state, valid only at its exact offset: never trims.
//   object     an exact tensor object (encoder output): never trims.
// Trimming to the current offset always succeeds (identity). Nothing here
// copies bytes. Method attachments are exact-boundary: an entry trimmed below
// its own length is served without them.
//
// Values of these types are immutable in practice and cheap to copy (they
// copy buffer references, not bytes); they are safe to hand across threads.
#pragma once

#include "../messages/buffer.hpp"
#include "../messages/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::tiers {

using token = uint32_t;
using token_seq = std::vector<token>;

/// Retention priorities an engine may give the state a request publishes:
/// 0 to 100, larger kept longer; `default_priority` (TensorRT-LLM's
/// default) when it gives none (docs/eviction.md).
inline constexpr uint8_t max_priority = 100;
inline constexpr uint8_t default_priority = 35;

enum class layer_kind : uint8_t { kv = 0, ring = 1, recurrent = 2, object = 3 };

const char* to_string(layer_kind k);

/// One model layer's state.
struct layer_state {
  layer_kind kind = layer_kind::kv;
  /// kv, ring: bytes of one token row. 0 for recurrent and object.
  uint32_t bytes_per_token = 0;
  /// ring: window in tokens. 0 otherwise.
  uint32_t window = 0;
  /// Tokens this state encodes (its offset).
  uint64_t tokens = 0;
  /// Cannot be trimmed below this offset (converted or quantized there).
  uint64_t min_offset = 0;
  /// The bytes, in order.
  std::vector<view> segments;

  static layer_state kv(uint32_t bytes_per_token, uint64_t tokens,
                        std::vector<view> segments, uint64_t min_offset = 0);
  static layer_state ring(uint32_t bytes_per_token, uint32_t window,
                          uint64_t tokens, std::vector<view> segments,
                          uint64_t min_offset = 0);
  static layer_state recurrent(uint64_t tokens, std::vector<view> segments);
  static layer_state object(std::vector<view> segments);

  /// Bytes this state holds (sum of its segment lengths).
  uint64_t byte_length() const noexcept;

  /// ring only: true once tokens have overwritten earlier slots.
  bool wrapped() const noexcept;

  /// Whether this state can be cut back to encode exactly `n` tokens.
  bool can_trim_to(uint64_t n) const noexcept;

  /// This state cut back to `n` tokens: shorter views, never a copy.
  /// Fails with `ec::not_trimmable`, naming the rule, when it cannot.
  caf::expected<layer_state> trimmed(uint64_t n) const;

  /// Checks that the byte length matches kind and geometry.
  caf::error validate() const;
};

/// An exact-boundary tensor a producing method attaches to an entry.
struct attachment {
  std::string name;
  std::vector<view> segments;
};

/// Tokens + namespace + the states that encode exactly that token prefix.
struct entry {
  std::string ns;
  token_seq tokens;
  std::vector<layer_state> layers;
  std::vector<attachment> attachments;
  std::optional<std::string> session;
  /// The retention priority it is kept by where it goes next (0 to
  /// `max_priority`): the RAM tier sets it on what it spills, from the
  /// publishing request's, so the SSD tier ranks the file by it; an SSD
  /// restore sets the file's and a RAM export the donor's, so RAM keeps a
  /// restored or fetched entry by it. Not part of the state: a tier
  /// storing the entry keeps its own (a publish takes its request's).
  uint8_t priority = default_priority;

  /// Whether every layer can be trimmed to `n` tokens (n <= size()).
  bool can_trim_to(uint64_t n) const noexcept;

  /// Whether the entry can serve any shorter prefix at all.
  bool trimmable() const noexcept;

  /// A copy cut back to the first `n` tokens; attachments dropped when
  /// n < size(). Fails with `ec::not_trimmable` like `layer_state::trimmed`.
  caf::expected<entry> trimmed(uint64_t n) const;

  /// Bytes held by layers and attachments (shared segments counted each time
  /// they appear here; tiers count each shared buffer once).
  uint64_t byte_length() const noexcept;

  /// Checks every layer against its geometry and token count.
  caf::error validate() const;

  size_t size() const noexcept {
    return tokens.size();
  }
};

/// Appends every distinct buffer referenced by `e` (by id) to `out`.
void collect_buffers(const entry& e, std::vector<buffer_ref>& out);

/// Length of the longest common prefix of `a` and `b`.
size_t common_prefix(std::span<const token> a, std::span<const token> b);

/// The usable prefix (docs/state-model.md "Entries"): for prompt P and entry E,
/// p = min(lcp(E, P), len(P) - 1); returns p when E is usable at p
/// (p == len(E) or every layer of E can trim to p), else nullopt.
/// An empty prompt, or p == 0, is never usable.
std::optional<uint64_t> usable_prefix(const entry& e,
                                      std::span<const token> prompt);

} // namespace kvtier::tiers
