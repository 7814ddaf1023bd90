// The SSD actor's start-up scan (docs/ssd-format.md "Start-up"), message
// by message on CAF's deterministic scheduler: a tier opened without
// `index_at_open` over files an earlier tier wrote, spawned with one file
// per batch. Requests queued behind the first batch are answered from the
// files indexed so far (misses, never a wrong key) while the scan has not
// ended, and the report says so; once the mailbox drained, every file is
// indexed and found. Checkpoint files the scan reaches while serving reach
// the checkpoints actor, attached before the scan or after it, and every
// one resumes its request.
#define BOOST_TEST_MODULE actors_ssd_start_scan
#include "actors/tier_counters.hpp"
#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/checkpoints_actor.hpp"
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

namespace {

/// `n` checkpoint files (requests 1..n, attempt 0, 30 tokens each) made
/// durable by a tier of their own, then the SSD actor over them, opened
/// without `index_at_open` and, as runtime/service/spawn.cpp does, with
/// the first `first` names indexed before it serves (`saved`: their
/// checkpoint files); one name per batch after that.
struct checkpoint_fixture : kvtier::testing::kvtier_fixture<> {
  static constexpr size_t n = 9;
  static constexpr size_t first = 2;
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  ssd::memory_file_system mem;
  ssd::ssd_config cfg;
  actors::ssd_tier_actor ssd;
  actors::checkpoints_actor ckpt;
  std::vector<tiers::checkpoint_file> saved;

  static tiers::token_seq tokens(uint64_t request) {
    tiers::token_seq t(30);
    for (size_t k = 0; k < t.size(); ++k)
      t[k] = static_cast<tiers::token>(100 * request + k);
    return t;
  }

  checkpoint_fixture() {
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    cfg.log = [](const std::string&) {};
    ssd::completion_queue q;
    auto engine = ssd::make_io_engine(ssd::engine_choice::threads, q.sink());
    BOOST_REQUIRE(engine);
    {
      ssd::ssd_tier tier{cfg, mem, **engine};
      BOOST_REQUIRE(tier.open());
      for (uint64_t r = 1; r <= n; ++r)
        BOOST_REQUIRE(tier.enqueue(
          oracle.prefill("ns", tokens(r)), ssd::write_reason::checkpoint,
          tiers::storage_key::checkpoint(r, 0, "ns", tokens(r))));
      std::optional<bool> durable;
      tier.flush(
        [&](const ssd::durability_evidence& ev) { durable = ev.durable; });
      auto deadline =
        std::chrono::steady_clock::now() + std::chrono::minutes(2);
      while (!durable || tier.busy()) {
        for (auto& c : q.wait(std::chrono::milliseconds(20)))
          tier.handle(std::move(c));
        BOOST_REQUIRE(std::chrono::steady_clock::now() < deadline);
      }
      BOOST_REQUIRE(*durable);
    }
    auto bg = cfg;
    bg.index_at_open = false;
    auto parts = testing::inline_ssd(bg, &mem);
    parts->index_batch = 1;
    BOOST_REQUIRE(!parts->tier->index_step(first));
    saved = parts->tier->checkpoint_files();
    ssd = sys.spawn(actors::ssd_tier, parts);
  }

  void attach() {
    ckpt =
      sys.spawn(actors::checkpoints, uint64_t{16}, ssd, saved, uint64_t{10000});
    self->send(ssd, actors::attach_ckpt_atom::value,
               actors::spill_listener_actor{ckpt});
  }

  /// Whether request `r` resumes its checkpoint (read from SSD, whole).
  bool resumes(uint64_t r) {
    msg::draft<msg::FindCheckpoint> d;
    d.root().initRequest().setId(r);
    d.root().getRequest().setNs("ns");
    auto prompt = tokens(r);
    prompt.resize(10);
    tiers::write_tokens(d.root().getRequest().initPrompt(prompt.size()),
                        prompt);
    self->send(ckpt, std::move(d).seal());
    drain();
    bool found = false;
    self->receive([&](const sealed<msg::FindCheckpointReply>& m) {
      if (!m.root().isEntry())
        return;
      auto e = tiers::read_entry(m, m.root().getEntry());
      BOOST_REQUIRE(e);
      BOOST_TEST(!oracle.verify_served(*e, "ns", prompt, true));
      BOOST_TEST(e->tokens == tokens(r));
      found = m.root().getFromSsd();
    });
    return found;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(checkpoints_found_late, checkpoint_fixture)

BOOST_AUTO_TEST_CASE(reach_the_checkpoints_actor_attached_before_the_scan) {
  BOOST_TEST(saved.size() <= first); // the rest is the actor's to find
  attach();
  drain(); // the scan runs to its end, the checkpoints actor attached
  for (uint64_t r = 1; r <= n; ++r)
    BOOST_TEST(resumes(r), "request " << r);
}

BOOST_AUTO_TEST_CASE(reach_the_checkpoints_actor_attached_after_the_scan) {
  drain(); // the whole scan before the attach: kept, sent at the attach
  attach();
  drain();
  for (uint64_t r = 1; r <= n; ++r)
    BOOST_TEST(resumes(r), "request " << r);
}

BOOST_AUTO_TEST_SUITE_END()
