// Priorities and pins from the engine, end to end through the service
// (`state_request::priority`, `state_request::pin_ms`; docs/eviction.md
// "Priorities and pins"): a pinned system prompt survives a flood of
// one-off prompts ten times the RAM cap under either policy, pins never
// hold more than their budget, a low priority leaves first (from RAM, and
// from SSD under either `ssd-tier.policy`, also after a restart; an entry
// restored from SSD keeps its file's priority in RAM), and an impossible
// priority is refused naming it.
#define BOOST_TEST_MODULE runtime_service_retention
#include "tests/runtime/service_fixture.hpp"

using namespace kvtier;
using runtime::state_source;
using testing::service_fixture;
using testing::why;

namespace {

struct retention_fixture : service_fixture {
  retention_fixture() {
    opts.ssd_dir.clear(); // RAM alone: what it keeps is what serves
    opts.kv_budget_bytes = 1ull << 30; // admission never in the way
  }

  /// Publishes a fresh prefill of `tokens` for `r`; requires it kept.
  runtime::publish_result publish(runtime::state_request r) {
    auto e = oracle->prefill("ns", r.prompt);
    auto out = svc->publish(r, std::move(e));
    BOOST_REQUIRE_MESSAGE(out, why(out));
    BOOST_REQUIRE(out->kept);
    return *out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(retention, retention_fixture)

BOOST_AUTO_TEST_CASE(a_pinned_prompt_survives_a_flood_ten_times_the_cap) {
  for (auto policy : {"lru", "gdsf"}) {
    opts.ram_policy = policy;
    start();
    auto budget = static_cast<uint64_t>(static_cast<double>(opts.ram_cap_bytes)
                                        * opts.pin_share);
    auto system = seq(256, 1);
    auto r = request(1, system);
    r.pin_ms = 600000; // outlives the test however slow the machine
    BOOST_TEST(publish(r).pinned, policy);
    // One-off prompts, 512 tokens each, ten times the cap in all.
    auto per = opts.ram_cap_bytes / 4096 * 512; // tiny-dense: 256 B a token
    uint64_t sent = 0;
    for (uint32_t i = 0; sent < 10 * opts.ram_cap_bytes; ++i, sent += per) {
      publish(request(100 + i, seq(512, 100000 + 1000 * i)));
      BOOST_TEST(report().ram.pinned_bytes <= budget);
    }
    auto rep = report();
    BOOST_TEST(rep.ram.evictions >= 60u, "the flood went through RAM");
    BOOST_TEST(rep.ram.pins_granted == 1u);
    BOOST_TEST(rep.ram.pinned_entries == 1u);
    auto got = get("ns", cat(system, seq(8, 900000)));
    BOOST_TEST((got.source == state_source::ram), policy);
    BOOST_TEST(got.usable_tokens == 256u);
  }
}

BOOST_AUTO_TEST_CASE(pins_over_the_budget_are_refused_and_the_state_kept) {
  opts.pin_share = 0.25; // 1024 tokens' worth
  start();
  uint32_t granted = 0, refused = 0;
  for (uint32_t i = 0; i < 8; ++i) {
    auto r = request(i + 1, seq(256, 1000 * (i + 1)));
    r.pin_ms = 600000;
    auto p = publish(r);
    BOOST_TEST(p.pinned != p.pin_refused);
    (p.pinned ? granted : refused) += 1;
  }
  BOOST_TEST(granted >= 1u);
  BOOST_TEST(granted <= 4u, "four 256-token entries fill the budget");
  BOOST_TEST(refused == 8u - granted);
  auto rep = report();
  BOOST_TEST(rep.ram.pins_refused == refused);
  BOOST_TEST(rep.ram.pinned_bytes <= opts.ram_cap_bytes / 4);
  BOOST_TEST(rep.ram.entries == 8u, "refused pins kept their state");
  // No budget at all: every pin refused.
  opts.pin_share = 0;
  start();
  auto r = request(1, seq(64));
  r.pin_ms = 1000;
  BOOST_TEST(publish(r).pin_refused);
}

BOOST_AUTO_TEST_CASE(a_low_priority_flood_leaves_a_default_entry_in_place) {
  start();
  put("ns", seq(256, 1)); // the default priority
  for (uint32_t i = 0; i < 80; ++i) {
    auto r = request(100 + i, seq(512, 100000 + 1000 * i));
    r.priority = 0;
    publish(r);
  }
  auto got = get("ns", cat(seq(256, 1), seq(8, 900000)));
  BOOST_TEST((got.source == state_source::ram));
  BOOST_TEST(got.usable_tokens == 256u);
  BOOST_TEST(report().ram.evictions >= 60u);
}

BOOST_AUTO_TEST_CASE(priorities_order_the_ssd_files_also_after_a_restart) {
  auto saved = [this](const tiers::token_seq& t) {
    auto all = svc->saved_prefixes();
    BOOST_REQUIRE_MESSAGE(all, why(all));
    for (auto& s : *all)
      if (s.tokens == t)
        return true;
    return false;
  };
  // One-off prompts of the default priority, 512 tokens each, through a
  // RAM cap of 8 of them into an SSD cap of about 7 files.
  // Waits for the spills to settle (no flush: it would write the RAM
  // entries again whose files went).
  uint32_t next = 0;
  auto flood = [&](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i, ++next)
      publish(request(100 + next, seq(512, 1000000 + 1000 * next)));
    BOOST_TEST(testing::eventually([&] {
      auto s = svc->stats();
      return s && s->pending_spills == 0 && s->pending_snapshots == 0;
    }));
  };
  for (auto policy : {"lru", "gdsf"}) {
    opts.ssd_dir = std::string{"/ssd-"} + policy;
    opts.ssd_cap_bytes = 1ull << 20;
    opts.ssd_policy = policy;
    start();
    auto keep = seq(512, 1), low = seq(512, 100000);
    auto r = request(1, keep);
    r.priority = 100;
    publish(r);
    r = request(2, low);
    r.priority = 0;
    publish(r);
    auto f = svc->flush(); // both on SSD, the oldest files there
    BOOST_REQUIRE_MESSAGE(f, why(f));
    BOOST_TEST(saved(keep));
    BOOST_TEST(saved(low));
    flood(30);
    auto rep = report();
    BOOST_TEST(rep.ssd.evicted >= 10u, policy);
    BOOST_TEST(!saved(low), policy);
    BOOST_TEST(saved(keep), policy); // the oldest file, by far
    // A restart reads the priority back from the file's header: the file
    // is still the last to go.
    start();
    BOOST_TEST(saved(keep), policy);
    flood(30);
    BOOST_TEST(report().ssd.evicted >= 10u, policy);
    BOOST_TEST(saved(keep), policy);
    auto got = get("ns", cat(keep, seq(8, 900000)));
    BOOST_TEST((got.source == state_source::ssd), policy);
    BOOST_TEST(got.usable_tokens == 512u);
    // Restored into RAM, it is kept there by its file's priority, not the
    // default: a flood of default-priority prompts through RAM leaves it.
    flood(30);
    BOOST_TEST(report().ram.evictions >= 30u, policy);
    got = get("ns", cat(keep, seq(8, 910000)));
    BOOST_TEST((got.source == state_source::ram), policy);
    BOOST_TEST(got.usable_tokens == 512u);
  }
}

BOOST_AUTO_TEST_CASE(a_priority_over_100_is_refused_naming_it) {
  start();
  auto r = request(1, seq(64));
  r.priority = 101;
  auto out = svc->publish(r, oracle->prefill("ns", r.prompt));
  BOOST_REQUIRE(!out);
  BOOST_TEST((out.error() == ec::invalid_argument));
  BOOST_TEST(describe(out.error()).find("priority 101") != std::string::npos,
             describe(out.error()));
  BOOST_TEST(report().ram.entries == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
