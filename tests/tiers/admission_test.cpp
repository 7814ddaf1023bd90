#define BOOST_TEST_MODULE tiers_admission
#include <boost/test/unit_test.hpp>

#include "tiers/admission.hpp"

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

// tiny-dense: 4 kv layers × 64 B = 256 B per token.
admission make(uint64_t budget_tokens, uint64_t position_limit = 1000) {
  return admission{model_geometry::preset("tiny-dense").value(),
                   {budget_tokens * 256, position_limit}};
}

ec code_of(const caf::error& e) {
  return static_cast<ec>(e.code());
}

} // namespace

BOOST_AUTO_TEST_CASE(admit_holds_projected_bytes_until_release) {
  auto a = make(100);
  BOOST_TEST(a.projected_bytes({1, 30, 10}) == 40u * 256);
  BOOST_TEST(a.admit({1, 30, 10}).value());
  BOOST_TEST(a.counters().held_bytes == 40u * 256);
  BOOST_TEST(a.admit({2, 50, 10}).value());
  BOOST_TEST(!a.admit({3, 1, 0}).value()); // 100 tokens held: wait
  BOOST_TEST(a.counters().refused == 1u);
  a.release(1);
  BOOST_TEST(a.counters().held_bytes == 60u * 256);
  BOOST_TEST(a.admit({3, 1, 0}).value());
}

BOOST_AUTO_TEST_CASE(fits_answers_without_holding) {
  auto a = make(10);
  BOOST_TEST(a.fits({1, 8, 2}).value());
  BOOST_TEST(a.fits({1, 8, 2}).value());
  BOOST_TEST(a.counters().held_bytes == 0u);
  BOOST_TEST(a.admit({1, 8, 2}).value());
  BOOST_TEST(!a.fits({2, 1, 0}).value());
}

BOOST_AUTO_TEST_CASE(past_the_position_limit_is_an_error_naming_the_excess) {
  auto a = make(10000, 1024);
  auto r = a.admit({7, 1000, 200});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::position_limit_exceeded);
  auto text = describe(r.error());
  BOOST_TEST(text.find("1200 tokens exceeds the position limit 1024 by 176")
             != std::string::npos);
  BOOST_TEST(!a.fits({7, 1000, 200}));
  BOOST_TEST(a.counters().errors == 1u);
}

BOOST_AUTO_TEST_CASE(over_the_whole_budget_alone_is_an_error_not_a_wait) {
  auto a = make(4); // 1 KiB budget
  auto r = a.admit({9, 5, 0});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::over_budget);
  BOOST_TEST(describe(r.error()).find("1.25 KiB exceeds the whole KV budget "
                                      "1.00 KiB by 256 B")
             != std::string::npos);
  auto q = a.enqueue({9, 5, 0});
  BOOST_TEST(!q); // never queued
  BOOST_TEST(a.counters().waiting == 0u);
}

BOOST_AUTO_TEST_CASE(ring_and_recurrent_layers_project_their_caps) {
  admission w{model_geometry::preset("tiny-window").value(),
              {1 << 30, 1 << 20}};
  // 2 rings of window 16 × 32 B + 1 kv × 32 B per token.
  BOOST_TEST(w.projected_bytes({1, 100, 0}) == 2u * 16 * 32 + 100u * 32);
  admission h{model_geometry::preset("tiny-hybrid").value(),
              {1 << 30, 1 << 20}};
  BOOST_TEST(h.projected_bytes({1, 100, 0}) == 3u * 256 + 100u * 32);
}

BOOST_AUTO_TEST_CASE(queued_requests_are_admitted_in_arrival_order) {
  auto a = make(10);
  BOOST_TEST(a.enqueue({1, 10, 0}).value());
  BOOST_TEST(!a.enqueue({2, 8, 0}).value());
  BOOST_TEST(!a.enqueue({3, 2, 0}).value()); // would fit after 2, waits behind
  BOOST_TEST(!a.enqueue({4, 1, 0}).value());
  BOOST_TEST(a.counters().waiting == 3u);
  // A plain admit does not jump the queue either.
  BOOST_TEST(!a.admit({5, 1, 0}).value());
  auto admitted = a.release(1);
  BOOST_TEST(admitted == (std::vector<uint64_t>{2, 3}));
  BOOST_TEST(a.counters().waiting == 1u);
  admitted = a.release(3);
  BOOST_TEST(admitted == (std::vector<uint64_t>{4}));
}

BOOST_AUTO_TEST_CASE(a_small_request_never_overtakes_a_large_one) {
  auto a = make(10);
  BOOST_TEST(a.enqueue({1, 6, 0}).value());
  BOOST_TEST(!a.enqueue({2, 10, 0}).value()); // needs everything
  BOOST_TEST(!a.enqueue({3, 1, 0}).value());
  BOOST_TEST(a.release(1) == (std::vector<uint64_t>{2}));
  BOOST_TEST(a.release(2) == (std::vector<uint64_t>{3}));
}

BOOST_AUTO_TEST_CASE(releasing_a_waiter_removes_it_and_release_is_idempotent) {
  auto a = make(10);
  BOOST_TEST(a.enqueue({1, 10, 0}).value());
  BOOST_TEST(!a.enqueue({2, 5, 0}).value());
  BOOST_TEST(a.release(2).empty()); // cancelled while waiting
  BOOST_TEST(a.counters().waiting == 0u);
  BOOST_TEST(a.release(1).empty());
  BOOST_TEST(a.release(1).empty());
  BOOST_TEST(a.counters().held_bytes == 0u);
  BOOST_TEST(a.counters().released == 1u);
}

BOOST_AUTO_TEST_CASE(double_admit_of_one_id_is_refused) {
  auto a = make(10);
  BOOST_TEST(a.admit({1, 1, 0}).value());
  auto r = a.admit({1, 1, 0});
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(
  the_queue_holds_at_most_max_queued_then_refuses_naming_it) {
  admission a{model_geometry::preset("tiny-dense").value(),
              {10 * 256, 1000, 2}};
  BOOST_TEST(a.enqueue({1, 10, 0}).value()); // holds the whole budget
  BOOST_TEST(!a.enqueue({2, 1, 0}).value());
  BOOST_TEST(!a.enqueue({3, 1, 0}).value());
  auto full = a.enqueue({4, 1, 0});
  BOOST_REQUIRE(!full);
  BOOST_TEST(code_of(full.error()) == ec::queue_full);
  auto text = describe(full.error());
  BOOST_TEST(text.find("request 4") != std::string::npos, text);
  BOOST_TEST(text.find("admission.max-queued = 2") != std::string::npos, text);
  BOOST_TEST(a.counters().queue_full == 1u);
  BOOST_TEST(a.counters().waiting == 2u); // nothing queued or held for 4
  BOOST_TEST(a.counters().errors == 0u);  // not a never-admissible request
  // An admit that needs no waiting is not bounded by the queue.
  BOOST_TEST(a.release(1) == (std::vector<uint64_t>{2, 3}));
  BOOST_TEST(a.enqueue({4, 1, 0}).value());
  // Room in the queue again: waiting is allowed.
  BOOST_TEST(a.enqueue({5, 7, 0}).value()); // 10 tokens held now
  BOOST_TEST(!a.enqueue({6, 1, 0}).value());
  BOOST_TEST(a.counters().waiting == 1u);
}

BOOST_AUTO_TEST_CASE(close_drops_the_queue_and_refuses_everything_but_release) {
  auto a = make(10);
  BOOST_TEST(a.admit({1, 10, 0}).value());
  BOOST_TEST(!a.enqueue({2, 5, 0}).value());
  BOOST_TEST(!a.enqueue({3, 1, 0}).value());
  BOOST_TEST(a.close() == (std::vector<uint64_t>{2, 3}));
  BOOST_TEST(a.closed());
  BOOST_TEST(a.counters().waiting == 0u);
  for (auto r : {a.admit({4, 1, 0}), a.enqueue({5, 1, 0}), a.fits({6, 1, 0})}) {
    BOOST_REQUIRE(!r);
    BOOST_TEST(code_of(r.error()) == ec::closed);
    BOOST_TEST(describe(r.error()).find("closed") != std::string::npos);
  }
  BOOST_TEST(a.counters().errors == 0u);
  // The holder gives its bytes back; nothing queued is admitted by it.
  BOOST_TEST(a.release(1).empty());
  BOOST_TEST(a.counters().held_bytes == 0u);
  BOOST_TEST(a.counters().admitted == 1u);
  BOOST_TEST(a.close().empty()); // idempotent
}
