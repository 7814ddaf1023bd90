// `kvtier replay --nodes 3` (runtime/tools/multi_replay.hpp) on a slice of
// the Mooncake conversation trace, through its library entry with the
// built program as the node processes: every placement is in the JSON,
// every node's served states verified and none wrong, the nodes' request
// counts sum to the slice's, round-robin's balance is exact, the isolated
// nodes share nothing, and the joined ones fetch from each other (the
// slice's later turns continue conversations started on another node).
// Bad input (0 nodes, a missing trace, an unknown placement) is refused
// with a clear error, and a replay agent refuses a step past its trace; a
// node without one refuses steps. Every process is started and stopped by
// the test (node_child: bounded start and stop, PR_SET_PDEATHSIG).
#define BOOST_TEST_MODULE cluster_replay_nodes
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/options.hpp"
#include "runtime/tools/client.hpp"
#include "runtime/tools/multi_replay.hpp"
#include "runtime/tools/node_spawn.hpp"

#include <caf/scoped_actor.hpp>

#include <cstdio>
#include <fstream>

using namespace kvtier;
using namespace kvtier::runtime;
using namespace std::chrono_literals;

namespace {

const std::string conversation = std::string{KVTIER_SOURCE_DIR}
                                 + "/tests/traces/mooncake-fast25/"
                                   "conversation_trace.jsonl.gz";
constexpr size_t slice = 150;

replay_settings settings() {
  replay_settings rs;
  rs.trace = conversation;
  rs.max_requests = slice;
  // Small caps: the nodes spill too (32 B per token; 24 MiB per node).
  rs.ram_cap_bytes = 72ull << 20;
  rs.ssd_cap_bytes = 96ull << 20;
  return rs;
}

service_options options() {
  service_options o;
  o.io_engine = "threads";
  return o;
}

trace load_slice() {
  trace_options to;
  to.max_requests = slice;
  auto t = load_trace(conversation, to);
  BOOST_REQUIRE_MESSAGE(static_cast<bool>(t),
                        (t ? std::string{} : describe(t.error())));
  return std::move(*t);
}

/// The run, once for every test case that reads it.
const multi_replay_result& result() {
  static std::optional<multi_replay_result> r;
  if (!r) {
    multi_replay_options mo;
    mo.nodes = 3;
    mo.program = KVTIER_PROGRAM;
    auto got = multi_replay(load_slice(), options(), settings(), mo);
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(got),
                          (got ? std::string{} : describe(got.error())));
    r = std::move(*got);
  }
  return *r;
}

const placement_result& placement(const std::string& name) {
  auto* p = result().find(name);
  BOOST_REQUIRE_MESSAGE(p != nullptr, "no placement " << name);
  BOOST_REQUIRE_MESSAGE(p->ran, name << " did not run: " << p->why);
  return *p;
}

/// The program's exit status and its stderr (into `err`).
int run_program(const std::string& args, std::string& err) {
  auto file = std::filesystem::temp_directory_path()
              / ("kvtier-replay-nodes-err-" + std::to_string(::getpid()));
  auto cmd =
    std::string{KVTIER_PROGRAM} + " " + args + " >/dev/null 2>" + file.string();
  int status = std::system(cmd.c_str());
  std::ifstream in(file);
  err.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_placement_is_in_the_json_verified_and_never_wrong) {
  auto j = to_json(result());
  BOOST_TEST(j["requests"].get<uint64_t>() == slice);
  BOOST_TEST(j["wrong_states"].get<uint64_t>() == 0u);
  std::vector<std::string> names;
  for (auto& s : j["scenarios"])
    names.push_back(s["name"].get<std::string>());
  BOOST_TEST(
    (names
     == std::vector<std::string>{"routed", "single", "random", "round-robin"}));
  for (auto& s : result().scenarios) {
    if (!s.ran)
      continue;
    BOOST_TEST_MESSAGE(s.name << ": hit " << s.token_hit_ratio());
    auto t = s.total();
    BOOST_TEST(t.wrong_states == 0u);
    BOOST_TEST(t.verified_states > 0u);
    BOOST_TEST(t.input_tokens
               == t.ram_tokens + t.ssd_tokens + t.peer_tokens + t.fresh_tokens);
    for (auto& n : s.per_node) {
      // The agent's own report agrees with what the driver counted, and
      // it verified every state it served.
      BOOST_TEST(n.report["verified"].get<bool>());
      BOOST_TEST(n.report["requests"].get<uint64_t>() == n.requests);
      BOOST_TEST(n.report["wrong_states"].get<uint64_t>() == 0u);
      BOOST_TEST(n.report["verified_states"].get<uint64_t>()
                 == n.verified_states);
      BOOST_TEST(n.report["peer_tokens"].get<uint64_t>() == n.peer_tokens);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_nodes_request_counts_sum_to_the_trace) {
  for (auto& s : result().scenarios) {
    if (!s.ran)
      continue;
    BOOST_TEST(s.per_node.size() == (s.name == "single" ? 1u : 3u));
    BOOST_TEST(s.total().requests == slice);
  }
}

BOOST_AUTO_TEST_CASE(round_robin_balance_is_exact) {
  auto& s = placement("round-robin");
  for (auto& n : s.per_node)
    BOOST_TEST(n.requests == slice / 3);
  BOOST_TEST(s.balance() == 1.0);
}

BOOST_AUTO_TEST_CASE(isolated_random_nodes_share_nothing) {
  auto& s = placement("random");
  auto t = s.total();
  BOOST_TEST(t.peer_tokens == 0u);
  BOOST_TEST(t.remote_fetches == 0u);
  BOOST_TEST(t.served_to_peers == 0u);
  // Seeded: every node got some of the slice.
  for (auto& n : s.per_node)
    BOOST_TEST(n.requests > 0u);
}

BOOST_AUTO_TEST_CASE(joined_nodes_fetch_continued_conversations) {
  for (auto* name : {"round-robin", "routed"}) {
    auto* p = result().find(name);
    if (!p || !p->ran)
      continue;
    auto t = p->total();
    BOOST_TEST_MESSAGE(name << ": " << t.remote_fetches << " fetches, "
                            << t.peer_tokens << " peer tokens");
    BOOST_TEST(t.remote_fetches > 0u);
    BOOST_TEST(t.peer_tokens > 0u);
    BOOST_TEST(t.served_to_peers == t.remote_fetches);
  }
  // One node with all the capacity serves at least what three
  // round-robin nodes sharing by fetches do.
  BOOST_TEST(placement("single").token_hit_ratio() + 1e-9
             >= placement("round-robin").token_hit_ratio() - 0.01);
}

BOOST_AUTO_TEST_CASE(zero_nodes_and_unknown_placements_are_refused) {
  auto t = load_slice();
  multi_replay_options mo;
  mo.program = KVTIER_PROGRAM;
  mo.nodes = 0;
  auto r = multi_replay(t, options(), settings(), mo);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == ec::invalid_argument));
  BOOST_TEST(describe(r.error()).find("node count") != std::string::npos);
  mo.nodes = 3;
  mo.scenarios = {"single", "sticky"};
  r = multi_replay(t, options(), settings(), mo);
  BOOST_REQUIRE(!r);
  BOOST_TEST(describe(r.error()).find("sticky") != std::string::npos);
  std::string err;
  BOOST_TEST(run_program("replay --nodes 0", err) == 2);
  BOOST_TEST(err.find("the node count must be 1 .. 64") != std::string::npos,
             err);
  BOOST_TEST(run_program("replay --nodes three", err) == 2);
  BOOST_TEST(err.find("not a number") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(a_missing_trace_is_refused_before_any_node_starts) {
  std::string err;
  BOOST_TEST(run_program("replay --nodes 3 /nonexistent/trace.jsonl", err)
             == 2);
  BOOST_TEST(err.find("/nonexistent/trace.jsonl") != std::string::npos, err);
  BOOST_TEST(run_program("node --replay-agent "
                         "--replay.trace=/nonexistent/trace.jsonl",
                         err)
             == 2);
  BOOST_TEST(err.find("--replay-agent") != std::string::npos, err);
  BOOST_TEST(err.find("/nonexistent/trace.jsonl") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(an_agent_refuses_a_step_past_its_trace) {
  auto dir = std::filesystem::temp_directory_path()
             / ("kvtier-agent-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto conf = dir / "n.conf";
  {
    std::ofstream out(conf);
    out << "[model]\nscale=0.000244140625\n[replay]\ntrace=\"" << conversation
        << "\"\nmax-requests=10\nssd-dir=\"" << (dir / "ssd").string()
        << "\"\nram-cap-bytes=16777216\n";
  }
  cluster::client_config cfg;
  caf::actor_system sys{cfg};
  auto ask = [&](const caf::actor& node, uint64_t index) {
    msg::draft<msg::ReplayStep> d;
    d.root().setIndex(index);
    caf::scoped_actor self{sys};
    caf::error out;
    self->request(node, caf::duration{10s}, std::move(d).seal())
      .receive([&](const msg::sealed<msg::ReplayStepReply>&) {},
               [&](caf::error& e) { out = std::move(e); });
    return out;
  };
  {
    auto agent = node_child::start(
      KVTIER_PROGRAM, {"node", "--config", conf.string(), "--replay-agent"},
      dir / "agent.log");
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(agent),
                          (agent ? "" : describe(agent.error())));
    auto node = cluster::connect_node(sys, (*agent)->address(), 5000ms);
    BOOST_REQUIRE(node);
    auto first = ask(*node, 0);
    BOOST_TEST(!first, describe(first));
    auto err = ask(*node, 10);
    BOOST_TEST((err == ec::invalid_argument), describe(err));
    BOOST_TEST(describe(err).find("past the trace") != std::string::npos);
    BOOST_TEST((*agent)->stop() == 0, (*agent)->log());
  }
  {
    auto plain = node_child::start(
      KVTIER_PROGRAM, {"node", "--config", conf.string()}, dir / "plain.log");
    BOOST_REQUIRE(plain);
    auto node = cluster::connect_node(sys, (*plain)->address(), 5000ms);
    BOOST_REQUIRE(node);
    auto err = ask(*node, 0);
    BOOST_TEST((err == ec::not_found), describe(err));
    BOOST_TEST((*plain)->stop() == 0, (*plain)->log());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
