// Close means closed (runtime/service.hpp, docs/api.md): queued admits
// fail `closed` and nothing is admitted after; writes that failed or still
// wait are released with their buffers and counted (`abandoned`); every
// buffer the service held is freed while the service object lives on;
// what the engine was lent stays valid and is then all that is live. Also
// the admission queue's bound (`admission.max-queued`).
#define BOOST_TEST_MODULE runtime_service_close
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include <chrono>
#include <thread>

using namespace kvtier;
using runtime::state_source;
using testing::ok;
using testing::service_fixture;
using testing::why;

namespace {

using admit_future = std::future<caf::expected<runtime::admit_decision>>;

bool ready(admit_future& f) {
  return f.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
}

/// Whether `f` completes within a bound: a future completes on an actor
/// thread, a moment after the reply that decided it (e.g. close) returned.
bool completes(admit_future& f) {
  return f.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
}

/// Bytes of the distinct buffers `e`'s views keep alive.
uint64_t held_bytes(const tiers::entry& e) {
  std::vector<buffer_ref> bufs;
  tiers::collect_buffers(e, bufs);
  uint64_t n = 0;
  for (auto& b : bufs)
    n += b->size();
  return n;
}

/// Message words are buffers too: for a moment after a call returns, the
/// actor that answered may still hold the message it was answering (a few
/// words). Far below any entry's bytes (100 tokens of tiny-dense: 25 KiB).
constexpr uint64_t message_slack = 1024;

/// The live buffer bytes once `done(bytes)` holds, or after 10 s: lets the
/// messages of the last call (see `message_slack`) go. On a busy machine
/// an actor thread may hold its last message for a while after its reply
/// returned, so no check reads the count only once.
template <class Done>
uint64_t live_bytes_once(Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done(buffer::live_bytes())
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return buffer::live_bytes();
}

uint64_t live_bytes_settled(uint64_t want) {
  return live_bytes_once([want](uint64_t n) { return n == want; });
}

bool mentions(const std::vector<std::string>& errors, const std::string& s) {
  for (auto& e : errors)
    if (e.find(s) != std::string::npos)
      return true;
  return false;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(service_close, service_fixture)

BOOST_AUTO_TEST_CASE(close_frees_every_buffer_the_service_held) {
  opts.checkpoint_every_tokens = 16;
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  auto baseline = buffer::live_bytes();
  // A cold file, prefetched: RAM and SSD hold its restored entry for the
  // lease.
  put("cold", seq(300));
  BOOST_REQUIRE_EQUAL(*svc->demote_idle(0), 1u);
  auto lease = svc->prefetch(seq(301), "cold");
  BOOST_REQUIRE_MESSAGE(lease, why(lease));
  BOOST_CHECK_EQUAL(lease->info().tokens, 300u);
  BOOST_CHECK(get("cold", seq(301)).source == state_source::ram);
  // A session's newest entry (pinned) and a plain one, not durable yet.
  auto chat = request(2, seq(50, 5000));
  chat.session = "chat-1";
  auto kept = svc->publish(chat, oracle->prefill("ns", seq(50, 5000)));
  BOOST_REQUIRE_MESSAGE(kept, why(kept));
  BOOST_REQUIRE(kept->kept);
  put("ns", seq(80, 7000));
  // A checkpoint of a generation.
  auto prompt = seq(40, 9000);
  auto gen = request(42, prompt, 64);
  BOOST_REQUIRE(*svc->checkpoint(
    gen,
    oracle->prefill("ns", cat(prompt, oracle->generate("ns", prompt, 16)))));
  // Admission: one holder, two waiting.
  BOOST_REQUIRE(svc->admit(request(7, seq(3000), 96))->admitted);
  auto q8 = svc->admit_queued(request(8, seq(2000), 48));
  auto q9 = svc->admit_queued(request(9, seq(500), 12));
  // Future calls from one thread arrive in order: both admits wait.
  BOOST_CHECK_EQUAL(svc->report_async().get()->admission.waiting, 2u);
  BOOST_CHECK_GT(buffer::live_bytes(), baseline);
  // From here every write fails: the flush's writes (the two RAM entries
  // and the checkpoint) fail, and so does every retry: the flush gives
  // them up after their last attempt, so close has nothing left to
  // release unwritten.
  faulty.inject(tiers::ssd::fs_op::create, 1, tiers::ssd::fault_kind::crash);
  auto c = svc->close();
  // Close freed the entries' buffers (each is far above the slack); only
  // the words of messages still being let go may remain for a moment.
  BOOST_CHECK_LT(live_bytes_once([baseline](uint64_t n) {
                   return n < baseline + message_slack;
                 }),
                 baseline + message_slack);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_CHECK(!c->durable);
  BOOST_CHECK_EQUAL(c->failed, 3u);    // each given up, its buffers released
  BOOST_CHECK_EQUAL(c->abandoned, 0u); // nothing was left queued
  BOOST_CHECK(mentions(c->errors, "3 writes: write failed at create"));
  // The waiters were answered `closed`; nothing was admitted.
  for (auto* q : {&q8, &q9}) {
    BOOST_REQUIRE(completes(*q));
    auto r = q->get();
    BOOST_REQUIRE(!r);
    BOOST_CHECK(r.error() == ec::closed);
  }
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.entries, 0u);
  BOOST_CHECK_EQUAL(rep.ram.bytes, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.queue_items, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.queue_bytes, 0u);
  BOOST_CHECK_EQUAL(rep.sessions.open, 0u);
  BOOST_CHECK_EQUAL(rep.admission.waiting, 0u);
  BOOST_CHECK_EQUAL(rep.admission.admitted, 1u);
  BOOST_CHECK_EQUAL(svc->stats()->pending_snapshots, 0u);
  BOOST_CHECK_EQUAL(svc->stats()->pending_checkpoint_writes, 0u);
  // The service object lives on, holding no buffer at all.
  BOOST_CHECK_EQUAL(live_bytes_settled(baseline), baseline);
  // The lease's release and a second close change nothing of that.
  lease->release();
  auto again = svc->close();
  BOOST_REQUIRE(again);
  BOOST_CHECK(again->already_closed);
  BOOST_CHECK_EQUAL(again->abandoned, 0u);
  BOOST_CHECK_EQUAL(again->failed, 3u);
  BOOST_CHECK(!again->durable);
  BOOST_CHECK_EQUAL(live_bytes_settled(baseline), baseline);
  faulty.clear();
  // Nothing half-written is served after a restart: the cold file only.
  start();
  BOOST_CHECK(get("ns", seq(81, 7000)).source == state_source::none);
  BOOST_CHECK(get("ns", prompt, 42).source == state_source::none);
  BOOST_CHECK(get("cold", seq(301)).source == state_source::ssd);
  svc.reset(); // before `faulty` goes
}

BOOST_AUTO_TEST_CASE(lent_views_stay_valid_and_are_all_that_stays_live) {
  start();
  auto baseline = buffer::live_bytes();
  put("ns", seq(100));
  put("ns", seq(200, 1000));
  auto got = get("ns", seq(101));
  BOOST_REQUIRE(got.source == state_source::ram);
  auto c = svc->close();
  BOOST_REQUIRE(c);
  BOOST_CHECK(c->durable);
  BOOST_CHECK_EQUAL(c->abandoned, 0u);
  // The engine's views are its own: valid, byte for byte, after close.
  BOOST_CHECK(ok(oracle->verify(got.state)));
  auto lent = held_bytes(got.state);
  BOOST_CHECK_EQUAL(lent, 100u * 256); // the donor's 100 tokens
  BOOST_CHECK_EQUAL(live_bytes_settled(baseline + lent) - baseline, lent);
  got = {};
  BOOST_CHECK_EQUAL(live_bytes_settled(baseline), baseline);
}

BOOST_AUTO_TEST_CASE(queued_admits_fail_closed_and_nothing_is_admitted_after) {
  start();
  auto holder = request(1, seq(3000), 96); // 3/4 of the budget
  BOOST_REQUIRE(svc->admit(holder)->admitted);
  auto second = svc->admit_queued(request(2, seq(2000), 48));
  auto third = svc->admit_queued(request(3, seq(500), 12));
  BOOST_CHECK_EQUAL(svc->report_async().get()->admission.waiting, 2u);
  BOOST_REQUIRE(svc->close());
  for (auto* q : {&second, &third}) {
    BOOST_REQUIRE(completes(*q));
    auto r = q->get();
    BOOST_REQUIRE(!r);
    BOOST_CHECK(r.error() == ec::closed);
  }
  auto small = request(4, seq(10), 1);
  auto admit = svc->admit(small);
  BOOST_REQUIRE(!admit);
  BOOST_CHECK(admit.error() == ec::closed);
  auto queued = svc->admit_queued(small).get();
  BOOST_REQUIRE(!queued);
  BOOST_CHECK(queued.error() == ec::closed);
  auto fits = svc->fits(small);
  BOOST_REQUIRE(!fits);
  BOOST_CHECK(fits.error() == ec::closed);
  // The holder still gives its bytes back; the budget admits no one.
  auto rel = svc->release(holder, true);
  BOOST_REQUIRE(rel);
  BOOST_CHECK_EQUAL(rel->released_bytes, 3096u * 256);
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.admission.holders, 0u);
  BOOST_CHECK_EQUAL(rep.admission.waiting, 0u);
  BOOST_CHECK_EQUAL(rep.admission.admitted, 1u);
}

BOOST_AUTO_TEST_CASE(admit_queued_past_the_bound_is_queue_full) {
  opts.max_queued = 1;
  start();
  auto holder = request(1, seq(3000), 96);
  BOOST_REQUIRE(svc->admit(holder)->admitted);
  auto second = svc->admit_queued(request(2, seq(2000), 48)); // waits
  auto third = svc->admit_queued(request(3, seq(500), 12)).get();
  BOOST_REQUIRE(!third);
  BOOST_CHECK(third.error() == ec::queue_full);
  BOOST_CHECK_NE(describe(third.error()).find("admission.max-queued = 1"),
                 std::string::npos);
  BOOST_CHECK(!ready(second));
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.admission.max_queued, 1u);
  BOOST_CHECK_EQUAL(rep.admission.queue_full, 1u);
  BOOST_CHECK_EQUAL(rep.admission.waiting, 1u);
  BOOST_REQUIRE(svc->release(holder, true));
  auto a2 = second.get();
  BOOST_REQUIRE_MESSAGE(a2, why(a2));
  BOOST_CHECK(a2->admitted);
}

BOOST_AUTO_TEST_CASE(an_out_of_range_queue_bound_is_refused_at_start) {
  opts.max_queued = 0;
  runtime::service bad{opts, runtime::service_parts{fs}};
  auto err = bad.start_error();
  BOOST_REQUIRE(err);
  BOOST_CHECK(err == ec::invalid_config);
  BOOST_CHECK_NE(describe(err).find("admission.max-queued = 0"),
                 std::string::npos);
  BOOST_CHECK_NE(describe(err).find("1 .. 1048576"), std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
