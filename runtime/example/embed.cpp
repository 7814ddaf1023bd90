// A minimal engine embedding kvtier (docs/embedding.md): two requests, the
// second extending the first's prompt, through the per-request calls
// prefetch -> admit -> acquire -> (prefill what was not reused) -> publish
// -> release, then flush. The "model" is two KV layers of 64 bytes per
// token whose row for token i is a function of (i, token), so the example
// can check byte for byte that the state it got back is the state it gave.
// Built in-tree (`kvtier_example`) and against an installed kvtier
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

std::byte cell(int layer, uint64_t i, tiers::token t, uint32_t k) {
  return static_cast<std::byte>((layer * 131 + i * 31 + t * 7 + k) & 0xff);
}

/// The engine's prefill: every layer's rows for the whole prompt.
tiers::entry prefill(const std::string& ns, const tiers::token_seq& prompt) {
  tiers::entry e;
  e.ns = ns;
  e.tokens = prompt;
  for (int l = 0; l < layers; ++l) {
    buffer_builder b(prompt.size() * row_bytes);
    for (uint64_t i = 0; i < prompt.size(); ++i)
      for (uint32_t k = 0; k < row_bytes; ++k)
        b.data()[i * row_bytes + k] = cell(l, i, prompt[i], k);
    e.layers.push_back(tiers::layer_state::kv(
      row_bytes, prompt.size(), {view::of(std::move(b).freeze())}));
  }
  return e;
}

/// Whether `got` holds exactly the rows prefill would compute.
bool same_rows(const runtime::acquired_state& got,
               const tiers::token_seq& prompt) {
  for (int l = 0; l < layers; ++l) {
    auto bytes = flatten(got.state.layers[l].segments);
    if (bytes.size() != got.usable_tokens * row_bytes)
      return false;
    for (uint64_t i = 0; i < got.usable_tokens; ++i)
      for (uint32_t k = 0; k < row_bytes; ++k)
        if (bytes[i * row_bytes + k] != cell(l, i, prompt[i], k))
          return false;
  }
  return true;
}

/// One request through the per-request calls; the tokens it reused.
uint64_t serve(runtime::service& svc, uint64_t id,
               const tiers::token_seq& prompt) {
  const std::string ns = "example";
  runtime::state_request r{id, prompt, 32, std::nullopt};
  auto lease = svc.prefetch(prompt, ns); // cold reads start early
  auto adm = svc.admit(r);               // hold the request's KV bytes
  if (!lease || !adm || !adm->admitted)
    return UINT64_MAX;
  auto got = svc.acquire(r, ns); // the longest usable prefix, lent
  if (!got)
    return UINT64_MAX;
  if (got->usable_tokens > 0 && !same_rows(*got, prompt))
    return UINT64_MAX; // never happens: wrong state is never served
  // A real engine computes only the tokens after got->usable_tokens.
  auto state = prefill(ns, prompt);
  auto pub = svc.publish(r, std::move(state));
  lease->release();
  auto rel = svc.release(r, true);
  if (!pub || !rel)
    return UINT64_MAX;
  std::printf("request %llu: %zu prompt tokens, %llu reused from %s\n",
              static_cast<unsigned long long>(id), prompt.size(),
              static_cast<unsigned long long>(got->usable_tokens),
              runtime::to_string(got->source));
  return got->usable_tokens;
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
  int rc = 0;
  {
    runtime::service svc(o);
    if (auto err = svc.start_error()) {
      std::fprintf(stderr, "cannot start: %s\n", describe(err).c_str());
      return 1;
    }
    tiers::token_seq first;
    for (tiers::token t = 0; t < 100; ++t)
      first.push_back(1000 + t);
    auto second = first;
    for (tiers::token t = 0; t < 20; ++t)
      second.push_back(5000 + t);
    if (serve(svc, 1, first) != 0 || serve(svc, 2, second) != 100)
      rc = 1;
    auto f = svc.flush(); // the durability evidence
    if (!f || !f->durable)
      rc = 1;
    else
      std::printf("flush: %llu entries durable\n",
                  static_cast<unsigned long long>(f->entries));
  }
  std::filesystem::remove_all(dir);
  std::printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
