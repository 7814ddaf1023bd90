// Differential test of the RAM tier against a linear-scan store
// (ram_diff_harness.hpp): 3 x 100 random sequences of 200 steps over a
// three-token alphabet, so prefixes collide all the time.
#define BOOST_TEST_MODULE tiers_ram_tier_diff
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "ram_diff_harness.hpp"

namespace bdata = boost::unit_test::data;

BOOST_DATA_TEST_CASE(random_sequences_match_a_linear_scan,
                     bdata::make(kvtier::testing::families), family) {
  auto t = kvtier::testing::run_differential(family, 100, 200, 3);
  // The mix must actually exercise every rule.
  BOOST_TEST(t.steps == 20000u);
  BOOST_TEST(t.hits > (family == std::string{"tiny-hybrid"} ? 300u : 2000u),
             "the hybrid serves exact boundaries only, so fewer hits");
  BOOST_TEST(t.lookups - t.hits > 100u);
  BOOST_TEST(t.evictions > 100u);
  if (family != std::string{"tiny-hybrid"})
    BOOST_TEST(t.supersessions > 100u);
}
