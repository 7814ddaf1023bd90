// The embedded API's admission, checkpoints, cold reads and lifecycle
// (runtime/service.hpp): waits and errors, awaitable admits, checkpoint
// resume across a restart, prefetch coalescing and interests, untrimmable
// cold entries, close durability, idempotence and the closed state.
#define BOOST_TEST_MODULE runtime_service_lifecycle
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include <chrono>
#include <thread>

using namespace kvtier;
using runtime::state_source;
using testing::ok;
using testing::service_fixture;

namespace {

/// An oracle of the fixture's model, to size files before `start`.
const runtime::oracle_engine& oracle_for_layout() {
  static const runtime::oracle_engine o{
    *tiers::model_geometry::preset("tiny-dense")};
  return o;
}

bool ready(std::future<caf::expected<runtime::admit_decision>>& f) {
  return f.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready;
}

/// A service on a faulty file system whose request `r` (id 42 over `p`)
/// holds a checkpoint of 16 generated tokens, made durable by a flush
/// (`begin`, after the test set its options). The service goes before the
/// file system.
struct durable_checkpoint : service_fixture {
  tiers::ssd::faulty_file_system faulty{memory};
  tiers::token_seq p = seq(100);
  runtime::state_request r = request(42, p, 64);

  void begin() {
    opts.checkpoint_every_tokens = 16;
    fs = &faulty;
    start();
    BOOST_REQUIRE(*svc->checkpoint(
      r, oracle->prefill("ns", cat(p, oracle->generate("ns", p, 16)))));
    BOOST_CHECK(svc->flush()->durable);
  }

  ~durable_checkpoint() {
    svc.reset();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(service_lifecycle, service_fixture)

BOOST_AUTO_TEST_CASE(admit_holds_fits_does_not_release_returns) {
  opts.kv_budget_bytes = 1ull << 20; // 4096 tokens of tiny-dense
  start();
  auto big = request(1, seq(2000), 48); // 2048 tokens: half the budget
  BOOST_CHECK(svc->fits(big)->admitted);
  BOOST_CHECK(svc->fits(big)->admitted); // fits holds nothing
  BOOST_CHECK(svc->admit(big)->admitted);
  BOOST_CHECK(svc->admit(request(2, seq(2000), 48))->admitted);
  auto third = svc->admit(request(3, seq(2000), 48));
  BOOST_REQUIRE(third);
  BOOST_CHECK(!third->admitted); // wait, not an error
  BOOST_CHECK_EQUAL(third->projected_bytes, 2048u * 256);
  BOOST_CHECK_EQUAL(third->available_bytes, 0u);
  auto rel = svc->release(big, true);
  BOOST_REQUIRE(rel);
  BOOST_CHECK_EQUAL(rel->released_bytes, 2048u * 256);
  BOOST_CHECK(svc->admit(request(3, seq(2000), 48))->admitted);
}

BOOST_AUTO_TEST_CASE(never_admissible_requests_are_errors_naming_the_limit) {
  opts.position_limit = 1000;
  start();
  auto far = svc->admit(request(1, seq(990), 20));
  BOOST_REQUIRE(!far);
  BOOST_CHECK(far.error() == ec::position_limit_exceeded);
  BOOST_CHECK_NE(describe(far.error()).find("1000"), std::string::npos);
  opts.position_limit = 8192;
  opts.kv_budget_bytes = 1ull << 20;
  start();
  auto huge = svc->fits(request(2, seq(5000), 0)); // 1.22 MiB > 1 MiB
  BOOST_REQUIRE(!huge);
  BOOST_CHECK(huge.error() == ec::over_budget);
  auto admit = svc->admit(request(2, seq(5000), 0));
  BOOST_REQUIRE(!admit);
  BOOST_CHECK(admit.error() == ec::over_budget);
  BOOST_CHECK_EQUAL(report().admission.errors, 1u); // fits counts none
}

BOOST_AUTO_TEST_CASE(queued_admits_complete_in_arrival_order) {
  start();
  BOOST_CHECK(svc->admit(request(1, seq(3000), 96))->admitted); // 3/4
  auto second = svc->admit_queued(request(2, seq(2000), 48));   // 1/2
  auto third = svc->admit_queued(request(3, seq(500), 12));     // 1/8
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The small third would fit now, but it does not overtake the second.
  BOOST_CHECK(!ready(second));
  BOOST_CHECK(!ready(third));
  BOOST_CHECK_EQUAL(report().admission.waiting, 2u);
  BOOST_REQUIRE(svc->release(request(1, {}), true));
  auto a2 = second.get();
  auto a3 = third.get();
  BOOST_REQUIRE(a2 && a3);
  BOOST_CHECK(a2->admitted && a3->admitted);
  BOOST_CHECK_EQUAL(report().admission.holders, 2u);
}

BOOST_AUTO_TEST_CASE(checkpoints_resume_the_newest_and_survive_a_restart) {
  opts.checkpoint_every_tokens = 16;
  start();
  BOOST_CHECK_EQUAL(*svc->checkpoint_every_tokens(), 16u);
  auto prompt = seq(100);
  auto r = request(42, prompt, 64);
  auto gen16 = oracle->generate("ns", prompt, 16);
  auto gen32 = oracle->generate("ns", prompt, 32);
  auto s16 = oracle->prefill("ns", cat(prompt, gen16));
  auto s32 = oracle->prefill("ns", cat(prompt, gen32));
  BOOST_CHECK(*svc->checkpoint(r, std::move(s16)));
  BOOST_CHECK(*svc->checkpoint(r, std::move(s32)));
  auto got = get("ns", prompt, 42);
  BOOST_CHECK(got.source == state_source::checkpoint);
  BOOST_CHECK_EQUAL(got.usable_tokens, 132u);
  // Another request with the same prompt gets no one else's generation.
  BOOST_CHECK(get("ns", prompt, 43).source == state_source::none);
  // Interrupted: kept; flushed; the service restarts on the same disk.
  BOOST_CHECK_EQUAL(svc->release(r, false)->checkpoints_kept, 1u);
  BOOST_CHECK(svc->flush()->durable);
  start();
  auto resumed = get("ns", prompt, 42);
  BOOST_CHECK(resumed.source == state_source::checkpoint);
  BOOST_CHECK_EQUAL(resumed.usable_tokens, 132u);
  BOOST_CHECK(resumed.state.tokens == cat(prompt, gen32));
  BOOST_CHECK(svc->saved_prefixes()->empty()); // checkpoints are not prefixes
  // Completed: removed, also from SSD.
  BOOST_CHECK_EQUAL(svc->release(r, true)->checkpoints_removed, 1u);
  BOOST_CHECK(get("ns", prompt, 42).source != state_source::checkpoint);
  svc->flush();
  start();
  BOOST_CHECK(get("ns", prompt, 42).source != state_source::checkpoint);
}

BOOST_AUTO_TEST_CASE(checkpoints_the_start_up_scan_finds_late_resume) {
  // Two names indexed before serving, one per batch after: the files the
  // SSD actor's scan reaches while serving are resumable too
  // (docs/ssd-format.md "Start-up").
  opts.checkpoint_every_tokens = 16;
  opts.ssd_index_before_serving = 2;
  opts.ssd_index_batch = 1;
  start();
  constexpr uint64_t n = 8;
  auto prompt = [](uint64_t id) {
    return seq(40, static_cast<tiers::token>(1000 * id));
  };
  std::vector<tiers::token_seq> done(n + 1);
  for (uint64_t id = 1; id <= n; ++id) {
    auto gen = oracle->generate("ns", prompt(id), 16);
    done[id] = cat(prompt(id), gen);
    BOOST_CHECK(*svc->checkpoint(request(id, prompt(id), 64),
                                 oracle->prefill("ns", done[id])));
    BOOST_CHECK_EQUAL(
      svc->release(request(id, prompt(id), 64), false)->checkpoints_kept, 1u);
  }
  BOOST_REQUIRE(svc->flush()->durable);
  start();
  BOOST_REQUIRE(
    testing::eventually([&] { return report().ssd.indexing == 0; }));
  BOOST_CHECK_EQUAL(report().ssd.index_files, n);
  for (uint64_t id = 1; id <= n; ++id) {
    auto resumed = get("ns", prompt(id), id);
    BOOST_CHECK_MESSAGE(resumed.source == state_source::checkpoint,
                        "request " << id);
    BOOST_CHECK(resumed.state.tokens == done[id]);
  }
}

BOOST_AUTO_TEST_CASE(a_checkpoint_the_ssd_cap_evicted_is_rewritten_by_a_flush) {
  opts.checkpoint_every_tokens = 16;
  opts.ram_cap_bytes = 4ull << 20;
  auto prompt = seq(2000);
  // Every file below has the checkpoint's shape: the cap (at least 1 MiB)
  // holds two.
  auto one = tiers::ssd::layout(oracle_for_layout().prefill("ns", seq(2032)),
                                runtime::running_model(opts)->fingerprint(),
                                4096, 1u << 20)
               .file_length;
  opts.ssd_cap_bytes = one * 5 / 2;
  start();
  auto r = request(42, prompt, 64);
  auto s =
    oracle->prefill("ns", cat(prompt, oracle->generate("ns", prompt, 32)));
  auto want = s.tokens;
  BOOST_REQUIRE(*svc->checkpoint(r, std::move(s)));
  BOOST_CHECK_EQUAL(svc->release(r, false)->checkpoints_kept, 1u);
  BOOST_CHECK(svc->flush()->durable);
  // Two prefix files later the checkpoint's is the least recently used
  // over the cap: evicted. The checkpoints actor hears of it.
  put("other", seq(2032, 10000));
  BOOST_CHECK(svc->flush()->durable);
  put("other", seq(2032, 20000));
  BOOST_CHECK(svc->flush()->durable);
  BOOST_CHECK_EQUAL(report().ssd.evicted, 1u);
  // The next flush writes the checkpoint (still in memory) again.
  auto writes = report().ssd.writes_ok;
  BOOST_CHECK(svc->flush()->durable);
  BOOST_CHECK_EQUAL(report().ssd.writes_ok, writes + 1);
  start(); // a restart: only the file can resume the generation
  auto resumed = get("ns", prompt, 42);
  BOOST_CHECK(resumed.source == state_source::checkpoint);
  BOOST_CHECK(resumed.state.tokens == want);
}

BOOST_AUTO_TEST_CASE(a_completed_release_leaves_no_file_of_a_queued_write) {
  opts.checkpoint_every_tokens = 16;
  // The flush retries a failed write after its backoff: a long one keeps
  // the write queued (failed, waiting) past the flush's deadline.
  opts.retry_backoff_ms = 60000;
  opts.storage_deadline_ms = 600;
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  auto prompt = seq(100);
  auto r = request(42, prompt, 64);
  auto s =
    oracle->prefill("ns", cat(prompt, oracle->generate("ns", prompt, 16)));
  BOOST_REQUIRE(*svc->checkpoint(r, std::move(s)));
  // The write fails: it stays queued on SSD for the next flush's retry.
  // The flush orders the checkpoint write and then flushes the SSD tier;
  // when the write has already failed by then, that flush retries it: a
  // second fault (on the retry's data write; the first attempt never gets
  // past create) makes the retry fail too, whichever way the timing goes.
  faulty.inject(tiers::ssd::fs_op::create, 1, tiers::ssd::fault_kind::eio);
  faulty.inject(tiers::ssd::fs_op::write, 1, tiers::ssd::fault_kind::eio);
  auto f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(!f->durable);
  BOOST_CHECK_EQUAL(report().ssd.queue_items, 1u);
  faulty.clear(); // the retry's fault, if the timing left it unused
  // Completed: the queued write is cancelled, not retried.
  BOOST_CHECK_EQUAL(svc->release(r, true)->checkpoints_removed, 1u);
  f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(f->durable); // a cancel is neither pending, failed nor dropped
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ssd.queue_items, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.writes_cancelled, 1u);
  BOOST_CHECK_EQUAL(rep.ssd.dropped, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.files, 0u);
  BOOST_CHECK_EQUAL(svc->stats()->pending_checkpoint_writes, 0u);
  // A reused request id finds no finished generation, also after a restart.
  BOOST_CHECK(get("ns", prompt, 42).source != state_source::checkpoint);
  start();
  BOOST_CHECK(get("ns", prompt, 42).source != state_source::checkpoint);
  BOOST_CHECK_EQUAL(report().ssd.files, 0u);
  svc.reset(); // before `faulty` goes
}

BOOST_AUTO_TEST_CASE(a_reused_request_id_never_resumes_another_prompts_state) {
  opts.checkpoint_every_tokens = 16;
  start();
  auto a = seq(100), b = seq(100, 5000);
  auto r = request(42, a, 64);
  auto s = oracle->prefill("ns", cat(a, oracle->generate("ns", a, 32)));
  BOOST_REQUIRE(*svc->checkpoint(r, std::move(s)));
  BOOST_CHECK_EQUAL(svc->release(r, false)->checkpoints_kept, 1u);
  put("ns", seq(60, 5000)); // a prefix of b
  BOOST_CHECK(svc->flush()->durable);
  // Request id 42 comes back for prompt b, before and after a restart:
  // served as a fresh prompt (its own prefix, from RAM, then from SSD),
  // and told that a checkpoint was passed over.
  for (auto from : {state_source::ram, state_source::ssd}) {
    auto got = get("ns", b, 42);
    BOOST_CHECK(got.source == from);
    BOOST_CHECK_EQUAL(got.usable_tokens, 60u);
    BOOST_CHECK_EQUAL(got.stale_checkpoint_tokens, 132u);
    BOOST_CHECK_EQUAL(report().checkpoints.stale, 1u);
    start();
  }
  // The prompt it extends still resumes it.
  auto own = get("ns", a, 42);
  BOOST_CHECK(own.source == state_source::checkpoint);
  BOOST_CHECK_EQUAL(own.stale_checkpoint_tokens, 0u);
  BOOST_CHECK_EQUAL(report().checkpoints.resumed, 1u);
  // The reused id completes: the stale checkpoint goes with it.
  BOOST_CHECK_EQUAL(svc->release(request(42, b), true)->checkpoints_removed,
                    1u);
  BOOST_CHECK(get("ns", a, 42).source != state_source::checkpoint);
  BOOST_CHECK(svc->flush()->durable);
  start();
  BOOST_CHECK(get("ns", a, 42).source != state_source::checkpoint);
}

BOOST_AUTO_TEST_CASE(
  a_retry_keeps_its_checkpoint_when_an_earlier_try_completes) {
  opts.checkpoint_every_tokens = 16;
  start();
  auto p = seq(100);
  auto first = request(42, p, 64);
  auto retry = first;
  retry.attempt = 1;
  auto at = [&](size_t n) {
    return oracle->prefill("ns", cat(p, oracle->generate("ns", p, n)));
  };
  BOOST_REQUIRE(*svc->checkpoint(first, at(16)));
  BOOST_CHECK_EQUAL(svc->release(first, false)->checkpoints_kept, 1u);
  // The retry resumes the first try's checkpoint: it owns it from now on.
  auto got = get("ns", p, 42, 1);
  BOOST_CHECK(got.source == state_source::checkpoint);
  BOOST_CHECK_EQUAL(got.usable_tokens, 116u);
  // The first try completes late: nothing of the retry's goes.
  BOOST_CHECK_EQUAL(svc->release(first, true)->checkpoints_removed, 0u);
  BOOST_CHECK(get("ns", p, 42, 1).source == state_source::checkpoint);
  // The first try's saves are disposed; the retry's are kept.
  BOOST_CHECK(!*svc->checkpoint(first, at(48)));
  BOOST_CHECK(*svc->checkpoint(retry, at(32)));
  BOOST_CHECK(svc->flush()->durable);
  start();
  // After a restart the owner is the same (the file names the retry).
  BOOST_CHECK_EQUAL(svc->release(first, true)->checkpoints_removed, 0u);
  auto resumed = get("ns", p, 42, 1);
  BOOST_CHECK(resumed.source == state_source::checkpoint);
  BOOST_CHECK_EQUAL(resumed.usable_tokens, 132u);
  BOOST_CHECK_EQUAL(svc->release(retry, true)->checkpoints_removed, 1u);
  BOOST_CHECK(svc->flush()->durable);
  start();
  BOOST_CHECK(get("ns", p, 42, 1).source != state_source::checkpoint);
  BOOST_CHECK_EQUAL(report().ssd.files, 0u);
}

BOOST_AUTO_TEST_CASE(a_resumed_checkpoint_stays_the_retrys_across_restarts) {
  opts.checkpoint_every_tokens = 16;
  start();
  auto p = seq(100);
  auto first = request(42, p, 64);
  auto retry = first;
  retry.attempt = 1;
  auto s = oracle->prefill("ns", cat(p, oracle->generate("ns", p, 16)));
  auto want = s.tokens;
  BOOST_REQUIRE(*svc->checkpoint(first, std::move(s)));
  BOOST_CHECK(svc->flush()->durable);
  start(); // only the file (written by the first try) is left
  // The retry resumes it from SSD; the next flush writes it under the
  // retry, so the next restart still knows who owns it.
  auto got = get("ns", p, 42, 1);
  BOOST_CHECK(got.source == state_source::checkpoint);
  BOOST_CHECK(got.state.tokens == want);
  auto writes = report().ssd.writes_ok;
  BOOST_CHECK(svc->flush()->durable);
  BOOST_CHECK_EQUAL(report().ssd.writes_ok, writes + 1);
  start();
  BOOST_CHECK_EQUAL(svc->release(first, true)->checkpoints_removed, 0u);
  auto again = get("ns", p, 42, 1);
  BOOST_CHECK(again.source == state_source::checkpoint);
  BOOST_CHECK(again.state.tokens == want);
  BOOST_CHECK_EQUAL(svc->release(retry, true)->checkpoints_removed, 1u);
  BOOST_CHECK(get("ns", p, 42, 1).source != state_source::checkpoint);
}

BOOST_FIXTURE_TEST_CASE(a_completed_generation_whose_unlink_fails_never_returns,
                        durable_checkpoint) {
  begin();
  // The removal record is written; unlinking the file fails.
  faulty.inject(tiers::ssd::fs_op::remove, 1, tiers::ssd::fault_kind::eio);
  auto rel = svc->release(r, true);
  BOOST_REQUIRE(rel);
  BOOST_CHECK_EQUAL(rel->checkpoints_removed, 1u);
  BOOST_CHECK(!rel->removal_pending); // the record made it durable
  BOOST_CHECK(get("ns", p, 42).source != state_source::checkpoint);
  // The unlink runs after the release answered: arming the next fault
  // before it ran would replace the first one (one armed fault per kind).
  BOOST_REQUIRE(testing::eventually([&] { return faulty.fired() >= 1; }));
  // The flush retries the unlink; failing again, it says so.
  faulty.inject(tiers::ssd::fs_op::remove, 1, tiers::ssd::fault_kind::eio);
  auto f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(!f->durable);
  BOOST_CHECK_EQUAL(f->removals_pending, 1u);
  BOOST_CHECK(!f->errors.empty());
  BOOST_CHECK_EQUAL(report().ssd.removals_pending, 1u);
  // A restart with the file still on disk (the close before it retries
  // the unlink once more, and fails): never indexed again.
  faulty.inject(tiers::ssd::fs_op::remove, 1, tiers::ssd::fault_kind::eio);
  start();
  BOOST_CHECK(get("ns", p, 42).source != state_source::checkpoint);
  BOOST_CHECK_EQUAL(report().ssd.files, 0u);
  BOOST_CHECK_EQUAL(report().checkpoints.held, 0u);
  BOOST_CHECK(svc->flush()->durable);
}

BOOST_FIXTURE_TEST_CASE(a_removal_slower_than_the_deadline_is_reported_pending,
                        durable_checkpoint) {
  // The removal record's fsync stalls past every deadline of the release:
  // the answer says the removal is pending and why, never "nothing".
  opts.storage_deadline_ms = 1000;
  begin();
  faulty.inject(tiers::ssd::fs_op::sync, 1, tiers::ssd::fault_kind::stall);
  auto rel = svc->release(r, true);
  BOOST_REQUIRE(rel);
  BOOST_CHECK(rel->removal_pending);
  BOOST_CHECK_NE(rel->removal_error.find("not durable"), std::string::npos);
  BOOST_TEST_MESSAGE("removal_error: " << rel->removal_error);
  // Never served again, whatever the disk does.
  BOOST_CHECK(get("ns", p, 42).source != state_source::checkpoint);
  faulty.release();
  // Once the disk answers, the removal settles: a flush finds nothing
  // pending, and a restart never resumes the generation.
  BOOST_CHECK(testing::eventually([&] {
    auto f = svc->flush();
    return f && f->durable && f->removals_pending == 0;
  }));
  start();
  BOOST_CHECK(get("ns", p, 42).source != state_source::checkpoint);
  BOOST_CHECK_EQUAL(report().checkpoints.held, 0u);
}

BOOST_FIXTURE_TEST_CASE(a_crash_between_release_and_unlink_never_resumes,
                        durable_checkpoint) {
  begin();
  // The process dies at the unlink, after the release answered; then the
  // power goes: only what was made durable is left.
  faulty.inject(tiers::ssd::fs_op::remove, 1, tiers::ssd::fault_kind::crash);
  BOOST_CHECK_EQUAL(svc->release(r, true)->checkpoints_removed, 1u);
  svc.reset();
  faulty.clear();
  memory.power_loss();
  fs = &memory;
  start();
  BOOST_CHECK(get("ns", p, 42).source != state_source::checkpoint);
  BOOST_CHECK_EQUAL(report().ssd.files, 0u);
}

BOOST_AUTO_TEST_CASE(a_publish_in_a_checkpoint_like_namespace_stays_a_prefix) {
  opts.checkpoint_every_tokens = 16;
  start();
  auto p = seq(100);
  auto generated = cat(p, oracle->generate("ns", p, 32));
  // What the old namespace convention took for request 42's checkpoint.
  const std::string hostile = "kvtier.checkpoint/42/ns";
  put(hostile, generated);
  put("ns", seq(50));
  BOOST_CHECK(svc->flush()->durable);
  for (int pass = 0; pass < 2; ++pass) { // before and after a restart
    auto got = get("ns", p, 42);
    BOOST_CHECK(got.source != state_source::checkpoint);
    BOOST_CHECK_EQUAL(got.usable_tokens, 50u);
    BOOST_CHECK_EQUAL(got.stale_checkpoint_tokens, 0u);
    BOOST_CHECK_EQUAL(report().checkpoints.held, 0u);
    start();
  }
  // A prefix like any other: listed, and served in its own namespace.
  auto saved = svc->saved_prefixes();
  BOOST_REQUIRE(saved);
  BOOST_CHECK_EQUAL(saved->size(), 2u);
  auto own = get(hostile, cat(generated, {7}), 43);
  BOOST_CHECK(own.source == state_source::ssd);
  BOOST_CHECK_EQUAL(own.usable_tokens, 132u);
  // A real checkpoint of request 42 is never found by a prompt lookup, in
  // its namespace or the look-alike one, and never listed.
  BOOST_REQUIRE(
    *svc->checkpoint(request(42, p, 64), oracle->prefill("ns", generated)));
  BOOST_CHECK(svc->flush()->durable);
  start();
  BOOST_CHECK_EQUAL(get("ns", cat(generated, {7}), 43).usable_tokens, 50u);
  BOOST_CHECK_EQUAL(svc->saved_prefixes()->size(), 2u);
  auto resumed = get("ns", p, 42);
  BOOST_CHECK(resumed.source == state_source::checkpoint);
  BOOST_CHECK(resumed.state.tokens == generated);
}

BOOST_AUTO_TEST_CASE(without_an_interval_checkpoints_are_disposed) {
  start();
  BOOST_CHECK(!svc->checkpoint_every_tokens());
  auto s = oracle->prefill("ns", seq(20));
  BOOST_CHECK(!*svc->checkpoint(request(1, seq(10)), std::move(s)));
  BOOST_CHECK(get("ns", seq(10)).source == state_source::none);
}

BOOST_AUTO_TEST_CASE(prefetch_coalesces_racing_reads_and_interest_holds) {
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  put("ns", seq(1000));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  // The first prefetch's read is held on the disk until the second has
  // joined it: without the hold, a second prefetch arriving after the read
  // was installed finds RAM holding the prefix and (rightly) reads nothing.
  faulty.inject(tiers::ssd::fs_op::read, 1, tiers::ssd::fault_kind::stall);
  auto a = svc->prefetch_async(seq(1001), "ns");
  BOOST_REQUIRE(testing::eventually([&] { return faulty.stalled() == 1; }));
  auto b = svc->prefetch_async(seq(1001), "ns");
  BOOST_REQUIRE(testing::eventually([&] { return report().ssd.coalesced; }));
  faulty.release();
  auto la = a.get();
  auto lb = b.get();
  BOOST_REQUIRE(la && lb);
  BOOST_CHECK_EQUAL(la->info().tokens, 1000u);
  BOOST_CHECK_EQUAL(la->info().reads_started + lb->info().reads_started, 1u);
  BOOST_CHECK_EQUAL(la->info().reads_joined + lb->info().reads_joined, 1u);
  auto rep = report();
  BOOST_CHECK_GE(rep.ssd.coalesced, 1u);
  BOOST_CHECK_EQUAL(rep.ssd.restores_ok, 1u); // one read for both
  // The restored donor is resident: RAM serves it, byte-exact.
  BOOST_CHECK(get("ns", seq(1001)).source == state_source::ram);
  // Over the cap, the leased donor outlives newer unleased entries...
  for (tiers::token t = 1; t <= 4; ++t)
    put("ns", seq(1000, 100000 * t));
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len(seq(1001), "ns"), 1000u);
  // ... until both interests end.
  BOOST_CHECK(la->release());
  BOOST_CHECK(!la->release()); // once
  lb = caf::expected<runtime::prefetch_lease>{runtime::prefetch_lease{}};
  for (tiers::token t = 5; t <= 8; ++t)
    put("ns", seq(1000, 100000 * t));
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len(seq(1001), "ns"), 0u);
  svc.reset(); // before `faulty` goes: its spills may still be writing
}

BOOST_AUTO_TEST_CASE(an_untrimmable_cold_entry_is_never_restored) {
  opts.model = "tiny-hybrid"; // recurrent layers: exact-boundary only
  start();
  put("ns", seq(200));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  auto reads = report().ssd_io.reads;
  // Diverges at 150: the file would need trimming, which it cannot.
  auto got = get("ns", cat(seq(150), seq(60, 9000)));
  BOOST_CHECK(got.source == state_source::none);
  BOOST_CHECK_EQUAL(report().ssd_io.reads, reads);
  BOOST_CHECK_EQUAL(report().ssd.restores_ok, 0u);
  // At its exact boundary it is found and restored.
  auto exact = get("ns", seq(201));
  BOOST_CHECK(exact.source == state_source::ssd);
  BOOST_CHECK_EQUAL(exact.usable_tokens, 200u);
}

BOOST_AUTO_TEST_CASE(close_reports_a_failed_disk_and_still_clears) {
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  put("ns", seq(100));
  faulty.inject(tiers::ssd::fs_op::write, 1, tiers::ssd::fault_kind::crash);
  auto c = svc->close();
  BOOST_REQUIRE(c);
  BOOST_CHECK(!c->durable);
  BOOST_CHECK(!c->already_closed);
  BOOST_CHECK(!c->errors.empty());
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.entries, 0u);
  BOOST_CHECK_EQUAL(rep.ram.bytes, 0u);
  auto again = svc->close();
  BOOST_REQUIRE(again);
  BOOST_CHECK(again->already_closed);
  BOOST_CHECK(!again->durable);
  svc.reset(); // before `faulty` goes
}

BOOST_AUTO_TEST_CASE(demotion_on_a_failing_disk_keeps_the_entry_in_ram) {
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  put("ns", seq(100));
  faulty.inject(tiers::ssd::fs_op::write, 1, tiers::ssd::fault_kind::crash);
  auto d = svc->demote_idle(0); // answered, not held until a flush
  BOOST_REQUIRE(d);
  BOOST_CHECK_EQUAL(*d, 0u);
  BOOST_CHECK(get("ns", seq(101)).source == state_source::ram);
  BOOST_CHECK_EQUAL(report().ssd.writes_failed, 1u);
  faulty.clear();
  BOOST_CHECK(svc->flush()->durable); // the retry writes it
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  svc.reset();
}

BOOST_AUTO_TEST_CASE(concurrent_closes_share_one_result_and_calls_fail_after) {
  start();
  put("ns", seq(100));
  auto a = svc->close_async();
  auto b = svc->close_async();
  auto ra = a.get();
  auto rb = b.get();
  BOOST_REQUIRE(ra && rb);
  BOOST_CHECK(ra->durable && rb->durable);
  BOOST_CHECK_EQUAL(ra->entries, 1u);
  BOOST_CHECK_EQUAL(rb->entries, 1u);
  auto acq = svc->acquire(request(1, seq(101)), "ns");
  BOOST_REQUIRE(!acq);
  BOOST_CHECK(acq.error() == ec::closed);
  auto pub = svc->publish(request(1, seq(10)), oracle->prefill("ns", seq(10)));
  BOOST_REQUIRE(pub);
  BOOST_CHECK(!pub->kept);
  BOOST_CHECK(pub->outcome == runtime::put_outcome::dropped_closed);
  BOOST_CHECK(svc->close()->already_closed);
}

BOOST_AUTO_TEST_CASE(flush_without_a_cold_tier_is_not_durable) {
  opts.ssd_dir.clear();
  start();
  BOOST_CHECK(svc->flush()->durable); // nothing held
  put("ns", seq(10));
  auto f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(!f->durable);
  BOOST_CHECK(!f->errors.empty());
}

BOOST_AUTO_TEST_CASE(invalid_options_are_refused_naming_key_and_range) {
  opts.ram_cap_bytes = 1000; // below 1 MiB
  runtime::service bad{opts, runtime::service_parts{fs}};
  auto err = bad.start_error();
  BOOST_REQUIRE(err);
  BOOST_CHECK(err == ec::invalid_config);
  BOOST_CHECK_NE(describe(err).find("ram-tier.cap-bytes"), std::string::npos);
  BOOST_CHECK_NE(describe(err).find("1 MiB"), std::string::npos);
  auto call = bad.acquire(request(1, seq(10)), "ns");
  BOOST_REQUIRE(!call);
  BOOST_CHECK(call.error() == ec::invalid_config);
}

BOOST_AUTO_TEST_SUITE_END()
