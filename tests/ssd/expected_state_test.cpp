#define BOOST_TEST_MODULE ssd_expected_state
// The expected-state crash loop (as RocksDB's crash test): a writer process
// (expected_writer.cpp) writes through an SSD tier on the real disk and
// logs what the tier told it; this test kills it, at a kill point (a
// random file-system step, KVTIER_KILL_AT) or by SIGKILL at a random
// moment, then opens the tier on the same directory and checks every
// entry the log says is durable and not removed since: on SSD, byte-exact
// against the oracle, and everything served verifies; every checkpoint
// reported durable and not completed is resumed exactly, no checkpoint of
// a completed generation is held, and a flush leaves no removal record
// and no removal pending. The directory and the log carry over from round
// to round, so state accumulates across kills. A quarter of the rounds aim
// their kill point at a step of the checkpoint removals (`@removal-...`);
// every kill point's line says which protocol step died, and the loop
// prints how often each was hit. Prints its figures; lost and wrong must
// be 0.
#include "tests/ssd/crash_common.hpp"
#include "tests/ssd/expected_check.hpp"
#include "tests/writer_child.hpp"

#include <csignal>
#include <cstdio>
#include <map>
#include <random>
#include <regex>

#include <poll.h>
#include <sys/wait.h>

#ifndef KVTIER_EXPECTED_WRITER
#error "KVTIER_EXPECTED_WRITER must name the expected-state writer program"
#endif

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;
using expected::tally;

namespace {

/// Entries one writer run offers.
constexpr uint64_t entries_per_run = 30;

/// How a round ends the writer.
struct kill_plan {
  /// A KVTIER_KILL_AT value ("" for none).
  std::string kill_at;
  /// Without a kill point: SIGKILL after this many lines and `delay_us`.
  int lines = 0;
  int delay_us = 0;
  /// Aimed at the start-up scan applying a removal record: a writer dies
  /// at its first removal unlink first (a durable record left), so the
  /// next one finds a record at its open.
  bool scan = false;
};

/// How often each protocol step was killed ("removal-record rename").
using coverage = std::map<std::string, uint64_t>;

/// Runs the writer once; true when it was killed (false: it finished).
/// A kill point's step goes to `hit`.
bool run_writer(const std::string& dir, const std::string& log,
                const std::string& err_path, uint64_t seed, crash::mode m,
                const kill_plan& plan, coverage& hit) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!plan.kill_at.empty())
    env.emplace_back("KVTIER_KILL_AT", plan.kill_at);
  auto [pid, out] = kvtier::testing::start_writer(
    KVTIER_EXPECTED_WRITER,
    {dir, log, std::to_string(seed),
     m == crash::mode::delta ? "delta" : "every-kind",
     std::to_string(entries_per_run)},
    err_path, env, 300);
  // Reads its lines (so it never blocks on a full pipe) until it ends or,
  // without a kill point, until the chosen line; generous deadline.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  std::string pending;
  int seen = 0;
  bool sent = false;
  for (;;) {
    pollfd p{out, POLLIN, 0};
    int ready = ::poll(&p, 1, 100);
    if (ready > 0) {
      char buf[512];
      auto n = ::read(out, buf, sizeof buf);
      if (n <= 0)
        break; // it ended
      for (ssize_t k = 0; k < n; ++k)
        if (buf[k] == '\n')
          ++seen;
    }
    if (plan.kill_at.empty() && !sent && seen >= plan.lines) {
      ::usleep(static_cast<useconds_t>(plan.delay_us));
      ::kill(pid, SIGKILL);
      sent = true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(out);
      BOOST_FAIL("the writer neither ended nor was killed in 240 s");
    }
  }
  ::close(out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in{err_path};
  std::string err{std::istreambuf_iterator<char>{in}, {}};
  if (WIFEXITED(status)) {
    BOOST_REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, "the writer failed ("
                                                      << WEXITSTATUS(status)
                                                      << "): " << err);
    return false;
  }
  BOOST_REQUIRE_MESSAGE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                        "the writer died otherwise: " << err);
  if (!plan.kill_at.empty()) {
    static const std::regex line{
      R"(kvtier: kill point: (\w+) #.* \(in ([\w -]+)\)\n)"};
    std::smatch found;
    BOOST_TEST(std::regex_search(err, found, line),
               "a kill point killed it: " << err);
    if (!found.empty())
      ++hit[found[2].str() + " " + found[1].str()];
  }
  return true;
}

/// Opens the tier on `dir`, checks it against the log, closes it. The
/// tier's own removals at open (evictions over the cap) go to the log.
void check_round(const std::string& dir, const std::string& log_path,
                 crash::mode m, tally& t) {
  auto want = expected::replay(log_path);
  expected::event_log log{log_path};
  BOOST_REQUIRE(log.ok());
  auto cfg = crash::config(dir, m);
  cfg.on_remove = [&](const remove_event& ev) {
    auto text = ev.kind == key_kind::prefix
                  ? expected::line('R', ev.ns, ev.tokens)
                  : expected::line('K', ev.ns, ev.tokens, ev.request);
    want.apply(text);
    BOOST_REQUIRE(log.append(text));
  };
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::automatic, q.sink());
  BOOST_REQUIRE(engine);
  ssd_tier tier{cfg, fs, **engine};
  auto r = tier.open();
  BOOST_REQUIRE_MESSAGE(r, (r ? "" : describe(r.error())));
  expected::check_expected(tier, q, crash::oracle(m), want, t);
  expected::settle(tier, q, fs, *r, t);
}

/// The steps of the checkpoint removals a kill point may aim at
/// (`KIND:N@PROTOCOL`, tiers/ssd/kill_points.hpp).
constexpr const char* removal_steps[] = {
  "create@removal-record",   "sync@removal-record",   "rename@removal-record",
  "sync_dir@removal-record", "remove@removal-unlink", "sync_dir@removal-unlink",
  "remove@removal-drop",     "sync_dir@removal-drop", "remove@scan-removal",
  "sync_dir@scan-removal"};

/// `n` rounds on one directory: odd rounds die by SIGKILL at a random
/// moment, the others at a kill point: a step of the checkpoint removals
/// (rounds 2, 6, 10, ...), a step of one kind (4, 12, ...) or of any kind
/// (0, 8, ...).
tally loop(int n, crash::mode m, unsigned seed, coverage& hit) {
  scratch_dir dir;
  auto tier_dir = dir.path + "/tier";
  auto log = dir.path + "/expected.log";
  auto err = dir.path + "/writer.err";
  std::mt19937 rng{seed};
  static const char* kinds[] = {"create", "write",  "sync",
                                "rename", "remove", "sync_dir"};
  tally t;
  for (int i = 0; i < n; ++i) {
    kill_plan plan;
    if (i % 4 == 2) {
      std::string aim = removal_steps[rng() % std::size(removal_steps)];
      auto at = aim.find('@');
      plan.scan = aim.ends_with("@scan-removal");
      plan.kill_at = aim.substr(0, at) + ":"
                     + std::to_string(1 + rng() % (plan.scan ? 2 : 4))
                     + aim.substr(at);
    } else if (i % 8 == 4)
      plan.kill_at =
        std::string{kinds[rng() % 6]} + ":" + std::to_string(1 + rng() % 30);
    else if (i % 2 == 0)
      plan.kill_at = std::to_string(1 + rng() % 220);
    else {
      plan.lines = 1 + static_cast<int>(rng() % (entries_per_run - 2));
      plan.delay_us = static_cast<int>(rng() % 4000);
    }
    BOOST_TEST_CONTEXT(
      "round " << i << " "
               << (plan.kill_at.empty()
                     ? "SIGKILL after " + std::to_string(plan.lines) + " lines"
                     : "KVTIER_KILL_AT=" + plan.kill_at)) {
      auto writer_seed = seed * 1000u + static_cast<unsigned>(i);
      if (plan.scan) {
        kill_plan first{"remove:1@removal-unlink"};
        bool killed =
          run_writer(tier_dir, log, err, writer_seed + 500, m, first, hit);
        ++(killed ? t.kills : t.finished);
      }
      bool killed = run_writer(tier_dir, log, err, writer_seed, m, plan, hit);
      ++(killed ? t.kills : t.finished);
      ++t.rounds;
      check_round(tier_dir, log, m, t);
    }
  }
  return t;
}

void print(const char* what, const tally& t, const coverage& hit) {
  double load[3] = {};
  ::getloadavg(load, 3);
  std::string steps;
  for (auto& [step, n] : hit)
    steps += (steps.empty() ? "" : ", ") + step + " " + std::to_string(n);
  std::printf("expected-state crash loop (%s): %s (load average %.2f); "
              "kill points hit: %s\n",
              what, t.figures().c_str(), load[0], steps.c_str());
  std::fflush(stdout);
}

/// A long run must have killed at every step of writing a removal record,
/// of its unlinks and of deleting it.
void expect_removal_coverage(int rounds, const coverage& hit) {
  if (rounds < 100)
    return;
  for (auto step : {"removal-record create", "removal-record sync",
                    "removal-record rename", "removal-record sync_dir",
                    "removal-unlink remove", "removal-unlink sync_dir",
                    "removal-drop remove", "removal-drop sync_dir"})
    BOOST_TEST(hit.count(step) > 0u, "no kill at " << step);
}

} // namespace

BOOST_AUTO_TEST_CASE(every_entry_told_durable_survives_every_kill) {
  coverage hit;
  auto n = expected::iterations(10);
  auto t = loop(n, crash::mode::every_kind, 777, hit);
  print("every kind", t, hit);
  BOOST_TEST(t.kills > 0u);
  BOOST_TEST(t.checkpoints > 0u);
  BOOST_TEST(t.removals > 0u);
  expect_removal_coverage(n, hit);
  t.expect_clean();
}

BOOST_AUTO_TEST_CASE(every_delta_told_durable_survives_every_kill) {
  coverage hit;
  auto n = expected::iterations(6);
  auto t = loop(n, crash::mode::delta, 4242, hit);
  print("delta files", t, hit);
  BOOST_TEST(t.kills > 0u);
  BOOST_TEST(t.checkpoints > 0u);
  BOOST_TEST(t.removals > 0u);
  expect_removal_coverage(n, hit);
  t.expect_clean();
}
