#define BOOST_TEST_MODULE messages_actor
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

using namespace kvtier;
using spill_msg = msg::sealed<msg::SpillEntry>;
using peek_msg = msg::sealed<msg::PeekPrefix>;
using reply_msg = msg::sealed<msg::PeekPrefixReply>;

namespace {

// CAF 0.17 binds a null argument tuple when an actor is spawned without
// arguments (UBSan: reference binding to null), so spawns pass one.
caf::behavior echo(caf::event_based_actor*, int /* spawn argument */) {
  return {[](const spill_msg& m) { return m; }};
}

/// A typed interface in the style actors/interfaces.hpp will use.
using peek_actor = caf::typed_actor<caf::replies_to<peek_msg>::with<reply_msg>>;

/// Answers with the prompt's length, to show the request was read.
peek_actor::behavior_type peek_counter(int /* spawn argument */) {
  return {[](const peek_msg& m) {
    msg::draft<msg::PeekPrefixReply> d;
    d.root().setTokens(m.root().getPrompt().size());
    return std::move(d).seal();
  }};
}

struct config : caf::actor_system_config {
  config() {
    msg::register_message_types(*this);
    register_error_category(*this);
    set("scheduler.max-threads", 1);
    load<caf::io::middleman>();
  }
};

peek_msg peek_of(std::vector<uint32_t> prompt) {
  msg::draft<msg::PeekPrefix> d;
  d.root().setNs("ns");
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  return std::move(d).seal();
}

/// Sends `m` to `to` from `sys` and returns the reply's token count.
uint64_t ask(caf::actor_system& sys, const peek_actor& to, peek_msg m) {
  caf::scoped_actor self{sys};
  uint64_t tokens = 0;
  self->request(to, std::chrono::seconds(10), std::move(m))
    .receive([&](const reply_msg& r) { tokens = r.root().getTokens(); },
             [&](const caf::error& err) {
               BOOST_FAIL("request failed: " << describe(err));
             });
  return tokens;
}

} // namespace

BOOST_AUTO_TEST_CASE(carrier_travels_through_an_actor_with_its_buffers) {
  config cfg;
  caf::actor_system sys{cfg};
  auto e = test::sample_entry(tiers::layer_kind::kv, 16, 1);
  msg::draft<msg::SpillEntry> d;
  tiers::write_entry(d, d.root().getItem().initEntry(), e);
  auto sent = std::move(d).seal();
  auto actor = sys.spawn(echo, 0);
  caf::scoped_actor self{sys};
  spill_msg got;
  self->request(actor, caf::infinite, sent)
    .receive([&](const spill_msg& m) { got = m; },
             [&](const caf::error& err) {
               BOOST_FAIL("echo failed: " << describe(err));
             });
  BOOST_REQUIRE(got.valid());
  BOOST_TEST(got.words().get() == sent.words().get()); // the same frame
  auto back = tiers::read_entry(got, got.root().getItem().getEntry());
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

BOOST_AUTO_TEST_CASE(typed_actor_answers_a_carrier_with_a_carrier) {
  config cfg;
  caf::actor_system sys{cfg};
  auto actor = sys.spawn(peek_counter, 0);
  BOOST_TEST(ask(sys, actor, peek_of({1, 2, 3, 4})) == 4u);
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(side_free_carrier_crosses_a_middleman_connection) {
  config server_cfg, client_cfg;
  caf::actor_system server{server_cfg}, client{client_cfg};
  auto actor = server.spawn(peek_counter, 0);
  auto port = server.middleman().publish(actor, 0, "127.0.0.1");
  BOOST_REQUIRE_MESSAGE(port, (port ? "" : describe(port.error())));
  auto remote = client.middleman().remote_actor<peek_actor>("127.0.0.1", *port);
  BOOST_REQUIRE_MESSAGE(remote, (remote ? "" : describe(remote.error())));
  BOOST_TEST(ask(client, *remote, peek_of({7, 8, 9})) == 3u);
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
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
