// The `kvtier` program as a user meets it (the built binary,
// KVTIER_PROGRAM): every command refuses a stray argument or an unknown
// option with a message naming the command and the argument (exit 2), and
// no message carries two prefixes ("kvtier: kvtier:", "kvtier node:
// kvtier"). Each case names the exact message a user sees.
#define BOOST_TEST_MODULE program_commands
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <sys/wait.h>

namespace {

struct run_result {
  int status = -1;
  std::string out; // stdout and stderr
};

/// Runs `kvtier ARGS` from the source tree (its default trace is there),
/// stdin closed, stdout and stderr together.
run_result kvtier(const std::string& args) {
  std::string cmd = std::string{"cd '"} + KVTIER_SOURCE_DIR + "' && '"
                    + KVTIER_PROGRAM + "' " + args + " 2>&1 </dev/null";
  run_result r;
  if (auto* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
      r.out.append(buf, n);
    int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return r;
}

/// No message says kvtier twice at its start: "kvtier: kvtier:",
/// "kvtier node: kvtier", "kvtier replay: kvtier: ...".
bool one_prefix(const std::string& out) {
  static const std::regex twice{"kvtier[a-z ]*: (\\S+: )*kvtier[: ]"};
  return !std::regex_search(out, twice);
}

void refused(const std::string& args, const std::string& message) {
  auto r = kvtier(args);
  BOOST_TEST(r.status == 2, "kvtier " << args << ": " << r.out);
  BOOST_TEST(r.out == message + "\n", "kvtier " << args);
  BOOST_TEST(one_prefix(r.out), r.out);
}

} // namespace

BOOST_AUTO_TEST_CASE(every_command_refuses_a_stray_argument) {
  refused("demo extra", "kvtier demo: unexpected argument 'extra'");
  refused("replay a.jsonl b.jsonl",
          "kvtier replay: unexpected argument 'b.jsonl'");
  refused("inspect /tmp/a /tmp/b", "kvtier inspect: unexpected argument "
                                   "'/tmp/b'");
  refused("inspect",
          "kvtier inspect: which directory? usage: kvtier inspect DIR "
          "[--verify] [--quarantine]");
  refused("scenario", "kvtier scenario: which file? usage: kvtier scenario "
                      "FILE...");
  refused("regret a.jsonl b.jsonl",
          "kvtier regret: unexpected argument 'b.jsonl'");
  refused("regret --sweep --capacities=5",
          "kvtier regret: --capacities and --sweep exclude each other");
  refused("regret --capacities=5,x",
          "kvtier regret: --capacities: invalid_argument: capacity 'x' is not "
          "a whole number of tokens above 0");
  refused("regret --cost-weight=-1",
          "kvtier regret: --cost-weight \"-1\" is not a number 0 .. 1024");
  refused("node extra", "kvtier node: unexpected argument 'extra'");
  refused("node --join", "kvtier node: --join needs HOST:PORT");
  refused("members 127.0.0.1:1 extra",
          "kvtier members: unexpected argument 'extra'");
  refused("members", "kvtier members: which node? usage: kvtier members "
                     "HOST:PORT");
  refused("config extra", "kvtier config: unexpected argument 'extra'");
  refused("version extra", "kvtier version: unexpected argument 'extra'");
  refused("help extra",
          "kvtier help: unknown command 'extra' (kvtier help lists them)");
  refused("help node extra", "kvtier help: unexpected argument 'extra'");
  refused("frobnicate",
          "kvtier: unknown command 'frobnicate' (kvtier help lists them)");
}

BOOST_AUTO_TEST_CASE(every_command_refuses_an_unknown_option) {
  refused("demo --nodes 3", "kvtier demo: unknown option --nodes");
  refused("replay --fast", "kvtier replay: unknown option --fast");
  refused("replay --quiet=yes", "kvtier replay: --quiet takes no value");
  refused("replay --json", "kvtier replay: --json needs a value");
  refused("replay --nodes 0", "kvtier replay: --nodes 0: the node count must "
                              "be 1 .. 64");
  refused("inspect /tmp --deep", "kvtier inspect: unknown option --deep");
  refused("scenario --all", "kvtier scenario: unknown option --all");
  refused("node --fast", "kvtier node: unexpected argument '--fast'");
  refused("members --all", "kvtier members: unknown option --all");
}

BOOST_AUTO_TEST_CASE(errors_carry_one_prefix) {
  // A configuration error is the error's own text: one "kvtier:".
  refused("config --log.level=loud",
          "kvtier: invalid_config: --log.level=loud: log.level: expected one "
          "of trace, debug, info, warn, error, off, not 'loud'");
  refused("demo --ram-tier.cap-bytes=12",
          "kvtier: invalid_config: ram-tier.cap-bytes = 12 is outside the "
          "accepted range 1 MiB .. 16 TiB");
  // A command's error names the command, then the error without "kvtier:".
  auto missing = std::string{"/nonexistent/kvtier-test-trace.jsonl"};
  for (auto [args, start] :
       {std::pair{"replay " + missing, "kvtier replay: "},
        {"demo --replay.trace=" + missing, "kvtier demo: "},
        {"inspect /nonexistent/kvtier-test-dir", "kvtier inspect: "},
        {"scenario /nonexistent/kvtier-test.scn", "kvtier scenario: "},
        {"node --replay-agent --replay.trace=" + missing,
         "kvtier node: --replay-agent: "}}) {
    auto r = kvtier(args);
    BOOST_TEST(r.status == 2, args << ": " << r.out);
    BOOST_TEST(r.out.rfind(start, 0) == 0, args << ": " << r.out);
    BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 1, r.out);
    BOOST_TEST(one_prefix(r.out), r.out);
  }
  // A node nobody runs: "kvtier members: ADDRESS: <reason>".
  auto r = kvtier("members 127.0.0.1:1");
  BOOST_TEST(r.status == 1, r.out);
  BOOST_TEST(r.out.rfind("kvtier members: 127.0.0.1:1: ", 0) == 0, r.out);
  BOOST_TEST(one_prefix(r.out), r.out);
  // CAF's refusal in words, not its `system_error(...)` rendering.
  BOOST_TEST(r.out.find("cannot connect to node (ip_connect failed, "
                        "127.0.0.1, 1)")
               != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("system_error") == std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(no_command_is_a_usage_error) {
  auto r = kvtier("");
  BOOST_TEST(r.status == 2, r.out);
  BOOST_TEST(r.out.rfind("usage: kvtier <command>", 0) == 0, r.out);
  // Asked for, the same text is the answer: exit 0.
  auto h = kvtier("help");
  BOOST_TEST(h.status == 0, h.out);
  BOOST_TEST(h.out == r.out);
}

BOOST_AUTO_TEST_CASE(help_shows_one_commands_usage) {
  for (auto* args : {"help node", "node --help", "node -h"}) {
    auto r = kvtier(args);
    BOOST_TEST(r.status == 0, args << ": " << r.out);
    BOOST_TEST(r.out.rfind("usage: kvtier node [--config FILE] [--join "
                           "HOST:PORT]... [--replay-agent]\n",
                           0)
                 == 0,
               args << ": " << r.out);
    BOOST_TEST(r.out.find("SIGTERM") != std::string::npos, r.out);
  }
  for (auto* cmd : {"replay", "demo", "regret", "scenario", "inspect",
                    "members", "config", "version", "help"}) {
    auto r = kvtier(std::string{"help "} + cmd);
    BOOST_TEST(r.status == 0, cmd << ": " << r.out);
    BOOST_TEST(r.out.rfind(std::string{"usage: kvtier "} + cmd, 0) == 0, r.out);
  }
}

BOOST_AUTO_TEST_CASE(a_bad_configuration_option_gets_kvtiers_own_words) {
  refused("config --ssd_tier.dir=/mnt/kv",
          "kvtier: invalid_config: --ssd_tier.dir=/mnt/kv: unknown option "
          "(did you mean --ssd-tier.dir? `kvtier config` prints kvtier's "
          "options)");
  refused("node --scheduler.max-threads=many",
          "kvtier: invalid_config: --scheduler.max-threads=many: "
          "scheduler.max-threads: expected a non-negative integer, not "
          "'many'");
  auto r = kvtier("config --scheduler.nope=1");
  BOOST_TEST(r.status == 2, r.out);
  BOOST_TEST(r.out.find("parser_error") == std::string::npos, r.out);
}

BOOST_AUTO_TEST_CASE(the_prefix_check_itself_catches_doubles) {
  BOOST_TEST(!one_prefix("kvtier: kvtier: invalid_config: x\n"));
  BOOST_TEST(!one_prefix("kvtier node: kvtier: timeout\n"));
  BOOST_TEST(!one_prefix("kvtier node: close: kvtier: timeout\n"));
  BOOST_TEST(one_prefix("kvtier node: close: timeout\n"));
  BOOST_TEST(one_prefix("kvtier: invalid_config: x\n"));
}
