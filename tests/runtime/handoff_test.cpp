// The RAM to SSD handoff under pressure and faults (issue #11; docs/api.md,
// docs/ram-tier.md "Handoff", docs/ssd-format.md "Retries"), through the
// embedded API over an in-memory disk behind a fault injector: an entry
// whose spill is pending or failed stays servable; only a durable copy or
// a reported drop removes it; relief reports only bytes that died and
// answers by the storage deadline; a boundary gives back without I/O;
// write-behind snapshots are reused. Every served state is checked with
// the oracle.
#define BOOST_TEST_MODULE runtime_handoff
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include <chrono>
#include <thread>

using namespace kvtier;
using runtime::state_source;
using testing::service_fixture;
using testing::why;
using tiers::ssd::fault_kind;
using tiers::ssd::fs_op;

using testing::eventually;

namespace {

using clock_type = std::chrono::steady_clock;

/// 1500 tokens of tiny-dense: 375 KiB. Two fit the 1 MiB cap, three not.
constexpr size_t big = 1500;

struct handoff_fixture : service_fixture {
  tiers::ssd::faulty_file_system faulty{memory};

  handoff_fixture() {
    fs = &faulty;
    opts.storage_deadline_ms = 5000; // stall tests set a short one
    opts.retry_backoff_ms = 20;
  }

  ~handoff_fixture() {
    faulty.clear(); // stalled operations run on, then the service goes
    svc.reset();
  }

  tiers::token_seq key(int i) const {
    return seq(big, static_cast<tiers::token>(10000 * (i + 1)));
  }

  /// The usable prefix RAM holds for entry `i` (peek: changes nothing).
  uint64_t in_ram(int i) {
    auto p = svc->peek_prefix_len(cat(key(i), {7}), "ns");
    BOOST_REQUIRE_MESSAGE(p, why(p));
    return *p;
  }

  runtime::persistence_stats stats() {
    auto s = svc->stats();
    BOOST_REQUIRE_MESSAGE(s, why(s));
    return *s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(handoff, handoff_fixture)

BOOST_AUTO_TEST_CASE(an_evicted_entry_is_servable_while_its_spill_is_pending) {
  start();
  put("ns", key(0));
  put("ns", key(1));
  faulty.inject_any(1, fault_kind::stall); // the spill's first operation
  put("ns", key(2));                       // key(0) must leave
  BOOST_REQUIRE(eventually([&] { return faulty.stalled() == 1; }));
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.evictions, 1u);
  BOOST_CHECK_EQUAL(rep.ram.leaving_entries, 1u);
  BOOST_CHECK_LE(rep.ram.resident_bytes, opts.ram_cap_bytes);
  BOOST_CHECK_EQUAL(in_ram(0), big);
  BOOST_CHECK_EQUAL(stats().leaving_entries, 1u);
  BOOST_CHECK_GE(stats().pending_spills, 1u);
  // Served from RAM, byte-exact; the hit makes it resident again.
  auto got = get("ns", cat(key(0), {7}));
  BOOST_CHECK(got.source == state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, big);
  BOOST_CHECK_EQUAL(report().ram.rejoined, 1u);
  faulty.release();
  BOOST_REQUIRE(svc->flush()->durable);
  // Now durable: whatever left RAM is found on SSD.
  for (int i = 0; i < 3; ++i)
    BOOST_CHECK_EQUAL(get("ns", cat(key(i), {7})).usable_tokens, big);
}

BOOST_AUTO_TEST_CASE(a_failed_spill_stays_servable_until_its_retry_is_durable) {
  opts.retry_backoff_ms = 1000;
  start();
  put("ns", key(0));
  put("ns", key(1));
  faulty.inject(fs_op::create, 1, fault_kind::eio);
  put("ns", key(2));
  BOOST_REQUIRE(eventually([&] { return report().ssd.writes_failed == 1; }));
  // Failed, waiting for its retry: still in RAM, servable.
  BOOST_CHECK_EQUAL(in_ram(0), big);
  BOOST_CHECK_EQUAL(stats().retrying_writes, 1u);
  // The backoff's retry makes it durable; then it leaves RAM.
  BOOST_REQUIRE(eventually([&] { return report().ssd.writes_ok == 1; }));
  BOOST_REQUIRE(eventually([&] { return report().ram.leaving_entries == 0; }));
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ssd.writes_failed, 1u);
  BOOST_CHECK_GE(rep.ssd.writes_retried, 1u);
  BOOST_CHECK_EQUAL(rep.ram.leaving_dropped, 0u);
  BOOST_CHECK_EQUAL(in_ram(0), 0u);
  BOOST_CHECK(get("ns", cat(key(0), {7})).source == state_source::ssd);
}

BOOST_AUTO_TEST_CASE(a_spill_given_up_leaves_ram_and_is_reported) {
  opts.write_attempts = 2;
  start();
  put("ns", key(0));
  put("ns", key(1));
  auto before =
    report().ram.bytes; // live bytes may include a message in flight
  faulty.inject(fs_op::create, 1, fault_kind::crash); // every write fails
  put("ns", key(2));
  BOOST_REQUIRE(eventually([&] { return report().ssd.writes_given_up == 1; }));
  BOOST_REQUIRE(eventually([&] { return report().ram.leaving_entries == 0; }));
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.leaving_dropped, 1u);
  BOOST_CHECK_EQUAL(rep.ssd.writes_failed, 2u);
  BOOST_CHECK_EQUAL(in_ram(0), 0u);
  BOOST_CHECK(get("ns", cat(key(0), {7})).source == state_source::none);
  // Its bytes went: what RAM holds is all that lives (the test holds
  // nothing).
  BOOST_CHECK(
    eventually([&] { return buffer::live_bytes() == report().ram.bytes; }));
  BOOST_CHECK_EQUAL(report().ram.entries, 2u);
  BOOST_CHECK_EQUAL(report().ram.bytes, before); // two entries, as before
  faulty.clear();
}

BOOST_AUTO_TEST_CASE(relief_reports_only_the_bytes_that_died) {
  start();
  put("ns", key(0));
  put("ns", key(1));
  BOOST_REQUIRE(svc->flush()->durable);
  // A running request holds views of key(0), the least recently used.
  auto lent = get("ns", cat(key(0), {7}));
  BOOST_REQUIRE(lent.source == state_source::ram);
  auto held = report().ram.bytes;
  auto r = svc->relieve_pressure([&] { return report().ram.bytes == 0; });
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_CHECK(!r->error);
  BOOST_CHECK_EQUAL(r->released, 2u);
  BOOST_CHECK_EQUAL(r->held_bytes, 0u);
  // key(0)'s bytes are still alive in the lent state: not counted.
  BOOST_CHECK_EQUAL(r->released_bytes, held / 2);
  BOOST_CHECK(testing::ok(oracle->verify(lent.state)));
  BOOST_CHECK_EQUAL(report().ram.bytes, 0u);
}

BOOST_AUTO_TEST_CASE(relief_on_a_failing_disk_keeps_the_entry_and_says_why) {
  opts.write_attempts = 100;
  opts.retry_backoff_ms = 60000; // no retry within the test
  start();
  put("ns", key(0));
  faulty.inject(fs_op::create, 1, fault_kind::eio);
  auto held = report().ram.bytes;
  auto r = svc->relieve_pressure([&] { return report().ram.bytes == 0; });
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_REQUIRE(r->error);
  BOOST_CHECK(r->error == ec::io_error);
  BOOST_CHECK_EQUAL(r->released, 0u);
  BOOST_CHECK_EQUAL(r->released_bytes, 0u);
  BOOST_CHECK_EQUAL(r->held_bytes, held);
  // Still in RAM, servable, waiting for the retry.
  BOOST_CHECK_EQUAL(in_ram(0), big);
  BOOST_CHECK_EQUAL(stats().retrying_writes, 1u);
  BOOST_CHECK(get("ns", cat(key(0), {7})).source == state_source::ram);
}

BOOST_AUTO_TEST_CASE(relief_on_a_stalled_disk_answers_by_the_deadline) {
  opts.storage_deadline_ms = 300;
  start();
  put("ns", key(0));
  faulty.inject_any(1, fault_kind::stall);
  auto t0 = clock_type::now();
  auto r = svc->relieve_pressure([&] { return report().ram.bytes == 0; });
  auto took = clock_type::now() - t0;
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_REQUIRE(r->error);
  BOOST_CHECK(r->error == ec::timeout);
  BOOST_CHECK_EQUAL(r->released, 0u);
  BOOST_CHECK_EQUAL(r->pending, 1u);
  BOOST_CHECK_LT(took, std::chrono::milliseconds(300 + 1000));
  BOOST_CHECK_EQUAL(in_ram(0), big); // the engine may still use it
  // The late outcome settles it without harm (a flush under the 300 ms
  // deadline may itself time out on a loaded machine: ask until durable).
  faulty.release();
  BOOST_REQUIRE(eventually([&] {
    auto f = svc->flush();
    return f && f->durable;
  }));
  BOOST_CHECK_EQUAL(in_ram(0), 0u);
  BOOST_CHECK(get("ns", cat(key(0), {7})).source == state_source::ssd);
}

BOOST_AUTO_TEST_CASE(no_call_waits_forever_on_a_stalled_disk) {
  opts.storage_deadline_ms = 300;
  start();
  put("ns", key(0));
  BOOST_REQUIRE(svc->flush()->durable);
  BOOST_REQUIRE_EQUAL(*svc->demote_idle(0), 1u);
  put("ns", seq(100)); // RAM holds something of its own
  faulty.inject(fs_op::open_read, 1,
                fault_kind::stall); // not the recency stamp
  auto bound = std::chrono::milliseconds(300 + 1000);
  // The restore stalls: the acquire serves what RAM has (fresh here).
  auto t0 = clock_type::now();
  auto a = svc->acquire(request(1, cat(key(0), {7})), "ns");
  BOOST_REQUIRE_MESSAGE(a, why(a));
  BOOST_CHECK(a->source == state_source::none);
  BOOST_CHECK_LT(clock_type::now() - t0, bound);
  BOOST_REQUIRE(eventually([&] { return faulty.stalled() == 1; }));
  // A prefetch of the same read answers that nothing was read.
  t0 = clock_type::now();
  auto p = svc->prefetch(cat(key(0), {7}), "ns");
  BOOST_REQUIRE_MESSAGE(p, why(p));
  BOOST_CHECK_EQUAL(p->info().lease, 0u);
  BOOST_CHECK_LT(clock_type::now() - t0, bound);
  // Writes stall behind it: flush and demotion answer by the deadline.
  faulty.inject_any(1, fault_kind::stall);
  t0 = clock_type::now();
  auto f = svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(!f->durable);
  BOOST_CHECK(!f->errors.empty());
  BOOST_CHECK_LT(clock_type::now() - t0, bound);
  t0 = clock_type::now();
  auto d = svc->demote_idle(0);
  BOOST_REQUIRE_MESSAGE(d, why(d));
  BOOST_CHECK_LT(clock_type::now() - t0, bound);
  BOOST_CHECK(get("ns", seq(101)).source == state_source::ram);
  // Close too; then everything runs on and settles without harm.
  t0 = clock_type::now();
  auto c = svc->close();
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_CHECK(!c->durable);
  BOOST_CHECK_LT(clock_type::now() - t0, 2 * bound);
  faulty.release();
  BOOST_CHECK(svc->close()->already_closed);
}

BOOST_AUTO_TEST_CASE(a_boundary_drops_optional_state_without_io) {
  for (bool cold : {true, false}) {
    BOOST_TEST_CONTEXT((cold ? "with" : "without") << " an SSD tier") {
      if (!cold)
        opts.ssd_dir.clear();
      start();
      put("ns", key(0));
      put("ns", key(1));
      auto before = report();
      auto one = before.ram.bytes / 2;
      // No amount: only durable copies go, and there are none.
      auto b = svc->boundary();
      BOOST_REQUIRE_MESSAGE(b, why(b));
      BOOST_CHECK_EQUAL(b->released + b->dropped, 0u);
      // The engine needs one entry's bytes: the least recently used goes,
      // reported as dropped, nothing written.
      b = svc->boundary(one);
      BOOST_REQUIRE_MESSAGE(b, why(b));
      BOOST_CHECK_EQUAL(b->released, 0u);
      BOOST_CHECK_EQUAL(b->dropped, 1u);
      BOOST_CHECK_EQUAL(b->dropped_bytes, one);
      auto after = report();
      BOOST_CHECK_EQUAL(after.ssd_io.submitted, before.ssd_io.submitted);
      BOOST_CHECK_EQUAL(after.ram.boundary_dropped, 1u);
      BOOST_CHECK_EQUAL(in_ram(0), 0u);
      BOOST_CHECK_EQUAL(in_ram(1), big);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_boundary_prefers_what_frees_bytes_and_keeps_lent_views) {
  start();
  put("ns", key(0));
  put("ns", key(1));
  BOOST_REQUIRE(svc->flush()->durable);
  auto lent = get("ns", cat(key(0), {7})); // a running request
  get("ns", cat(key(1), {7}));             // key(0) least recently used
  auto one = report().ram.bytes / 2;
  auto b = svc->boundary(one);
  BOOST_REQUIRE_MESSAGE(b, why(b));
  BOOST_CHECK_EQUAL(b->released, 1u);
  BOOST_CHECK_EQUAL(b->released_bytes, one);
  BOOST_CHECK_EQUAL(in_ram(0), big); // its drop would have freed nothing
  BOOST_CHECK_EQUAL(in_ram(1), 0u);
  BOOST_CHECK(testing::ok(oracle->verify(lent.state)));
}

BOOST_AUTO_TEST_CASE(
  write_behind_snapshots_kept_prefixes_and_eviction_reuses_them) {
  opts.write_behind = true;
  opts.write_behind_delay_ms = 20;
  start();
  put("ns", key(0));
  put("ns", key(1));
  BOOST_REQUIRE(eventually([&] { return report().ram.snapshots == 2; }));
  auto s = stats();
  BOOST_CHECK_EQUAL(s.waiting_snapshots, 0u);
  BOOST_CHECK_EQUAL(s.pending_snapshots, 0u);
  auto writes = report().ssd.writes_ok;
  BOOST_CHECK_EQUAL(writes, 2u);
  put("ns", key(2)); // key(0) leaves: durable already, nothing written
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.evictions, 1u);
  BOOST_CHECK_EQUAL(rep.ram.leaving_entries, 0u);
  BOOST_CHECK_EQUAL(in_ram(0), 0u);
  BOOST_CHECK(get("ns", cat(key(0), {7})).source == state_source::ssd);
  // A flush writes only what was not snapshotted yet.
  BOOST_REQUIRE(svc->flush()->durable);
  BOOST_CHECK_LE(report().ssd.writes_ok, writes + 1);
}

BOOST_AUTO_TEST_CASE(write_behind_waits_for_its_budget) {
  opts.write_behind = true;
  opts.write_behind_delay_ms = 0;
  opts.write_behind_bytes_per_s = 1ull << 20; // a second of burst: 2 entries
  opts.ram_cap_bytes = 8ull << 20;
  start();
  for (int i = 0; i < 6; ++i)
    put("ns", key(i));
  BOOST_REQUIRE(eventually([&] { return report().ram.snapshots >= 2; }));
  // The rest waits for the bucket to refill: visible in stats().
  auto s = stats();
  BOOST_CHECK_GT(s.waiting_snapshots + s.pending_snapshots, 0u);
  BOOST_CHECK_LT(report().ram.snapshots, 6u);
  BOOST_REQUIRE(eventually([&] { return report().ram.snapshots == 6; }));
  BOOST_CHECK_EQUAL(stats().waiting_snapshots, 0u);
}

BOOST_AUTO_TEST_CASE(flush_retries_and_lists_each_distinct_failure) {
  start();
  put("ns", key(0));
  put("ns", seq(100));
  // One transient fault: the flush's retry repairs it.
  faulty.inject(fs_op::create, 1, fault_kind::eio);
  auto f = svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(f->durable);
  BOOST_CHECK(f->errors.empty());
  BOOST_CHECK_GE(report().ssd.writes_retried, 1u);
  // A lasting failure of two writes: given up, named once for both.
  faulty.clear();
  opts.write_attempts = 2;
  start();
  put("ns", key(3));
  put("ns", seq(100, 50000));
  faulty.inject(fs_op::create, 1, fault_kind::crash); // every create on
  f = svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(!f->durable);
  BOOST_CHECK_EQUAL(f->failed, 2u);
  BOOST_REQUIRE_EQUAL(f->errors.size(), 1u);
  BOOST_CHECK(f->errors[0].find("2 writes: write failed at create")
              != std::string::npos);
  // Two failures of different kinds (one attempt each): two lines.
  faulty.clear();
  opts.write_attempts = 1;
  start();
  put("ns", key(5));
  put("ns", seq(100, 60000));
  faulty.inject(fs_op::create, 1, fault_kind::enospc);
  faulty.inject(fs_op::sync, 1, fault_kind::eio);
  f = svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK(!f->durable);
  BOOST_CHECK_EQUAL(f->failed, 2u);
  for (auto& e : f->errors)
    BOOST_TEST_MESSAGE("flush error: " << e);
  BOOST_REQUIRE_EQUAL(f->errors.size(), 2u);
  bool space = false, sync = false;
  for (auto& e : f->errors) {
    space = space || e.find("1 write: write failed at create") != e.npos;
    sync = sync || e.find("1 write: write failed at fsync") != e.npos;
  }
  BOOST_CHECK(space);
  BOOST_CHECK(sync);
}

BOOST_AUTO_TEST_SUITE_END()
