// The RAM tier differential run at soak length (label soak, `make soak`):
// 3 x 2000 random sequences of 500 steps, over 3 and over 5 tokens.
#define BOOST_TEST_MODULE tiers_ram_tier_long
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "ram_diff_harness.hpp"

namespace bdata = boost::unit_test::data;

BOOST_DATA_TEST_CASE(long_random_sequences_match_a_linear_scan,
                     bdata::make(kvtier::testing::families)
                       * bdata::make({3, 5}),
                     family, alphabet) {
  auto t = kvtier::testing::run_differential(family, 2000, 500, alphabet);
  BOOST_TEST(t.steps == 1000000u);
  BOOST_TEST(t.hits > 10000u);
  BOOST_TEST(t.evictions > 10000u);
}
