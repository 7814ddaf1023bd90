// The --simulate reference (runtime/tools/simulate.hpp): its file sizes match
// the SSD entry format byte for byte, it never beats the infinite cache, and
// with room for everything it is the infinite cache.
#define BOOST_TEST_MODULE runtime_simulate
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "runtime/tools/simulate.hpp"
#include "tiers/ssd/entry_format.hpp"

using namespace kvtier;
using namespace kvtier::runtime;

namespace {

const std::string traces = std::string{KVTIER_SOURCE_DIR} + "/tests/traces/";

trace slice(const std::string& path, size_t n) {
  trace_options o;
  o.max_requests = n;
  auto t = load_trace(traces + path, o);
  BOOST_REQUIRE_MESSAGE(static_cast<bool>(t),
                        (t ? std::string{} : describe(t.error())));
  return std::move(*t);
}

simulate_options options(uint64_t ram, uint64_t ssd) {
  simulate_options o;
  o.geometry = *tiers::model_geometry::preset("llama-3.1-8b", 1.0 / 4096);
  o.ram_cap_bytes = ram;
  o.ssd_cap_bytes = ssd;
  o.fingerprint = "llama-3.1-8b";
  o.kv_budget_bytes = 1ull << 40;
  return o;
}

} // namespace

BOOST_AUTO_TEST_CASE(entry_file_bytes_match_the_entry_format) {
  for (auto scale : {1.0 / 4096, 1.0 / 64}) {
    auto g = *tiers::model_geometry::preset("llama-3.1-8b", scale);
    oracle_engine e(g);
    for (uint64_t n : {1u, 7u, 512u, 3000u}) {
      tiers::token_seq tokens(n);
      for (uint64_t i = 0; i < n; ++i)
        tokens[i] = static_cast<tiers::token>(i * 7 + 1);
      auto s = e.prefill("ns/x", tokens);
      for (bool with_session : {false, true}) {
        if (with_session)
          s.session = "conversation-17";
        auto h = tiers::ssd::layout(s, "llama-3.1-8b", 4096, 1u << 20);
        BOOST_TEST(entry_file_bytes(g, n, s.ns, s.session, "llama-3.1-8b", 4096,
                                    1u << 20)
                   == h.file_length);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(room_for_everything_is_the_infinite_cache) {
  for (auto path : {"mooncake-fast25/conversation_trace.jsonl.gz",
                    "mooncake-fast25/synthetic_trace.jsonl.gz"}) {
    auto t = slice(path, 400);
    auto r = simulate(t, options(1ull << 40, 1ull << 40));
    BOOST_REQUIRE(r);
    BOOST_TEST(r->ram_evictions == 0u);
    BOOST_TEST(r->ram_tokens + r->ssd_tokens == r->infinite_tokens);
    BOOST_TEST(r->infinite_tokens > 0u);
  }
}

BOOST_AUTO_TEST_CASE(small_caps_spill_restore_and_stay_below_infinite) {
  auto t = slice("mooncake-fast25/conversation_trace.jsonl.gz", 600);
  auto r = simulate(t, options(8ull << 20, 32ull << 20));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->spills > 0u);
  BOOST_TEST(r->restores > 0u);
  BOOST_TEST(r->ssd_tokens > 0u);
  BOOST_TEST(r->token_hit_ratio() < r->infinite_hit_ratio());
  // Deterministic: the same run gives the same figures.
  auto again = simulate(t, options(8ull << 20, 32ull << 20));
  BOOST_TEST(again->ram_tokens == r->ram_tokens);
  BOOST_TEST(again->ssd_tokens == r->ssd_tokens);
  BOOST_TEST(again->spills == r->spills);
}

BOOST_AUTO_TEST_CASE(without_ssd_nothing_spills_or_restores) {
  auto t = slice("mooncake-fast25/conversation_trace.jsonl.gz", 300);
  auto r = simulate(t, options(8ull << 20, 0));
  BOOST_REQUIRE(r);
  BOOST_TEST(r->spills == 0u);
  BOOST_TEST(r->restores == 0u);
  BOOST_TEST(r->ssd_tokens == 0u);
  BOOST_TEST(r->ram_evictions > 0u);
}

BOOST_AUTO_TEST_CASE(refused_requests_count_their_tokens_and_nothing_else) {
  auto t = slice("mooncake-fast25/conversation_trace.jsonl.gz", 200);
  auto o = options(1ull << 40, 0);
  o.position_limit = 8192; // most of the trace's prompts are longer
  auto r = simulate(t, o);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->refused > 0u);
  BOOST_TEST(r->refused < r->requests);
  uint64_t input = 0;
  for (auto& q : t.requests)
    input += q.input_tokens;
  BOOST_TEST(r->input_tokens == input);
}

BOOST_AUTO_TEST_CASE(geometries_with_rings_or_recurrent_layers_are_refused) {
  auto t = slice("mooncake-fast25/conversation_trace.jsonl.gz", 10);
  auto o = options(1ull << 30, 0);
  o.geometry = *tiers::model_geometry::preset("gemma-3-12b", 1.0 / 4096);
  auto r = simulate(t, o);
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()).find("ring") != std::string::npos);
}
