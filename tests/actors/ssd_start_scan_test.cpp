// The SSD actor's start-up scan (docs/ssd-format.md "Start-up"), message
// by message on CAF's deterministic scheduler: a tier opened without
// `index_at_open` over files an earlier tier wrote, spawned with one file
// per batch. Requests queued behind the first batch are answered from the
// files indexed so far (misses, never a wrong key) while the scan has not
// ended, and the report says so; once the mailbox drained, every file is
// indexed and found.
#define BOOST_TEST_MODULE actors_ssd_start_scan
#include "actors/tier_counters.hpp"
#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/ssd_tier_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/memory_file_system.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

namespace ssd = tiers::ssd;

constexpr size_t files = 12;

tiers::token_seq seq(size_t i) {
  tiers::token_seq t(20);
  for (size_t k = 0; k < t.size(); ++k)
    t[k] = static_cast<tiers::token>(1000 * (i + 1) + k);
  return t;
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  ssd::memory_file_system mem;
  ssd::ssd_config cfg;
  actors::ssd_tier_actor ssd;

  fixture() {
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    cfg.log = [](const std::string&) {};
    write_files();
    auto bg = cfg;
    bg.index_at_open = false;
    auto parts = testing::inline_ssd(bg, &mem);
    parts->index_batch = 1;
    ssd = sys.spawn(actors::ssd_tier, parts);
  }

  /// `files` entries made durable by a tier of their own (threads engine).
  void write_files() {
    ssd::completion_queue q;
    auto engine = ssd::make_io_engine(ssd::engine_choice::threads, q.sink());
    BOOST_REQUIRE(engine);
    ssd::ssd_tier tier{cfg, mem, **engine};
    BOOST_REQUIRE(tier.open());
    for (size_t i = 0; i < files; ++i)
      BOOST_REQUIRE(
        tier.enqueue(oracle.prefill("ns", seq(i)), ssd::write_reason::spill));
    std::optional<bool> durable;
    tier.flush(
      [&](const ssd::durability_evidence& ev) { durable = ev.durable; });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (!durable || tier.busy()) {
      for (auto& c : q.wait(std::chrono::milliseconds(20)))
        tier.handle(std::move(c));
      BOOST_REQUIRE(std::chrono::steady_clock::now() < deadline);
    }
    BOOST_REQUIRE(*durable);
  }

  void ask(size_t i) {
    msg::draft<msg::FindPrefix> f;
    f.root().setNs("ns");
    auto prompt = seq(i);
    prompt.push_back(7); // a prompt one token past the key
    tiers::write_tokens(f.root().initPrompt(prompt.size()), prompt);
    self->send(ssd, std::move(f).seal());
  }

  /// Each reply: a miss, or entry i's whole key. Returns the hits.
  size_t answers() {
    size_t hits = 0;
    for (size_t i = 0; i < files; ++i)
      self->receive([&](const sealed<msg::FindPrefixReply>& r) {
        if (r.root().getUsableTokens() == 0)
          return;
        ++hits;
        BOOST_TEST(r.root().getUsableTokens() == 20u);
        auto key = tiers::read_key(r.root().getKey());
        BOOST_TEST(key.tokens == seq(i));
      });
    return hits;
  }

  tiers::report::ssd report() {
    tiers::report::ssd out;
    self->receive([&](const sealed<msg::ReadReportReply>& r) {
      out = actors::read_part<tiers::report::ssd>(r.root());
    });
    return out;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(start_scan, fixture)

BOOST_AUTO_TEST_CASE(requests_are_answered_while_the_scan_runs) {
  for (size_t i = 0; i < files; ++i)
    ask(i);
  self->send(ssd, msg::draft<msg::ReadReport>{}.seal());
  drain();
  // At most one name was scanned before these requests ran.
  BOOST_TEST(answers() <= 1u);
  auto during = report();
  BOOST_TEST(during.indexing == 1u);
  BOOST_TEST(during.index_files <= 1u);
  BOOST_TEST(during.index_seconds == 0u);
  // The mailbox drained: the scan ran to its end behind them.
  for (size_t i = 0; i < files; ++i)
    ask(i);
  self->send(ssd, msg::draft<msg::ReadReport>{}.seal());
  drain();
  BOOST_TEST(answers() == files);
  auto after = report();
  BOOST_TEST(after.indexing == 0u);
  BOOST_TEST(after.index_files == files);
  BOOST_TEST(after.files == files);
}

BOOST_AUTO_TEST_SUITE_END()
