// The facade's lookup over N cold tiers, on CAF's deterministic scheduler:
// a real RAM tier actor and three scripted cold tiers (answering
// FindPrefix, RestoreEntry, PrefetchPrefix and ReleasePrefetch from a map
// of oracle states), one of which may be silent, fail its restores, or
// die. Every state served is checked byte for byte with the oracle.
#define BOOST_TEST_MODULE actors_cold_tiers
#include "tests/caf_bridge.hpp"

#include "actors/cache_service.hpp"
#include "actors/ram_tier_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"

#include <map>

using namespace kvtier;
using actors::sealed;

namespace {

const auto geometry = *tiers::model_geometry::preset("tiny-dense");

tiers::token_seq seq(size_t n) {
  tiers::token_seq t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<tiers::token>(i + 1);
  return t;
}

/// What a scripted cold tier holds and how it behaves; the test reads the
/// counters.
struct script {
  std::map<size_t, tiers::entry> held; // by tokens, all prefixes of seq()
  bool silent = false;                 // never answers
  bool fail_restores = false;          // answers every restore `failed`
  bool silent_restores = false;        // answers finds, never restores
  int finds = 0, restores = 0, prefetches = 0;
  /// Background messages handled, and how many of them before a find.
  int noise = 0, noise_before_find = -1;
  uint64_t next_lease = 100;
  std::vector<uint64_t> released;
  std::vector<caf::response_promise> never; // kept: no answer ever comes

  /// The longest entry that is a strict prefix of `prompt`, longer than
  /// `better_than`.
  const tiers::entry* best(const tiers::token_seq& prompt,
                           uint64_t better_than) const {
    const tiers::entry* out = nullptr;
    for (auto& [n, e] : held)
      if (n < prompt.size() && n > better_than
          && std::equal(e.tokens.begin(), e.tokens.end(), prompt.begin()))
        out = &e;
    return out;
  }
};

caf::behavior scripted_tier(caf::event_based_actor* self,
                            std::shared_ptr<script> sc) {
  auto hold = [self, sc](bool also = false) -> bool {
    if (!sc->silent && !also)
      return false;
    sc->never.push_back(self->make_response_promise());
    return true;
  };
  return {
    [sc](int) { ++sc->noise; }, // background work (spill orders, I/O)
    [sc, hold](const sealed<msg::FindPrefix>& m)
      -> caf::result<sealed<msg::FindPrefixReply>> {
      ++sc->finds;
      if (sc->noise_before_find < 0)
        sc->noise_before_find = sc->noise;
      if (hold())
        return caf::delegated<sealed<msg::FindPrefixReply>>{};
      auto e = sc->best(tiers::read_tokens(m.root().getPrompt()),
                        m.root().getBetterThan());
      msg::draft<msg::FindPrefixReply> d;
      if (e) {
        d.root().setUsableTokens(e->size());
        tiers::write_key(d.root().initKey(), e->ns, e->tokens);
      }
      return std::move(d).seal();
    },
    [sc, hold](const sealed<msg::RestoreEntry>& m)
      -> caf::result<sealed<msg::RestoreEntryReply>> {
      ++sc->restores;
      if (hold(sc->silent_restores))
        return caf::delegated<sealed<msg::RestoreEntryReply>>{};
      msg::draft<msg::RestoreEntryReply> d;
      auto key = tiers::read_key(m.root().getKey());
      auto i = sc->held.find(key.tokens.size());
      if (sc->fail_restores || i == sc->held.end())
        d.root().initFailed().setContext("scripted failure");
      else
        tiers::write_entry(d, d.root().initEntry(), i->second);
      return std::move(d).seal();
    },
    [sc, hold](const sealed<msg::PrefetchPrefix>& m)
      -> caf::result<sealed<msg::PrefetchPrefixReply>> {
      ++sc->prefetches;
      if (hold())
        return caf::delegated<sealed<msg::PrefetchPrefixReply>>{};
      auto e = sc->best(tiers::read_tokens(m.root().getPrompt()),
                        m.root().getBetterThan());
      msg::draft<msg::PrefetchPrefixReply> d;
      if (e) {
        d.root().setLeaseId(sc->next_lease++);
        d.root().setReadsStarted(1);
        d.root().setTokens(e->size());
        tiers::write_entry(d, d.root().initEntry(), *e);
      }
      return std::move(d).seal();
    },
    [sc](const sealed<msg::ReleasePrefetch>& m) {
      sc->released.push_back(m.root().getLeaseId());
      msg::draft<msg::ReleasePrefetchReply> d;
      d.root().setReleased(true);
      return std::move(d).seal();
    },
  };
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{geometry};
  actors::ram_tier_actor ram = sys.spawn(
    actors::ram_tier, actors::ram_tier_config{uint64_t{1} << 20, true},
    actors::ssd_tier_actor{}, nullptr);
  std::vector<std::shared_ptr<script>> scripts;
  std::vector<caf::actor> doubles;
  actors::cache_service_actor facade;
  /// The facade's wait for the cold tiers after a RAM hit.
  uint64_t cold_wait_ms = 100;

  ~fixture() {
    // A kept promise holds its actor: let the silent ones go.
    for (auto& sc : scripts)
      sc->never.clear();
  }

  /// Three cold tiers (ssd, then two peers) holding prefixes of these
  /// lengths (0: nothing), and a facade over RAM and them.
  void start(std::vector<std::vector<size_t>> lengths) {
    actors::service_actors t;
    t.ram = ram;
    const msg::Tier tags[] = {msg::Tier::SSD, msg::Tier::PEER, msg::Tier::PEER};
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto sc = std::make_shared<script>();
      for (auto n : lengths[i])
        sc->held.emplace(n, oracle.prefill("ns", seq(n)));
      scripts.push_back(sc);
      doubles.push_back(sys.spawn(scripted_tier, sc));
      t.cold.push_back({caf::actor_cast<actors::cold_tier_actor>(doubles[i]),
                        tags[i], "tier-" + std::to_string(i)});
    }
    facade =
      sys.spawn(actors::cache_service, t, geometry, false, uint64_t{0}, true,
                uint64_t{10000}, cold_wait_ms, tiers::route_costs{},
                std::shared_ptr<tiers::latency_book>{});
    drain();
  }

  void publish_to_ram(size_t n) {
    msg::draft<msg::PublishState> d;
    tiers::write_entry(d, d.root().initEntry(), oracle.prefill("ns", seq(n)));
    self->send(ram, std::move(d).seal());
    drain();
    self->receive([](const sealed<msg::PublishStateReply>&) {});
  }

  /// Sends an acquire of a 40-token prompt; the request's words, watched
  /// (whoever still holds the request keeps them).
  std::weak_ptr<const kvtier::buffer> send_acquire() {
    msg::draft<msg::AcquireState> d;
    auto q = d.root().initRequest();
    q.setId(7);
    q.setNs("ns");
    auto prompt = seq(40);
    tiers::write_tokens(q.initPrompt(prompt.size()), prompt);
    auto m = std::move(d).seal();
    std::weak_ptr<const kvtier::buffer> words = m.words();
    self->send(facade, std::move(m));
    return words;
  }

  /// Acquires a 40-token prompt: the source and the served tokens, each
  /// state checked byte for byte.
  std::pair<msg::Tier, uint64_t> acquire() {
    send_acquire();
    drain();
    return answer();
  }

  /// The acquire's answer waiting for this test (fails without one).
  std::pair<msg::Tier, uint64_t> answer() {
    auto prompt = seq(40);
    std::pair<msg::Tier, uint64_t> out{msg::Tier::NONE, 0};
    self->receive(
      [&](const sealed<msg::AcquireStateReply>& r) {
        out = {r.root().getSource(), r.root().getUsableTokens()};
        if (out.first != msg::Tier::NONE) {
          auto e = tiers::read_entry(r, r.root().getEntry());
          BOOST_REQUIRE(e);
          BOOST_CHECK(!oracle.verify_served(*e, "ns", prompt, false));
          BOOST_CHECK_EQUAL(e->size(), out.second);
        }
      },
      [](const caf::error& err) { BOOST_FAIL(describe(err)); },
      caf::after(std::chrono::seconds(0)) >> [] { BOOST_FAIL("no answer"); });
    return out;
  }

  sealed<msg::ReadReportReply> report() {
    self->send(facade, msg::draft<msg::ReadReport>{}.seal());
    drain();
    std::optional<sealed<msg::ReadReportReply>> out;
    self->receive([&](const sealed<msg::ReadReportReply>& r) { out = r; },
                  caf::after(std::chrono::seconds(0)) >>
                    [] { BOOST_FAIL("no report"); });
    return *out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(cold_tiers, fixture)

BOOST_AUTO_TEST_CASE(
  the_longest_of_three_cold_tiers_wins_when_strictly_longer) {
  start({{20}, {25}, {30}});
  publish_to_ram(10);
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::PEER);
  BOOST_CHECK_EQUAL(tokens, 30u);
  // Every tier was asked; only the winner read anything.
  for (auto& sc : scripts)
    BOOST_CHECK_EQUAL(sc->finds, 1);
  BOOST_CHECK_EQUAL(scripts[0]->restores + scripts[1]->restores, 0);
  BOOST_CHECK_EQUAL(scripts[2]->restores, 1);
  // Installed in RAM: the next acquire is served from there.
  BOOST_CHECK(acquire().first == msg::Tier::RAM);
}

BOOST_AUTO_TEST_CASE(an_equal_length_never_beats_an_earlier_tier) {
  start({{20}, {20}, {20}});
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::SSD);
  BOOST_CHECK_EQUAL(tokens, 20u);
  BOOST_CHECK_EQUAL(scripts[0]->restores, 1);
  BOOST_CHECK_EQUAL(scripts[1]->restores + scripts[2]->restores, 0);
}

BOOST_AUTO_TEST_CASE(ram_keeps_a_tie_with_every_cold_tier) {
  start({{20}, {20}, {}});
  publish_to_ram(20);
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::RAM);
  BOOST_CHECK_EQUAL(tokens, 20u);
  for (auto& sc : scripts)
    BOOST_CHECK_EQUAL(sc->restores, 0);
}

BOOST_AUTO_TEST_CASE(a_silent_tier_is_no_candidate_and_the_acquire_answers) {
  start({{20}, {35}, {25}});
  scripts[1]->silent = true;
  // The silent tier's 35 is never seen: the third tier's 25 wins by the
  // deadline (drain fires the request timeouts).
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::PEER);
  BOOST_CHECK_EQUAL(tokens, 25u);
  BOOST_CHECK_EQUAL(scripts[1]->finds, 1);
  BOOST_CHECK_EQUAL(scripts[2]->restores, 1);
  // Silence is not death: the tier stays in the list.
  BOOST_CHECK_EQUAL(report().root().getColdTiers(), 3u);
  BOOST_CHECK_EQUAL(report().root().getDeadTiers(), 0u);
}

BOOST_AUTO_TEST_CASE(a_ram_hit_waits_for_a_silent_cold_tier_only_briefly) {
  start({{35}});
  scripts[0]->silent = true; // e.g. busy with a write backlog
  publish_to_ram(20);
  send_acquire();
  sched.run();
  BOOST_CHECK(!self->has_next_message()); // the cold tier may answer yet
  sched.advance_time(std::chrono::milliseconds{cold_wait_ms - 1});
  sched.run();
  BOOST_CHECK(!self->has_next_message());
  // Then RAM's hit is served (not at the 5 s tier deadline), counted.
  sched.advance_time(std::chrono::milliseconds{1});
  sched.run();
  BOOST_REQUIRE(self->has_next_message());
  auto [source, tokens] = answer();
  BOOST_CHECK(source == msg::Tier::RAM);
  BOOST_CHECK_EQUAL(tokens, 20u);
  BOOST_CHECK_EQUAL(report().root().getColdLate(), 1u);
  // A tier that answers in time is waited for and wins as before.
  scripts[0]->silent = false;
  auto [later, n] = acquire();
  BOOST_CHECK(later == msg::Tier::SSD);
  BOOST_CHECK_EQUAL(n, 35u);
  BOOST_CHECK_EQUAL(report().root().getColdLate(), 1u);
}

BOOST_AUTO_TEST_CASE(ram_hits_arm_no_timer_per_acquire) {
  start({{20}});
  publish_to_ram(30);
  auto timers = [&] { return sched.clock().schedule().size(); };
  auto before = timers();
  for (int i = 0; i < 20; ++i) {
    send_acquire();
    sched.run(); // no time passes: each hit waits for the cold tier
    BOOST_CHECK(answer().first == msg::Tier::RAM);
  }
  // Each hit's tier deadline and cold wait are served by the facade's one
  // timer (armed for the first lookup's deadline, then again for its
  // earlier cold wait); its two requests (RAM, the cold tier) carry no
  // CAF timeout (the facade's deadline releases them). A delayed
  // cold-wait message or a request timeout per hit would add one or two
  // per hit.
  BOOST_CHECK_LE(timers(), before + 2);
  BOOST_CHECK_EQUAL(report().root().getColdLate(), 0u);
}

BOOST_AUTO_TEST_CASE(a_stalled_cold_tier_leaves_no_lookup_past_the_deadline) {
  start({{35}});
  scripts[0]->silent = true; // alive, never answers
  publish_to_ram(20);
  std::vector<std::weak_ptr<const kvtier::buffer>> requests;
  for (int i = 0; i < 5; ++i)
    requests.push_back(send_acquire());
  sched.run();
  sched.advance_time(std::chrono::milliseconds{cold_wait_ms});
  sched.run();
  for (int i = 0; i < 5; ++i)
    BOOST_CHECK(answer().first == msg::Tier::RAM);
  // Served, but each lookup's find still waits for the silent tier: its
  // response handler holds the lookup (and the engine's request).
  for (auto& w : requests)
    BOOST_CHECK(!w.expired());
  // The tier deadline answers those finds with a timeout: every handler,
  // and with them the lookups, are gone.
  drain();
  for (auto& w : requests)
    BOOST_CHECK(w.expired());
  BOOST_CHECK_EQUAL(scripts[0]->finds, 5);
}

BOOST_AUTO_TEST_CASE(a_ram_miss_waits_for_the_cold_tiers_until_the_deadline) {
  start({{35}});
  scripts[0]->silent = true;
  send_acquire();
  sched.run();
  sched.advance_time(std::chrono::milliseconds{1000});
  sched.run();
  BOOST_CHECK(!self->has_next_message()); // no RAM hit: no short wait
  drain();                                // the tier deadline
  BOOST_CHECK(answer().first == msg::Tier::NONE);
  BOOST_CHECK_EQUAL(report().root().getColdLate(), 0u);
}

BOOST_AUTO_TEST_CASE(lookups_pass_the_background_work_queued_at_a_tier) {
  start({{30}});
  publish_to_ram(10);
  // The acquire first, then a backlog at the cold tier: the find the
  // facade sends it lands behind that backlog, and is handled first.
  send_acquire();
  for (int i = 0; i < 200; ++i)
    self->send(doubles[0], i);
  drain();
  BOOST_CHECK_EQUAL(scripts[0]->noise, 200);
  BOOST_CHECK_EQUAL(scripts[0]->noise_before_find, 0);
  auto [source, tokens] = answer();
  BOOST_CHECK(source == msg::Tier::SSD);
  BOOST_CHECK_EQUAL(tokens, 30u);
}

BOOST_AUTO_TEST_CASE(a_dead_tier_is_dropped_counted_and_never_asked_again) {
  start({{20}, {25}, {30}});
  caf::anon_send_exit(doubles[2], caf::exit_reason::kill);
  drain();
  auto r = report();
  BOOST_CHECK_EQUAL(r.root().getDeadTiers(), 1u);
  BOOST_CHECK_EQUAL(r.root().getColdTiers(), 2u);
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::PEER);
  BOOST_CHECK_EQUAL(tokens, 25u);
  BOOST_CHECK_EQUAL(scripts[2]->finds, 0);
  // Counted once, however often it is looked up.
  acquire();
  BOOST_CHECK_EQUAL(report().root().getDeadTiers(), 1u);
}

BOOST_AUTO_TEST_CASE(a_failed_restore_falls_back_to_the_candidate_it_beat) {
  start({{20}, {25}, {30}});
  scripts[2]->fail_restores = true;
  auto [source, tokens] = acquire();
  BOOST_CHECK_EQUAL(tokens, 25u);
  BOOST_CHECK(source == msg::Tier::PEER);
  BOOST_CHECK_EQUAL(scripts[2]->restores, 1);
  BOOST_CHECK_EQUAL(scripts[1]->restores, 1);
  BOOST_CHECK_EQUAL(scripts[0]->restores, 0);
}

BOOST_AUTO_TEST_CASE(a_silent_restore_falls_back_within_the_deadline) {
  start({{20}, {}, {30}});
  scripts[2]->silent_restores = true;
  auto [source, tokens] = acquire();
  BOOST_CHECK(source == msg::Tier::SSD);
  BOOST_CHECK_EQUAL(tokens, 20u);
  BOOST_CHECK_EQUAL(scripts[2]->restores, 1);
  BOOST_CHECK_EQUAL(scripts[0]->restores, 1);
}

BOOST_AUTO_TEST_CASE(a_silent_prefetch_passes_the_read_to_the_tier_it_beat) {
  start({{20}, {}, {30}});
  scripts[2]->held.clear(); // finds of the prefetch
  scripts[2]->silent = true;
  msg::draft<msg::PrefetchPrefix> d;
  d.root().setNs("ns");
  auto prompt = seq(40);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  self->send(facade, std::move(d).seal());
  drain();
  self->receive(
    [&](const sealed<msg::PrefetchPrefixReply>& r) {
      BOOST_CHECK_NE(r.root().getLeaseId(), 0u);
      BOOST_CHECK_EQUAL(r.root().getTokens(), 20u);
    },
    [](const caf::error& err) { BOOST_FAIL(describe(err)); });
  BOOST_CHECK_EQUAL(scripts[0]->prefetches, 1);
}

BOOST_AUTO_TEST_CASE(prefetch_reads_from_the_winner_under_a_facade_lease) {
  start({{20}, {30}, {25}});
  publish_to_ram(10);
  msg::draft<msg::PrefetchPrefix> d;
  d.root().setNs("ns");
  auto prompt = seq(40);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  self->send(facade, std::move(d).seal());
  drain();
  uint64_t lease = 0;
  self->receive(
    [&](const sealed<msg::PrefetchPrefixReply>& r) {
      lease = r.root().getLeaseId();
      BOOST_CHECK_EQUAL(r.root().getTokens(), 30u);
      BOOST_CHECK_EQUAL(r.root().getRamTokens(), 10u);
    },
    [](const caf::error& err) { BOOST_FAIL(describe(err)); });
  BOOST_CHECK_NE(lease, 0u);
  BOOST_CHECK_EQUAL(scripts[1]->prefetches, 1);
  BOOST_CHECK_EQUAL(scripts[0]->prefetches + scripts[2]->prefetches, 0);
  // The restored donor is in RAM now.
  BOOST_CHECK(acquire().first == msg::Tier::RAM);
  // The release reaches the tier that read, with its own lease.
  msg::draft<msg::ReleasePrefetch> rel;
  rel.root().setLeaseId(lease);
  self->send(facade, std::move(rel).seal());
  drain();
  self->receive([](const sealed<msg::ReleasePrefetchReply>& r) {
    BOOST_CHECK(r.root().getReleased());
  });
  BOOST_REQUIRE_EQUAL(scripts[1]->released.size(), 1u);
  BOOST_CHECK_EQUAL(scripts[1]->released[0], 100u);
}

BOOST_AUTO_TEST_CASE(prefetch_with_nothing_longer_than_ram_reads_nothing) {
  start({{20}, {20}, {}});
  publish_to_ram(20);
  msg::draft<msg::PrefetchPrefix> d;
  d.root().setNs("ns");
  auto prompt = seq(40);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  self->send(facade, std::move(d).seal());
  drain();
  self->receive([](const sealed<msg::PrefetchPrefixReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getLeaseId(), 0u);
    BOOST_CHECK_EQUAL(r.root().getRamTokens(), 20u);
  });
  for (auto& sc : scripts)
    BOOST_CHECK_EQUAL(sc->prefetches, 0);
}

BOOST_AUTO_TEST_CASE(a_stalled_ram_tier_fails_the_acquire_naming_it) {
  // A RAM tier that stays alive and never answers a lookup.
  auto never = std::make_shared<std::vector<caf::response_promise>>();
  auto silent = sys.spawn(
    [](caf::event_based_actor* self,
       std::shared_ptr<std::vector<caf::response_promise>> kept)
      -> caf::behavior {
      return {[self, kept](const sealed<msg::AcquireState>&)
                -> caf::result<sealed<msg::AcquireStateReply>> {
        kept->push_back(self->make_response_promise());
        return caf::delegated<sealed<msg::AcquireStateReply>>{};
      }};
    },
    never);
  ram = caf::actor_cast<actors::ram_tier_actor>(silent);
  start({{35}});
  auto request = send_acquire();
  drain(); // the tier deadline
  bool failed = false;
  self->receive(
    [](const sealed<msg::AcquireStateReply>&) {
      BOOST_FAIL("an answer without RAM's");
    },
    [&](const caf::error& err) {
      failed = true;
      BOOST_CHECK(err == ec::timeout);
      BOOST_CHECK_NE(describe(err).find("RAM tier"), std::string::npos);
    },
    caf::after(std::chrono::seconds(0)) >> [] { BOOST_FAIL("no answer"); });
  BOOST_CHECK(failed);
  BOOST_CHECK_EQUAL(never->size(), 1u);
  // Its request's handler was released with the lookup.
  BOOST_CHECK(request.expired());
  never->clear();
}

BOOST_AUTO_TEST_SUITE_END()
