// The RAM tier actor message by message on CAF's deterministic scheduler:
// evictions become spill orders to the SSD actor, a boundary sends none,
// idle demotion waits for the SSD's reply before the entry leaves. The SSD
// actor is a stand-in that records spill orders and answers "durable" (and
// that a file serves every prompt but its last token: an installed entry's
// durable claim is confirmed). tests/actors/ssd_evict_test.cpp runs the RAM
// actor against a real SSD actor.
#define BOOST_TEST_MODULE actors_ram_tier
#include "actors/tier_counters.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/ram_tier_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

/// Answers SpillEntry (a notify order, as the RAM actor sends them) with
/// `queued` and a SpillSettled "durable" event before it, FindPrefix with a
/// file of the prompt but its last token, and FlushState at once; counts
/// spills.
caf::behavior fake_ssd(caf::event_based_actor* self,
                       std::shared_ptr<int> spills) {
  return {
    [](const sealed<msg::FindPrefix>& m) {
      auto prompt = tiers::read_tokens(m.root().getPrompt());
      prompt.pop_back();
      msg::draft<msg::FindPrefixReply> d;
      d.root().setUsableTokens(prompt.size());
      tiers::write_key(d.root().initKey(), m.root().getNs().cStr(), prompt);
      return std::move(d).seal();
    },
    [self, spills](const sealed<msg::SpillEntry>& m) {
      ++*spills;
      BOOST_CHECK(m.root().getNotify());
      msg::draft<msg::SpillSettled> e;
      e.root().setOrderId(m.root().getOrderId());
      e.root().setOutcome(msg::SpillOutcome::DURABLE);
      self->send(
        caf::actor_cast<actors::ram_tier_actor>(self->current_sender()),
        std::move(e).seal());
      msg::draft<msg::SpillEntryReply> d;
      d.root().setOrderId(m.root().getOrderId());
      d.root().setOutcome(msg::SpillOutcome::QUEUED);
      return std::move(d).seal();
    },
    [](const sealed<msg::FlushState>&) {
      return msg::draft<msg::FlushStateReply>{}.seal();
    },
  };
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  std::shared_ptr<int> spills = std::make_shared<int>(0);
  caf::actor ssd_impl = sys.spawn(fake_ssd, spills);
  actors::ssd_tier_actor ssd =
    caf::actor_cast<actors::ssd_tier_actor>(ssd_impl);
  // 1 MiB: 4096 tokens of tiny-dense (256 bytes per token).
  actors::ram_tier_actor ram =
    sys.spawn(actors::ram_tier,
              actors::ram_tier_config{uint64_t{1} << 20, true}, ssd, nullptr);

  static tiers::token_seq seq(size_t n, tiers::token first) {
    tiers::token_seq t(n);
    for (size_t i = 0; i < n; ++i)
      t[i] = first + static_cast<tiers::token>(i);
    return t;
  }

  sealed<msg::PublishState> publish(size_t n, tiers::token first) {
    msg::draft<msg::PublishState> d;
    tiers::write_entry(d, d.root().initEntry(),
                       oracle.prefill("ns", seq(n, first)));
    return std::move(d).seal();
  }

  template <class Root>
  static sealed<Root> empty() {
    return msg::draft<Root>{}.seal();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ram_tier_actor, fixture)

BOOST_AUTO_TEST_CASE(eviction_over_the_cap_sends_a_spill_order) {
  self->send(ram, publish(3000, 1));
  expect((sealed<msg::PublishState>), from(self).to(ram));
  BOOST_CHECK_EQUAL(*spills, 0);
  self->send(ram, publish(3000, 100000)); // the first must leave
  expect((sealed<msg::PublishState>), from(self).to(ram));
  expect((sealed<msg::SpillEntry>), from(ram).to(ssd_impl));
  drain();
  BOOST_CHECK_EQUAL(*spills, 1);
}

BOOST_AUTO_TEST_CASE(a_boundary_sends_nothing_to_storage) {
  // A durable (restored) entry: the boundary may release it.
  msg::draft<msg::InstallEntry> d;
  tiers::write_entry(d, d.root().initEntry(),
                     oracle.prefill("ns", seq(100, 1)));
  d.root().setDurable(true);
  self->send(ram, std::move(d).seal());
  expect((sealed<msg::InstallEntry>), from(self).to(ram));
  drain();
  msg::draft<msg::ReclaimAtBoundary> b;
  b.root().setTargetBytes(UINT64_MAX);
  self->send(ram, std::move(b).seal());
  expect((sealed<msg::ReclaimAtBoundary>), from(self).to(ram));
  disallow((sealed<msg::SpillEntry>), from(ram).to(ssd_impl));
  disallow((sealed<msg::FlushState>), from(ram).to(ssd_impl));
  drain();
  BOOST_CHECK_EQUAL(*spills, 0);
  self->receive([](const sealed<msg::InstallEntryReply>&) {});
  self->receive([](const sealed<msg::ReclaimAtBoundaryReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getReleased(), 1u);
    BOOST_CHECK_EQUAL(r.root().getReleasedBytes(), 100u * 256);
  });
}

BOOST_AUTO_TEST_CASE(demotion_waits_for_the_ssd_before_the_entry_leaves) {
  self->send(ram, publish(100, 1));
  expect((sealed<msg::PublishState>), from(self).to(ram));
  msg::draft<msg::DemoteIdle> d;
  d.root().setIdleMs(0);
  self->send(ram, std::move(d).seal());
  expect((sealed<msg::DemoteIdle>), from(self).to(ram));
  // The order is out, the entry still in RAM until the reply comes.
  self->send(ram, empty<msg::ReadReport>());
  expect((sealed<msg::ReadReport>), from(self).to(ram));
  expect((sealed<msg::SpillEntry>), from(ram).to(ssd_impl));
  expect((sealed<msg::SpillSettled>), from(ssd_impl).to(ram));
  expect((sealed<msg::SpillEntryReply>), from(ssd_impl).to(ram));
  drain();
  self->receive([](const sealed<msg::PublishStateReply>&) {});
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    BOOST_CHECK_EQUAL(actors::read_part<tiers::report::ram>(r.root()).entries,
                      1u);
  });
  self->receive([](const sealed<msg::DemoteIdleReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getDemoted(), 1u);
  });
  self->send(ram, empty<msg::ReadReport>());
  drain();
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    BOOST_CHECK_EQUAL(actors::read_part<tiers::report::ram>(r.root()).entries,
                      0u);
  });
}

BOOST_AUTO_TEST_SUITE_END()
