#define BOOST_TEST_MODULE tiers_state
#include <boost/test/unit_test.hpp>

#include "tiers/state.hpp"

using namespace kvtier;
using namespace kvtier::tiers;

BOOST_AUTO_TEST_CASE(placeholder_compiles) {
  BOOST_TEST(to_string(layer_kind::ring) == std::string{"ring"});
}
