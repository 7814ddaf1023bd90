// The trace readers must reproduce the figures tests/traces/README.md
// publishes for each trace (computed there by an independent replay).
#define BOOST_TEST_MODULE runtime_trace
#include <boost/test/unit_test.hpp>

#include "runtime/tools/trace.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <zlib.h>

using namespace kvtier;
using namespace kvtier::runtime;

namespace {

const std::string traces = std::string{KVTIER_SOURCE_DIR} + "/tests/traces/";

double round3(double x) {
  return std::round(x * 1000.0) / 1000.0;
}

/// The error text of a failed load, "" otherwise (Boost evaluates messages
/// even when the check passes).
std::string why(const caf::expected<trace>& t) {
  return t ? std::string{} : describe(t.error());
}

uint64_t sum_input(const trace& t) {
  uint64_t n = 0;
  for (auto& r : t.requests)
    n += r.input_tokens;
  return n;
}

} // namespace

BOOST_AUTO_TEST_CASE(mooncake_conversation_matches_published_figures) {
  auto t = load_trace(traces + "mooncake-fast25/conversation_trace.jsonl.gz");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_TEST(to_string(t->format) == std::string{"mooncake"});
  BOOST_TEST(t->requests.size() == 12031u);
  BOOST_TEST(sum_input(*t) == 144793823u);
  auto inf = infinite_cache_hits(*t);
  BOOST_TEST(inf.referenced_blocks == 288500u);
  BOOST_TEST(round3(inf.block_ratio()) == 0.366);
  BOOST_TEST(round3(inf.token_ratio()) == 0.374);
  BOOST_TEST(round3(lru_block_hits(*t, 1024).block_ratio()) == 0.045);
  BOOST_TEST(round3(lru_block_hits(*t, 16384).block_ratio()) == 0.266);
}

BOOST_AUTO_TEST_CASE(mooncake_synthetic_matches_published_figures) {
  auto t = load_trace(traces + "mooncake-fast25/synthetic_trace.jsonl.gz");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_TEST(t->requests.size() == 3993u);
  auto inf = infinite_cache_hits(*t);
  BOOST_TEST(round3(inf.block_ratio()) == 0.640);
  BOOST_TEST(round3(lru_block_hits(*t, 4096).block_ratio()) == 0.244);
}

BOOST_AUTO_TEST_CASE(weka_directory_merges_conversations) {
  auto t = load_trace(traces + "kv-cache-tester-weka");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_TEST(to_string(t->format) == std::string{"weka"});
  BOOST_TEST(t->block_size == 64u);
  BOOST_TEST(t->requests.size() == 3878u);
  BOOST_TEST(sum_input(*t) == 565515277u);
  auto inf = infinite_cache_hits(*t);
  BOOST_TEST(inf.referenced_blocks == 8834278u);
  BOOST_TEST(round3(inf.block_ratio()) == 0.964);
  BOOST_TEST(round3(lru_block_hits(*t, 16384).block_ratio()) == 0.512);
  auto staggered = load_trace(traces + "kv-cache-tester-weka", {0, 600});
  BOOST_TEST(round3(lru_block_hits(*staggered, 16384).block_ratio()) == 0.923);
}

BOOST_AUTO_TEST_CASE(azure_gives_lengths_and_no_shared_blocks) {
  auto t = load_trace(traces
                      + "azure-llm-inference-2023/"
                        "AzureLLMInferenceTrace_code.csv.gz");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_TEST(t->requests.size() == 8819u);
  BOOST_TEST(sum_input(*t) == 18059974u);
  BOOST_TEST(infinite_cache_hits(*t).hit_blocks == 0u);
  BOOST_TEST(t->requests.back().arrival_s > 3400.0);
}

BOOST_AUTO_TEST_CASE(shared_blocks_expand_to_shared_prefixes) {
  auto t =
    load_trace(traces + "mooncake-fast25/conversation_trace.jsonl.gz", {10, 0});
  BOOST_REQUIRE(t);
  BOOST_TEST(t->requests.size() == 10u);
  auto& a = t->requests[0]; // blocks 0, 1, ...
  auto& b = t->requests[1]; // blocks 0, 14, ...
  auto pa = prompt_tokens(a, 512);
  auto pb = prompt_tokens(b, 512);
  BOOST_TEST(pa.size() == a.input_tokens);
  BOOST_TEST(pb.size() == b.input_tokens);
  BOOST_TEST(tiers::common_prefix(pa, pb) >= 512u);
  BOOST_TEST(tiers::common_prefix(pa, pb) < 1024u);
  BOOST_TEST(prompt_tokens(a, 512) == pa); // deterministic
}

BOOST_AUTO_TEST_CASE(malformed_traces_name_file_and_line) {
  auto path = std::string{"/tmp/kvtier_bad_trace.jsonl"};
  {
    std::ofstream out(path);
    out
      << R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]})"
      << "\n{\"timestamp\": 1, \"input_length\": }\n";
  }
  auto t = load_trace(path);
  BOOST_REQUIRE(!t);
  BOOST_TEST(static_cast<ec>(t.error().code()) == ec::invalid_argument);
  BOOST_TEST(describe(t.error()).find("kvtier_bad_trace.jsonl:2")
               != std::string::npos,
             describe(t.error()));
  std::remove(path.c_str());
  BOOST_TEST(!load_trace("/nonexistent/trace.jsonl"));
}

namespace {

const std::string fixtures =
  std::string{KVTIER_SOURCE_DIR} + "/tests/runtime/fixtures/traces/";

/// Loads fixture `name`, which must fail with `invalid_argument` naming
/// `where` (file:line, or file: record) and saying `what`.
void check_refused(const std::string& name, const std::string& where,
                   const std::string& what) {
  BOOST_TEST_CONTEXT(name) {
    auto t = load_trace(fixtures + name);
    BOOST_REQUIRE(!t);
    BOOST_TEST(static_cast<ec>(t.error().code()) == ec::invalid_argument);
    auto text = describe(t.error());
    BOOST_TEST(text.find(fixtures + where + ": ") != std::string::npos, text);
    BOOST_TEST(text.find(what) != std::string::npos, text);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(a_small_fixture_loads_exactly) {
  auto t = load_trace(fixtures + "mooncake_small.jsonl");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_REQUIRE(t->requests.size() == 2u); // the blank line is skipped
  BOOST_TEST(t->requests[0].input_tokens == 600u);
  BOOST_TEST(t->requests[1].output_tokens == 20u);
  BOOST_TEST(t->requests[1].arrival_s == 2.5);
  BOOST_TEST(t->requests[0].blocks == t->requests[1].blocks);
}

BOOST_AUTO_TEST_CASE(bad_mooncake_lines_are_errors_naming_file_and_line) {
  check_refused("mooncake_negative_length.jsonl",
                "mooncake_negative_length.jsonl:3",
                "input_length -5 is negative");
  check_refused(
    "mooncake_absurd_length.jsonl", "mooncake_absurd_length.jsonl:2",
    "output_length 5000000000 is past the limit of 16777216 tokens");
  check_refused("mooncake_fractional_length.jsonl",
                "mooncake_fractional_length.jsonl:1",
                "input_length 12.5 is not a whole number");
  check_refused("mooncake_missing_field.jsonl",
                "mooncake_missing_field.jsonl:3", "missing hash_ids");
  check_refused("mooncake_negative_block_id.jsonl",
                "mooncake_negative_block_id.jsonl:1",
                "hash_ids[1] -2 is not a block id");
}

BOOST_AUTO_TEST_CASE(bad_azure_lines_are_errors_naming_file_and_line) {
  check_refused("azure_negative_length.csv", "azure_negative_length.csv:3",
                "ContextTokens -5 is negative");
  check_refused("azure_absurd_length.csv", "azure_absurd_length.csv:3",
                "GeneratedTokens 99999999999999999999999 is past the limit");
  check_refused("azure_fractional_length.csv", "azure_fractional_length.csv:3",
                "GeneratedTokens '7.5' is not a whole number");
  check_refused("azure_missing_field.csv", "azure_missing_field.csv:2",
                "expected TIMESTAMP,ContextTokens,GeneratedTokens");
}

BOOST_AUTO_TEST_CASE(bad_weka_records_are_errors_naming_file_and_record) {
  check_refused("weka_negative_length.json", "weka_negative_length.json",
                "requests[1]: out -3 is negative");
  check_refused("weka_subagent_missing_field.json",
                "weka_subagent_missing_field.json",
                "requests[1].requests[1]: missing in");
  check_refused("weka_zero_block_size.json", "weka_zero_block_size.json",
                "block_size 0 is not a whole number 1 .. 16777216");
}

BOOST_AUTO_TEST_CASE(
  a_gzip_trace_reads_as_its_bytes_and_a_broken_one_is_refused) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path()
             / ("kvtier-trace-gz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(fixtures + "mooncake_small.jsonl", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto gz = (dir / "mooncake_small.jsonl.gz").string();
  auto* f = gzopen(gz.c_str(), "wb9");
  BOOST_REQUIRE(f);
  BOOST_REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size()))
                == static_cast<int>(text.size()));
  BOOST_REQUIRE(gzclose(f) == Z_OK);
  auto plain = load_trace(fixtures + "mooncake_small.jsonl");
  auto packed = load_trace(gz);
  BOOST_REQUIRE_MESSAGE(packed, why(packed));
  BOOST_TEST(packed->name
             == "mooncake_small.jsonl"); // reported as the original
  BOOST_REQUIRE(packed->requests.size() == plain->requests.size());
  for (size_t i = 0; i < plain->requests.size(); ++i) {
    BOOST_TEST(packed->requests[i].blocks == plain->requests[i].blocks);
    BOOST_TEST(packed->requests[i].input_tokens
               == plain->requests[i].input_tokens);
  }
  // A truncated gzip file is refused, naming the file and why.
  std::ifstream whole(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(whole)), {});
  auto cut = (dir / "cut.jsonl.gz").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto t = load_trace(cut);
  BOOST_REQUIRE(!t);
  auto said = describe(t.error());
  BOOST_TEST(said.find(cut) != std::string::npos, said);
  BOOST_TEST(said.find("gzip") != std::string::npos, said);
  BOOST_TEST(!load_trace((dir / "missing.jsonl.gz").string()));
  fs::remove_all(dir);
}
