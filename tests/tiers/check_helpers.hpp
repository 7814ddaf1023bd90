// Boost.Test helpers shared by the tiers/ tests (header-only, used from
// one test thread): `ok(err)` turns a `caf::error` (e.g. an oracle
// mismatch from `oracle_engine::verify`) into a check that names the error
// when it fails, instead of a bare false.
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
