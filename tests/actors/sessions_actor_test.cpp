// The sessions actor message by message on CAF's deterministic scheduler:
// a newer put of a session sends RAM an unprotect order for its previous
// newest entry, close_session answers only after RAM took the pin back, the
// report carries the session counts, and CloseService forgets everything.
// Most cases use a stand-in RAM actor that records the orders; the last
// runs against the real RAM tier actor and watches its protected entries.
#define BOOST_TEST_MODULE actors_sessions
#include "actors/tier_counters.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/ram_tier_actor.hpp"
#include "actors/sessions_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

/// Records every UnprotectEntry order and answers `unprotected = true`.
caf::behavior
fake_ram(caf::event_based_actor*,
         std::shared_ptr<std::vector<tiers::pinned_entry>> orders) {
  return {
    [orders](const sealed<msg::UnprotectEntry>& m) {
      auto k = m.root().getKey();
      orders->push_back({k.getNs().cStr(), tiers::read_tokens(k.getTokens()),
                         m.root().getPin()});
      msg::draft<msg::UnprotectEntryReply> d;
      d.root().setUnprotected(true);
      return std::move(d).seal();
    },
  };
}

tiers::token_seq seq(size_t n, tiers::token first) {
  tiers::token_seq t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = first + static_cast<tiers::token>(i);
  return t;
}

sealed<msg::SessionPutEvent> put_event(const std::string& session,
                                       const tiers::pinned_entry& p) {
  msg::draft<msg::SessionPutEvent> d;
  d.root().setSession(session);
  tiers::write_key(d.root().initKey(), p.ns, p.tokens);
  d.root().setPin(p.pin);
  return std::move(d).seal();
}

sealed<msg::CloseSession> close(const std::string& session) {
  msg::draft<msg::CloseSession> d;
  d.root().setSession(session);
  return std::move(d).seal();
}

template <class Root>
sealed<Root> empty() {
  return msg::draft<Root>{}.seal();
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  std::shared_ptr<std::vector<tiers::pinned_entry>> orders =
    std::make_shared<std::vector<tiers::pinned_entry>>();
  caf::actor ram_impl = sys.spawn(fake_ram, orders);
  actors::ram_tier_actor ram =
    caf::actor_cast<actors::ram_tier_actor>(ram_impl);
  actors::sessions_actor sessions =
    sys.spawn(actors::sessions, ram, uint64_t{10000});

  tiers::pinned_entry k1{"ns", seq(8, 1000), 1};
  tiers::pinned_entry k2{"ns", seq(12, 1000), 2};
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(sessions_actor, fixture)

BOOST_AUTO_TEST_CASE(a_first_put_sends_nothing_to_ram) {
  self->send(sessions, put_event("s", k1));
  expect((sealed<msg::SessionPutEvent>), from(self).to(sessions));
  disallow((sealed<msg::UnprotectEntry>), from(sessions).to(ram_impl));
  drain();
  BOOST_TEST(orders->empty());
}

BOOST_AUTO_TEST_CASE(a_newer_put_unprotects_the_previous_newest) {
  self->send(sessions, put_event("s", k1));
  self->send(sessions, put_event("other", {"ns", seq(4, 50), 3}));
  self->send(sessions, put_event("s", k2));
  expect((sealed<msg::SessionPutEvent>), from(self).to(sessions));
  expect((sealed<msg::SessionPutEvent>), from(self).to(sessions));
  expect((sealed<msg::SessionPutEvent>), from(self).to(sessions));
  expect((sealed<msg::UnprotectEntry>), from(sessions).to(ram_impl));
  drain();
  BOOST_REQUIRE_EQUAL(orders->size(), 1u);
  BOOST_TEST((orders->at(0) == k1), "only s's previous newest, by its pin");
  BOOST_CHECK(!self->has_next_message()); // events are not answered
}

BOOST_AUTO_TEST_CASE(close_session_answers_after_ram_took_the_pin_back) {
  self->send(sessions, put_event("s", k1));
  self->send(sessions, close("s"));
  expect((sealed<msg::SessionPutEvent>), from(self).to(sessions));
  expect((sealed<msg::CloseSession>), from(self).to(sessions));
  BOOST_CHECK(!self->has_next_message()); // not before RAM's answer
  expect((sealed<msg::UnprotectEntry>), from(sessions).to(ram_impl));
  expect((sealed<msg::UnprotectEntryReply>), from(ram_impl).to(sessions));
  BOOST_REQUIRE(self->has_next_message());
  self->receive([](const sealed<msg::CloseSessionReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUnprotected(), 1u);
  });
  BOOST_REQUIRE_EQUAL(orders->size(), 1u);
  BOOST_TEST((orders->at(0) == k1));
}

BOOST_AUTO_TEST_CASE(closing_a_session_that_is_not_open_sends_nothing) {
  self->send(sessions, close("never"));
  expect((sealed<msg::CloseSession>), from(self).to(sessions));
  disallow((sealed<msg::UnprotectEntry>), from(sessions).to(ram_impl));
  drain();
  self->receive([](const sealed<msg::CloseSessionReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUnprotected(), 0u);
  });
}

BOOST_AUTO_TEST_CASE(the_report_counts_open_opened_and_closed_sessions) {
  self->send(sessions, put_event("a", k1));
  self->send(sessions, put_event("b", k2));
  self->send(sessions, close("a"));
  self->send(sessions, put_event("a", k1)); // open again
  self->send(sessions, empty<msg::ReadReport>());
  drain();
  self->receive([](const sealed<msg::CloseSessionReply>&) {});
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    auto s = actors::read_part<tiers::report::sessions>(r.root());
    BOOST_CHECK_EQUAL(s.open, 2u);
    BOOST_CHECK_EQUAL(s.opened, 3u);
    BOOST_CHECK_EQUAL(s.closed, 1u);
    BOOST_CHECK_EQUAL(s.protected_entries, 0u); // RAM's part
    BOOST_CHECK(!actors::has_part(r.root(), "ram"));
  });
}

BOOST_AUTO_TEST_CASE(close_service_forgets_every_session) {
  self->send(sessions, put_event("s", k1));
  self->send(sessions, empty<msg::CloseService>());
  self->send(sessions, close("s"));
  self->send(sessions, empty<msg::ReadReport>());
  drain();
  BOOST_TEST(orders->empty(), "RAM is cleared beside it: no pin to take back");
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  self->receive([](const sealed<msg::CloseSessionReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUnprotected(), 0u);
  });
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    BOOST_CHECK_EQUAL(actors::read_part<tiers::report::sessions>(r.root()).open,
                      0u);
    BOOST_CHECK_EQUAL(
      actors::read_part<tiers::report::sessions>(r.root()).closed, 0u);
  });
}

BOOST_AUTO_TEST_CASE(with_the_real_ram_tier_the_newest_entry_alone_is_pinned) {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  auto real_ram =
    sys.spawn(actors::ram_tier, actors::ram_tier_config{uint64_t{1} << 20},
              actors::ssd_tier_actor{}, nullptr);
  auto real = sys.spawn(actors::sessions, real_ram, uint64_t{10000});
  // Publishes as the facade makes them: protect set, then the event.
  auto publish = [&](const tiers::token_seq& tokens) {
    msg::draft<msg::PublishState> d;
    tiers::write_entry(d, d.root().initEntry(), oracle.prefill("ns", tokens));
    d.root().setProtect(true);
    self->send(real_ram, std::move(d).seal());
    drain();
    uint64_t pin = 0;
    self->receive([&](const sealed<msg::PublishStateReply>& r) {
      BOOST_CHECK(r.root().getKept());
      pin = r.root().getPin();
    });
    BOOST_TEST(pin != 0u);
    self->send(real, put_event("s", {"ns", tokens, pin}));
    drain();
  };
  auto protected_entries = [&] {
    self->send(real_ram, empty<msg::ReadReport>());
    drain();
    uint64_t n = 0;
    self->receive([&](const sealed<msg::ReadReportReply>& r) {
      n =
        actors::read_part<tiers::report::sessions>(r.root()).protected_entries;
    });
    return n;
  };
  publish(seq(8, 1000));
  BOOST_TEST(protected_entries() == 1u);
  publish(seq(8, 2000)); // unrelated tokens: both stay in RAM
  BOOST_TEST(protected_entries() == 1u, "the previous newest was unpinned");
  self->send(real, close("s"));
  drain();
  self->receive([](const sealed<msg::CloseSessionReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUnprotected(), 1u);
  });
  BOOST_TEST(protected_entries() == 0u);
  self->send(real_ram, empty<msg::ReadReport>());
  drain();
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    BOOST_CHECK_EQUAL(actors::read_part<tiers::report::ram>(r.root()).entries,
                      2u); // none deleted
  });
}

BOOST_AUTO_TEST_SUITE_END()
