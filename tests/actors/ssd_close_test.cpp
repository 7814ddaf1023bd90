// The SSD actor's CloseService, message by message on CAF's deterministic
// scheduler: a real SSD actor over an in-memory file system behind a fault
// injector, with an I/O engine that runs each op at once (its completion
// becomes an io_done message the scheduler orders). Spill orders of writes
// the close releases are answered `refused` with `ec::closed`, so is every
// later one; a prefetch result held for a lease goes; the reply waits for
// the writes running and counts what was released unwritten.
#define BOOST_TEST_MODULE actors_ssd_close
// Before the CAF test DSL, whose `inject` macro would eat the method's name.
#include "actors/tier_counters.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <map>

using namespace kvtier;
using actors::sealed;

namespace {

namespace ssd = tiers::ssd;

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  ssd::memory_file_system memory;
  ssd::faulty_file_system faulty{memory};
  actors::ssd_tier_actor ssd;

  fixture() {
    ssd::ssd_config cfg;
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    cfg.writes_in_flight = 2;
    ssd = sys.spawn(actors::ssd_tier, testing::inline_ssd(cfg, &faulty));
    drain();
  }

  static tiers::token_seq seq(size_t n, tiers::token first) {
    tiers::token_seq t(n);
    for (size_t i = 0; i < n; ++i)
      t[i] = first + static_cast<tiers::token>(i);
    return t;
  }

  sealed<msg::SpillEntry> spill(uint64_t order, tiers::token first) {
    msg::draft<msg::SpillEntry> d;
    d.root().setOrderId(order);
    d.root().setReason(msg::SpillReason::SNAPSHOT);
    tiers::write_entry(d, d.root().getItem().initEntry(),
                       oracle.prefill("ns", seq(100, first)));
    return std::move(d).seal();
  }

  /// Every spill reply waiting, by order id.
  std::map<uint64_t, std::pair<msg::SpillOutcome, uint8_t>> spill_replies() {
    std::map<uint64_t, std::pair<msg::SpillOutcome, uint8_t>> out;
    while (self->has_next_message())
      self->receive([&](const sealed<msg::SpillEntryReply>& r) {
        out[r.root().getOrderId()] = {r.root().getOutcome(),
                                      r.root().getError().getCode()};
      });
    return out;
  }

  tiers::report::ssd counters() {
    self->send(ssd, msg::draft<msg::ReadReport>{}.seal());
    drain();
    self->receive([&](const sealed<msg::ReadReportReply>& r) { report = r; });
    return actors::read_part<tiers::report::ssd>(report->root());
  }

  std::optional<sealed<msg::ReadReportReply>> report;
};

constexpr auto closed_code = static_cast<uint8_t>(ec::closed);

} // namespace

BOOST_FIXTURE_TEST_SUITE(ssd_close, fixture)

BOOST_AUTO_TEST_CASE(close_releases_unwritten_writes_and_refuses_later_ones) {
  auto live = buffer::live_bytes();
  // A file, and its prefetch result held for a lease.
  self->send(ssd, spill(1, 1));
  drain();
  BOOST_CHECK(spill_replies()[1].first == msg::SpillOutcome::DURABLE);
  msg::draft<msg::PrefetchPrefix> p;
  p.root().setNs("ns");
  tiers::write_tokens(p.root().initPrompt(101), seq(101, 1));
  self->send(ssd, std::move(p).seal());
  drain();
  self->receive([&](const sealed<msg::PrefetchPrefixReply>& r) {
    BOOST_CHECK_NE(r.root().getLeaseId(), 0u);
    auto e = tiers::read_entry(r, r.root().getEntry());
    BOOST_REQUIRE(e);
    BOOST_CHECK(!oracle.verify(*e));
  });
  BOOST_CHECK_GT(buffer::live_bytes(), live); // the held result
  // Three writes, then the close, in one mailbox: the first two start (the
  // first fails at create), the third waits; the close comes before any
  // of their completions.
  (faulty.inject)(ssd::fs_op::create, 1, ssd::fault_kind::eio);
  self->send(ssd, spill(2, 1000));
  self->send(ssd, spill(3, 2000));
  self->send(ssd, spill(4, 3000));
  self->send(ssd, msg::draft<msg::CloseService>{}.seal());
  drain();
  std::map<uint64_t, std::pair<msg::SpillOutcome, uint8_t>> got;
  std::optional<uint64_t> abandoned;
  bool durable = true;
  while (self->has_next_message())
    self->receive(
      [&](const sealed<msg::SpillEntryReply>& r) {
        BOOST_CHECK(!abandoned); // every order is answered before the close
        got[r.root().getOrderId()] = {r.root().getOutcome(),
                                      r.root().getError().getCode()};
      },
      [&](const sealed<msg::CloseServiceReply>& r) {
        abandoned = r.root().getResult().getAbandoned();
        durable = r.root().getResult().getDurable();
      });
  BOOST_REQUIRE(abandoned);
  BOOST_CHECK_EQUAL(*abandoned, 2u); // the failed one and the waiting one
  BOOST_CHECK(!durable);
  BOOST_CHECK(got[2].first == msg::SpillOutcome::FAILED);
  BOOST_CHECK(got[3].first == msg::SpillOutcome::DURABLE); // it was running
  BOOST_CHECK(got[4].first == msg::SpillOutcome::REFUSED);
  BOOST_CHECK_EQUAL(got[4].second, closed_code);
  // Later spill orders are refused; a prefetch starts nothing.
  self->send(ssd, spill(5, 4000));
  drain();
  auto later = spill_replies()[5];
  BOOST_CHECK(later.first == msg::SpillOutcome::REFUSED);
  BOOST_CHECK_EQUAL(later.second, closed_code);
  msg::draft<msg::PrefetchPrefix> again;
  again.root().setNs("ns");
  tiers::write_tokens(again.root().initPrompt(101), seq(101, 1));
  self->send(ssd, std::move(again).seal());
  drain();
  self->receive([](const sealed<msg::PrefetchPrefixReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getLeaseId(), 0u);
  });
  auto c = counters();
  BOOST_CHECK_EQUAL(c.queue_items, 0u);
  BOOST_CHECK_EQUAL(c.queue_bytes, 0u);
  BOOST_CHECK_EQUAL(c.files, 2u);
  BOOST_CHECK_EQUAL(report->root().getIo()[0].getFailures(), 1u);
  report.reset();
  // Nothing is held: no queued write, no prefetch result.
  BOOST_CHECK_EQUAL(buffer::live_bytes(), live);
}

BOOST_AUTO_TEST_CASE(a_close_with_nothing_to_release_is_durable) {
  self->send(ssd, spill(1, 1));
  self->send(ssd, msg::draft<msg::CloseService>{}.seal());
  self->send(ssd, msg::draft<msg::CloseService>{}.seal()); // again
  drain();
  // The write that was running finishes first; both closes answer after.
  self->receive([](const sealed<msg::SpillEntryReply>& r) {
    BOOST_CHECK(r.root().getOutcome() == msg::SpillOutcome::DURABLE);
  });
  for (int i = 0; i < 2; ++i)
    self->receive([](const sealed<msg::CloseServiceReply>& r) {
      BOOST_CHECK(r.root().getResult().getDurable());
      BOOST_CHECK_EQUAL(r.root().getResult().getAbandoned(), 0u);
      BOOST_CHECK_EQUAL(r.root().getResult().getErrors().size(), 0u);
    });
  BOOST_CHECK(!self->has_next_message());
}

BOOST_AUTO_TEST_SUITE_END()
