// Calls that order many writes at once (flush, idle demotion), message by
// message on CAF's deterministic scheduler: a real RAM actor over a real
// SSD actor (in-memory file system, an I/O engine that runs each op at
// once), whose write-behind queue holds four entries. The RAM actor never
// has more writes out than that queue holds: the rest wait in RAM (their
// entries resident, servable) and go as earlier ones settle, so none is
// dropped for want of room. (The RAM actor used to send all of them at
// once and the SSD tier dropped all but the newest few.) With an SSD actor
// that never settles a write (a scripted double), a flush answers by its
// bound saying how many snapshots still wait, and an evicted entry's
// waiting write goes at once.
#define BOOST_TEST_MODULE actors_write_backlog
#include "actors/tier_counters.hpp"
#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/ram_tier_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"

#include <memory>

using namespace kvtier;
using actors::sealed;

namespace {

namespace ssd = tiers::ssd;

using ram_impl = std::remove_pointer_t<actors::ram_tier_pointer>;

/// Entries of 100 tokens of tiny-dense (25,600 bytes each).
constexpr size_t tokens_per_entry = 100;
constexpr uint64_t entry_bytes = tokens_per_entry * 256;
/// How many the test publishes: far more than the queue holds.
constexpr size_t entries = 30;

/// An SSD actor that acknowledges every write order and never settles one
/// (a disk that does not answer); it counts the orders.
caf::behavior silent_ssd(caf::event_based_actor*,
                         std::shared_ptr<size_t> orders) {
  return {
    [orders](const sealed<msg::SpillEntry>&) {
      ++*orders;
      msg::draft<msg::SpillEntryReply> d;
      d.root().setOutcome(msg::SpillOutcome::QUEUED);
      return std::move(d).seal();
    },
  };
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  actors::ssd_tier_actor ssd;
  actors::ram_tier_actor ram;
  /// The silent double's order count (when it is the SSD actor).
  std::shared_ptr<size_t> silent_orders = std::make_shared<size_t>(0);

  actors::ram_tier_config ram_config() {
    actors::ram_tier_config cfg{uint64_t{1} << 20, false};
    cfg.write_behind_cap_bytes = 4 * entry_bytes; // the SSD queue's cap
    return cfg;
  }

  /// A real SSD actor whose write-behind queue holds four entries.
  void start_real() {
    ssd::ssd_config cfg;
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    cfg.queue_cap = 4 * entry_bytes;
    ssd = sys.spawn(actors::ssd_tier, testing::inline_ssd(cfg));
    ram = sys.spawn(actors::ram_tier, ram_config(), ssd, nullptr);
    self->send(ssd, actors::attach_ram_atom::value,
               actors::spill_listener_actor{ram});
    drain();
  }

  /// The silent double as the SSD actor.
  void start_silent() {
    ssd = caf::actor_cast<actors::ssd_tier_actor>(
      sys.spawn(silent_ssd, silent_orders));
    ram = sys.spawn(actors::ram_tier, ram_config(), ssd, nullptr);
    drain();
  }

  static tiers::token_seq key(size_t i) {
    tiers::token_seq t(tokens_per_entry);
    for (size_t j = 0; j < t.size(); ++j)
      t[j] = static_cast<tiers::token>(100000 * (i + 1) + j);
    return t;
  }

  void publish(size_t i) {
    msg::draft<msg::PublishState> d;
    tiers::write_entry(d, d.root().initEntry(), oracle.prefill("ns", key(i)));
    self->send(ram, std::move(d).seal());
    drain();
    self->receive([](const sealed<msg::PublishStateReply>& r) {
      BOOST_CHECK(r.root().getKept());
    });
  }

  std::optional<tiers::ram_item> item(size_t i) {
    return deref<ram_impl>(ram).state.tier->item({false, "ns", key(i)});
  }

  template <class Root>
  static sealed<Root> empty() {
    return msg::draft<Root>{}.seal();
  }

  sealed<msg::ReadReportReply> ssd_report() {
    self->send(ssd, empty<msg::ReadReport>());
    drain();
    std::optional<sealed<msg::ReadReportReply>> out;
    self->receive([&](const sealed<msg::ReadReportReply>& r) { out = r; });
    return *out;
  }

  /// The facade's flush: RAM's snapshots, then (after RAM's answer) the
  /// SSD's flush; the SSD's evidence.
  sealed<msg::FlushStateReply> flush() {
    self->send(ram, empty<msg::FlushState>());
    drain();
    self->receive([](const sealed<msg::FlushStateReply>& r) {
      BOOST_CHECK_EQUAL(r.root().getResult().getPending(), 0u);
    });
    self->send(ssd, empty<msg::FlushState>());
    drain();
    std::optional<sealed<msg::FlushStateReply>> out;
    self->receive([&](const sealed<msg::FlushStateReply>& r) { out = r; });
    return *out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(write_backlog, fixture)

BOOST_AUTO_TEST_CASE(a_flush_of_many_entries_never_overfills_the_write_queue) {
  start_real();
  for (size_t i = 0; i < entries; ++i)
    publish(i);
  auto f = flush();
  BOOST_CHECK(f.root().getResult().getDurable());
  BOOST_CHECK_EQUAL(f.root().getResult().getDropped(), 0u);
  auto report = ssd_report(); // kept: `s` reads from it
  auto s = actors::read_part<tiers::report::ssd>(report.root());
  BOOST_CHECK_EQUAL(s.dropped, 0u);
  BOOST_CHECK_EQUAL(s.writes_ok, entries);
  BOOST_CHECK_EQUAL(s.files, entries);
  for (size_t i = 0; i < entries; ++i) {
    auto it = item(i);
    BOOST_REQUIRE(it);
    BOOST_CHECK(it->durable);
  }
}

BOOST_AUTO_TEST_CASE(idle_demotion_of_many_entries_drops_no_write) {
  start_real();
  for (size_t i = 0; i < entries; ++i)
    publish(i);
  msg::draft<msg::DemoteIdle> d;
  d.root().setIdleMs(0);
  self->send(ram, std::move(d).seal());
  drain();
  uint64_t demoted = 0;
  self->receive([&](const sealed<msg::DemoteIdleReply>& r) {
    demoted = r.root().getDemoted();
  });
  BOOST_CHECK_EQUAL(demoted, entries);
  auto report = ssd_report(); // kept: `s` reads from it
  auto s = actors::read_part<tiers::report::ssd>(report.root());
  BOOST_CHECK_EQUAL(s.dropped, 0u);
  BOOST_CHECK_EQUAL(s.files, entries);
  for (size_t i = 0; i < entries; ++i)
    BOOST_CHECK(!item(i)); // made durable, then left RAM
}

BOOST_AUTO_TEST_CASE(a_flush_says_how_many_snapshots_still_wait_for_room) {
  start_silent();
  for (size_t i = 0; i < entries; ++i)
    publish(i);
  self->send(ram, empty<msg::FlushState>());
  sched.run();
  // Four orders fill the queue's room; none settles; the rest wait.
  BOOST_CHECK_EQUAL(*silent_orders, 4u);
  BOOST_CHECK(!self->has_next_message()); // the flush waits for them
  self->send(ram, empty<msg::ReadStats>());
  sched.run();
  self->receive([](const sealed<msg::ReadStatsReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getWaitingSnapshots(), entries - 4);
  });
  // An entry whose write waits and that leaves the cap (evicted) has its
  // write sent at once: it no longer counts against RAM's cap.
  auto lru = item(0);
  BOOST_REQUIRE(lru);
  BOOST_CHECK(lru->writing);
  // (40 entries fit the 1 MiB cap: 16 more evict the 6 least recently
  // used, the last two of them with writes still waiting.)
  for (size_t i = entries; i < entries + 16; ++i) {
    msg::draft<msg::PublishState> p;
    tiers::write_entry(p, p.root().initEntry(), oracle.prefill("ns", key(i)));
    self->send(ram, std::move(p).seal());
    sched.run();
  }
  BOOST_CHECK_EQUAL(*silent_orders, 6u);
  // By its bound (2/5 of the 10 s storage deadline) the flush answers
  // with what still waits.
  sched.advance_time(std::chrono::milliseconds{4000});
  sched.run();
  bool answered = false;
  while (self->has_next_message())
    self->receive([](const sealed<msg::PublishStateReply>&) {},
                  [&](const sealed<msg::FlushStateReply>& r) {
                    answered = true;
                    auto ev = r.root().getResult();
                    BOOST_CHECK(!ev.getDurable());
                    BOOST_CHECK_EQUAL(ev.getPending(),
                                      entries - *silent_orders);
                    BOOST_REQUIRE_EQUAL(ev.getErrors().size(), 1u);
                    BOOST_CHECK(ev.getErrors()[0].getCode()
                                == static_cast<uint8_t>(ec::timeout));
                  });
  BOOST_CHECK(answered);
}

BOOST_AUTO_TEST_SUITE_END()
