#define BOOST_TEST_MODULE ssd_crash
#include "tests/ssd/crash_common.hpp"
#include "tests/ssd/ssd_fixture.hpp"
#include "tests/writer_child.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <csignal>
#include <cstdio>
#include <random>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

// The writer program's path, set by tests/extra_tests.cmake.
#ifndef KVTIER_CRASH_WRITER
#error "KVTIER_CRASH_WRITER must name the crash writer program"
#endif

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

/// Iterations: the first command-line argument after `--`, else 20.
int iterations() {
  auto& m = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i < m.argc; ++i)
    if (auto n = std::atoi(m.argv[i]); n > 0)
      return n;
  return 20;
}

/// Runs the writer on `dir`, kills it with SIGKILL after `lines` lines of
/// progress and `delay_us` more microseconds.
void run_and_kill(const std::string& dir, uint64_t seed, int lines,
                  int delay_us, crash::mode m = crash::mode::every_kind) {
  auto [pid, out] = kvtier::testing::start_writer(
    KVTIER_CRASH_WRITER, {dir, std::to_string(seed),
                          m == crash::mode::delta ? "delta" : "every-kind"});
  auto* in = ::fdopen(out, "r");
  char line[128];
  for (int seen = 0; seen < lines && std::fgets(line, sizeof line, in);)
    ++seen;
  ::usleep(static_cast<useconds_t>(delay_us));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fclose(in);
  BOOST_REQUIRE_MESSAGE(WIFSIGNALED(status), "the writer exited by itself");
}

struct tally {
  size_t verified = 0;
  size_t temps = 0;
  size_t corrupt = 0;
  /// Delta files among the verified entries, and chains the scan found
  /// broken (a child whose parent left before the child's removal landed).
  size_t deltas = 0;
  size_t broken_chains = 0;
};

/// Restarts on `dir` and checks what the writer left.
void check_after_crash(const std::string& dir, tally& t,
                       crash::mode mode = crash::mode::every_kind) {
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::automatic, q.sink());
  BOOST_REQUIRE(engine);
  ssd_tier tier{crash::config(dir, mode), fs, **engine};
  auto r = tier.open();
  BOOST_REQUIRE(r);
  t.temps += r->temps_removed;
  t.corrupt += r->corrupt_removed;
  t.broken_chains += r->broken_chains;
  auto names = fs.list(tier.root());
  BOOST_REQUIRE(names);
  std::erase_if(*names, [](const std::string& n) {
    return n == lock_file_name || n == model_file_name; // the tier's own
  });
  for (auto& n : *names)
    BOOST_TEST(!n.ends_with(".tmp"), "temp file survived the scan: " << n);
  BOOST_TEST(names->size() == tier.saved_prefixes().size());
  for (auto& p : tier.saved_prefixes()) {
    auto prompt = p.tokens;
    prompt.push_back(7777777);
    auto m = tier.find(prompt, p.ns);
    BOOST_REQUIRE(m);
    BOOST_REQUIRE(m->length == p.tokens.size());
    std::optional<caf::expected<entry>> out;
    tier.restore(*m, [&](caf::expected<entry> e) { out = std::move(e); });
    drive(tier, q);
    BOOST_REQUIRE(out);
    if (!*out) {
      BOOST_ERROR("restore failed: " << describe(out->error()));
      continue;
    }
    auto err = crash::oracle(mode).verify(**out);
    if (err) {
      BOOST_ERROR("served a wrong state: " << describe(err));
      continue;
    }
    ++t.verified;
    auto f = fs.open(join_path(tier.root(), m->name), open_mode::read);
    BOOST_REQUIRE(f);
    auto h = read_header(**f);
    BOOST_REQUIRE(h);
    if (!h->parent.empty())
      ++t.deltas;
  }
}

/// `n` runs of the writer on one directory, each killed after `min_lines`
/// to `min_lines + spread - 1` lines and up to 4 ms more, then checked.
tally kill_and_check(int n, crash::mode m, unsigned seed, int min_lines,
                     int spread) {
  scratch_dir dir;
  std::mt19937 rng{seed};
  tally t;
  for (int i = 0; i < n; ++i) {
    BOOST_TEST_CONTEXT("iteration " << i) {
      run_and_kill(dir.path, static_cast<uint64_t>(i),
                   min_lines + static_cast<int>(rng() % spread),
                   static_cast<int>(rng() % 4000), m);
      check_after_crash(dir.path, t, m);
    }
  }
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(sigkilled_writer_leaves_only_whole_verifiable_entries) {
  auto n = iterations();
  auto t = kill_and_check(n, crash::mode::every_kind, 12345, 1, 12);
  BOOST_TEST_MESSAGE(n << " kills: " << t.verified << " entries verified, "
                       << t.temps << " interrupted writes cleaned up, "
                       << t.corrupt << " corrupt files removed");
  BOOST_TEST(t.verified > 0u);
  BOOST_TEST(t.temps > 0u); // some kills did land in the middle of a write
  // Renamed files are whole (fsync before rename): a kill never corrupts.
  BOOST_TEST(t.corrupt == 0u);
}

BOOST_AUTO_TEST_CASE(sigkilled_delta_writer_leaves_only_whole_chains) {
  // Delta files on: a kill between a parent's and a child's write, inside
  // a child's write or inside a cascade leaves no chain that serves a
  // wrong state. Every file left is indexed whole (its chain resolved) or
  // removed by the scan; every saved prefix restores through its chain
  // and verifies, deltas among them.
  auto n = iterations();
  auto t = kill_and_check(n, crash::mode::delta, 54321, 4, 30);
  BOOST_TEST_MESSAGE(n << " kills with delta files: " << t.verified
                       << " entries verified (" << t.deltas << " deltas), "
                       << t.temps << " interrupted writes cleaned up, "
                       << t.broken_chains << " broken chains removed");
  BOOST_TEST(t.verified > 0u);
  BOOST_TEST(t.deltas > 0u); // chains were there to be broken
  BOOST_TEST(t.corrupt == 0u);
}

BOOST_AUTO_TEST_CASE(a_second_process_is_refused_by_name_until_the_first_dies) {
  // The writer owns the directory while it runs: this process is refused,
  // told the writer's pid, and never touches its temp files; the kernel
  // frees the lock when the writer is killed (no stale lock to clean up).
  scratch_dir dir;
  auto [pid, out] = kvtier::testing::start_writer(KVTIER_CRASH_WRITER,
                                                  {dir.path, "1"}, {}, {}, 60);
  pollfd p{out, POLLIN, 0};
  BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "the writer did not start");
  auto* in = ::fdopen(out, "r");
  char line[128];
  BOOST_REQUIRE(std::fgets(line, sizeof line, in)); // it holds the lock now
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::threads, q.sink());
  BOOST_REQUIRE(engine);
  {
    ssd_tier second{crash::config(dir.path), fs, **engine};
    auto r = second.open();
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error() == ec::locked));
    auto why = describe(r.error());
    BOOST_TEST(why.find("pid " + std::to_string(pid) + " on host ")
                 != std::string::npos,
               why);
    BOOST_TEST(why.find("/LOCK") != std::string::npos, why);
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fclose(in);
  ssd_tier after{crash::config(dir.path), fs, **engine};
  auto r = after.open();
  BOOST_REQUIRE_MESSAGE(r, (r ? std::string{} : describe(r.error())));
  drive(after, q);
}
