// Scenarios (runtime/tools/scenario.hpp): every shipped scenario passes against
// the service, a broken expectation fails naming line, expectation and
// what happened, and malformed files are refused with their line.
#define BOOST_TEST_MODULE runtime_scenario
#include <boost/test/unit_test.hpp>

#include "runtime/tools/scenario.hpp"

#include <filesystem>

using namespace kvtier;
using namespace kvtier::runtime;

namespace {

const std::string source = KVTIER_SOURCE_DIR;

bool check_expectation_fails(const scenario_step& s,
                             const scenario_facts& facts) {
  return check_expectation(s, facts).has_value();
}

} // namespace

BOOST_AUTO_TEST_CASE(every_shipped_scenario_passes) {
  size_t n = 0;
  for (auto& e :
       std::filesystem::directory_iterator(source + "/conf/scenarios")) {
    if (e.path().extension() != ".scn")
      continue;
    ++n;
    auto s = load_scenario(e.path().string());
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(s),
                          (s ? std::string{} : describe(s.error())));
    auto r = run_scenario(*s, service_options{});
    BOOST_TEST(r.passed(), render_result(r));
    BOOST_TEST(r.facts.at("wrong_states") == "0");
  }
  BOOST_TEST(n >= 8u);
}

BOOST_AUTO_TEST_CASE(a_broken_expectation_fails_with_a_clear_diff) {
  auto path = source + "/tests/runtime/fixtures/broken_expectation.scn";
  auto s = load_scenario(path);
  BOOST_REQUIRE(s);
  auto r = run_scenario(*s, service_options{});
  BOOST_TEST(!r.passed());
  BOOST_TEST(r.error.empty(), r.error);
  BOOST_REQUIRE(r.failures.size() == 2u);
  auto text = render_result(r);
  BOOST_TEST(text.find("FAIL a deliberately broken expectation") == 0u);
  BOOST_TEST(text.find(path
                       + ":8: expected t2.reused == 999, got "
                         "t2.reused = 388")
               != std::string::npos,
             text);
  BOOST_TEST(text.find(path
                       + ":10: expected t2.reuse == 388, got no fact "
                         "'t2.reuse' (known: t2.")
               != std::string::npos,
             text);
}

BOOST_AUTO_TEST_CASE(malformed_scenarios_are_refused_with_their_line) {
  auto unknown = parse_scenario("scenario x\nfrobnicate now\n", "f.scn");
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(describe(unknown.error()).find("f.scn:2: unknown step")
             != std::string::npos);
  auto bad_op = parse_scenario("scenario x\nexpect a.b =~ 3\n", "g.scn");
  BOOST_REQUIRE(!bad_op);
  BOOST_TEST(describe(bad_op.error()).find("g.scn:2: expect needs")
             != std::string::npos);
  auto no_prompt = parse_scenario("scenario x\nrequest r1 ns=a\n", "h.scn");
  BOOST_REQUIRE(!no_prompt);
  auto no_name = parse_scenario("request r1 prompt=a:3\n", "i.scn");
  BOOST_REQUIRE(!no_name);
}

BOOST_AUTO_TEST_CASE(expectations_compare_numbers_and_words) {
  scenario_facts facts{{"r.reused", "388"}, {"r.source", "ram"}};
  auto step = [](std::string a, std::string op, std::string b) {
    scenario_step s;
    s.line = 7;
    s.verb = "expect";
    s.words = {a, op, b};
    return s;
  };
  BOOST_TEST(!check_expectation_fails(step("r.reused", ">=", "300"), facts));
  BOOST_TEST(!check_expectation_fails(step("r.reused", "<", "388.5"), facts));
  BOOST_TEST(!check_expectation_fails(step("r.source", "==", "ram"), facts));
  BOOST_TEST(!check_expectation_fails(step("r.source", "!=", "ssd"), facts));
  auto f = check_expectation(step("r.reused", ">", "388"), facts);
  BOOST_REQUIRE(f);
  BOOST_TEST(f->line == 7u);
  BOOST_TEST(f->expected == "r.reused > 388");
  BOOST_TEST(f->actual == "r.reused = 388");
  BOOST_TEST(check_expectation_fails(step("r.source", ">=", "ram"), facts));
}
