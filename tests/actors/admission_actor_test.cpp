// The admission actor message by message: a queued admit is answered only
// when a release admits it, in arrival order; a request that can never be
// admitted gets its error inside the reply.
#define BOOST_TEST_MODULE actors_admission
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

BOOST_AUTO_TEST_SUITE_END()
