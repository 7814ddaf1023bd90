// The embedded API end to end (runtime/service.hpp): lookups, publishing,
// tier order, demotion, pressure, boundaries, sessions, objects, reporting.
// Admission, checkpoints and lifecycle are in service_lifecycle_test.cpp.
#define BOOST_TEST_MODULE runtime_service
#include "tests/runtime/service_fixture.hpp"

using namespace kvtier;
using runtime::state_source;
using testing::service_fixture;

BOOST_FIXTURE_TEST_SUITE(service, service_fixture)

BOOST_AUTO_TEST_CASE(ram_hit_lends_the_usable_prefix_byte_exact) {
  start();
  put("ns", seq(100));
  auto got = get("ns", cat(seq(100), seq(20, 1000)));
  BOOST_CHECK(got.source == state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, 100u);
  auto trimmed = get("ns", seq(60));
  BOOST_CHECK(trimmed.source == state_source::ram);
  BOOST_CHECK_EQUAL(trimmed.usable_tokens, 59u); // one token left to forward
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.hits, 2u);
  BOOST_CHECK_EQUAL(rep.ram.entries, 1u);
}

BOOST_AUTO_TEST_CASE(a_miss_is_fresh_state_and_counts_a_ram_miss) {
  start();
  put("ns", seq(100));
  auto other_ns = get("other", seq(100));
  BOOST_CHECK(other_ns.source == state_source::none);
  BOOST_CHECK_EQUAL(other_ns.usable_tokens, 0u);
  BOOST_CHECK(other_ns.state.layers.empty());
  BOOST_CHECK_EQUAL(report().ram.misses, 1u);
}

BOOST_AUTO_TEST_SUITE_END()
