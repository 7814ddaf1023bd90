// What the SSD tier agrees to write (tiers/ssd/write_admission.hpp): the
// `reused` admission rule skips a spill seen once and writes one whose
// leading tokens were spilled before, within a bounded memory; the daily
// write budget is never exceeded in any 24-hour window over a simulated
// week (the tier's clock injected, no sleeping), refuses writes naming
// itself, and gives up a retry it cannot pay for.
#define BOOST_TEST_MODULE ssd_admission
#include "tests/ssd/ssd_fixture.hpp"

#include <deque>
#include <random>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

/// `n` tokens whose first `lead` are 1..lead and the rest `salt`-shifted.
token_seq turn(size_t n, size_t lead, token salt) {
  auto t = tokens(n);
  for (size_t i = lead; i < n; ++i)
    t[i] += salt;
  return t;
}

bool mentions(const caf::error& err, const std::string& word) {
  return describe(err).find(word) != std::string::npos;
}

constexpr uint64_t ms_ns = 1'000'000;
constexpr uint64_t hour_ms = 3'600'000;

} // namespace

BOOST_AUTO_TEST_CASE(all_admits_every_spill) {
  spill_admission a{admission_rule::all, 4};
  for (int i = 0; i < 10; ++i)
    BOOST_TEST(a.admit("ns", tokens(20, static_cast<token>(i * 100))));
  BOOST_TEST(a.remembered() == 0u);
}

BOOST_AUTO_TEST_CASE(reused_skips_a_key_seen_once_and_writes_it_again) {
  spill_admission a{admission_rule::reused, 16};
  auto lead = spill_admission::lead_tokens;
  // A conversation's first eviction: skipped, remembered.
  BOOST_TEST(!a.admit("chat", turn(lead + 10, lead, 0)));
  // Its next turn (same leading tokens, another tail): written.
  BOOST_TEST(a.admit("chat", turn(lead + 40, lead, 7)));
  // The same tokens in another namespace are another key.
  BOOST_TEST(!a.admit("other", turn(lead + 10, lead, 0)));
  // A short key is all its tokens: a longer one sharing them is another.
  BOOST_TEST(!a.admit("chat", tokens(30)));
  BOOST_TEST(!a.admit("chat", tokens(31)));
  BOOST_TEST(a.admit("chat", tokens(30)));
  BOOST_TEST(a.remembered() == 4u);
}

BOOST_AUTO_TEST_CASE(the_memory_is_bounded_least_recently_asked_first_out) {
  spill_admission a{admission_rule::reused, 4};
  for (token k = 0; k < 100; ++k) {
    BOOST_TEST(!a.admit("ns", tokens(8, k * 1000)));
    BOOST_TEST(a.remembered() <= 4u);
  }
  BOOST_TEST(a.remembered() == 4u);
  // The newest four are remembered, the older forgotten.
  BOOST_TEST(a.admit("ns", tokens(8, 99 * 1000)));
  BOOST_TEST(a.admit("ns", tokens(8, 96 * 1000)));
  BOOST_TEST(!a.admit("ns", tokens(8, 95 * 1000)));
  // Asking again made 96 the most recently asked: 97 went for 95, not 96.
  BOOST_TEST(a.admit("ns", tokens(8, 96 * 1000)));
  BOOST_TEST(!a.admit("ns", tokens(8, 97 * 1000)));
  BOOST_TEST(spill_admission::memory_for(1ull << 20) == 1024u);
  BOOST_TEST(spill_admission::memory_for(16ull << 30) == 262144u);
  BOOST_TEST(spill_admission::memory_for(1ull << 50) == (4u << 20));
}

BOOST_AUTO_TEST_CASE(the_budget_is_never_exceeded_in_any_day_of_a_week) {
  // Random writes for seven simulated days, in bursts and lulls: every
  // 24-hour window ending at a granted write (the windows whose sums are
  // largest) holds at most the budget, and the budget is used (writes are
  // granted again once old ones leave the window).
  const uint64_t limit = 10'000'000;
  write_budget b{limit};
  std::mt19937_64 rng{42};
  std::deque<std::pair<uint64_t, uint64_t>> granted; // (ms, bytes)
  uint64_t window = 0, refused = 0, total = 0, now = 5 * hour_ms;
  uint64_t most = 0;
  while (now < 7 * 24 * hour_ms) {
    now += rng() % 3 == 0 ? rng() % (2 * hour_ms) : rng() % 20'000;
    uint64_t bytes = 1 + rng() % 400'000;
    if (!b.charge(bytes, now)) {
      ++refused;
      continue;
    }
    granted.emplace_back(now, bytes);
    window += bytes;
    total += bytes;
    while (granted.front().first + write_budget::day_ms <= now) {
      window -= granted.front().second;
      granted.pop_front();
    }
    BOOST_REQUIRE(window <= limit);
    most = std::max(most, window);
    BOOST_REQUIRE(b.used(now) >= window); // it over-counts, never under
  }
  BOOST_TEST(refused > 0u);
  BOOST_TEST(total > 5 * limit); // about a budget a day was granted
  BOOST_TEST(most > limit * 9 / 10);
}

BOOST_AUTO_TEST_CASE(
  the_budget_frees_a_day_after_and_ignores_a_clock_stepping_back) {
  write_budget b{1000};
  uint64_t t0 = 1'000 * write_budget::day_ms + 30'000; // mid-minute
  BOOST_TEST(b.charge(1000, t0));
  BOOST_TEST(!b.charge(1, t0 + 1));
  BOOST_TEST(!b.charge(1, t0 - hour_ms)); // stepped back: still today
  BOOST_TEST(!b.charge(1, t0 + write_budget::day_ms)); // its minute counts
  BOOST_TEST(b.used(t0 + write_budget::day_ms) == 1000u);
  BOOST_TEST(b.used(t0 + write_budget::day_ms + 60'000) == 0u);
  BOOST_TEST(b.charge(1000, t0 + write_budget::day_ms + 60'000));
  BOOST_TEST(!b.charge(1001, t0 + 30 * write_budget::day_ms)); // > budget
  write_budget none{0};
  BOOST_TEST(none.charge(1ull << 60, 0));
  BOOST_TEST(none.used(0) == 0u);
}

BOOST_AUTO_TEST_CASE(the_tier_skips_a_spill_seen_once_and_writes_the_rest) {
  backend b{fs_kind::memory, engine_choice::threads};
  runtime::oracle_engine o{every_kind(), 40};
  ssd_config cfg;
  cfg.admission = admission_rule::reused;
  world w{b, "/adm", cfg};
  auto first = o.prefill("chat", tokens(30));
  auto r = w.tier->enqueue(first, write_reason::spill);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == ec::cancelled));
  BOOST_TEST(mentions(r.error(), "ssd-tier.admission"));
  auto s = w.tier->stats();
  BOOST_TEST(s.admission_skipped == 1u);
  BOOST_TEST(
    s.admission_skipped_bytes
    == layout(first, w.tier->fingerprint(), cfg.alignment, cfg.checksum_chunk)
         .file_length);
  // The same key spilled again is written; a snapshot or a demotion of a
  // key never spilled is written whatever the rule.
  BOOST_TEST(static_cast<bool>(w.tier->enqueue(first, write_reason::spill)));
  auto kept = o.prefill("chat", tokens(12, 500));
  BOOST_TEST(static_cast<bool>(w.tier->enqueue(kept, write_reason::snapshot)));
  auto idle = o.prefill("chat", tokens(14, 900));
  BOOST_TEST(static_cast<bool>(w.tier->enqueue(idle, write_reason::demotion)));
  BOOST_TEST(w.flush().durable);
  BOOST_TEST(w.tier->contains("chat", first.tokens));
  BOOST_TEST(w.tier->contains("chat", kept.tokens));
  BOOST_TEST(w.tier->contains("chat", idle.tokens));
  BOOST_TEST(w.tier->stats().writes_ok == 3u);
  BOOST_TEST(w.tier->stats().admission_skipped == 1u);
}

BOOST_AUTO_TEST_CASE(the_tier_refuses_writes_over_its_budget_by_its_clock) {
  backend b{fs_kind::memory, engine_choice::threads};
  runtime::oracle_engine o{every_kind(), 40};
  const uint64_t t0 = 20'000 * write_budget::day_ms;
  uint64_t now_ms = t0;
  ssd_config cfg;
  cfg.clock = [&] { return now_ms * ms_ns; };
  auto one = o.prefill("ns", tokens(20));
  auto file = layout(one, "default", cfg.alignment, cfg.checksum_chunk);
  cfg.write_budget_bytes_per_day = 3 * file.file_length + 10;
  world w{b, "/budget", cfg};
  // Three files fit a day; the fourth is refused, naming the budget.
  for (token i = 0; i < 3; ++i, now_ms += hour_ms)
    BOOST_REQUIRE(w.tier->enqueue(o.prefill("ns", tokens(20, 100 * (i + 1))),
                                  write_reason::snapshot));
  auto r =
    w.tier->enqueue(o.prefill("ns", tokens(20, 900)), write_reason::spill);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == ec::over_budget));
  BOOST_TEST(mentions(r.error(), "ssd-tier.write-budget-bytes-per-day"));
  BOOST_TEST(w.flush().durable);
  auto s = w.tier->stats();
  BOOST_TEST(s.writes_ok == 3u);
  BOOST_TEST(s.budget_refused == 1u);
  BOOST_TEST(s.budget_used_bytes == 3 * file.file_length);
  BOOST_TEST(s.budget_bytes_per_day == cfg.write_budget_bytes_per_day);
  BOOST_TEST(s.bytes_written <= cfg.write_budget_bytes_per_day);
  // A day after the first write it still counts (its minute counts
  // whole); a minute later it has left the window and one fits again.
  now_ms = t0 + write_budget::day_ms;
  BOOST_TEST(
    !w.tier->enqueue(o.prefill("ns", tokens(20, 901)), write_reason::spill));
  now_ms = t0 + write_budget::day_ms + write_budget::minute_ms;
  BOOST_TEST(static_cast<bool>(
    w.tier->enqueue(o.prefill("ns", tokens(20, 902)), write_reason::spill)));
  BOOST_TEST(w.flush().durable);
  BOOST_TEST(w.tier->stats().budget_refused == 2u);
}

BOOST_AUTO_TEST_CASE(a_retry_over_the_budget_is_given_up_naming_it) {
  // Every write fails once; its retry is charged again and, over the
  // budget, given up (reported with the budget's error), never written.
  runtime::oracle_engine o{every_kind(), 40};
  uint64_t now_ms = 30'000 * write_budget::day_ms;
  memory_file_system mem;
  faulty_file_system faulty{mem};
  ssd_config cfg;
  cfg.clock = [&] { return now_ms * ms_ns; };
  auto e = o.prefill("ns", tokens(20));
  auto file = layout(e, "default", cfg.alignment, cfg.checksum_chunk);
  cfg.write_budget_bytes_per_day = file.file_length + file.file_length / 2;
  std::vector<write_event> events;
  cfg.on_write = [&](const write_event& ev) { events.push_back(ev); };
  world w{{fs_kind::memory, engine_choice::threads}, "/retry", cfg, &faulty};
  faulty.inject(fs_op::sync, 1, fault_kind::eio);
  auto id = w.tier->enqueue(e, write_reason::snapshot);
  BOOST_REQUIRE(id);
  drive(*w.tier, w.queue);
  BOOST_REQUIRE(!events.empty());
  BOOST_TEST((events.back().outcome == write_outcome::failed));
  BOOST_TEST(!w.tier->retry(*id));
  BOOST_TEST((events.back().outcome == write_outcome::given_up));
  BOOST_TEST((events.back().err == ec::over_budget));
  auto s = w.tier->stats();
  BOOST_TEST(s.budget_refused == 1u);
  BOOST_TEST(s.writes_given_up == 1u);
  BOOST_TEST(!w.tier->contains("ns", e.tokens));
  auto ev = w.flush();
  BOOST_TEST(!ev.durable);
  BOOST_TEST(ev.given_up == 1u);
}
