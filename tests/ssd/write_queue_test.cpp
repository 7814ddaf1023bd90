#define BOOST_TEST_MODULE ssd_write_queue
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/write_queue.hpp"

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

/// An entry of exactly `tokens` x 100 bytes.
entry sized(size_t tokens, token salt) {
  model_geometry g{"kv", {{layer_kind::kv, 100, 0, 0}}};
  return runtime::oracle_engine{g}.prefill("ns", token_seq(tokens, salt));
}

} // namespace

BOOST_AUTO_TEST_CASE(over_the_cap_the_oldest_idle_item_is_dropped) {
  auto live = buffer::live_count();
  {
    write_queue q{1000};
    q.push("a", sized(4, 1), write_reason::spill); // 400 bytes
    q.push("b", sized(4, 2), write_reason::spill); // 800
    auto* a = q.start_next();
    BOOST_REQUIRE(a);
    BOOST_TEST(a->key == "a"); // in flight: never dropped
    auto r = q.push("c", sized(4, 3), write_reason::demotion); // 1200
    BOOST_TEST(r.dropped == 1u); // b went, a stays
    BOOST_TEST(q.size() == 2u);
    BOOST_TEST(q.bytes() == 800u);
    BOOST_TEST(q.items().front().key == "a");
    BOOST_TEST(q.items().back().key == "c");
  }
  BOOST_TEST(buffer::live_count() == live);
}

BOOST_AUTO_TEST_CASE(the_newest_item_is_never_its_own_victim) {
  write_queue q{100};
  auto r = q.push("big", sized(5, 1), write_reason::snapshot); // 500 > cap
  BOOST_TEST(r.dropped == 0u);
  BOOST_TEST(q.size() == 1u);
  r = q.push("big2", sized(5, 2), write_reason::snapshot);
  BOOST_TEST(r.dropped == 1u);
  BOOST_TEST(q.items().front().key == "big2");
}

BOOST_AUTO_TEST_CASE(same_key_supersedes_and_never_overlaps_in_flight) {
  write_queue q{10000};
  q.push("k", sized(2, 1), write_reason::spill);
  auto* first = q.start_next();
  BOOST_REQUIRE(first);
  auto id1 = first->id;
  q.push("k", sized(2, 2), write_reason::spill);
  auto r = q.push("k", sized(2, 3), write_reason::spill);
  BOOST_TEST(r.superseded == 1u); // the queued one, not the in-flight one
  BOOST_TEST(q.start_next() == nullptr); // "k" is being written
  q.done(id1);
  auto* next = q.start_next();
  BOOST_REQUIRE(next);
  BOOST_TEST(next->id == r.id);
}

BOOST_AUTO_TEST_CASE(failed_items_stay_until_retried_and_release_buffers) {
  auto live = buffer::live_count();
  {
    write_queue q{10000};
    q.push("k", sized(2, 1), write_reason::spill);
    auto* w = q.start_next();
    BOOST_REQUIRE(w);
    auto id = w->id;
    q.fail(id);
    BOOST_TEST(q.failed() == 1u);
    BOOST_TEST(!q.active());
    BOOST_TEST(q.start_next() == nullptr);
    BOOST_TEST(q.retry_failed() == 1u);
    BOOST_TEST(q.active());
    BOOST_REQUIRE(q.start_next());
    BOOST_TEST(q.find(id)->attempts == 2u);
    q.done(id);
    BOOST_TEST(q.size() == 0u);
    BOOST_TEST(buffer::live_count() == live);
  }
}

BOOST_AUTO_TEST_CASE(cancel_takes_back_queued_and_failed_items_of_one_key) {
  auto live = buffer::live_count();
  {
    write_queue q{10000};
    auto a = q.push("a", sized(2, 1), write_reason::spill).id; // 200
    q.push("b", sized(3, 2), write_reason::snapshot);          // 500
    auto* first = q.start_next();
    BOOST_REQUIRE(first);
    BOOST_TEST(first->id == a);
    auto queued = q.push("a", sized(4, 3), write_reason::spill).id; // 900
    BOOST_TEST(q.cancel("a").size() == 1u); // not the one in flight
    BOOST_TEST(q.size() == 2u);
    BOOST_TEST(q.bytes() == 500u);
    BOOST_TEST(q.find(queued) == nullptr);
    BOOST_TEST(q.find(a) != nullptr);
    // A failed item of a key is cancelled too; nothing of another key.
    q.fail(a);
    auto gone = q.cancel("a");
    BOOST_REQUIRE(gone.size() == 1u);
    BOOST_TEST(gone[0].id == a);
    BOOST_TEST(q.cancel("none").empty());
    BOOST_TEST(q.size() == 1u);
    BOOST_TEST(q.bytes() == 300u);
    // take removes by id, in flight or not.
    auto* b = q.start_next();
    BOOST_REQUIRE(b);
    auto taken = q.take(b->id);
    BOOST_REQUIRE(taken);
    BOOST_TEST(taken->key == "b");
    BOOST_TEST(!q.take(taken->id)); // gone
    BOOST_TEST(q.size() == 0u);
    BOOST_TEST(q.bytes() == 0u);
  }
  BOOST_TEST(buffer::live_count() == live);
}

BOOST_AUTO_TEST_CASE(a_retried_item_goes_before_newer_items) {
  // One retry clock per write: when its owner makes it writable again, it
  // is the next to start, not queued behind what arrived meanwhile.
  write_queue q{10000};
  auto a = q.push("a", sized(1, 1), write_reason::spill).id;
  q.push("b", sized(1, 2), write_reason::spill);
  BOOST_REQUIRE(q.start_next()->id == a);
  q.fail(a);
  auto* b = q.start_next();
  BOOST_REQUIRE(b);
  BOOST_TEST(b->key == "b");
  q.push("c", sized(1, 3), write_reason::spill);
  BOOST_TEST(!q.retry(b->id)); // not failed
  BOOST_TEST(q.failed_ids() == std::vector<uint64_t>{a});
  BOOST_TEST(q.retry(a));
  BOOST_TEST(!q.retry(a)); // writable already
  auto* next = q.start_next();
  BOOST_REQUIRE(next);
  BOOST_TEST(next->id == a);
  BOOST_TEST(next->attempts == 2u);
}

BOOST_AUTO_TEST_CASE(counts_and_indexes_follow_every_change) {
  write_queue q{100000};
  storage_key ckpt{key_kind::checkpoint, "ns", {1}, 7, 1};
  auto a = q.push("a", sized(1, 1), write_reason::snapshot).id;
  auto b = q.push("b", sized(2, 2), write_reason::checkpoint, ckpt).id;
  q.push("c", sized(3, 3), write_reason::demotion);
  BOOST_TEST(q.count(write_reason::snapshot) == 1u);
  BOOST_TEST(q.count(write_reason::checkpoint) == 1u);
  BOOST_TEST(q.count(write_reason::demotion) == 1u);
  BOOST_TEST(q.count(key_kind::checkpoint) == 1u);
  BOOST_TEST(q.count(key_kind::prefix) == 2u);
  BOOST_TEST(q.bytes() == 600u);
  BOOST_TEST(q.active());
  BOOST_REQUIRE(q.start_next()->id == a);
  BOOST_TEST(q.in_flight() == 1u);
  // A newer state of "a" while "a" is written: both are "a"'s items.
  auto a2 = q.push("a", sized(1, 4), write_reason::snapshot).id;
  auto of_a = q.items_of("a");
  BOOST_REQUIRE(of_a.size() == 2u);
  BOOST_TEST(of_a[0]->id == a);
  BOOST_TEST(of_a[1]->id == a2);
  BOOST_TEST(q.count(write_reason::snapshot) == 2u);
  q.fail(a);
  BOOST_TEST(q.in_flight() == 0u);
  BOOST_TEST(q.failed() == 1u);
  // b starts (a2 waits: its key is not in flight, but b is older).
  BOOST_REQUIRE(q.start_next()->id == b);
  BOOST_TEST(q.cancel("a").size() == 2u); // the failed and the queued one
  BOOST_TEST(!q.holds("a"));
  BOOST_TEST(q.items_of("a").empty());
  BOOST_TEST(q.failed() == 0u);
  BOOST_TEST(q.count(write_reason::snapshot) == 0u);
  q.done(b);
  BOOST_TEST(q.count(key_kind::checkpoint) == 0u);
  BOOST_TEST(q.in_flight() == 0u);
  BOOST_TEST(q.size() == 1u);
  BOOST_TEST(q.bytes() == 300u);
  auto taken = q.take(q.items().front().id);
  BOOST_REQUIRE(taken);
  BOOST_TEST(q.count(write_reason::demotion) == 0u);
  BOOST_TEST(q.size() == 0u);
  BOOST_TEST(q.bytes() == 0u);
  BOOST_TEST(!q.active());
}

BOOST_AUTO_TEST_CASE(reasons_have_their_own_names_in_log_lines) {
  using kvtier::tiers::ssd::write_reason;
  BOOST_TEST(std::string{to_string(write_reason::spill)} == "spill");
  BOOST_TEST(std::string{to_string(write_reason::demotion)} == "demotion");
  BOOST_TEST(std::string{to_string(write_reason::snapshot)} == "snapshot");
  BOOST_TEST(std::string{to_string(write_reason::checkpoint)} == "checkpoint");
}
