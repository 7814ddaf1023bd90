// `kvtier node` processes on loopback (tests/cluster/node_process.hpp):
// three nodes meet through --join chains, a node of another model identity
// is refused while the others go on, a stopped node is down within
// down-after-ms and up again after SIGCONT, a killed node is down and
// rejoins when restarted on its port, SIGTERM exits 0 and its peers mark
// it as left at once. Each wait is bounded; nothing is left running.
#define BOOST_TEST_MODULE cluster_nodes
#include "tests/cluster/node_process.hpp"

#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"

#include <algorithm>
#include <numeric>
#include <regex>

using namespace kvtier;
using namespace kvtier::test;
using cluster::peer_state;

namespace {

struct fixture : nodes_fixture {
  /// Whether `n` sees exactly `ids` up.
  bool sees_up(const node_process& n, std::vector<std::string> ids) {
    auto v = view(n);
    std::sort(ids.begin(), ids.end());
    return v && v->in_state(peer_state::up) == ids;
  }

  /// The stdout of `command`.
  static std::string run(const std::string& command) {
    std::string out;
    if (auto* p = ::popen(command.c_str(), "r")) {
      char buf[256];
      while (auto n = std::fread(buf, 1, sizeof buf, p))
        out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }

  node_settings settings(std::string id, std::vector<std::string> joins = {}) {
    node_settings s;
    s.node_id = std::move(id);
    s.joins = std::move(joins);
    return s;
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(three_nodes_joined_in_a_chain_see_each_other_up,
                        fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  node_process c{dir.path, settings("c", {b.address()})};
  BOOST_TEST(wait_for([&] { return sees_up(a, {"b", "c"}); }, 5000ms));
  BOOST_TEST(wait_for([&] { return sees_up(b, {"a", "c"}); }, 5000ms));
  BOOST_TEST(wait_for([&] { return sees_up(c, {"a", "b"}); }, 5000ms));
  auto v = view(a);
  BOOST_REQUIRE(v);
  BOOST_TEST(v->self.node_id == "a");
  BOOST_TEST(v->self.address == a.address());
  BOOST_TEST(v->refused.malformed == 0u);
  BOOST_TEST(v->refused.model_identity == 0u);
  // `kvtier members` prints the same view.
  auto out = run(std::string{KVTIER_PROGRAM} + " members " + a.address());
  BOOST_TEST(out.find("self a " + a.address()) != std::string::npos, out);
  BOOST_TEST(out.find("member b " + b.address() + " up") != std::string::npos,
             out);
  BOOST_TEST(out.find("member c " + c.address() + " up") != std::string::npos,
             out);
}

BOOST_FIXTURE_TEST_CASE(a_second_node_with_the_same_id_is_refused, fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  node_process twin{dir.path, settings("b", {a.address()})};
  BOOST_TEST(wait_for(
    [&] {
      auto v = view(a);
      return v && v->refused.node_id >= 1;
    },
    5000ms));
  BOOST_TEST(sees_up(a, {"b"}));
  auto v = view(a);
  BOOST_REQUIRE(v);
  for (auto& m : v->members)
    if (m.node_id == "b")
      BOOST_TEST(m.address == b.address()); // the first one stays
  BOOST_TEST(sees_up(twin, {}));
}

BOOST_FIXTURE_TEST_CASE(a_node_of_another_model_identity_is_refused, fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  auto odd = settings("odd", {a.address()});
  odd.identity = "another-model";
  node_process o{dir.path, odd};
  // Refused on both sides, and counted.
  BOOST_TEST(wait_for(
    [&] {
      auto v = view(a);
      return v && v->refused.model_identity >= 1;
    },
    5000ms));
  BOOST_TEST(wait_for(
    [&] {
      auto v = view(o);
      return v && v->refused.model_identity >= 1;
    },
    5000ms));
  BOOST_TEST(sees_up(o, {}));
  // The others keep going: a and b up, the odd one not a member of either.
  BOOST_TEST(wait_for([&] { return sees_up(a, {"b"}); }, 5000ms));
  BOOST_TEST(wait_for([&] { return sees_up(b, {"a"}); }, 5000ms));
  auto v = view(a);
  BOOST_REQUIRE(v);
  for (auto& m : v->members)
    BOOST_TEST(m.node_id != "odd");
  // The log line names both identities.
  auto log = a.log();
  BOOST_TEST(log.find("model identity") != std::string::npos, log);
  BOOST_TEST(log.find("odd") != std::string::npos, log);
}

BOOST_FIXTURE_TEST_CASE(a_stopped_node_is_down_within_the_timeout_and_back_up,
                        fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  BOOST_REQUIRE(wait_for([&] { return sees_up(a, {"b"}); }, 5000ms));
  auto t0 = std::chrono::steady_clock::now();
  b.pause();
  // down-after-ms (1000) plus a heartbeat period on an idle machine.
  BOOST_TEST(
    wait_for([&] { return state_of(a, "b") == peer_state::down; }, 1800ms));
  auto took =
    std::chrono::duration_cast<ms>(std::chrono::steady_clock::now() - t0);
  BOOST_TEST_MESSAGE("marked down after " << took.count() << " ms");
  BOOST_TEST(took.count() >= 900); // silence, not a dropped connection
  b.resume();
  BOOST_TEST(wait_for([&] { return sees_up(a, {"b"}); }, 5000ms));
  BOOST_TEST(wait_for([&] { return sees_up(b, {"a"}); }, 5000ms));
}

BOOST_FIXTURE_TEST_CASE(a_killed_node_is_down_and_rejoins_on_its_port,
                        fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  BOOST_REQUIRE(wait_for([&] { return sees_up(a, {"b"}); }, 5000ms));
  auto port = b.port();
  b.kill9();
  BOOST_TEST(
    wait_for([&] { return state_of(a, "b") == peer_state::down; }, 1800ms));
  b.restart();
  BOOST_TEST(b.port() == port);
  BOOST_TEST(wait_for([&] { return sees_up(a, {"b"}); }, 5000ms));
  BOOST_TEST(wait_for([&] { return sees_up(b, {"a"}); }, 5000ms));
}

BOOST_FIXTURE_TEST_CASE(sigterm_flushes_exits_zero_and_peers_mark_it_left,
                        fixture) {
  node_process a{dir.path, settings("a")};
  // b holds three entries in RAM (write-behind off): only the close that
  // SIGTERM starts puts them on its SSD directory.
  auto sb = settings("b", {a.address()});
  sb.program = KVTIER_NODE_WRITER;
  sb.extra_args = {"--entries", "3"};
  sb.ssd_dir = (dir.path / "ssd-b").string();
  node_process b{dir.path, sb};
  node_process c{dir.path, settings("c", {a.address()})};
  BOOST_REQUIRE(wait_for([&] { return sees_up(a, {"b", "c"}); }, 5000ms));
  BOOST_REQUIRE(wait_for([&] { return sees_up(c, {"a", "b"}); }, 5000ms));
  auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(b.stop() == 0, b.log());
  // b waited for its peers' acknowledgements before it exited: no timeout.
  BOOST_TEST(state_of(a, "b") == peer_state::left);
  BOOST_TEST(state_of(c, "b") == peer_state::left);
  auto took =
    std::chrono::duration_cast<ms>(std::chrono::steady_clock::now() - t0);
  BOOST_TEST(took.count() < 1000, "stopping took " << took.count() << " ms");
  BOOST_TEST(sees_up(a, {"c"}));
  auto log = b.log();
  BOOST_TEST(log.find("flushed: 3 entries, durable=true") != std::string::npos,
             log);
  BOOST_TEST(log.find("left (2 peer(s) told)") != std::string::npos, log);
  // Log lines (docs/logging.md): a UTC timestamp to the millisecond, the
  // level, the node.
  std::regex flushed{R"((^|\n)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[info\] )"
                     R"(kvtier node b: flushed: 3 entries, durable=true, 0 )"
                     R"(failed\n)"};
  BOOST_TEST(std::regex_search(log, flushed), log);
  BOOST_TEST(
    log.find("[info] kvtier node b: listening on ") != std::string::npos, log);
  // Its SSD directory holds the three entries, byte-exact.
  runtime::service_options o;
  o.model = "tiny-dense";
  o.model_scale = 1.0;
  o.model_identity = "test-model";
  o.ssd_dir = sb.ssd_dir;
  o.write_behind = false;
  o.idle_demotion_ms = 0;
  o.ram_cap_bytes = 64ull << 20;
  runtime::service svc{o};
  BOOST_REQUIRE_MESSAGE(!svc.start_error(), describe(svc.start_error()));
  auto g = runtime::running_geometry(o);
  BOOST_REQUIRE(g);
  runtime::oracle_engine oracle{*g};
  for (uint32_t i = 0; i < 3; ++i) {
    tiers::token_seq prompt(64);
    std::iota(prompt.begin(), prompt.end(), 1000 * i + 1);
    prompt.push_back(7);
    auto r = svc.acquire({100 + i, prompt, 16, std::nullopt}, "ns");
    BOOST_REQUIRE_MESSAGE(r, (r ? std::string{} : describe(r.error())));
    BOOST_CHECK(r->source == runtime::state_source::ssd);
    BOOST_TEST(r->usable_tokens == 64u);
    auto err = oracle.verify_served(r->state, "ns", prompt, false);
    BOOST_TEST(!err, describe(err));
  }
}
