// The admission actor message by message: a queued admit is answered only
// when a release admits it, in arrival order; a request that can never be
// admitted gets its error inside the reply.
#define BOOST_TEST_MODULE actors_admission
#include "actors/tier_counters.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/admission_actor.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

struct fixture : kvtier::testing::kvtier_fixture<> {
  // tiny-dense: 256 bytes per token; 1024 tokens of budget.
  actors::admission_actor adm =
    sys.spawn(actors::admission, *tiers::model_geometry::preset("tiny-dense"),
              tiers::admission_limits{1024 * 256, 2048});

  static sealed<msg::AdmitRequest> admit(uint64_t id, uint32_t tokens,
                                         bool queue) {
    msg::draft<msg::AdmitRequest> d;
    d.root().initRequest().setId(id);
    d.root().getRequest().initPrompt(tokens);
    d.root().setQueue(queue);
    return std::move(d).seal();
  }

  static sealed<msg::ReleaseRequest> release(uint64_t id) {
    msg::draft<msg::ReleaseRequest> d;
    d.root().initRequest().setId(id);
    d.root().setCompleted(true);
    return std::move(d).seal();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(admission_actor, fixture)

BOOST_AUTO_TEST_CASE(a_queued_admit_is_answered_when_a_release_admits_it) {
  self->send(adm, admit(1, 800, false));
  self->send(adm, admit(2, 800, true)); // must wait
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_CHECK(r.root().getAdmitted());
  });
  BOOST_CHECK(!self->has_next_message()); // no answer for 2 yet
  self->send(adm, release(1));
  expect((sealed<msg::ReleaseRequest>), from(self).to(adm));
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_CHECK(r.root().getAdmitted());
    BOOST_CHECK_EQUAL(r.root().getProjectedBytes(), 800u * 256);
  });
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getReleasedBytes(), 800u * 256);
  });
}

BOOST_AUTO_TEST_CASE(a_never_admissible_request_carries_its_error) {
  self->send(adm, admit(1, 4000, true)); // past the position limit
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_REQUIRE(r.root().isNever());
    BOOST_CHECK_EQUAL(r.root().getNever().getCode(),
                      static_cast<uint8_t>(ec::position_limit_exceeded));
  });
}

BOOST_AUTO_TEST_CASE(close_answers_queued_admits_closed_and_refuses_later) {
  self->send(adm, admit(1, 800, false));
  self->send(adm, admit(2, 800, true)); // waits
  self->send(adm, admit(3, 100, true)); // waits behind 2
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_CHECK(r.root().getAdmitted());
  });
  BOOST_CHECK(!self->has_next_message());
  self->send(adm, msg::draft<msg::CloseService>{}.seal());
  drain();
  // The two waiters first (in arrival order), then the close's own reply.
  for (int i = 0; i < 2; ++i)
    self->receive(
      [](const sealed<msg::AdmitRequestReply>&) {
        BOOST_FAIL("a queued admit was admitted after close");
      },
      [](const caf::error& err) { BOOST_CHECK(err == ec::closed); });
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  // Later admits (plain or queued) and fits fail closed; release works.
  self->send(adm, admit(4, 10, false));
  self->send(adm, admit(5, 10, true));
  drain();
  for (int i = 0; i < 2; ++i)
    self->receive([](const sealed<msg::AdmitRequestReply>& r) {
      BOOST_REQUIRE(r.root().isNever());
      BOOST_CHECK_EQUAL(r.root().getNever().getCode(),
                        static_cast<uint8_t>(ec::closed));
    });
  msg::draft<msg::FitsRequest> f;
  f.root().initRequest().setId(6);
  self->send(adm, std::move(f).seal());
  self->send(adm, release(1));
  drain();
  self->receive([](const sealed<msg::FitsRequestReply>& r) {
    BOOST_REQUIRE(r.root().isNever());
    BOOST_CHECK_EQUAL(r.root().getNever().getCode(),
                      static_cast<uint8_t>(ec::closed));
  });
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getReleasedBytes(), 800u * 256);
  });
  self->send(adm, msg::draft<msg::ReadReport>{}.seal());
  drain();
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    auto a = actors::read_part<tiers::report::admission>(r.root());
    BOOST_CHECK_EQUAL(a.waiting, 0u);
    BOOST_CHECK_EQUAL(a.holders, 0u);
    BOOST_CHECK_EQUAL(a.admitted, 1u);
  });
}

BOOST_AUTO_TEST_CASE(a_queued_admit_past_the_bound_is_refused_queue_full) {
  auto small =
    sys.spawn(actors::admission, *tiers::model_geometry::preset("tiny-dense"),
              tiers::admission_limits{1024 * 256, 2048, 1});
  self->send(small, admit(1, 1000, false));
  self->send(small, admit(2, 100, true)); // the one place in the queue
  self->send(small, admit(3, 100, true)); // over the bound
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_CHECK(r.root().getAdmitted());
  });
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_REQUIRE(r.root().isNever());
    BOOST_CHECK_EQUAL(r.root().getNever().getCode(),
                      static_cast<uint8_t>(ec::queue_full));
    std::string text = r.root().getNever().getContext().cStr();
    BOOST_CHECK_NE(text.find("admission.max-queued = 1"), std::string::npos);
  });
  BOOST_CHECK(!self->has_next_message()); // 2 still waits
  self->send(small, msg::draft<msg::ReadReport>{}.seal());
  drain();
  self->receive([](const sealed<msg::ReadReportReply>& r) {
    auto a = actors::read_part<tiers::report::admission>(r.root());
    BOOST_CHECK_EQUAL(a.max_queued, 1u);
    BOOST_CHECK_EQUAL(a.queue_full, 1u);
    BOOST_CHECK_EQUAL(a.waiting, 1u);
  });
  self->send(small, release(1));
  drain();
  self->receive([](const sealed<msg::AdmitRequestReply>& r) {
    BOOST_CHECK(r.root().getAdmitted()); // 2, admitted by the release
  });
  self->receive([](const sealed<msg::ReleaseRequestReply>&) {});
}

BOOST_AUTO_TEST_SUITE_END()
