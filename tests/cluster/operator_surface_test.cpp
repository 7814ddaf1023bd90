// What an operator sees of a cluster member through the report, /metrics,
// /health and the membership view (docs/operations.md): /health fails for
// a node none of whose configured peers accepts it and for a tier that
// did not answer the report, and says ok for a node that met its peer;
// the node port's refusals (the wire guard's counters: raw garbage sent to
// the port among them) and the bulk lane's refusals reach the report,
// /metrics and `kvtier members`; a port in use is refused naming its key
// before anything is created.
// Embedded services with `cluster.enabled` on loopback ephemeral ports,
// each with its own actor system; every wait is bounded.
#define BOOST_TEST_MODULE cluster_operator_surface
#include "messages/bulk_lane.hpp"
#include "runtime/cluster/node.hpp"
#include "tests/cluster/member.hpp"
#include "tests/runtime/http_client.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tiers/entry_message.hpp"

#include <caf/scoped_actor.hpp>

#include <nlohmann/json.hpp>

using namespace kvtier;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::eventually;
using testing::why;

namespace {

/// A cluster member with its HTTP endpoint on an ephemeral port.
struct member : test::cluster_member {
  explicit member(const std::string& id)
    : cluster_member(id) {
    opts.http_enabled = true;
    opts.http_port = 0;
  }

  testing::http_reply get(const std::string& target) {
    return testing::http_call(testing::port_of(svc->http_address()), "GET",
                              target);
  }

  json health(int& status) {
    auto r = get("/health");
    status = r.status;
    auto j = json::parse(r.body, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!j.is_discarded(), "not JSON: " << r.body);
    return j;
  }
};

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(health_fails_for_a_node_no_configured_peer_accepts) {
  member a{"a"};
  a.start();
  // B speaks of another model: A refuses its hello, so none of B's
  // configured peers is ever up.
  member b{"b"};
  b.opts.model_identity = "another-model";
  b.opts.cluster_peers = {a.svc->cluster()->address()};
  b.start();
  int status = 0;
  json h;
  // The grace is down-after-ms + reconnect-backoff-max-ms (1.4 s here).
  BOOST_CHECK(eventually(
    [&] {
      h = b.health(status);
      return status == 503;
    },
    15000ms));
  BOOST_CHECK_EQUAL(h["status"], "degraded");
  BOOST_CHECK_EQUAL(h["peers"]["configured"], 1);
  BOOST_CHECK_EQUAL(h["peers"]["up"], 0);
  BOOST_REQUIRE_EQUAL(h["reasons"].size(), 1u);
  BOOST_CHECK_MESSAGE(h["reasons"][0].get<std::string>().find(
                        "none of its 1 configured peer(s) is up")
                        != std::string::npos,
                      h.dump());
  // A node of the same model that met A is healthy.
  member c{"c"};
  c.opts.cluster_peers = {a.svc->cluster()->address()};
  c.start();
  BOOST_CHECK(eventually(
    [&] {
      h = c.health(status);
      return status == 200 && h["peers"]["up"] == 1;
    },
    15000ms));
  BOOST_CHECK_EQUAL(h["status"], "ok");
  // A node configured with no peers is healthy alone.
  a.health(status);
  BOOST_CHECK_EQUAL(status, 200);
}

BOOST_AUTO_TEST_CASE(health_names_a_tier_that_did_not_answer_the_report) {
  member a{"a"};
  a.start();
  int status = 0;
  a.health(status);
  BOOST_CHECK_EQUAL(status, 200);
  BOOST_CHECK(a.report().silent_tiers.empty());
  {
    caf::scoped_actor self{a.svc->system()};
    self->send_exit(a.svc->peer_tier(), caf::exit_reason::kill);
  }
  runtime::service_report r;
  BOOST_CHECK(eventually([&] {
    r = a.report();
    return !r.silent_tiers.empty();
  }));
  BOOST_CHECK(r.silent_tiers == std::vector<std::string>{"peer"});
  auto h = a.health(status);
  BOOST_CHECK_EQUAL(status, 503);
  BOOST_CHECK_EQUAL(h["status"], "degraded");
  BOOST_CHECK_MESSAGE(h["reasons"][0].get<std::string>().find(
                        "the peer tier did not answer the report")
                        != std::string::npos,
                      h.dump());
  BOOST_CHECK(has_line(a.get("/metrics").body, "kvtier_silent_tiers 1"));
  auto stats = json::parse(a.get("/stats").body);
  BOOST_CHECK_EQUAL(stats["report"]["silent_tiers"][0], "peer");
}

BOOST_AUTO_TEST_CASE(the_node_ports_refusals_reach_report_metrics_and_members) {
  member a{"a"};
  a.start();
  // Raw garbage on the node's port (not CAF's protocol): the port's guard
  // closes the connection and counts it.
  auto fd = testing::http_connect(a.svc->cluster()->port(), 10000ms);
  BOOST_REQUIRE(fd >= 0);
  std::string junk(64, '\xff');
  BOOST_REQUIRE(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) == 64);
  testing::http_read_all(fd); // until the node closes it
  ::close(fd);
  runtime::service_report r;
  BOOST_CHECK(eventually([&] {
    r = a.report();
    return r.node.garbage_frames >= 1 && r.node.failed_handshakes >= 1;
  }));
  BOOST_CHECK_EQUAL(r.node.garbage_frames, 1u);
  // That connection never finished CAF's handshake either.
  BOOST_CHECK_EQUAL(r.node.failed_handshakes, 1u);
  // The other refusals of the port's guard, set here as it would.
  auto& g = *a.svc->cluster()->guard();
  g.oversized += 1;
  g.undecodable += 2;
  g.oversized_frames += 3;
  g.refused_connections += 4;
  r = a.report();
  BOOST_CHECK_EQUAL(r.node.refused_connections, 4u);
  BOOST_CHECK_EQUAL(r.node.refused_oversized, 1u);
  BOOST_CHECK_EQUAL(r.node.refused_undecodable, 2u);
  BOOST_CHECK_EQUAL(r.node.oversized_frames, 3u);
  BOOST_CHECK_EQUAL(r.node.garbage_frames, 1u);
  BOOST_CHECK_EQUAL(r.node.configured_peers, 0u);
  auto m = a.get("/metrics").body;
  BOOST_CHECK(
    has_line(m, "kvtier_node_refused_messages_total{reason=\"oversized\"} 1"));
  BOOST_CHECK(has_line(
    m, "kvtier_node_refused_messages_total{reason=\"undecodable\"} 2"));
  BOOST_CHECK(
    has_line(m, "kvtier_node_refused_frames_total{reason=\"oversized\"} 3"));
  BOOST_CHECK(
    has_line(m, "kvtier_node_refused_frames_total{reason=\"garbage\"} 1"));
  BOOST_CHECK(has_line(m, "kvtier_node_refused_connections_total 4"));
  BOOST_CHECK(has_line(m, "kvtier_node_failed_handshakes_total 1"));
  auto v = a.svc->cluster()->members();
  BOOST_REQUIRE_MESSAGE(v, why(v));
  BOOST_CHECK_EQUAL(v->oversized_frames, 3u);
  BOOST_CHECK_EQUAL(v->garbage_frames, 1u);
  BOOST_CHECK_EQUAL(v->refused_connections, 4u);
  BOOST_CHECK_EQUAL(v->failed_handshakes, 1u);
}

BOOST_AUTO_TEST_CASE(bulk_lane_refusals_are_counted_in_the_report) {
  member a{"a"};
  a.start();
  auto prompt = testing::service_fixture::seq(64);
  auto e = a.oracle->prefill("ns", prompt);
  auto put = a.svc->publish({1, prompt, 16, std::nullopt}, std::move(e));
  BOOST_REQUIRE_MESSAGE(put && put->kept, why(put));
  // Ask A's serving side for it as a peer would: a transfer on its lane.
  msg::draft<msg::FetchEntry> d;
  d.root().setNs("ns");
  tiers::write_tokens(d.root().initPrompt(prompt.size() + 1),
                      testing::service_fixture::seq(65));
  std::optional<msg::sealed<msg::FetchEntryReply>> reply;
  {
    caf::scoped_actor self{a.svc->system()};
    self->request(a.svc->state_server(), caf::duration{5s}, std::move(d).seal())
      .receive([&](const msg::sealed<msg::FetchEntryReply>& r) { reply = r; },
               [&](caf::error& err) { BOOST_FAIL(describe(err)); });
  }
  BOOST_REQUIRE(reply && reply->root().isTransfer());
  auto header = reply->root().getTransfer();
  BOOST_REQUIRE(header.getBulkPort() != 0);
  // The right id with a wrong token: the lane refuses it.
  msg::draft<msg::TransferHeader> wrong;
  wrong.root().setTransferId(header.getTransferId());
  wrong.root().setTotalLength(header.getTotalLength());
  wrong.root().setBulkPort(header.getBulkPort());
  wrong.root().setBulkHost(header.getBulkHost());
  wrong.root().setBulkToken(header.getBulkToken() ^ 1);
  wrong.root().setLaneChecksum(header.getLaneChecksum());
  wrong.root().setLanePieces(header.getLanePieces());
  auto sealed = std::move(wrong).seal();
  auto got = msg::bulk_fetch("127.0.0.1", sealed.root(),
                             std::chrono::steady_clock::now() + 5s);
  BOOST_CHECK(!got);
  runtime::service_report r;
  BOOST_CHECK(eventually([&] {
    r = a.report();
    return r.peer.lane_refused >= 1;
  }));
  BOOST_CHECK_EQUAL(r.peer.lane_refused, 1u);
  BOOST_CHECK_EQUAL(r.peer.lane_failed, 0u);
  BOOST_CHECK(
    has_line(a.get("/metrics").body, "kvtier_peer_lane_refused_total 1"));
}

BOOST_AUTO_TEST_CASE(a_cluster_port_in_use_names_the_key_and_creates_nothing) {
  member a{"a"};
  a.start();
  member b{"b"};
  b.opts.cluster_port = a.svc->cluster()->port();
  b.opts.ssd_dir = "/ssd-b";
  runtime::service second{b.opts, runtime::service_parts{&b.fs}};
  auto err = second.start_error();
  BOOST_REQUIRE(err);
  auto port = std::to_string(b.opts.cluster_port);
  auto text = describe(err);
  BOOST_CHECK_MESSAGE(
    text.find("cluster.port = " + port + ": cannot listen on 127.0.0.1:" + port)
      != std::string::npos,
    text);
  // Refused before anything was made: no SSD directory.
  BOOST_CHECK_MESSAGE(!b.fs.mode("/ssd-b"), "/ssd-b was created");
}
