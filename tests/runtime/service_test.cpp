// The embedded API end to end (runtime/service.hpp): lookups, publishing,
// tier order, demotion, pressure, boundaries, sessions, objects, reporting.
// Admission, checkpoints and lifecycle are in service_lifecycle_test.cpp.
#define BOOST_TEST_MODULE runtime_service
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <mutex>
#include <thread>

using namespace kvtier;
using runtime::state_source;
using testing::ok;
using testing::service_fixture;
using testing::why;

BOOST_FIXTURE_TEST_SUITE(service, service_fixture)

BOOST_AUTO_TEST_CASE(ram_hit_lends_the_usable_prefix_byte_exact) {
  start();
  put("ns", seq(100));
  auto got = get("ns", cat(seq(100), seq(20, 1000)));
  BOOST_CHECK(got.source == state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, 100u);
  auto trimmed = get("ns", seq(60));
  BOOST_CHECK(trimmed.source == state_source::ram);
  BOOST_CHECK_EQUAL(trimmed.usable_tokens, 59u); // one token left to forward
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.hits, 2u);
  BOOST_CHECK_EQUAL(rep.ram.entries, 1u);
}

BOOST_AUTO_TEST_CASE(a_miss_is_fresh_state_and_counts_a_ram_miss) {
  start();
  put("ns", seq(100));
  auto other_ns = get("other", seq(100));
  BOOST_CHECK(other_ns.source == state_source::none);
  BOOST_CHECK_EQUAL(other_ns.usable_tokens, 0u);
  BOOST_CHECK(other_ns.state.layers.empty());
  BOOST_CHECK_EQUAL(report().ram.misses, 1u);
}

BOOST_AUTO_TEST_CASE(peek_answers_from_ram_and_takes_nothing) {
  start();
  put("ns", seq(100));
  auto p = svc->peek_prefix_len(seq(120), "ns");
  BOOST_REQUIRE(p);
  BOOST_CHECK_EQUAL(*p, 100u);
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.hits, 0u);
  BOOST_CHECK_EQUAL(rep.ram.misses, 0u);
  BOOST_CHECK_EQUAL(rep.ram.prefix_scans, 1u);
}

BOOST_AUTO_TEST_CASE(route_without_a_cluster_names_this_service_and_its_tier) {
  start();
  put("ns", seq(100));
  auto r = svc->route(cat(seq(100), seq(20, 1000)), "ns");
  BOOST_REQUIRE_MESSAGE(r, why(r));
  BOOST_REQUIRE_EQUAL(r->options.size(), 1u);
  BOOST_CHECK_EQUAL(r->best, 0u);
  BOOST_CHECK(r->chosen.source == state_source::ram);
  BOOST_CHECK_EQUAL(r->chosen.usable_tokens, 100u);
  BOOST_CHECK_EQUAL(r->chosen.cost, 20.0); // 20 tokens to prefill
  BOOST_CHECK(r->chosen.node_id.empty());
  // Routing takes nothing: no hit, no miss.
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.hits + rep.ram.misses, 0u);
  auto empty = svc->route({}, "ns");
  BOOST_REQUIRE(!empty);
  BOOST_CHECK(empty.error() == ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(publish_takes_ownership_only_when_it_succeeds) {
  start();
  auto e = oracle->prefill("ns", seq(10));
  BOOST_REQUIRE(svc->publish(request(1, seq(10)), std::move(e)));
  BOOST_CHECK(e.layers.empty()); // the cache's now
  auto bad = oracle->prefill("ns", seq(10));
  bad.layers[0].tokens = 11; // does not validate
  auto r = svc->publish(request(1, seq(10)), std::move(bad));
  BOOST_CHECK(!r);
  BOOST_CHECK_EQUAL(bad.layers.size(), 4u); // still the caller's
}

BOOST_AUTO_TEST_CASE(an_entry_that_does_not_validate_is_invalid_argument) {
  opts.checkpoint_every_tokens = 16;
  start();
  auto bad = oracle->prefill("ns", seq(10));
  bad.layers[2].tokens = 11; // the entry has 10
  auto r = svc->publish(request(1, seq(10)), std::move(bad));
  BOOST_REQUIRE(!r);
  BOOST_CHECK(r.error() == ec::invalid_argument);
  BOOST_CHECK_NE(describe(r.error()).find("layer 2: tokens"),
                 std::string::npos);
  auto ckpt = oracle->prefill("ns", seq(20));
  ckpt.layers[0].segments.back().length -= 64; // one row short
  auto c = svc->checkpoint(request(1, seq(10)), std::move(ckpt));
  BOOST_REQUIRE(!c);
  BOOST_CHECK(c.error() == ec::invalid_argument);
  BOOST_CHECK_NE(describe(c.error()).find("layer 0: segments"),
                 std::string::npos);
  BOOST_CHECK_EQUAL(report().ram.entries, 0u); // nothing kept
  // The service goes on: a valid entry is kept and served byte for byte.
  put("ns", seq(10));
  BOOST_CHECK(get("ns", seq(11)).source == state_source::ram);
}

BOOST_AUTO_TEST_CASE(cold_wins_only_when_strictly_longer) {
  start();
  put("ns", seq(200));
  auto demoted = svc->demote_idle(0);
  BOOST_REQUIRE(demoted);
  BOOST_CHECK_EQUAL(*demoted, 1u);
  put("ns", seq(100)); // RAM holds 100, SSD 200
  auto cold = get("ns", seq(300));
  BOOST_CHECK(cold.source == state_source::ssd);
  BOOST_CHECK_EQUAL(cold.usable_tokens, 200u);
  // Equal lengths: RAM serves, nothing is read.
  auto restores = report().ssd.restores_ok;
  auto warm = get("ns", seq(101));
  BOOST_CHECK(warm.source == state_source::ram);
  BOOST_CHECK_EQUAL(warm.usable_tokens, 100u);
  BOOST_CHECK_EQUAL(report().ssd.restores_ok, restores);
}

BOOST_AUTO_TEST_CASE(prefetch_reads_nothing_when_ram_holds_as_long) {
  start();
  put("ns", seq(200));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u); // SSD holds 200
  auto before = report();
  auto no_read = [&](uint64_t ram_len) {
    auto lease = svc->prefetch(seq(400), "ns");
    BOOST_REQUIRE_MESSAGE(lease, why(lease));
    auto& info = lease->info();
    BOOST_CHECK_EQUAL(info.lease, 0u);
    BOOST_CHECK_EQUAL(info.reads_started, 0u);
    BOOST_CHECK_EQUAL(info.reads_joined, 0u);
    BOOST_CHECK_EQUAL(info.tokens, 0u);
    BOOST_CHECK_EQUAL(info.ram_tokens, ram_len);
    BOOST_CHECK(!lease->release()); // harmless: there is nothing to end
    auto rep = report();
    BOOST_CHECK_EQUAL(rep.ssd_io.reads, before.ssd_io.reads);
    BOOST_CHECK_EQUAL(rep.ssd.restores_ok, before.ssd.restores_ok);
    BOOST_CHECK_EQUAL(rep.ssd.coalesced, before.ssd.coalesced);
  };
  put("ns", seq(200)); // equal in RAM
  no_read(200);
  put("ns", seq(300)); // longer in RAM
  no_read(300);
  auto got = get("ns", seq(400));
  BOOST_CHECK(got.source == state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, 300u);
  BOOST_CHECK_EQUAL(report().ssd_io.reads, before.ssd_io.reads);
}

BOOST_AUTO_TEST_CASE(prefetch_reads_a_strictly_longer_cold_prefix) {
  start();
  put("ns", seq(300));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u); // SSD holds 300
  put("ns", seq(100));                         // RAM holds 100
  auto reads = report().ssd_io.reads;
  auto lease = svc->prefetch(seq(400), "ns");
  BOOST_REQUIRE_MESSAGE(lease, why(lease));
  BOOST_CHECK_NE(lease->info().lease, 0u);
  BOOST_CHECK_EQUAL(lease->info().reads_started, 1u);
  BOOST_CHECK_EQUAL(lease->info().tokens, 300u);
  BOOST_CHECK_EQUAL(lease->info().ram_tokens, 100u);
  auto rep = report();
  BOOST_CHECK_GT(rep.ssd_io.reads, reads);
  BOOST_CHECK_EQUAL(rep.ssd.restores_ok, 1u);
  // Installed under the lease: the acquire is a RAM hit, byte-exact.
  auto got = get("ns", seq(400));
  BOOST_CHECK(got.source == state_source::ram);
  BOOST_CHECK_EQUAL(got.usable_tokens, 300u);
  BOOST_CHECK_EQUAL(report().ssd.restores_ok, 1u);
  BOOST_CHECK(lease->release());
}

BOOST_AUTO_TEST_CASE(the_report_counts_the_cold_tiers_the_lookups_consult) {
  start();
  BOOST_CHECK_EQUAL(report().cold_tiers, 1u); // the SSD tier
  BOOST_CHECK_EQUAL(report().dead_tiers, 0u);
  opts.ssd_dir.clear();
  start();
  BOOST_CHECK_EQUAL(report().cold_tiers, 0u);
}

BOOST_AUTO_TEST_CASE(demotion_then_restore_is_byte_exact_and_lands_in_ram) {
  start();
  put("ns", seq(300));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ram.entries, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.files, 1u);
  BOOST_CHECK_EQUAL(rep.demotions, 1u);
  auto got = get("ns", seq(301));
  BOOST_CHECK(got.source == state_source::ssd);
  BOOST_CHECK_EQUAL(got.usable_tokens, 300u);
  // Restored entries are installed in RAM (durable): the next is a RAM hit.
  BOOST_CHECK(get("ns", seq(301)).source == state_source::ram);
  // ... and a durable entry leaves RAM again without a second write.
  auto writes = report().ssd.writes_ok;
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  BOOST_CHECK_EQUAL(report().ssd.writes_ok, writes);
}

BOOST_AUTO_TEST_CASE(demotion_without_a_cold_tier_does_nothing) {
  opts.ssd_dir.clear();
  start();
  put("ns", seq(100));
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 0u);
  BOOST_CHECK_EQUAL(report().ram.entries, 1u);
}

BOOST_AUTO_TEST_CASE(idle_demotion_timer_demotes_until_stopped) {
  opts.idle_demotion_ms = 20;
  start();
  put("ns", seq(100));
  // A real clock here (the service runs on CAF's scheduler): poll for at
  // most five seconds.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (report().demotions == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_CHECK_EQUAL(report().demotions, 1u);
  BOOST_CHECK_EQUAL(report().ram.entries, 0u);
  BOOST_CHECK(*svc->stop_idle_demotion());
  BOOST_CHECK(!*svc->stop_idle_demotion()); // no longer running
  put("ns", seq(50, 7));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BOOST_CHECK_EQUAL(report().ram.entries, 1u); // the state stays
}

BOOST_AUTO_TEST_CASE(pressure_relief_frees_bytes_and_finishes_writes) {
  start();
  for (tiers::token t = 0; t < 3; ++t)
    put("ns", seq(500, 10000 * (t + 1)));
  auto held = report().ram.bytes;
  BOOST_REQUIRE_GT(held, 0u);
  auto target = held / 2;
  auto r = svc->relieve_pressure([&] { return report().ram.bytes <= target; });
  BOOST_REQUIRE(r);
  BOOST_CHECK_GE(r->released, 2u);
  BOOST_CHECK_LE(r->held_bytes, target);
  auto rep = report();
  BOOST_CHECK_LE(rep.ram.bytes, target);
  // The released entries' writes are finished, not queued clones.
  BOOST_CHECK_EQUAL(rep.ssd.queue_items, 0u);
  BOOST_CHECK_EQUAL(rep.ssd.files, r->released);
}

BOOST_AUTO_TEST_CASE(boundary_releases_durable_snapshots_with_no_storage_io) {
  start();
  put("ns", seq(100));
  put("ns", seq(100, 5000));
  auto f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(f->durable);
  auto before = report();
  BOOST_REQUIRE_GT(before.ssd_io.submitted, 0u);
  auto b = svc->boundary();
  BOOST_REQUIRE(b);
  BOOST_CHECK_EQUAL(b->released, 2u);
  auto after = report();
  BOOST_CHECK_EQUAL(after.ssd_io.submitted, before.ssd_io.submitted);
  BOOST_CHECK_EQUAL(after.ram_io.submitted, 0u);
  BOOST_CHECK_EQUAL(after.ram.entries, 0u);
  // What the boundary released is found again on SSD.
  BOOST_CHECK(get("ns", seq(101)).source == state_source::ssd);
}

BOOST_AUTO_TEST_CASE(boundary_keeps_entries_that_are_not_durable) {
  start();
  put("ns", seq(100));
  auto before = report().ssd_io.submitted;
  BOOST_CHECK_EQUAL(svc->boundary()->released, 0u);
  BOOST_CHECK_EQUAL(report().ssd_io.submitted, before);
  BOOST_CHECK_EQUAL(report().ram.entries, 1u);
}

BOOST_AUTO_TEST_CASE(an_entry_whose_ssd_file_went_is_kept_at_a_boundary) {
  // Room on SSD for one 3000-token file (the cap is at least 1 MiB): each
  // new file evicts the one before. RAM holds both entries.
  opts.ram_cap_bytes = 4ull << 20;
  auto g = tiers::model_geometry::preset(opts.model, opts.model_scale);
  BOOST_REQUIRE(g);
  runtime::oracle_engine probe{*g};
  auto align = static_cast<uint32_t>(opts.alignment);
  opts.ssd_cap_bytes =
    tiers::ssd::layout(probe.prefill("ns", seq(3000)),
                       runtime::running_model(opts)->fingerprint(), align,
                       std::max<uint32_t>(align, 1u << 20))
      .file_length
    * 3 / 2;
  start();
  put("ns", seq(3000));
  BOOST_REQUIRE(svc->flush()->durable); // A: on SSD, durable in RAM
  put("ns", seq(3000, 50000));
  BOOST_REQUIRE(svc->flush()->durable); // B's file evicts A's
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.ssd.evicted, 1u);
  BOOST_CHECK_EQUAL(rep.ssd.files, 1u);
  BOOST_CHECK_EQUAL(rep.ram.backing_lost, 1u);
  // The boundary releases B only: A's RAM copy is the last one.
  BOOST_CHECK_EQUAL(svc->boundary()->released, 1u);
  BOOST_CHECK(get("ns", seq(3001)).source == state_source::ram);
  // Demotion writes A again before it leaves RAM; it is found on SSD.
  auto writes = report().ssd.writes_ok;
  BOOST_CHECK_EQUAL(*svc->demote_idle(0), 1u);
  BOOST_CHECK_EQUAL(report().ssd.writes_ok, writes + 1);
  BOOST_CHECK(get("ns", seq(3001)).source == state_source::ssd);
}

BOOST_AUTO_TEST_CASE(keeps_says_whether_projected_state_fits_the_cap) {
  start();
  BOOST_CHECK(*svc->keeps(request(1, seq(100))));
  BOOST_CHECK(!*svc->keeps(request(2, seq(5000)))); // 5016 x 256 B > 1 MiB
}

BOOST_AUTO_TEST_CASE(the_put_observer_sees_every_put_and_is_contained) {
  start();
  std::vector<std::pair<tiers::token_seq, std::string>> seen;
  std::mutex mtx;
  svc->set_put_observer([&](const tiers::token_seq& t, const std::string& ns) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.emplace_back(t, ns);
  });
  auto count = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    return seen.size();
  };
  // The observer is a subscriber of the event feed: it runs after the
  // put, maybe after publish returned, so the test waits for it.
  put("ns", seq(10));
  BOOST_REQUIRE(testing::eventually([&] { return count() == 1; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_CHECK(seen[0].first == seq(10));
    BOOST_CHECK_EQUAL(seen[0].second, "ns");
  }
  // Every stored prefix, in order.
  put("ns", seq(10, 500));
  put("other", seq(10, 900));
  BOOST_REQUIRE(testing::eventually([&] { return count() == 3; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_CHECK(seen[1].first == seq(10, 500));
    BOOST_CHECK_EQUAL(seen[2].second, "other");
  }
  svc->set_put_observer([](const tiers::token_seq&, const std::string&) {
    throw std::runtime_error("observer failure");
  });
  put("ns", seq(20, 100)); // still kept
  BOOST_CHECK(
    testing::eventually([&] { return report().ram.observer_errors == 1u; }));
  BOOST_CHECK_EQUAL(report().ram.entries, 4u);
}

BOOST_AUTO_TEST_CASE(close_session_drops_protection_not_state) {
  start();
  auto r = request(1, seq(100));
  r.session = "chat-1";
  auto e = oracle->prefill("ns", seq(100));
  BOOST_REQUIRE(svc->publish(r, std::move(e)));
  BOOST_CHECK_EQUAL(report().sessions.open, 1u);
  auto n = svc->close_session("chat-1");
  BOOST_REQUIRE(n);
  BOOST_CHECK_EQUAL(*n, 1u);
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.sessions.open, 0u);
  BOOST_CHECK_EQUAL(rep.sessions.closed, 1u);
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len(seq(101), "ns"), 100u);
}

/// Publishes a fresh prefill of `tokens` in "ns" for `session`.
void publish_in(service_fixture& f, const std::string& session,
                const tiers::token_seq& tokens) {
  auto r = service_fixture::request(1, tokens);
  r.session = session;
  auto p = f.svc->publish(r, f.oracle->prefill("ns", tokens));
  BOOST_REQUIRE(p && p->kept);
}

BOOST_AUTO_TEST_CASE(a_session_protects_only_its_newest_entry) {
  start();
  publish_in(*this, "a", seq(100, 1000));
  publish_in(*this, "a", seq(100, 2000)); // a's older entry loses its pin
  publish_in(*this, "b", seq(100, 3000));
  // close_session answers once RAM took the pin back, so a's earlier
  // unprotect (sent before it) has landed too.
  BOOST_CHECK_EQUAL(*svc->close_session("a"), 1u);
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.sessions.protected_entries, 1u); // b's newest
  BOOST_CHECK_EQUAL(rep.sessions.open, 1u);
  BOOST_CHECK_EQUAL(rep.sessions.opened, 2u);
  BOOST_CHECK_EQUAL(rep.sessions.closed, 1u);
  BOOST_CHECK_EQUAL(*svc->close_session("a"), 0u); // closing twice
  BOOST_CHECK_EQUAL(report().sessions.closed, 1u);
  BOOST_CHECK_EQUAL(report().ram.entries, 3u);
}

BOOST_AUTO_TEST_CASE(two_sessions_naming_one_entry_both_protect_it) {
  start();
  publish_in(*this, "a", seq(100));
  publish_in(*this, "b", seq(100)); // the same key, replaced, pins follow
  BOOST_CHECK_EQUAL(*svc->close_session("a"), 1u);
  BOOST_CHECK_EQUAL(report().sessions.protected_entries, 1u);
  BOOST_CHECK_EQUAL(*svc->close_session("b"), 1u);
  BOOST_CHECK_EQUAL(report().sessions.protected_entries, 0u);
}

BOOST_AUTO_TEST_CASE(a_closed_session_entry_is_evicted_before_an_open_one) {
  start();                                    // 4096 tokens of RAM
  publish_in(*this, "open", seq(1500, 5000)); // least recently used
  publish_in(*this, "old", seq(1500, 1000));
  BOOST_CHECK_EQUAL(*svc->close_session("old"), 1u);
  put("ns", seq(1500, 9000)); // over the cap: one must leave
  // It leaves once its spill is durable; until then it is still servable.
  BOOST_REQUIRE(svc->flush()->durable);
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len(seq(1501, 1000), "ns"), 0u);
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len(seq(1501, 5000), "ns"), 1500u);
  BOOST_CHECK_EQUAL(report().ram.evictions, 1u);
}

BOOST_AUTO_TEST_CASE(close_clears_the_session_table) {
  start();
  publish_in(*this, "a", seq(100));
  BOOST_REQUIRE(svc->close());
  auto rep = report();
  BOOST_CHECK_EQUAL(rep.sessions.open, 0u);
  BOOST_CHECK_EQUAL(rep.sessions.protected_entries, 0u);
  BOOST_CHECK_EQUAL(*svc->close_session("a"), 0u);
}

BOOST_AUTO_TEST_CASE(objects_are_exact_and_shared_by_reference) {
  start();
  auto* objects = svc->objects();
  BOOST_REQUIRE(objects);
  auto bytes = oracle->prefill("enc", seq(8)).layers[0].segments;
  BOOST_CHECK(*objects->put("image-1", {{"encoder", bytes}}));
  auto got = objects->get("image-1");
  BOOST_REQUIRE(got && *got);
  BOOST_REQUIRE_EQUAL((*got)->size(), 1u);
  BOOST_CHECK_EQUAL((**got)[0].name, "encoder");
  BOOST_CHECK((**got)[0].segments[0].bytes().data()
              == bytes[0].bytes().data()); // zero-copy
  BOOST_CHECK(!*objects->get("image-2"));
  BOOST_CHECK_EQUAL(report().objects.hits, 1u);
}

BOOST_AUTO_TEST_CASE(saved_prefixes_and_stats_after_a_flush) {
  start();
  put("ns", seq(100));
  auto f = svc->flush();
  BOOST_REQUIRE(f);
  BOOST_CHECK(f->durable);
  BOOST_CHECK_EQUAL(f->entries, 1u);
  BOOST_CHECK_EQUAL(f->longest_durable_prefix, 100u);
  auto saved = svc->saved_prefixes();
  BOOST_REQUIRE(saved);
  BOOST_REQUIRE_EQUAL(saved->size(), 1u);
  BOOST_CHECK((*saved)[0].tokens == seq(100));
  auto st = svc->stats();
  BOOST_REQUIRE(st);
  BOOST_CHECK_EQUAL(st->pending_snapshots + st->pending_spills
                      + st->pending_checkpoint_writes,
                    0u);
}

BOOST_AUTO_TEST_CASE(future_forms_answer_like_the_blocking_ones) {
  start();
  auto e = oracle->prefill("ns", seq(50));
  auto pub = svc->publish_async(request(1, seq(50)), e).get();
  BOOST_REQUIRE(pub);
  BOOST_CHECK(pub->kept);
  auto got = svc->acquire_async(request(2, seq(60)), "ns").get();
  BOOST_REQUIRE(got);
  BOOST_CHECK(got->source == state_source::ram);
  BOOST_CHECK(ok(oracle->verify(got->state)));
  BOOST_CHECK_EQUAL(*svc->peek_prefix_len_async(seq(60), "ns").get(), 50u);
  BOOST_CHECK_EQUAL(svc->report_async().get()->ram.hits, 1u);
}

BOOST_AUTO_TEST_SUITE_END()
