// The operator's endpoint of a `kvtier node` process (docs/operations.md),
// checked from outside with a real HTTP client (curl) and Prometheus' own
// linter (promtool check metrics, Debian's `prometheus` package): every
// route, the admin token, a peer seen in the metrics, and a refused
// configuration. Loopback, ephemeral ports; every process is stopped by
// the test, every wait bounded.
#define BOOST_TEST_MODULE cluster_http_node
#include "tests/cluster/node_process.hpp"

#include <nlohmann/json.hpp>

using namespace kvtier;
using namespace kvtier::test;

namespace {

struct result {
  int status = 0;
  std::string body;
};

struct fixture {
  temp_dir dir;
  int calls = 0;

  /// curl `method` `url` (bounded: 10 s), with `header` when not empty.
  result curl(const std::string& method, const std::string& url,
              const std::string& header = {}) {
    auto body = dir.path / ("body-" + std::to_string(++calls));
    auto [rc, out] =
      run_command("curl -s -m 10 -X " + method + " -o '" + body.string()
                  + "' -w '%{http_code}' "
                  + (header.empty() ? std::string{} : "-H '" + header + "' ")
                  + "'" + url + "'");
    BOOST_REQUIRE_MESSAGE(rc == 0, "curl " << url << " failed: " << out);
    std::ifstream in(body);
    std::stringstream s;
    s << in.rdbuf();
    return {std::stoi(out), s.str()};
  }

  node_settings with_http(std::string id, std::vector<std::string> extra = {}) {
    node_settings s;
    s.node_id = std::move(id);
    s.extra_args = {"--http.enabled", "--http.port=0"};
    s.extra_args.insert(s.extra_args.end(), extra.begin(), extra.end());
    return s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(every_route_of_a_node_answers_curl_and_promtool,
                        fixture) {
  auto s = with_http("a", {"--http.admin-token=t0ken"});
  s.ssd_dir = (dir.path / "ssd-a").string();
  node_process a{dir.path, s};
  BOOST_REQUIRE_MESSAGE(!a.http_address().empty(), a.log());
  node_settings b_settings;
  b_settings.node_id = "b";
  b_settings.joins = {a.address()};
  node_process b{dir.path, b_settings};
  auto base = "http://" + a.http_address();
  const std::string auth = "Authorization: Bearer t0ken";

  auto health = curl("GET", base + "/health");
  BOOST_CHECK_EQUAL(health.status, 200);
  auto h = nlohmann::json::parse(health.body);
  BOOST_CHECK_EQUAL(h["status"], "ok");
  BOOST_CHECK_EQUAL(h["node_id"], "a");
  BOOST_CHECK(h["reasons"].empty());

  // The peer shows in the metrics once it is up.
  result metrics;
  BOOST_CHECK(wait_for(
    [&] {
      metrics = curl("GET", base + "/metrics");
      return metrics.body.find("\nkvtier_peer_peers_up 1\n")
             != std::string::npos;
    },
    10000ms));
  BOOST_CHECK_EQUAL(metrics.status, 200);
  auto scraped = dir.path / "metrics.txt";
  std::ofstream(scraped) << metrics.body;
  auto [lint_rc, lint] =
    run_command("promtool check metrics < '" + scraped.string() + "'");
  BOOST_CHECK_MESSAGE(lint_rc == 0, "promtool: " << lint);
  BOOST_CHECK_MESSAGE(lint.find("problem") == std::string::npos, lint);
  for (auto* family :
       {"kvtier_acquire_duration_seconds", "kvtier_publish_duration_seconds",
        "kvtier_ssd_restore_duration_seconds",
        "kvtier_peer_fetch_duration_seconds"})
    BOOST_CHECK_MESSAGE(
      metrics.body.find(std::string{"# TYPE "} + family + " histogram")
        != std::string::npos,
      family);
  // The operator's counters, linted with the rest above.
  for (auto* family :
       {"kvtier_tokens_served_total", "kvtier_tokens_computed_total",
        "kvtier_node_refused_frames_total",
        "kvtier_node_refused_messages_total", "kvtier_peer_lane_refused_total",
        "kvtier_peer_lane_failed_total"})
    BOOST_CHECK_MESSAGE(
      metrics.body.find(std::string{"# TYPE "} + family + " counter")
        != std::string::npos,
      family);

  auto stats = curl("GET", base + "/stats");
  BOOST_CHECK_EQUAL(stats.status, 200);
  auto j = nlohmann::json::parse(stats.body);
  BOOST_CHECK_EQUAL(j["report"]["peer"]["peers_up"], 1);
  BOOST_CHECK(j["persistence"].contains("pending_bytes"));

  // Admin routes: refused without the token, served with it.
  BOOST_CHECK_EQUAL(curl("POST", base + "/admin/cache/flush").status, 401);
  auto flushed = curl("POST", base + "/admin/cache/flush", auth);
  BOOST_CHECK_EQUAL(flushed.status, 200);
  BOOST_CHECK_EQUAL(nlohmann::json::parse(flushed.body)["durable"], true);
  auto closed = curl("POST", base + "/admin/sessions/chat-7/close", auth);
  BOOST_CHECK_EQUAL(closed.status, 200);
  BOOST_CHECK_EQUAL(nlohmann::json::parse(closed.body)["session"], "chat-7");
  auto dropped = curl("POST", base + "/admin/ram/drop?bytes=1048576", auth);
  BOOST_CHECK_EQUAL(dropped.status, 200);
  BOOST_CHECK(nlohmann::json::parse(dropped.body).contains("released"));
  BOOST_CHECK_EQUAL(curl("GET", base + "/admin/ram/drop", auth).status, 405);
  BOOST_CHECK_EQUAL(curl("GET", base + "/nowhere").status, 404);

  BOOST_CHECK_EQUAL(b.stop(), 0);
  BOOST_CHECK_EQUAL(a.stop(), 0);
}

BOOST_FIXTURE_TEST_CASE(a_node_refuses_a_public_endpoint_without_a_token,
                        fixture) {
  auto s = with_http("lonely");
  auto conf = dir.path / "public.conf";
  node_process::write_config(s, conf);
  auto [rc, out] =
    run_command(std::string{KVTIER_PROGRAM} + " node --config '" + conf.string()
                + "' --http.enabled --http.address=0.0.0.0");
  BOOST_CHECK_EQUAL(rc, 2);
  BOOST_CHECK_MESSAGE(out.find("http.address = \"0.0.0.0\" is not a loopback "
                               "address")
                        != std::string::npos,
                      out);
  BOOST_CHECK_MESSAGE(out.find("kvtier: kvtier:") == std::string::npos, out);
}
