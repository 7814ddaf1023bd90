// Closing the SSD tier (`ssd_tier::close`): writes that were not running
// are released unwritten with their buffers, a write failing after the
// close is released instead of kept, prefetch results and leases go, and
// the close is done once no write runs (reads are not waited for), so the
// live buffer count is back where it was once the reads end. Every state
// served afterwards is verified with the oracle.
#define BOOST_TEST_MODULE ssd_close
#include "tests/ssd/ssd_fixture.hpp"

#include <map>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{every_kind(), 40};
  return o;
}

/// An in-memory disk behind a fault injector; one write at a time; every
/// report the tier makes of its writes, by the entry's first token.
struct closing_world {
  explicit closing_world(engine_choice e)
    : faulty{mem}
    , w{{fs_kind::memory, e}, dir.path, config(), &faulty} {}

  ssd_config config() {
    ssd_config cfg;
    cfg.writes_in_flight = 1;
    cfg.log = [](const std::string&) {};
    cfg.on_write = [this](const write_event& ev) {
      outcomes[ev.tokens[0]].push_back(ev.outcome);
      if (ev.outcome == write_outcome::abandoned)
        abandon_errors.push_back(ev.err);
    };
    return cfg;
  }

  /// Closes; the callback's count once it ran.
  std::optional<uint64_t> close() {
    w.tier->close([this](uint64_t n) { closed = n; });
    return closed;
  }

  /// Restores the best file for `prompt` and checks it byte for byte.
  void check_served(const token_seq& prompt, size_t want) {
    auto m = w.tier->find(prompt, "ns");
    BOOST_REQUIRE(m);
    BOOST_TEST(m->length == want);
    auto e = w.restore(*m);
    BOOST_REQUIRE_MESSAGE(e, (e ? std::string{} : describe(e.error())));
    auto err = oracle().verify(*e);
    BOOST_TEST(!err, describe(err));
  }

  scratch_dir dir;
  memory_file_system mem;
  faulty_file_system faulty;
  std::map<token, std::vector<write_outcome>> outcomes;
  std::vector<caf::error> abandon_errors;
  std::optional<uint64_t> closed;
  world w;
};

using wo = write_outcome;

const char* engine_name(engine_choice e) {
  return e == engine_choice::uring ? "uring" : "threads";
}

} // namespace

BOOST_AUTO_TEST_CASE(close_releases_queued_and_failed_writes_and_prefetches) {
  for (auto engine : all_engines()) {
    BOOST_TEST_CONTEXT(engine_name(engine)) {
      closing_world cw{engine};
      auto& w = cw.w;
      w.store(oracle().prefill("ns", tokens(24, 500))); // the prefetched file
      auto live = buffer::live_bytes();
      auto lease = w.tier->prefetch(tokens(25, 500), "ns");
      BOOST_REQUIRE(lease);
      drive(*w.tier, w.queue);
      BOOST_TEST(buffer::live_bytes() > live); // held for the lease
      // A write that fails is kept for a retry...
      cw.faulty.inject(fs_op::create, 1, fault_kind::eio);
      BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", tokens(20, 100)),
                                    write_reason::spill));
      drive(*w.tier, w.queue);
      BOOST_TEST(w.tier->stats().queue_items == 1u);
      // ... one runs, one waits behind it (one write at a time).
      BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", tokens(20, 200)),
                                    write_reason::snapshot));
      BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", tokens(20, 300)),
                                    write_reason::checkpoint));
      BOOST_TEST(!cw.close()); // not done while a write runs
      BOOST_TEST(w.tier->closed());
      // The failed and the waiting write went at once.
      BOOST_TEST(
        (cw.outcomes[101] == std::vector<wo>{wo::failed, wo::abandoned}));
      BOOST_TEST((cw.outcomes[301] == std::vector<wo>{wo::abandoned}));
      BOOST_TEST(cw.outcomes[201].empty());
      drive(*w.tier, w.queue);
      BOOST_REQUIRE(cw.closed);
      BOOST_TEST(*cw.closed == 2u);
      BOOST_TEST((cw.outcomes[201] == std::vector<wo>{wo::durable}));
      for (auto& err : cw.abandon_errors)
        BOOST_CHECK(err == ec::closed);
      auto s = w.tier->stats();
      BOOST_TEST(s.writes_abandoned == 2u);
      BOOST_TEST(s.queue_items == 0u);
      BOOST_TEST(s.queue_bytes == 0u);
      BOOST_TEST(s.dropped == 0u);
      // Every buffer the tier held is gone: the held prefetch result and
      // the three entries (written or not).
      BOOST_TEST(buffer::live_bytes() == live);
      // Later writes are refused; a prefetch starts nothing; the lease's
      // release is harmless.
      auto later = w.tier->enqueue(oracle().prefill("ns", tokens(20, 400)),
                                   write_reason::spill);
      BOOST_REQUIRE(!later);
      BOOST_CHECK(later.error() == ec::closed);
      BOOST_TEST(!w.tier->prefetch(tokens(25, 500), "ns"));
      w.tier->release(lease->id);
      BOOST_TEST(!w.tier->busy());
      // What is on disk is still served, byte for byte.
      cw.check_served(tokens(25, 500), 24);
      cw.check_served(tokens(21, 200), 20);
      BOOST_TEST(!w.tier->find(tokens(21, 100), "ns"));
      BOOST_TEST(!w.tier->find(tokens(21, 300), "ns"));
      BOOST_TEST(buffer::live_bytes() == live);
      // A second close is harmless and says the same.
      cw.closed.reset();
      BOOST_CHECK(cw.close() == std::optional<uint64_t>{2});
    }
  }
}

BOOST_AUTO_TEST_CASE(a_write_failing_after_close_is_released_not_kept) {
  for (auto engine : all_engines()) {
    BOOST_TEST_CONTEXT(engine_name(engine)) {
      closing_world cw{engine};
      auto& w = cw.w;
      auto live = buffer::live_bytes();
      cw.faulty.inject(fs_op::sync, 1, fault_kind::eio);
      BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", tokens(20, 100)),
                                    write_reason::spill));
      BOOST_TEST(!cw.close()); // running
      drive(*w.tier, w.queue);
      BOOST_REQUIRE(cw.closed);
      BOOST_TEST(*cw.closed == 1u);
      BOOST_TEST(
        (cw.outcomes[101] == std::vector<wo>{wo::failed, wo::abandoned}));
      BOOST_TEST(w.tier->stats().queue_items == 0u);
      BOOST_TEST(w.tier->stats().writes_failed == 1u);
      BOOST_TEST(!w.tier->find(tokens(21, 100), "ns"));
      BOOST_TEST(buffer::live_bytes() == live);
      // A flush now has nothing to retry: nothing pending or failed.
      auto ev = w.flush();
      BOOST_TEST(ev.pending == 0u);
      BOOST_TEST(ev.failed == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(close_cancels_a_read_for_leases_and_waits_for_no_read) {
  for (auto engine : all_engines()) {
    BOOST_TEST_CONTEXT(engine_name(engine)) {
      closing_world cw{engine};
      auto& w = cw.w;
      w.store(oracle().prefill("ns", tokens(24, 500)));
      w.store(oracle().prefill("ns", tokens(30, 700)));
      auto live = buffer::live_bytes();
      // A prefetch's read, for its lease alone; a restore's, awaited.
      BOOST_REQUIRE(w.tier->prefetch(tokens(25, 500), "ns"));
      auto m = w.tier->find(tokens(31, 700), "ns");
      BOOST_REQUIRE(m);
      std::optional<caf::expected<entry>> got;
      w.tier->restore(*m, [&](caf::expected<entry> e) { got = std::move(e); });
      // Done at once: a close never waited on a read (a stalled disk must
      // not hold it up more than a flush would).
      auto done = cw.close();
      BOOST_REQUIRE(done);
      BOOST_TEST(*done == 0u);
      BOOST_TEST(w.tier->busy()); // both reads still run
      BOOST_TEST(w.tier->stats().cancelled == 1u);
      BOOST_TEST(!got.has_value());
      drive(*w.tier, w.queue);
      BOOST_TEST(w.tier->stats().restores_ok == 1u); // the awaited one
      BOOST_REQUIRE(got.has_value());
      BOOST_REQUIRE(*got);
      auto err = oracle().verify(**got);
      BOOST_TEST(!err, describe(err));
      got.reset(); // the caller's buffers
      BOOST_TEST(buffer::live_bytes() == live);
    }
  }
}
