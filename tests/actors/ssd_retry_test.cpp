// The SSD actor's retry clock, on CAF's deterministic scheduler and its
// test clock: a real SSD actor over an in-memory file system behind a fault
// injector, with an I/O engine that runs each op at once. A disk outage of
// 250 ms (every mutating operation fails) begins as a write is ordered;
// with `ssd-tier.retry-backoff-ms` = 100 and four attempts the write is
// tried at 0, 100 and 300 ms (then the outage is over) and stored, and a
// flush arriving meanwhile waits for those attempts instead of making
// its own: the same three attempts at the same times, the write stored,
// the flush durable. (A flush used to retry at once and on its own rounds
// besides the write's timer: four attempts within about 100 ms, all in
// the outage, and the write was given up.)
#define BOOST_TEST_MODULE actors_ssd_retry
// Before the CAF test DSL, whose `inject` macro would eat the method's name.
#include "actors/tier_counters.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"

#include <chrono>
#include <vector>

using namespace kvtier;
using actors::sealed;
using std::chrono::milliseconds;

namespace {

namespace ssd = tiers::ssd;

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  ssd::memory_file_system memory;
  ssd::faulty_file_system faulty{memory};
  actors::ssd_tier_actor ssd;
  /// Milliseconds since the first order, on the test clock.
  uint64_t now_ms = 0;
  /// When each write attempt began (its temp file's create), in ms.
  std::vector<uint64_t> attempts;
  /// Creates before the first order (the tier's own files at open).
  uint64_t creates_before = 0;

  fixture() {
    ssd::ssd_config cfg;
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    cfg.max_attempts = 4;
    auto parts = testing::inline_ssd(cfg, &faulty);
    parts->retry_backoff_ms = 100;
    parts->write_attempts = 4;
    ssd = sys.spawn(actors::ssd_tier, std::move(parts));
    drain();
    creates_before = faulty.count(ssd::fs_op::create);
  }

  sealed<msg::SpillEntry> spill(uint64_t order) {
    tiers::token_seq tokens(100);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<tiers::token>(i + 1);
    msg::draft<msg::SpillEntry> d;
    d.root().setOrderId(order);
    d.root().setReason(msg::SpillReason::SPILL);
    tiers::write_entry(d, d.root().getItem().initEntry(),
                       oracle.prefill("ns", tokens));
    return std::move(d).seal();
  }

  /// Runs every job due now, noting each write attempt that began.
  void run_now() {
    sched.run();
    while (creates_before + attempts.size() < faulty.count(ssd::fs_op::create))
      attempts.push_back(now_ms);
  }

  /// Advances the test clock 1 ms at a time up to `t` ms, running what
  /// falls due; the outage ends at `outage_ends` ms.
  void run_until(uint64_t t, uint64_t outage_ends) {
    while (now_ms < t) {
      sched.advance_time(milliseconds{1});
      ++now_ms;
      if (now_ms == outage_ends)
        faulty.clear();
      run_now();
    }
  }

  tiers::report::ssd counters() {
    self->send(ssd, msg::draft<msg::ReadReport>{}.seal());
    run_now();
    self->receive([&](const sealed<msg::ReadReportReply>& r) { report = r; });
    return actors::read_part<tiers::report::ssd>(report->root());
  }

  std::optional<sealed<msg::ReadReportReply>> report;
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ssd_retry, fixture)

BOOST_AUTO_TEST_CASE(a_write_is_retried_on_its_backoff_through_an_outage) {
  faulty.crash_now(); // the outage: every create fails until it ends
  self->send(ssd, spill(1));
  run_now();
  run_until(1000, 250);
  BOOST_CHECK((attempts == std::vector<uint64_t>{0, 100, 300}));
  auto c = counters();
  BOOST_CHECK_EQUAL(c.writes_ok, 1u);
  BOOST_CHECK_EQUAL(c.writes_given_up, 0u);
}

BOOST_AUTO_TEST_CASE(a_flush_waits_for_the_retry_clock_instead_of_driving_it) {
  faulty.crash_now();
  self->send(ssd, spill(1));
  run_now();
  BOOST_REQUIRE_EQUAL(attempts.size(), 1u); // failed, its retry timer armed
  self->send(ssd, msg::draft<msg::FlushState>{}.seal());
  run_now();
  // A second flush joins it: still no attempt of its own.
  run_until(50, 250);
  self->send(ssd, msg::draft<msg::FlushState>{}.seal());
  run_until(1000, 250);
  BOOST_CHECK((attempts == std::vector<uint64_t>{0, 100, 300}));
  int flushes = 0;
  while (self->has_next_message())
    self->receive([](const sealed<msg::SpillEntryReply>&) {},
                  [&](const sealed<msg::FlushStateReply>& r) {
                    ++flushes;
                    auto ev = r.root().getResult();
                    BOOST_CHECK(ev.getDurable());
                    BOOST_CHECK_EQUAL(ev.getFailed(), 0u);
                    BOOST_CHECK_EQUAL(ev.getPending(), 0u);
                    BOOST_CHECK_EQUAL(ev.getEntries(), 1u);
                  });
  BOOST_CHECK_EQUAL(flushes, 2);
  auto c = counters();
  BOOST_CHECK_EQUAL(c.writes_ok, 1u);
  BOOST_CHECK_EQUAL(c.writes_given_up, 0u);
  BOOST_CHECK_EQUAL(c.writes_failed, 2u);
}

BOOST_AUTO_TEST_CASE(a_flush_ends_when_the_last_attempt_is_given_up) {
  faulty.crash_now(); // an outage longer than every backoff
  self->send(ssd, spill(1));
  run_now();
  self->send(ssd, msg::draft<msg::FlushState>{}.seal());
  run_until(2000, 5000);
  // Attempts at 0, 100, 300 and 700 ms: the fourth is the last.
  BOOST_CHECK((attempts == std::vector<uint64_t>{0, 100, 300, 700}));
  bool answered = false;
  while (self->has_next_message())
    self->receive([](const sealed<msg::SpillEntryReply>&) {},
                  [&](const sealed<msg::FlushStateReply>& r) {
                    answered = true;
                    auto ev = r.root().getResult();
                    BOOST_CHECK(!ev.getDurable());
                    BOOST_CHECK_EQUAL(ev.getFailed(), 1u); // given up
                    BOOST_CHECK_EQUAL(ev.getPending(), 0u);
                  });
  BOOST_CHECK(answered);
  BOOST_CHECK_EQUAL(counters().writes_given_up, 1u);
  faulty.clear();
}

BOOST_AUTO_TEST_SUITE_END()
