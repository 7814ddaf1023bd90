// Boost.Test helpers shared by the tiers/ tests.
#pragma once

#include "messages/error.hpp"

#include <boost/test/unit_test.hpp>

namespace kvtier::testing {

/// Passes for no error; fails naming the error (e.g. an oracle mismatch).
inline boost::test_tools::predicate_result ok(const caf::error& err) {
  if (!err)
    return true;
  boost::test_tools::predicate_result r(false);
  r.message() << describe(err);
  return r;
}

} // namespace kvtier::testing
