// kill -9 with write-behind on (issue #11): a real child process runs an
// embedded service over a real directory and publishes conversation turns,
// telling this process (a pipe) each entry a write-behind snapshot, a
// spill or a flush made durable (tests/runtime/service_crash_writer.cpp).
// This process SIGKILLs it at a random moment, restarts a service on the
// directory, and requires every entry reported before the kill to be
// served byte-exact (the oracle). 8 kills in the default suite
// (runtime.service_crash); 100 under the `soak` label
// (runtime.service_crash_soak, tests/extra_tests.cmake).
#define BOOST_TEST_MODULE runtime_service_crash
#include <boost/test/unit_test.hpp>

#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/runtime/service_crash_common.hpp"
#include "tests/writer_child.hpp"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#ifndef KVTIER_SERVICE_CRASH_WRITER
#error "KVTIER_SERVICE_CRASH_WRITER must name the writer program"
#endif

using namespace kvtier;
namespace crash = kvtier::testing::service_crash;

namespace {

int iterations() {
  auto& m = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i < m.argc; ++i)
    if (auto n = std::atoi(m.argv[i]); n > 0)
      return n;
  return 8;
}

struct scratch_dir {
  scratch_dir() {
    char tmpl[] = "/tmp/kvtier-crash-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

/// Runs the writer on `dir` with `seed`; kills it with SIGKILL after it
/// reported `want` durable entries (or flushes) and `delay_us` more;
/// returns the (conversation, turn) pairs it reported durable.
std::set<std::pair<int, int>> run_and_kill(const std::string& dir,
                                           uint64_t seed, int want,
                                           int delay_us, int& flushes) {
  auto [pid, out] = kvtier::testing::start_writer(KVTIER_SERVICE_CRASH_WRITER,
                                                  {dir, std::to_string(seed)});
  auto* in = ::fdopen(out, "r");
  std::set<std::pair<int, int>> durable;
  char line[128];
  int seen = 0;
  while (seen < want && std::fgets(line, sizeof line, in)) {
    int c = 0, k = 0;
    if (std::sscanf(line, "durable %d %d", &c, &k) == 2) {
      durable.insert({c, k});
      ++seen;
    } else if (std::strncmp(line, "flushed", 7) == 0) {
      ++flushes;
    }
  }
  ::usleep(static_cast<useconds_t>(delay_us));
  ::kill(pid, SIGKILL);
  // What it reported before it died counts too (read the rest).
  while (std::fgets(line, sizeof line, in)) {
    int c = 0, k = 0;
    if (std::sscanf(line, "durable %d %d", &c, &k) == 2)
      durable.insert({c, k});
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fclose(in);
  BOOST_REQUIRE_MESSAGE(WIFSIGNALED(status),
                        "the writer exited by itself (" << status << ")");
  return durable;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_entry_reported_durable_survives_a_kill) {
  scratch_dir dir;
  std::mt19937 rng{4242};
  auto n = iterations();
  uint64_t reported = 0, recovered = 0, flushes = 0;
  for (int i = 0; i < n; ++i) {
    BOOST_TEST_CONTEXT("kill " << i) {
      auto seed = static_cast<uint64_t>(i + 1);
      int f = 0;
      auto durable =
        run_and_kill(dir.path, seed, 1 + static_cast<int>(rng() % 40),
                     static_cast<int>(rng() % 20000), f);
      flushes += static_cast<uint64_t>(f);
      reported += durable.size();
      auto opts = crash::options(dir.path);
      opts.write_behind = false;
      runtime::service svc{opts};
      BOOST_REQUIRE_MESSAGE(!svc.start_error(), describe(svc.start_error()));
      runtime::oracle_engine oracle{*runtime::running_geometry(opts)};
      for (auto [c, k] : durable) {
        auto prompt = crash::prompt(seed, c, k);
        auto len = prompt.size();
        prompt.push_back(0); // no turn continues with token 0
        auto acq = svc.acquire({1, prompt, 4, {}}, crash::ns(seed));
        BOOST_REQUIRE(acq);
        BOOST_CHECK_MESSAGE(acq->usable_tokens >= len,
                            "conversation " << c << " turn " << k
                                            << " was reported durable, "
                                               "restored "
                                            << acq->usable_tokens << " of "
                                            << len << " tokens");
        if (acq->usable_tokens == 0)
          continue;
        auto err = oracle.verify(acq->state);
        BOOST_CHECK_MESSAGE(!err, "served a wrong state: " << describe(err));
        if (!err && acq->usable_tokens >= len)
          ++recovered;
      }
    }
  }
  BOOST_TEST_MESSAGE(
    n << " kills: " << reported << " entries reported durable, " << recovered
      << " served byte-exact after the restarts, " << flushes << " flushes");
  std::cout << "service crash loop: " << n << " kills, " << reported
            << " entries reported durable, " << recovered
            << " recovered byte-exact\n";
  BOOST_CHECK_EQUAL(recovered, reported);
  BOOST_CHECK_GT(reported, 0u);
}
