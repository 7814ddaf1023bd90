// Bridge between CAF 0.17.6's test DSL and Boost.Test.
//
// CAF's deterministic-scheduler DSL (`expect`, `allow`, `disallow`, `inject`,
// `test_coordinator_fixture`) reports through CAF's own check macros and test
// engine. This header maps those macros to Boost.Test's, so actor suites are
// ordinary Boost.Test binaries registered with CTest. Include it instead of
// <boost/test/unit_test.hpp> and <caf/test/dsl.hpp>, in exactly one
// translation unit per test binary (it defines CAF's engine::argc/argv).
//
// A failed `expect` is a Boost REQUIRE failure: it ends the test case, and
// CAF may abort the binary afterwards; so each actor suite is its own CTest
// entry (tests/CMakeLists.txt does that for every *_test.cpp).
//
// Remember: `test_coordinator::run()` does not fire timeouts. Use `drain()`
// from `kvtier_fixture` (below) to run until no job and no timeout is left.
#pragma once

#include <boost/test/unit_test.hpp>

#include <caf/test/unit_test.hpp>

#undef CAF_CHECK
#undef CAF_CHECK_FAIL
#undef CAF_REQUIRE
#undef CAF_FAIL
#undef CAF_ERROR
#undef CAF_MESSAGE
#undef CAF_CHECK_EQUAL
#undef CAF_CHECK_NOT_EQUAL
#undef CAF_REQUIRE_EQUAL
#undef CAF_REQUIRE_NOT_EQUAL

#define CAF_CHECK(...) BOOST_CHECK(static_cast<bool>(__VA_ARGS__))
#define CAF_CHECK_FAIL(...) BOOST_CHECK(!static_cast<bool>(__VA_ARGS__))
#define CAF_REQUIRE(...) BOOST_REQUIRE(static_cast<bool>(__VA_ARGS__))
#define CAF_FAIL(msg) BOOST_FAIL(msg)
#define CAF_ERROR(msg) BOOST_ERROR(msg)
#define CAF_MESSAGE(msg) BOOST_TEST_MESSAGE(msg)
// CAF's types mostly lack operator<<: compare, and name the expressions.
#define CAF_CHECK_EQUAL(x, y) BOOST_CHECK_MESSAGE((x) == (y), #x " == " #y)
#define CAF_CHECK_NOT_EQUAL(x, y) BOOST_CHECK_MESSAGE((x) != (y), #x " != " #y)
#define CAF_REQUIRE_EQUAL(x, y) BOOST_REQUIRE_MESSAGE((x) == (y), #x " == " #y)
#define CAF_REQUIRE_NOT_EQUAL(x, y)                                            \
  BOOST_REQUIRE_MESSAGE((x) != (y), #x " != " #y)

#include <caf/test/dsl.hpp>

namespace caf::test {

// The DSL's fixture parses CAF options from the test engine's arguments;
// under Boost.Test there are none.
int engine::argc() {
  return 0;
}

char** engine::argv() {
  return nullptr;
}

} // namespace caf::test

namespace kvtier::testing {

/// CAF's deterministic fixture plus a drain that also fires timeouts.
template <class Config = caf::actor_system_config>
struct kvtier_fixture : test_coordinator_fixture<Config> {
  /// Runs jobs and fires pending timeouts until nothing is left; returns
  /// the number of jobs run. Bounded, so a timer loop cannot hang a test.
  size_t drain(size_t max_rounds = 100000) {
    size_t jobs = 0;
    for (size_t i = 0; i < max_rounds; ++i) {
      jobs += this->sched.run();
      if (this->sched.has_pending_timeout())
        this->sched.trigger_timeouts();
      else if (!this->sched.has_job())
        return jobs;
    }
    BOOST_FAIL("drain: still busy after " << max_rounds << " rounds");
    return jobs;
  }
};

} // namespace kvtier::testing
