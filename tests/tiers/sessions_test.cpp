// The session table (tiers/sessions.hpp): each open session's newest
// entry and the pin to take back when a newer one replaces it or the
// session closes; counters of opened, closed and open sessions.
#define BOOST_TEST_MODULE tiers_sessions
#include <boost/test/unit_test.hpp>

#include "tiers/sessions.hpp"

using namespace kvtier::tiers;

namespace {

pinned_entry at(token first, uint64_t pin, const char* ns = "ns") {
  return {ns, {first, first + 1, first + 2}, pin};
}

} // namespace

BOOST_AUTO_TEST_CASE(a_first_put_opens_the_session_and_returns_nothing) {
  sessions t;
  BOOST_TEST(!t.note_put("s", at(1, 1)).has_value());
  BOOST_REQUIRE(t.newest("s"));
  BOOST_TEST((*t.newest("s") == at(1, 1)));
  BOOST_TEST(!t.newest("other"));
  auto c = t.counters();
  BOOST_TEST(c.opened == 1u);
  BOOST_TEST(c.open == 1u);
  BOOST_TEST(c.closed == 0u);
}

BOOST_AUTO_TEST_CASE(a_newer_put_returns_the_previous_newest_to_unprotect) {
  sessions t;
  t.note_put("s", at(1, 1));
  auto prev = t.note_put("s", at(10, 2));
  BOOST_REQUIRE(prev);
  BOOST_TEST((*prev == at(1, 1)));
  prev = t.note_put("s", at(20, 3, "other-ns"));
  BOOST_REQUIRE(prev);
  BOOST_TEST((*prev == at(10, 2)));
  BOOST_TEST((*t.newest("s") == at(20, 3, "other-ns")));
  BOOST_TEST(t.counters().opened == 1u, "one session, however many puts");
}

BOOST_AUTO_TEST_CASE(the_same_key_again_returns_its_previous_pin) {
  sessions t;
  t.note_put("s", at(1, 1));
  auto prev = t.note_put("s", at(1, 7));
  BOOST_REQUIRE(prev);
  BOOST_TEST(prev->pin == 1u, "every pin is taken back exactly once");
  BOOST_TEST(t.newest("s")->pin == 7u);
}

BOOST_AUTO_TEST_CASE(sessions_are_independent_even_on_one_entry) {
  sessions t;
  t.note_put("a", at(1, 1));
  t.note_put("b", at(1, 2)); // the same entry, pinned twice
  BOOST_TEST(t.counters().open == 2u);
  auto a = t.close("a");
  BOOST_REQUIRE(a);
  BOOST_TEST(a->pin == 1u);
  BOOST_REQUIRE(t.newest("b"));
  BOOST_TEST(t.newest("b")->pin == 2u, "b keeps its own pin");
}

BOOST_AUTO_TEST_CASE(close_returns_the_newest_entry_and_forgets_the_session) {
  sessions t;
  t.note_put("s", at(1, 1));
  t.note_put("s", at(10, 2));
  auto last = t.close("s");
  BOOST_REQUIRE(last);
  BOOST_TEST((*last == at(10, 2)));
  BOOST_TEST(!t.newest("s"));
  auto c = t.counters();
  BOOST_TEST(c.open == 0u);
  BOOST_TEST(c.closed == 1u);
}

BOOST_AUTO_TEST_CASE(closing_a_session_that_is_not_open_is_not_an_error) {
  sessions t;
  BOOST_TEST(!t.close("never").has_value());
  t.note_put("s", at(1, 1));
  t.close("s");
  BOOST_TEST(!t.close("s").has_value(), "closing twice");
  BOOST_TEST(t.counters().closed == 1u, "only real closes count");
}

BOOST_AUTO_TEST_CASE(a_closed_session_used_again_opens_again) {
  sessions t;
  t.note_put("s", at(1, 1));
  t.close("s");
  BOOST_TEST(!t.note_put("s", at(10, 2)).has_value(),
             "nothing of the closed life is returned");
  auto c = t.counters();
  BOOST_TEST(c.opened == 2u);
  BOOST_TEST(c.open == 1u);
  BOOST_TEST(c.closed == 1u);
}

BOOST_AUTO_TEST_CASE(clear_forgets_every_session_without_counting_closes) {
  sessions t;
  t.note_put("a", at(1, 1));
  t.note_put("b", at(10, 2));
  t.clear();
  BOOST_TEST(!t.newest("a"));
  BOOST_TEST(!t.close("b").has_value());
  auto c = t.counters();
  BOOST_TEST(c.open == 0u);
  BOOST_TEST(c.closed == 0u);
  BOOST_TEST(c.opened == 2u);
}
