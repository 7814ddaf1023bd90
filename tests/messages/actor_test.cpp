#define BOOST_TEST_MODULE messages_actor
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

using namespace kvtier;
using spill_msg = msg::sealed<msg::SpillEntry>;

namespace {

caf::behavior echo(caf::event_based_actor*) {
  return {[](const spill_msg& m) { return m; }};
}

struct config : caf::actor_system_config {
  config() {
    msg::register_message_types(*this);
    register_error_category(*this);
    set("scheduler.max-threads", 1);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(carrier_travels_through_an_actor_with_its_buffers) {
  config cfg;
  caf::actor_system sys{cfg};
  auto e = test::sample_entry(tiers::layer_kind::kv, 16, 1);
  msg::draft<msg::SpillEntry> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  auto sent = std::move(d).seal();
  auto actor = sys.spawn(echo);
  caf::scoped_actor self{sys};
  spill_msg got;
  self->request(actor, caf::infinite, sent)
    .receive([&](const spill_msg& m) { got = m; },
             [&](const caf::error& err) {
               BOOST_FAIL("echo failed: " << describe(err));
             });
  BOOST_REQUIRE(got.valid());
  BOOST_TEST(got.words().get() == sent.words().get()); // the same frame
  auto back = tiers::read_entry(got, got.root().getEntry());
  BOOST_REQUIRE(back);
  auto& want = e.layers[0].segments;
  auto& have = back->layers[0].segments;
  BOOST_REQUIRE(have.size() == want.size());
  for (size_t i = 0; i < have.size(); ++i) {
    BOOST_TEST(have[i].buf->id() == want[i].buf->id());
    BOOST_TEST(have[i].bytes().data() == want[i].bytes().data());
  }
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(every_carrier_is_registered_by_name) {
  config cfg;
  auto& names = cfg.type_names_by_rtti;
  BOOST_TEST(names.at(typeid(spill_msg))
             == "kvtier::msg::sealed<kvtier::msg::SpillEntry>");
  BOOST_TEST(names.count(typeid(msg::sealed<msg::CancelTransferReply>)) == 1u);
#define KVTIER_COUNT_ONE(Root) +1
  constexpr int roots = 0 KVTIER_MESSAGE_ROOTS(KVTIER_COUNT_ONE);
#undef KVTIER_COUNT_ONE
  auto count = caf::id_block::kvtier::end - caf::id_block::kvtier::begin;
  BOOST_TEST(count == roots);
#define KVTIER_CHECK_ONE(Root)                                                 \
  BOOST_TEST(names.count(typeid(msg::sealed<msg::Root>)) == 1u, #Root);
  KVTIER_MESSAGE_ROOTS(KVTIER_CHECK_ONE)
#undef KVTIER_CHECK_ONE
}
