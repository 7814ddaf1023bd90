// The membership logic without sockets (tiers/membership.hpp):
// handshake decisions, heartbeat deadlines, the backoff schedule and the
// reconnect targets, with time stepped by hand.
#define BOOST_TEST_MODULE cluster_membership
#include <boost/test/unit_test.hpp>

#include "runtime/net/address.hpp"
#include "tiers/membership.hpp"

using namespace kvtier::tiers;
using namespace kvtier::net;
using namespace std::chrono_literals;

namespace {

identity id_of(std::string name, std::string address,
               std::string fp = "tiny-dense-00ff") {
  return identity{std::move(name), std::move(fp), protocol_version,
                  std::move(address)};
}

timing fast() {
  timing t;
  t.heartbeat = 100ms;
  t.down_after = 1000ms;
  t.reconnect.base = 100ms;
  t.reconnect.cap = 800ms;
  return t;
}

struct fixture {
  time_point t0 = clock::now();
  membership m{id_of("a", "127.0.0.1:7000"), fast()};
};

} // namespace

BOOST_AUTO_TEST_CASE(a_peer_of_the_same_identity_is_accepted) {
  fixture f;
  auto d = f.m.judge(id_of("b", "127.0.0.1:7001"));
  BOOST_TEST(d.accepted());
  BOOST_TEST(f.m.mark_up(id_of("b", "127.0.0.1:7001"), f.t0));
  BOOST_TEST(!f.m.mark_up(id_of("b", "127.0.0.1:7001"), f.t0)); // no change
  BOOST_REQUIRE(f.m.find("b"));
  BOOST_TEST(f.m.find("b")->state == peer_state::up);
}

BOOST_AUTO_TEST_CASE(another_model_identity_is_refused_naming_both) {
  fixture f;
  auto d = f.m.judge(id_of("b", "127.0.0.1:7001", "tiny-dense-aaaa"));
  BOOST_TEST(d.reason == refusal::model_identity);
  BOOST_TEST(d.text.find("tiny-dense-aaaa") != std::string::npos);
  BOOST_TEST(d.text.find("tiny-dense-00ff") != std::string::npos);
  BOOST_TEST(f.m.refused().model_identity == 1u);
}

BOOST_AUTO_TEST_CASE(another_protocol_version_is_refused) {
  fixture f;
  auto peer = id_of("b", "127.0.0.1:7001");
  peer.protocol = protocol_version + 1;
  BOOST_TEST(f.m.judge(peer).reason == refusal::protocol);
  BOOST_TEST(f.m.refused().protocol == 1u);
}

BOOST_AUTO_TEST_CASE(our_own_node_id_is_refused) {
  fixture f;
  BOOST_TEST(f.m.judge(id_of("a", "127.0.0.1:7001")).reason
             == refusal::node_id);
  BOOST_TEST(f.m.refused().node_id == 1u);
}

BOOST_AUTO_TEST_CASE(an_id_up_at_another_address_is_a_collision) {
  fixture f;
  f.m.mark_up(id_of("b", "127.0.0.1:7001"), f.t0);
  BOOST_TEST(f.m.judge(id_of("b", "127.0.0.1:7002")).reason
             == refusal::node_id);
  // The same address is the same peer saying hello again (a restart).
  BOOST_TEST(f.m.judge(id_of("b", "127.0.0.1:7001")).accepted());
  // Once it is down, the id may come back from elsewhere.
  f.m.mark_down("b", f.t0);
  BOOST_TEST(f.m.judge(id_of("b", "127.0.0.1:7002")).accepted());
}

BOOST_AUTO_TEST_CASE(malformed_and_oversized_fields_are_refused_and_counted) {
  fixture f;
  BOOST_TEST(f.m.judge(id_of("", "127.0.0.1:7001")).reason
             == refusal::malformed);
  BOOST_TEST(
    f.m.judge(id_of(std::string(max_node_id_bytes + 1, 'x'), "127.0.0.1:7001"))
      .reason
    == refusal::malformed);
  BOOST_TEST(f.m.judge(id_of("b", "127.0.0.1:7001", "")).reason
             == refusal::malformed);
  BOOST_TEST(f.m.judge(id_of("b", "no-port")).reason == refusal::malformed);
  BOOST_TEST(f.m.judge(id_of("b", "127.0.0.1:70000")).reason
             == refusal::malformed);
  BOOST_TEST(f.m.refused().malformed == 5u);
}

BOOST_AUTO_TEST_CASE(a_silent_peer_is_down_after_the_deadline_not_before) {
  fixture f;
  f.m.mark_up(id_of("b", "127.0.0.1:7001"), f.t0);
  BOOST_TEST(f.m.expire(f.t0 + 1000ms).empty()); // exactly the deadline
  BOOST_TEST(f.m.heard("b", f.t0 + 900ms));
  BOOST_TEST(f.m.expire(f.t0 + 1800ms).empty()); // heard at 900
  auto gone = f.m.expire(f.t0 + 1901ms);
  BOOST_REQUIRE_EQUAL(gone.size(), 1u);
  BOOST_TEST(gone[0] == "b");
  BOOST_TEST(f.m.find("b")->state == peer_state::down);
  BOOST_TEST(f.m.expire(f.t0 + 5000ms).empty()); // once
  // A heartbeat from a down member is no proof: it must say hello again.
  BOOST_TEST(!f.m.heard("b", f.t0 + 5000ms));
}

BOOST_AUTO_TEST_CASE(the_backoff_doubles_up_to_its_cap) {
  backoff b{100ms, 800ms};
  BOOST_TEST(b.delay(0).count() == 100);
  BOOST_TEST(b.delay(1).count() == 200);
  BOOST_TEST(b.delay(2).count() == 400);
  BOOST_TEST(b.delay(3).count() == 800);
  BOOST_TEST(b.delay(4).count() == 800);
  BOOST_TEST(b.delay(1000).count() == 800);
}

BOOST_AUTO_TEST_CASE(failed_attempts_wait_out_the_backoff_and_success_resets) {
  fixture f;
  const std::string b = "127.0.0.1:7001";
  f.m.add_address(b, f.t0);
  auto due = f.m.due(f.t0);
  BOOST_REQUIRE_EQUAL(due.size(), 1u);
  BOOST_TEST(f.m.due(f.t0).empty()); // in flight
  f.m.attempt_done(b, false, f.t0);
  BOOST_TEST(f.m.due(f.t0 + 99ms).empty());
  BOOST_TEST(f.m.due(f.t0 + 100ms).size() == 1u);
  f.m.attempt_done(b, false, f.t0 + 100ms); // second failure: 200 ms
  BOOST_TEST(f.m.due(f.t0 + 299ms).empty());
  BOOST_TEST(f.m.due(f.t0 + 300ms).size() == 1u);
  f.m.attempt_done(b, true, f.t0 + 300ms);
  BOOST_TEST(f.m.failures(b) == 0u);
  f.m.mark_up(id_of("b", b), f.t0 + 300ms);
  BOOST_TEST(f.m.due(f.t0 + 10s).empty()); // up: nothing to do
  // Down: retried after the base delay.
  f.m.mark_down("b", f.t0 + 400ms);
  BOOST_TEST(f.m.due(f.t0 + 499ms).empty());
  BOOST_TEST(f.m.due(f.t0 + 500ms).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_refused_address_is_not_tried_again) {
  fixture f;
  const std::string b = "127.0.0.1:7001";
  f.m.add_address(b, f.t0);
  f.m.due(f.t0);
  f.m.attempt_done(b, false, f.t0, true);
  BOOST_TEST(f.m.due(f.t0 + 1h).empty());
  BOOST_TEST(!f.m.next_attempt(b));
}

BOOST_AUTO_TEST_CASE(our_own_address_is_never_a_target) {
  fixture f;
  f.m.add_address("127.0.0.1:7000", f.t0);
  BOOST_TEST(f.m.due(f.t0).empty());
}

BOOST_AUTO_TEST_CASE(a_leave_marks_the_peer_left_at_once_and_retries_later) {
  fixture f;
  const std::string b = "127.0.0.1:7001";
  f.m.mark_up(id_of("b", b), f.t0);
  BOOST_TEST(f.m.mark_down("b", f.t0 + 10ms, true));
  BOOST_TEST(f.m.find("b")->state == peer_state::left);
  BOOST_TEST(!f.m.mark_down("b", f.t0 + 20ms));   // no second "down"
  BOOST_TEST(f.m.due(f.t0 + 110ms).size() == 1u); // it may restart
}

BOOST_AUTO_TEST_CASE(retry_now_makes_a_waiting_address_due) {
  fixture f;
  const std::string b = "127.0.0.1:7001";
  f.m.add_address(b, f.t0);
  f.m.due(f.t0);
  for (int i = 0; i < 5; ++i)
    f.m.attempt_done(b, false, f.t0); // next try at the cap, 800 ms
  BOOST_TEST(f.m.due(f.t0 + 10ms).empty());
  f.m.retry_now(b, f.t0 + 10ms);
  BOOST_TEST(f.m.due(f.t0 + 10ms).size() == 1u);
}

BOOST_AUTO_TEST_CASE(addresses_parse_and_only_loopback_counts_as_loopback) {
  auto hp = parse_address("127.0.0.1:7400");
  BOOST_REQUIRE(hp);
  BOOST_TEST(hp->host == "127.0.0.1");
  BOOST_TEST(hp->port == 7400);
  BOOST_TEST(parse_address("[::1]:80")->host == "::1");
  BOOST_TEST(!parse_address(":80"));
  BOOST_TEST(!parse_address("host:"));
  BOOST_TEST(!parse_address("host:0"));
  BOOST_TEST(!parse_address("host:12ab"));
  BOOST_TEST(is_loopback("127.0.0.1"));
  BOOST_TEST(is_loopback("127.255.3.4"));
  BOOST_TEST(is_loopback("localhost"));
  BOOST_TEST(is_loopback("::1"));
  BOOST_TEST(!is_loopback("0.0.0.0"));
  BOOST_TEST(!is_loopback("10.0.0.1"));
  BOOST_TEST(!is_loopback("127.0.0"));
  BOOST_TEST(!is_loopback("127.0.0.256"));
  BOOST_TEST(!is_loopback("example.com"));
}
