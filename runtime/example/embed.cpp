// A minimal engine embedding kvtier (docs/embedding.md), through the calls
// of docs/embedding.md's diagram: prefetch -> admit -> acquire -> prefill
// only what was not reused, on top of the lent state -> decode with
// checkpoints -> publish -> release, then close.
//
//   request 1  a 100-token prompt, nothing to reuse: prefill all of it,
//              publish, release completed.
//   request 2  the same prompt plus 20 tokens: acquire lends request 1's
//              100 tokens; the engine computes only the 20 new rows and its
//              state lists the lent segments followed by its own. It
//              decodes 8 tokens, checkpointing every 4, and is interrupted
//              (release, not completed).
//   retry      request 2 again (attempt 1): acquire resumes the checkpoint
//              (128 tokens); it decodes 8 more tokens on top, publishes the
//              whole conversation and completes (its checkpoint goes).
//   request 3  the conversation plus a follow-up: reuses all 136 tokens
//              from RAM, and its first segment is request 1's own buffer
//              (stored once, never copied).
//   close      flush, then clear; calls fail `closed` from then on, and
//              what acquire lent stays readable.
//
// The "model" is two KV layers of 64 bytes per token whose row for token i
// is a function of (layer, i, token), so every state kvtier hands back is
// checked byte for byte against what a full prefill would compute. Built
// in-tree (`kvtier_example`) and against an installed kvtier
// (runtime/example/CMakeLists.txt); exits 0 when every check held.
#include <kvtier/runtime/service.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace kvtier;

namespace {

constexpr uint32_t row_bytes = 64;
constexpr int layers = 2;
const std::string ns = "example";

int failures = 0;

/// Counts and prints a failed check (`ok`: a bool or a call's result).
template <class T>
bool check(const T& ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
    return false;
  }
  return true;
}

std::byte cell(int layer, uint64_t i, tiers::token t, uint32_t k) {
  return static_cast<std::byte>((layer * 131 + i * 31 + t * 7 + k) & 0xff);
}

/// The engine's compute: every layer's rows for tokens[from, size), as one
/// new segment per layer.
std::vector<view> compute(const tiers::token_seq& tokens, uint64_t from) {
  std::vector<view> rows;
  for (int l = 0; l < layers; ++l) {
    // A cache line is alignment enough for state rows (the default, a
    // page, pads every small buffer to 4 KiB).
    buffer_builder b((tokens.size() - from) * row_bytes, 64);
    for (uint64_t i = from; i < tokens.size(); ++i)
      for (uint32_t k = 0; k < row_bytes; ++k)
        b.data()[(i - from) * row_bytes + k] = cell(l, i, tokens[i], k);
    rows.push_back(view::of(std::move(b).freeze()));
  }
  return rows;
}

/// `state` (covering a prefix of `tokens`, possibly lent by acquire)
/// extended to all of `tokens`: its segments followed by the rows computed
/// for the rest. No byte of `state` is copied.
tiers::entry extend(const tiers::entry& state, const tiers::token_seq& tokens) {
  uint64_t have = state.layers.empty() ? 0 : state.layers[0].tokens;
  auto rows = compute(tokens, have);
  tiers::entry e;
  e.ns = ns;
  e.tokens = tokens;
  for (int l = 0; l < layers; ++l) {
    std::vector<view> segments;
    if (!state.layers.empty())
      segments = state.layers[l].segments;
    segments.push_back(rows[l]);
    e.layers.push_back(
      tiers::layer_state::kv(row_bytes, tokens.size(), std::move(segments)));
  }
  return e;
}

/// Whether `state`'s first `n` rows are exactly what a prefill computes.
bool same_rows(const tiers::entry& state, const tiers::token_seq& tokens,
               uint64_t n) {
  if (n == 0)
    return state.layers.empty();
  if (state.layers.size() != layers || state.tokens.size() != n)
    return false;
  for (int l = 0; l < layers; ++l) {
    auto bytes = flatten(state.layers[l].segments);
    if (bytes.size() != n * row_bytes)
      return false;
    for (uint64_t i = 0; i < n; ++i)
      for (uint32_t k = 0; k < row_bytes; ++k)
        if (bytes[i * row_bytes + k] != cell(l, i, tokens[i], k))
          return false;
  }
  return true;
}

/// The engine's sampler: the next token after `tokens`.
tiers::token next_token(const tiers::token_seq& tokens) {
  return 7000 + tokens.back() % 97;
}

/// A request's start: prefetch (cold reads early), admit (its KV bytes
/// held), acquire (its checkpoint, else the longest usable prefix, lent).
std::optional<runtime::acquired_state> start(runtime::service& svc,
                                             const runtime::state_request& r) {
  auto lease = svc.prefetch(r.prompt, ns);
  auto adm = svc.admit(r);
  if (!check(lease && adm && adm->admitted, "prefetch and admit"))
    return std::nullopt;
  auto got = svc.acquire(r, ns);
  lease->release(); // what the prefetch read is in RAM or lent by now
  if (!check(got, "acquire"))
    return std::nullopt;
  std::printf("request %llu%s: %zu prompt tokens, %llu reused from %s\n",
              static_cast<unsigned long long>(r.id),
              r.attempt > 0 ? " (retry)" : "", r.prompt.size(),
              static_cast<unsigned long long>(got->usable_tokens),
              runtime::to_string(got->source));
  return std::move(*got);
}

/// Decodes `count` tokens on top of `state`, checkpointing every
/// `checkpoint_every_tokens`; returns the state with them.
tiers::entry decode(runtime::service& svc, const runtime::state_request& r,
                    tiers::entry state, int count) {
  auto every = svc.checkpoint_every_tokens().value_or(0);
  for (int i = 0; i < count; ++i) {
    auto tokens = state.tokens;
    tokens.push_back(next_token(tokens));
    state = extend(state, tokens); // one new row per layer
    if (every > 0 && (tokens.size() - r.prompt.size()) % every == 0) {
      auto copy = state; // checkpoint takes its entry: views, no bytes
      auto kept = svc.checkpoint(r, std::move(copy));
      check(kept && *kept, "checkpoint kept");
    }
  }
  return state;
}

/// `seq` followed by `n` tokens counting up from `from`.
tiers::token_seq followed(tiers::token_seq seq, tiers::token from, int n) {
  for (int i = 0; i < n; ++i)
    seq.push_back(from + i);
  return seq;
}

void run(runtime::service& svc) {
  auto first = followed({}, 1000, 100);

  // Request 1: nothing to reuse.
  runtime::state_request r1{1, first, 16, std::nullopt};
  auto got1 = start(svc, r1);
  if (!got1)
    return;
  check(got1->usable_tokens == 0, "request 1 starts fresh");
  auto state1 = extend(got1->state, first);
  const auto* first_buffer = state1.layers[0].segments[0].buf.get();
  check(svc.publish(r1, std::move(state1)), "publish 1");
  check(svc.release(r1, true), "release 1");

  // Request 2: extends request 1's lent state, decodes, is interrupted.
  auto second = followed(first, 5000, 20);
  runtime::state_request r2{2, second, 16, std::nullopt};
  auto got2 = start(svc, r2);
  if (!got2)
    return;
  check(got2->usable_tokens == 100
          && got2->source == runtime::state_source::ram,
        "request 2 reuses request 1's 100 tokens from RAM");
  check(same_rows(got2->state, second, got2->usable_tokens),
        "lent state byte for byte");
  auto state2 = extend(got2->state, second); // computes 20 rows, not 120
  std::printf("request 2: computed %zu tokens; each layer lists %zu "
              "segments (lent, then its own)\n",
              second.size() - got2->usable_tokens,
              state2.layers[0].segments.size());
  state2 = decode(svc, r2, std::move(state2), 8);
  auto rel2 = svc.release(r2, false); // interrupted: its checkpoint stays
  check(rel2 && rel2->checkpoints_kept == 1, "interrupted keeps checkpoint");
  std::printf(
    "request 2: decoded 8 tokens (checkpoints every %llu), "
    "interrupted\n",
    static_cast<unsigned long long>(svc.checkpoint_every_tokens().value_or(0)));

  // The retry resumes the checkpoint, finishes and publishes it all.
  runtime::state_request retry{2, second, 16, std::nullopt, 1};
  auto got_retry = start(svc, retry);
  if (!got_retry)
    return;
  check(got_retry->source == runtime::state_source::checkpoint
          && got_retry->usable_tokens == 128,
        "the retry resumes the 128-token checkpoint");
  check(same_rows(got_retry->state, got_retry->state.tokens,
                  got_retry->usable_tokens),
        "checkpoint byte for byte");
  auto done = decode(svc, retry, std::move(got_retry->state), 8);
  auto conversation = done.tokens;
  check(svc.publish(retry, std::move(done)), "publish 2");
  auto rel3 = svc.release(retry, true);
  check(rel3 && rel3->checkpoints_removed == 1, "completed removes it");
  std::printf("request 2 (retry): decoded 8 more, published %zu tokens, "
              "completed\n",
              conversation.size());

  // Request 3: the whole conversation is reused; its rows are still
  // request 1's buffer for the first 100 tokens.
  auto follow_up = followed(conversation, 6000, 1);
  runtime::state_request r3{3, follow_up, 16, std::nullopt};
  auto got3 = start(svc, r3);
  if (!got3)
    return;
  check(got3->usable_tokens == conversation.size()
          && same_rows(got3->state, follow_up, got3->usable_tokens),
        "request 3 reuses the whole conversation byte for byte");
  check(got3->state.layers[0].segments[0].buf.get() == first_buffer,
        "request 1's rows are stored once, never copied");
  check(svc.release(r3, true), "release 3");

  // Close: flush, then clear. The lent state stays the engine's.
  auto closed = svc.close();
  check(closed && closed->durable, "close: everything durable first");
  if (closed)
    std::printf("close: %s, %llu entries durable\n",
                closed->durable ? "durable" : "NOT durable",
                static_cast<unsigned long long>(closed->entries));
  auto after = svc.acquire(r3, ns);
  check(!after && after.error() == ec::closed, "calls after close: closed");
  check(same_rows(got3->state, follow_up, got3->usable_tokens),
        "lent state readable after close");
}

} // namespace

int main() {
  auto dir = std::filesystem::temp_directory_path()
             / ("kvtier-example-" + std::to_string(::getpid()));
  runtime::service_options o;
  o.model_identity = "example-model v1";
  o.model_layers = std::to_string(layers) + "*kv:" + std::to_string(row_bytes);
  o.ram_cap_bytes = 64ull << 20;
  o.ssd_dir = dir.string();
  o.ssd_cap_bytes = 256ull << 20;
  o.kv_budget_bytes = 16ull << 20;
  o.checkpoint_every_tokens = 4;
  {
    runtime::service svc(o);
    if (auto err = svc.start_error()) {
      std::fprintf(stderr, "cannot start: %s\n", describe(err).c_str());
      return 1;
    }
    run(svc);
  }
  std::filesystem::remove_all(dir);
  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
