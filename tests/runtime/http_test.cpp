// The operator's HTTP endpoint (runtime/http/endpoint.hpp,
// docs/operations.md) over an embedded service on a loopback ephemeral
// port: every route's status and body, the admin token, the metrics'
// names and histograms, a session close that answers while a flush waits
// on a stalled disk, and the server's limits (malformed and oversized
// requests, the connection cap, the read deadline). The same routes
// through `kvtier node`, curl and promtool: tests/cluster/http_node_test.cpp.
#define BOOST_TEST_MODULE runtime_http
#include "messages/log.hpp"
#include "runtime/http/endpoint.hpp"
#include "runtime/http/exposition.hpp"
#include "runtime/http/health.hpp"
#include "tests/runtime/http_client.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include <nlohmann/json.hpp>

#include <future>
#include <set>
#include <sstream>

using namespace kvtier;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::http_call;
using testing::http_reply;
using testing::service_fixture;
using testing::why;

namespace {

struct http_fixture : service_fixture {
  tiers::ssd::faulty_file_system faulty{memory};

  http_fixture() {
    fs = &faulty;
    opts.http_enabled = true;
    opts.http_port = 0;
  }

  // The service uses `faulty`, a member of this class, which goes before
  // the base's members: the service must go first.
  ~http_fixture() {
    svc.reset();
  }

  uint16_t port() const {
    return testing::port_of(svc->http_address());
  }

  http_reply call(const std::string& method, const std::string& target,
                  const std::string& headers = {}) {
    return http_call(port(), method, target, headers);
  }

  json body_of(const http_reply& r) {
    auto j = json::parse(r.body, nullptr, false);
    BOOST_REQUIRE_MESSAGE(!j.is_discarded(), "not JSON: " << r.body);
    return j;
  }
};

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos
         || text.rfind(line + "\n", 0) == 0;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(routes, http_fixture)

BOOST_AUTO_TEST_CASE(every_route_answers_with_its_status_and_body) {
  start();
  BOOST_REQUIRE(!svc->http_address().empty());
  auto r = request(1, seq(100));
  r.session = "chat 1";
  BOOST_REQUIRE(svc->publish(r, oracle->prefill("ns", seq(100))));
  get("ns", seq(101));

  auto health = call("GET", "/health");
  BOOST_CHECK_EQUAL(health.status, 200);
  BOOST_CHECK_EQUAL(body_of(health)["status"], "ok");

  auto metrics = call("GET", "/metrics");
  BOOST_CHECK_EQUAL(metrics.status, 200);
  BOOST_CHECK(metrics.head.find("Content-Type: text/plain; version=0.0.4")
              != std::string::npos);
  BOOST_CHECK(has_line(metrics.body, "kvtier_ram_entries 1"));
  BOOST_CHECK(has_line(metrics.body, "kvtier_ram_hits_total 1"));
  BOOST_CHECK(has_line(metrics.body, "kvtier_sessions_open 1"));
  BOOST_CHECK(
    has_line(metrics.body, "kvtier_acquire_duration_seconds_count 1"));
  BOOST_CHECK(
    has_line(metrics.body, "kvtier_publish_duration_seconds_count 1"));
  BOOST_CHECK(has_line(metrics.body, "kvtier_closed 0"));

  auto stats = call("GET", "/stats");
  BOOST_CHECK_EQUAL(stats.status, 200);
  auto s = body_of(stats);
  BOOST_CHECK_EQUAL(s["report"]["ram"]["entries"], 1);
  BOOST_CHECK_EQUAL(s["report"]["ram"]["hits"], 1);
  BOOST_CHECK_EQUAL(s["report"]["closed"], false);
  BOOST_CHECK_EQUAL(s["persistence"]["pending_spills"], 0);
  BOOST_CHECK_EQUAL(s["latency"]["acquire"]["count"], 1);

  auto flushed = call("POST", "/admin/cache/flush");
  BOOST_CHECK_EQUAL(flushed.status, 200);
  auto f = body_of(flushed);
  BOOST_CHECK_EQUAL(f["durable"], true);
  BOOST_CHECK_EQUAL(f["entries"], 1);

  // The id is %-decoded: "chat 1".
  auto closed = call("POST", "/admin/sessions/chat%201/close");
  BOOST_CHECK_EQUAL(closed.status, 200);
  BOOST_CHECK_EQUAL(body_of(closed)["session"], "chat 1");
  BOOST_CHECK_EQUAL(body_of(closed)["unpinned"], 1);
  BOOST_CHECK_EQUAL(report().sessions.open, 0u);

  // The entry is durable now: the boundary gives its RAM copy back.
  auto dropped = call("POST", "/admin/ram/drop");
  BOOST_CHECK_EQUAL(dropped.status, 200);
  BOOST_CHECK_EQUAL(body_of(dropped)["released"], 1);
  BOOST_CHECK_EQUAL(report().ram.entries, 0u);
  // ... and it is still served, from the SSD.
  BOOST_CHECK(get("ns", seq(101)).source == runtime::state_source::ssd);

  auto none = call("GET", "/nothing");
  BOOST_CHECK_EQUAL(none.status, 404);
  BOOST_CHECK(body_of(none)["error"].get<std::string>().find("/metrics")
              != std::string::npos);
  auto wrong = call("POST", "/metrics");
  BOOST_CHECK_EQUAL(wrong.status, 405);
  BOOST_CHECK(wrong.head.find("Allow: GET") != std::string::npos);
  auto admin_get = call("GET", "/admin/cache/flush");
  BOOST_CHECK_EQUAL(admin_get.status, 405);
  BOOST_CHECK(admin_get.head.find("Allow: POST") != std::string::npos);
  BOOST_CHECK_EQUAL(call("POST", "/admin/sessions//close").status, 404);
  BOOST_CHECK_EQUAL(call("POST", "/admin/sessions/a/b/close").status, 404);
}

BOOST_AUTO_TEST_CASE(histograms_time_acquires_publishes_and_restores) {
  start();
  put("ns", seq(300));
  put("ns", seq(200, 5000), 2);
  get("ns", seq(301));
  BOOST_REQUIRE_EQUAL(*svc->demote_idle(0), 2u);
  BOOST_CHECK(get("ns", seq(301)).source == runtime::state_source::ssd);
  get("ns", seq(50, 9000)); // a miss is timed too
  auto l = svc->latency();
  BOOST_CHECK_EQUAL(l.publish.count, 2u);
  BOOST_CHECK_EQUAL(l.acquire.count, 3u);
  BOOST_CHECK_EQUAL(l.restore.count, 1u);
  BOOST_CHECK_EQUAL(l.remote_fetch.count, 0u);
  BOOST_CHECK_GT(l.acquire.sum_seconds, 0.0);
  BOOST_CHECK_GE(l.acquire.sum_seconds, l.restore.sum_seconds);
  auto m = call("GET", "/metrics").body;
  BOOST_CHECK(has_line(m, "kvtier_ssd_restore_duration_seconds_count 1"));
  BOOST_CHECK(
    has_line(m, "kvtier_acquire_duration_seconds_bucket{le=\"+Inf\"} 3"));
  BOOST_CHECK(has_line(m, "kvtier_peer_fetch_duration_seconds_count 0"));
  BOOST_CHECK(has_line(m, "kvtier_call_failures_total{call=\"acquire\"} 0"));
}

BOOST_AUTO_TEST_CASE(failed_calls_are_counted_not_timed) {
  start();
  put("ns", seq(300));
  // A publish of another model's shape is refused.
  auto wrong = oracle->prefill("ns", seq(40));
  wrong.layers.pop_back();
  BOOST_REQUIRE(!svc->publish(request(2, seq(40)), std::move(wrong)));
  // A restore whose read fails: the acquire falls back (here to a miss)
  // and succeeds; the restore is counted as failed.
  BOOST_REQUIRE_EQUAL(*svc->demote_idle(0), 1u);
  faulty.inject(tiers::ssd::fs_op::read, 1, tiers::ssd::fault_kind::eio);
  BOOST_CHECK(get("ns", seq(301)).source == runtime::state_source::none);
  faulty.clear();
  auto l = svc->latency();
  BOOST_CHECK_EQUAL(l.publish.count, 1u);
  BOOST_CHECK_EQUAL(l.publish.failed, 1u);
  BOOST_CHECK_EQUAL(l.acquire.count, 1u);
  BOOST_CHECK_EQUAL(l.acquire.failed, 0u);
  BOOST_CHECK_EQUAL(l.restore.count, 0u);
  BOOST_CHECK_EQUAL(l.restore.failed, 1u);
  auto m = call("GET", "/metrics").body;
  BOOST_CHECK(has_line(m, "kvtier_publish_duration_seconds_count 1"));
  BOOST_CHECK(has_line(m, "kvtier_call_failures_total{call=\"publish\"} 1"));
  BOOST_CHECK(has_line(m, "kvtier_call_failures_total{call=\"restore\"} 1"));
  BOOST_CHECK(
    has_line(m, "kvtier_call_failures_total{call=\"remote_fetch\"} 0"));
  BOOST_CHECK_EQUAL(
    body_of(call("GET", "/stats"))["latency"]["publish"]["failed"], 1);
  // A call the closed service refuses.
  BOOST_REQUIRE(svc->close());
  BOOST_CHECK(!svc->acquire(request(3, seq(301)), "ns"));
  auto late = svc->acquire_async(request(4, seq(301)), "ns");
  BOOST_REQUIRE(late.wait_for(15s) == std::future_status::ready);
  BOOST_CHECK(!late.get());
  BOOST_CHECK_EQUAL(svc->latency().acquire.failed, 2u);
  BOOST_CHECK_EQUAL(svc->latency().acquire.count, 1u);
}

BOOST_AUTO_TEST_CASE(admin_routes_need_the_token_when_one_is_set) {
  opts.http_admin_token = "s3cret-token";
  start();
  auto bare = call("POST", "/admin/cache/flush");
  BOOST_CHECK_EQUAL(bare.status, 401);
  BOOST_CHECK(bare.head.find("WWW-Authenticate: Bearer") != std::string::npos);
  BOOST_CHECK(
    body_of(bare)["error"].get<std::string>().find("Authorization: Bearer")
    != std::string::npos);
  auto wrong =
    call("POST", "/admin/ram/drop", "Authorization: Bearer s3cret-tokem\r\n");
  BOOST_CHECK_EQUAL(wrong.status, 401);
  BOOST_CHECK_EQUAL(body_of(wrong)["error"], "the admin token is wrong");
  BOOST_CHECK_EQUAL(call("POST", "/admin/sessions/x/close",
                         "Authorization: Bearer s3cret-token\r\n")
                      .status,
                    200);
  BOOST_CHECK_EQUAL(
    call("POST", "/admin/cache/flush", "Authorization: Bearer s3cret-token\r\n")
      .status,
    200);
  // Reading needs no token.
  BOOST_CHECK_EQUAL(call("GET", "/metrics").status, 200);
  BOOST_CHECK_EQUAL(call("GET", "/health").status, 200);
}

BOOST_AUTO_TEST_CASE(a_flush_that_is_not_durable_answers_503_with_evidence) {
  opts.write_attempts = 1; // the failed write is given up at once
  start();
  put("ns", seq(100));
  faulty.inject(tiers::ssd::fs_op::write, 1, tiers::ssd::fault_kind::eio);
  auto r = call("POST", "/admin/cache/flush");
  BOOST_CHECK_EQUAL(r.status, 503);
  auto b = body_of(r);
  BOOST_CHECK_EQUAL(b["durable"], false);
  BOOST_CHECK(!b["errors"].empty() || b["failed"].get<uint64_t>() > 0
              || b["pending"].get<uint64_t>() > 0);
}

BOOST_AUTO_TEST_CASE(a_session_close_answers_while_a_flush_waits_on_storage) {
  opts.storage_deadline_ms = 20000;
  start();
  auto r = request(1, seq(100));
  r.session = "s";
  BOOST_REQUIRE(svc->publish(r, oracle->prefill("ns", seq(100))));
  faulty.inject(tiers::ssd::fs_op::write, 1, tiers::ssd::fault_kind::stall);
  auto flush = std::async(std::launch::async,
                          [&] { return call("POST", "/admin/cache/flush"); });
  BOOST_REQUIRE(testing::eventually([&] { return faulty.stalled() > 0; }));
  auto t0 = std::chrono::steady_clock::now();
  auto closed = call("POST", "/admin/sessions/s/close");
  auto took = std::chrono::steady_clock::now() - t0;
  BOOST_CHECK_EQUAL(closed.status, 200);
  BOOST_CHECK_EQUAL(body_of(closed)["unpinned"], 1);
  // Answered while the flush still waits on the stalled write.
  BOOST_CHECK(flush.wait_for(0s) != std::future_status::ready);
  BOOST_CHECK_EQUAL(faulty.stalled(), 1u);
  BOOST_TEST_MESSAGE("session close took "
                     << std::chrono::duration<double>(took).count() << " s");
  faulty.release();
  BOOST_REQUIRE(flush.wait_for(15s) == std::future_status::ready);
  BOOST_CHECK_EQUAL(flush.get().status, 200);
}

BOOST_AUTO_TEST_CASE(health_says_closed_once_the_service_closed) {
  start();
  BOOST_CHECK_EQUAL(call("GET", "/health").status, 200);
  BOOST_REQUIRE(svc->close());
  auto h = call("GET", "/health");
  BOOST_CHECK_EQUAL(h.status, 503);
  BOOST_CHECK_EQUAL(body_of(h)["status"], "closed");
  BOOST_CHECK(has_line(call("GET", "/metrics").body, "kvtier_closed 1"));
  // An admin call on a closed service says why, as 503.
  auto f = call("POST", "/admin/ram/drop");
  BOOST_CHECK_EQUAL(f.status, 503);
  BOOST_CHECK(body_of(f)["error"].get<std::string>().find("closed")
              != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_naming_what_was_wrong) {
  start();
  auto garbage = testing::http_exchange(port(), "NOT HTTP AT ALL\r\n\r\n");
  BOOST_CHECK_EQUAL(garbage.status, 400);
  auto big = http_call(port(), "POST", "/admin/cache/flush", {},
                       std::string(65 * 1024, 'x'));
  BOOST_CHECK_EQUAL(big.status, 413);
  BOOST_CHECK(big.body.find("64 KiB") != std::string::npos);
  auto huge_head =
    http_call(port(), "GET", "/health",
              "X-Filler: " + std::string(17 * 1024, 'y') + "\r\n");
  BOOST_CHECK_EQUAL(huge_head.status, 431);
  auto escape = call("POST", "/admin/sessions/%zz/close");
  BOOST_CHECK_EQUAL(escape.status, 400);
  BOOST_CHECK(body_of(escape)["error"].get<std::string>().find("%-escape")
              != std::string::npos);
  auto bytes = call("POST", "/admin/ram/drop?bytes=12x");
  BOOST_CHECK_EQUAL(bytes.status, 400);
  BOOST_CHECK_EQUAL(body_of(bytes)["error"],
                    "bytes: expected a whole number of bytes, not '12x'");
  // Nothing else was lost: the endpoint still serves.
  BOOST_CHECK_EQUAL(call("GET", "/health").status, 200);
  auto s = body_of(call("GET", "/stats"));
  BOOST_CHECK_EQUAL(s["http"]["bad_requests"], 3);
}

BOOST_AUTO_TEST_CASE(connections_over_the_cap_are_answered_503) {
  opts.http_max_connections = 2;
  start();
  int a = testing::http_connect(port(), 5s);
  int b = testing::http_connect(port(), 5s);
  BOOST_REQUIRE(a >= 0 && b >= 0);
  // Both are served (idle) once the acceptor took them: the third waits
  // for nothing, it is refused at once.
  http_reply third;
  BOOST_REQUIRE(testing::eventually([&] {
    third = call("GET", "/health");
    return third.status == 503;
  }));
  BOOST_CHECK(third.body.find("http.max-connections") != std::string::npos);
  ::close(a);
  ::close(b);
  BOOST_CHECK(
    testing::eventually([&] { return call("GET", "/health").status == 200; }));
  auto s = body_of(call("GET", "/stats"));
  BOOST_CHECK_GE(s["http"]["refused_busy"].get<uint64_t>(), 1u);
}

BOOST_AUTO_TEST_CASE(a_client_that_stalls_is_disconnected_at_the_deadline) {
  opts.http_timeout_ms = 200;
  start();
  int fd = testing::http_connect(port(), 5s);
  BOOST_REQUIRE(fd >= 0);
  std::string part = "GET /hea";
  ::send(fd, part.data(), part.size(), MSG_NOSIGNAL);
  auto t0 = std::chrono::steady_clock::now();
  auto got = testing::http_read_all(fd); // ends when the server closes
  auto took = std::chrono::steady_clock::now() - t0;
  ::close(fd);
  BOOST_CHECK(got.empty());
  BOOST_CHECK(took < 4s); // the deadline (0.2 s), not the client's 5 s
  BOOST_CHECK_EQUAL(call("GET", "/health").status, 200);
}

BOOST_AUTO_TEST_CASE(head_answers_the_get_head_without_its_body) {
  start();
  for (std::string target : {"/health", "/metrics", "/nothing"}) {
    BOOST_TEST_CONTEXT(target) {
      auto get = call("GET", target);
      auto head = call("HEAD", target);
      BOOST_CHECK_EQUAL(head.status, get.status);
      BOOST_CHECK(head.body.empty());
      BOOST_CHECK(!get.body.empty());
      // /metrics changes between the two calls (the request counters):
      // only the digits may differ, so compare lengths within a few.
      auto at = head.head.find("Content-Length: ");
      BOOST_REQUIRE(at != std::string::npos);
      auto length = std::stoul(head.head.substr(at + 16));
      BOOST_CHECK_LE(length, get.body.size() + 8);
      BOOST_CHECK_GE(length + 8, get.body.size());
      if (target != "/metrics")
        BOOST_CHECK_EQUAL(length, get.body.size());
    }
  }
}

BOOST_AUTO_TEST_CASE(keep_alive_serves_several_requests_on_one_connection) {
  start();
  int fd = testing::http_connect(port(), 5s);
  BOOST_REQUIRE(fd >= 0);
  std::string two =
    "GET /health HTTP/1.1\r\nHost: k\r\n\r\n"
    "GET /health HTTP/1.1\r\nHost: k\r\nConnection: close\r\n\r\n";
  ::send(fd, two.data(), two.size(), MSG_NOSIGNAL);
  auto got = testing::http_read_all(fd);
  ::close(fd);
  size_t n = 0;
  for (size_t at = 0;
       (at = got.find("HTTP/1.1 200 OK", at)) != std::string::npos; ++at)
    ++n;
  BOOST_CHECK_EQUAL(n, 2u);
}

BOOST_AUTO_TEST_CASE(a_port_in_use_names_the_key_and_creates_nothing) {
  start();
  auto busy = svc->http_address();
  auto second_opts = opts;
  second_opts.http_port = testing::port_of(busy);
  second_opts.ssd_dir = "/ssd2";
  runtime::service second{second_opts, runtime::service_parts{&memory}};
  auto err = second.start_error();
  BOOST_REQUIRE(err);
  auto text = describe(err);
  auto port = std::to_string(second_opts.http_port);
  BOOST_CHECK_MESSAGE(
    text.find("http.port = " + port + ": cannot listen on 127.0.0.1:" + port)
      != std::string::npos,
    text);
  // Refused before anything was made: no SSD directory.
  BOOST_CHECK_MESSAGE(!memory.mode("/ssd2"), "/ssd2 was created");
}

BOOST_AUTO_TEST_CASE(tokens_are_counted_by_where_acquires_served_them) {
  opts.checkpoint_every_tokens = 16;
  start();
  put("ns", seq(100));
  BOOST_CHECK(get("ns", seq(101)).source == runtime::state_source::ram);
  BOOST_CHECK(get("other", seq(10)).source == runtime::state_source::none);
  auto demoted = svc->demote_idle(0); // to SSD, out of RAM
  BOOST_REQUIRE(demoted && *demoted == 1u);
  BOOST_CHECK(get("ns", seq(101), 2).source == runtime::state_source::ssd);
  // A checkpoint covers the prompt and more: its prompt part counts.
  auto prompt = seq(50, 1000);
  auto r = request(42, prompt, 64);
  auto gen = oracle->generate("ns", prompt, 16);
  BOOST_REQUIRE(*svc->checkpoint(r, oracle->prefill("ns", cat(prompt, gen))));
  BOOST_CHECK(get("ns", prompt, 42).source
              == runtime::state_source::checkpoint);
  auto t = report().tokens;
  BOOST_CHECK_EQUAL(t.ram, 100u);
  BOOST_CHECK_EQUAL(t.ssd, 100u);
  BOOST_CHECK_EQUAL(t.peer, 0u);
  BOOST_CHECK_EQUAL(t.checkpoint, 50u);
  BOOST_CHECK_EQUAL(t.computed, 1u + 10u + 1u);
  // The same counters on /metrics and /stats (one home: the facade).
  auto m = call("GET", "/metrics").body;
  BOOST_CHECK(has_line(m, "kvtier_tokens_served_total{tier=\"ram\"} 100"));
  BOOST_CHECK(has_line(m, "kvtier_tokens_served_total{tier=\"ssd\"} 100"));
  BOOST_CHECK(has_line(m, "kvtier_tokens_served_total{tier=\"peer\"} 0"));
  BOOST_CHECK(
    has_line(m, "kvtier_tokens_served_total{tier=\"checkpoint\"} 50"));
  BOOST_CHECK(has_line(m, "kvtier_tokens_computed_total 12"));
  auto j = body_of(call("GET", "/stats"))["report"]["tokens"];
  BOOST_CHECK_EQUAL(j["ram"], 100);
  BOOST_CHECK_EQUAL(j["computed"], 12);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_interval_without_an_ssd_tier_says_ram_only) {
  std::ostringstream lines;
  log::redirect(&lines);
  opts.ssd_dir.clear();
  opts.checkpoint_every_tokens = 16;
  start();
  log::redirect(nullptr);
  auto text = lines.str();
  BOOST_CHECK_MESSAGE(text.find("[warn] kvtier service: "
                                "service.checkpoint-every-tokens = 16 "
                                "without ssd-tier.dir: checkpoints are kept "
                                "in RAM only and none survives a restart")
                        != std::string::npos,
                      text);
  auto c = report().checkpoints;
  BOOST_CHECK(c.ram_only);
  BOOST_CHECK_EQUAL(c.every_tokens, 16u);
  BOOST_CHECK(
    has_line(call("GET", "/metrics").body, "kvtier_checkpoints_ram_only 1"));
  BOOST_CHECK_EQUAL(
    body_of(call("GET", "/stats"))["report"]["checkpoints"]["ram_only"], true);
  // Checkpoints still resume within the process.
  auto prompt = seq(40);
  auto r = request(7, prompt, 32);
  auto gen = oracle->generate("ns", prompt, 16);
  BOOST_REQUIRE(*svc->checkpoint(r, oracle->prefill("ns", cat(prompt, gen))));
  BOOST_CHECK(get("ns", prompt, 7).source == runtime::state_source::checkpoint);
  // With an SSD tier they reach the disk: not RAM-only.
  opts.ssd_dir = "/ssd";
  start();
  BOOST_CHECK(!report().checkpoints.ram_only);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(exposition)

BOOST_AUTO_TEST_CASE(stats_json_names_every_report_field) {
  // Every part of the report is a struct of uint64_t figures: the JSON
  // has a key for each (a field added to the report but not to the
  // table fails here).
  using R = runtime::service_report;
  auto j = http::stats_json({})["report"];
  BOOST_CHECK_EQUAL(j["ram"].size(), sizeof(R::ram_part) / 8);
  BOOST_CHECK_EQUAL(j["ssd"].size(), sizeof(R::ssd_part) / 8);
  BOOST_CHECK_EQUAL(j["checkpoints"].size(), sizeof(R::checkpoints_part) / 8);
  BOOST_CHECK_EQUAL(j["sessions"].size(), sizeof(R::sessions_part) / 8);
  BOOST_CHECK_EQUAL(j["objects"].size(), sizeof(R::objects_part) / 8);
  BOOST_CHECK_EQUAL(j["admission"].size(), sizeof(R::admission_part) / 8);
  BOOST_CHECK_EQUAL(j["peer"].size(), sizeof(R::peer_part) / 8);
  BOOST_CHECK_EQUAL(j["node"].size(), sizeof(R::node_part) / 8);
  BOOST_CHECK_EQUAL(j["tokens"].size(), sizeof(R::tokens_part) / 8);
  BOOST_CHECK_EQUAL(j["io"]["ram"].size(), sizeof(runtime::io_counters) / 8);
  BOOST_CHECK_EQUAL(j["io"]["ssd"].size(), sizeof(runtime::io_counters) / 8);
  for (auto* top : {"demotions", "cold_tiers", "dead_tiers", "cold_late",
                    "closed", "silent_tiers"})
    BOOST_CHECK_MESSAGE(j.contains(top), top);
  auto p = http::stats_json({})["persistence"];
  BOOST_CHECK_EQUAL(p.size(), sizeof(runtime::persistence_stats) / 8);
}

BOOST_AUTO_TEST_CASE(a_silent_member_s_figures_are_missing_not_zero) {
  http::scrape s;
  s.report.ram.hits = 7;
  s.report.silent_tiers = {"ssd"};
  auto text = http::metrics_text(s);
  BOOST_CHECK(text.find("kvtier_ram_hits_total 7") != std::string::npos);
  BOOST_CHECK(text.find("kvtier_tier_silent{tier=\"ssd\"} 1")
              != std::string::npos);
  // The SSD's figures (its section and its I/O) are left out, not 0.
  BOOST_CHECK(text.find("kvtier_ssd_files") == std::string::npos);
  BOOST_CHECK(text.find("kvtier_ssd_writes_ok") == std::string::npos);
  BOOST_CHECK(text.find("kvtier_io_reads_total{tier=\"ssd\"}")
              == std::string::npos);
  BOOST_CHECK(text.find("kvtier_io_reads_total{tier=\"ram\"}")
              != std::string::npos);
  auto j = http::stats_json(s)["report"];
  BOOST_CHECK(j["ssd"]["entries"].is_null());
  BOOST_CHECK_EQUAL(j["ram"]["hits"], 7);
}

BOOST_AUTO_TEST_CASE(health_decides_from_the_report_and_the_peers) {
  using ms = std::chrono::milliseconds;
  auto verdict = [](const caf::expected<runtime::service_report>& r,
                    std::optional<http::node_health> n = std::nullopt) {
    auto out = http::health_of(r, n);
    return std::pair{out.status, json::parse(out.body)};
  };
  runtime::service_report r;
  auto [ok_status, ok] = verdict(r);
  BOOST_CHECK_EQUAL(ok_status, 200);
  BOOST_CHECK_EQUAL(ok["status"], "ok");
  // The service did not report; it closed; a tier missed its deadline.
  auto [u_status, u] = verdict(make_error(ec::timeout, "no answer"));
  BOOST_CHECK_EQUAL(u_status, 503);
  BOOST_CHECK_EQUAL(u["status"], "unavailable");
  BOOST_CHECK_EQUAL(u["reasons"].size(), 1u);
  auto closed = r;
  closed.closed = true;
  BOOST_CHECK_EQUAL(verdict(closed).second["status"], "closed");
  BOOST_CHECK_EQUAL(verdict(closed).second["reasons"].size(), 1u);
  BOOST_CHECK(ok["reasons"].empty());
  auto silent = r;
  silent.silent_tiers = {"ssd"};
  auto [s_status, s] = verdict(silent);
  BOOST_CHECK_EQUAL(s_status, 503);
  BOOST_CHECK_EQUAL(s["status"], "degraded");
  BOOST_CHECK_EQUAL(s["reasons"][0],
                    "the ssd tier did not answer the report within its "
                    "deadline");
  // A node: alone it is fine; with peers configured and none up, it is
  // starting during its grace (200) and degraded after it (503).
  http::node_health node{"n1", "127.0.0.1:1", ms{0}, ms{1400}};
  BOOST_CHECK_EQUAL(verdict(r, node).first, 200);
  auto lonely = r;
  lonely.node.configured_peers = 2;
  node.since_start = ms{1000};
  auto [g_status, g] = verdict(lonely, node);
  BOOST_CHECK_EQUAL(g_status, 200);
  BOOST_CHECK_EQUAL(g["status"], "starting");
  BOOST_CHECK_EQUAL(g["peers"]["grace_left_ms"], 400);
  node.since_start = ms{1400};
  auto [d_status, d] = verdict(lonely, node);
  BOOST_CHECK_EQUAL(d_status, 503);
  BOOST_CHECK_EQUAL(d["status"], "degraded");
  BOOST_CHECK_EQUAL(d["peers"]["configured"], 2);
  BOOST_CHECK_EQUAL(d["peers"]["up"], 0);
  auto met = lonely;
  met.peer.peers_up = 1;
  auto [m_status, m] = verdict(met, node);
  BOOST_CHECK_EQUAL(m_status, 200);
  BOOST_CHECK_EQUAL(m["status"], "ok");
  BOOST_CHECK_EQUAL(m["node_id"], "n1");
  // The grace: one connection attempt, then one retry at the longest
  // backoff.
  runtime::service_options o;
  BOOST_CHECK_EQUAL(http::peer_grace(o).count(), 2000 + 5000);
}

BOOST_AUTO_TEST_CASE(metric_names_follow_prometheus_conventions) {
  http::scrape s;
  s.report.ram.hits = 7;
  s.report.peer.failed_timeout = 3;
  s.report.ssd_io.bytes_written = 4096;
  auto text = http::metrics_text(s);
  std::set<std::string> seen;
  for (auto& name : http::metric_names()) {
    BOOST_CHECK_MESSAGE(seen.insert(name).second, "twice: " << name);
    BOOST_CHECK_MESSAGE(name.rfind("kvtier_", 0) == 0, name);
    auto type_at = text.find("# TYPE " + name + " ");
    BOOST_REQUIRE_MESSAGE(type_at != std::string::npos, "no TYPE: " << name);
    auto type =
      text.substr(type_at + 8 + name.size(),
                  text.find('\n', type_at) - type_at - 8 - name.size());
    bool total = name.size() > 6 && name.substr(name.size() - 6) == "_total";
    BOOST_CHECK_MESSAGE((type == "counter") == total, name << " is a " << type);
    BOOST_CHECK_MESSAGE(text.find("# HELP " + name + " ") != std::string::npos,
                        "no HELP: " << name);
    BOOST_CHECK_MESSAGE(name.find("millis") == std::string::npos, name);
  }
  BOOST_CHECK(has_line(text, "kvtier_ram_hits_total 7"));
  BOOST_CHECK(
    has_line(text, "kvtier_peer_fetch_failures_total{reason=\"timeout\"} 3"));
  BOOST_CHECK(
    has_line(text, "kvtier_io_written_bytes_total{tier=\"ssd\"} 4096"));
  BOOST_CHECK(has_line(text, "kvtier_io_written_bytes_total{tier=\"ram\"} 0"));
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative) {
  tiers::latency_histogram h;
  h.observe(30e-6);                        // first bucket (<= 50 us)
  h.observe(std::chrono::milliseconds{3}); // <= 5 ms
  h.observe(20.0);                         // +Inf
  http::scrape s;
  s.latency.acquire = h.read();
  auto text = http::metrics_text(s);
  BOOST_CHECK(
    has_line(text, "kvtier_acquire_duration_seconds_bucket{le=\"5e-05\"} 1"));
  BOOST_CHECK(
    has_line(text, "kvtier_acquire_duration_seconds_bucket{le=\"0.005\"} 2"));
  BOOST_CHECK(
    has_line(text, "kvtier_acquire_duration_seconds_bucket{le=\"10\"} 2"));
  BOOST_CHECK(
    has_line(text, "kvtier_acquire_duration_seconds_bucket{le=\"+Inf\"} 3"));
  BOOST_CHECK(has_line(text, "kvtier_acquire_duration_seconds_count 3"));
  auto j = http::stats_json(s)["latency"]["acquire"];
  BOOST_CHECK_EQUAL(j["count"], 3);
  BOOST_CHECK_EQUAL(j["failed"], 0);
  double sum = j["sum_seconds"];
  BOOST_CHECK_CLOSE(sum, 20.00303, 0.001);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(http_config)

BOOST_AUTO_TEST_CASE(a_non_loopback_address_needs_an_admin_token) {
  runtime::service_options o;
  o.http_address = "0.0.0.0";
  auto err = o.validate();
  BOOST_REQUIRE(err);
  BOOST_CHECK_EQUAL(describe(err),
                    "kvtier: invalid_config: http.address = \"0.0.0.0\" is "
                    "not a loopback address (127.0.0.0/8, ::1, localhost); "
                    "set http.admin-token to serve the endpoint on any other "
                    "address");
  o.http_admin_token = "tok";
  BOOST_CHECK(!o.validate());
  o.http_admin_token = "has space";
  BOOST_REQUIRE(o.validate());
  BOOST_CHECK_EQUAL(describe(o.validate()),
                    "kvtier: invalid_config: http.admin-token: expected "
                    "printable characters without spaces");
}

BOOST_AUTO_TEST_CASE(out_of_range_http_values_are_refused) {
  runtime::service_options o;
  o.http_port = 70000;
  BOOST_CHECK_EQUAL(describe(o.validate()),
                    "kvtier: invalid_config: http.port = 70000 is outside the "
                    "accepted range 0 .. 65535");
  o = {};
  o.http_max_connections = 0;
  BOOST_CHECK(o.validate());
  o = {};
  o.http_timeout_ms = 1;
  BOOST_CHECK(o.validate());
  o = {};
  o.http_address = "";
  BOOST_CHECK(o.validate());
}

BOOST_AUTO_TEST_SUITE_END()
