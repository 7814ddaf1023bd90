// Request traces with prefix structure, for replay and the hit-ratio
// reference (docs/traces.md). Reads the formats of the traces in
// tests/traces/ (each file plain or gzip-compressed, `.gz`):
//   mooncake  JSONL {timestamp ms, input_length, output_length, hash_ids}:
//             512-token prefix-chained blocks, the last one partial.
//   weka      one JSON conversation per file {block_size 64, requests[{t,
//             in, out, model, hash_ids}], with nested `subagent` requests};
//             only full blocks are hashed, ids are local to a file, so keys
//             are scoped by file and model. A directory merges every file,
//             each conversation starting `conv_stagger_s` after the last.
//   azure     CSV TIMESTAMP,ContextTokens,GeneratedTokens: lengths only; no
//             request shares a block with another.
// Block ids become globally unique 64-bit keys; `prompt_tokens` expands each
// key into `block_size` deterministic tokens, so equal block keys give
// equal prefixes and different keys different ones.
//
// Plain values; loading is single-threaded, the results are read-only.
#pragma once

#include "tiers/state.hpp"

#include <string>
#include <vector>

namespace kvtier::runtime {

enum class trace_format { mooncake, weka, azure };

const char* to_string(trace_format f);

struct trace_request {
  /// Arrival, seconds since the trace's start.
  double arrival_s = 0;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  /// Prefix-chained block keys (equal key: equal prefix through the block).
  std::vector<uint64_t> blocks;
  /// Namespace the request's state belongs to (weka: its model).
  std::string ns;
  /// Conversation the request belongs to ("" when the trace has none).
  std::string session;
  /// Seed of the prompt tokens no block covers (unique per request).
  uint64_t tail_seed = 0;
};

struct trace {
  std::string name;
  trace_format format = trace_format::mooncake;
  uint32_t block_size = 0;
  std::vector<trace_request> requests; // in arrival order
};

struct trace_options {
  /// Keep only the first this many requests (0: all).
  size_t max_requests = 0;
  /// weka directories: seconds between conversation starts.
  double conv_stagger_s = 0;
};

/// Largest input or output length a trace request may give: the largest
/// position limit kvtier accepts (admission.position-limit, 2^24 tokens).
inline constexpr uint64_t max_trace_tokens = uint64_t{1} << 24;

/// Loads a trace file (format from its content) or a directory of weka
/// files. Bad input is `ec::invalid_argument` naming what is wrong and
/// where: "file:line: ..." (mooncake, azure), "file: requests[3].in: ..."
/// (weka: the record's place in the JSON). Refused: a missing field; a
/// length that is negative, fractional, not a number, or past
/// `max_trace_tokens`; a block id that is not a whole number >= 0; a weka
/// block size outside 1 .. `max_trace_tokens`; an azure line without
/// exactly three fields or with a malformed time. No exception escapes.
caf::expected<trace> load_trace(const std::string& path,
                                const trace_options& opts = {});

/// The request's prompt: its blocks expanded, then unique tail tokens, cut
/// to `input_tokens`. Tokens are drawn from [0, vocab).
tiers::token_seq prompt_tokens(const trace_request& r, uint32_t block_size,
                               uint32_t vocab = 32000);

/// Block-level hit statistics, as defined in tests/traces/README.md.
struct block_hits {
  uint64_t requests = 0;
  uint64_t referenced_blocks = 0;
  uint64_t hit_blocks = 0;
  uint64_t input_tokens = 0;
  uint64_t hit_tokens = 0; // sum of min(hit blocks × block size, input)
  double block_ratio() const;
  double token_ratio() const;
};

/// Infinite cache: a request hits the longest prefix of its blocks seen
/// before; afterwards all its blocks are stored.
block_hits infinite_cache_hits(const trace& t);

/// LRU of `capacity_blocks` blocks, refreshed tail-first (a request's
/// blocks are touched last to first, so its shared head is evicted last).
block_hits lru_block_hits(const trace& t, uint64_t capacity_blocks);

} // namespace kvtier::runtime
