#define BOOST_TEST_MODULE ssd_kill_points
// KVTIER_KILL_AT (tiers/ssd/kill_points.hpp): the values it accepts and
// refuses, and a child process that dies at exactly the step it names,
// a write half written. The parent process runs no file-system step of
// its own (the variable is read once per process, at the first step).
#include "tests/ssd/ssd_fixture.hpp"
#include "tiers/ssd/kill_points.hpp"

#include <csignal>
#include <fcntl.h>
#include <filesystem>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::tiers::ssd;

namespace {

/// Runs `body` in a child with KVTIER_KILL_AT=`at`; its wait status.
template <class Body>
int in_child(const char* at, Body body) {
  auto pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("KVTIER_KILL_AT", at, 1);
    ::alarm(60);
    body();
    ::_exit(0);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

bool killed(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

std::vector<std::byte> bytes(size_t n) {
  return std::vector<std::byte>(n, std::byte{7});
}

} // namespace

BOOST_AUTO_TEST_CASE(values_are_parsed_or_refused_by_name) {
  auto any = parse_kill_plan("17");
  BOOST_REQUIRE(any);
  BOOST_TEST(!any->only.has_value());
  BOOST_TEST(any->at == 17u);
  auto kind = parse_kill_plan("sync_dir:3");
  BOOST_REQUIRE(kind);
  BOOST_TEST((kind->only == kill_step::sync_dir));
  BOOST_TEST(kind->at == 3u);
  auto aimed = parse_kill_plan("rename:2@removal-record");
  BOOST_REQUIRE(aimed);
  BOOST_TEST((aimed->only == kill_step::rename));
  BOOST_TEST(aimed->protocol == "removal-record");
  BOOST_TEST(aimed->at == 2u);
  auto any_in = parse_kill_plan("5@scan");
  BOOST_REQUIRE(any_in);
  BOOST_TEST(!any_in->only.has_value());
  BOOST_TEST(any_in->protocol == "scan");
  for (auto bad : {"0", "x", "sync:", "fsync:2", "-1", "3x", "write:0", "",
                   "rename:2@", "@removal", "x@removal"}) {
    auto p = parse_kill_plan(bad);
    BOOST_REQUIRE(!p);
    BOOST_TEST((p.error() == ec::invalid_config));
    auto why = describe(p.error());
    BOOST_TEST(
      why.find(std::string{"KVTIER_KILL_AT="} + bad) != std::string::npos, why);
    BOOST_TEST(why.find("sync_dir") != std::string::npos, why);
  }
}

BOOST_AUTO_TEST_CASE(the_named_step_kills_the_process_and_no_other) {
  test::scratch_dir dir;
  auto a = dir.path + "/a", b = dir.path + "/b", c = dir.path + "/c";
  auto steps = [&] {
    posix_file_system fs;
    auto f = fs.open(a, open_mode::create); // create #1
    if (!f)
      ::_exit(3);
    (void)(*f)->write_at(0, bytes(100)); // write #1
    (void)(*f)->sync();                  // sync #1
    (void)fs.rename(a, b);               // rename #1
    (void)fs.rename(b, c);               // rename #2
    (void)fs.sync_dir(dir.path);         // sync_dir #1
  };
  // The second rename: the first ran, the second did not.
  BOOST_TEST(killed(in_child("rename:2", steps)));
  BOOST_TEST(std::filesystem::exists(b));
  BOOST_TEST(!std::filesystem::exists(c));
  std::filesystem::remove(b);
  // Step 4 of any kind is the first rename.
  BOOST_TEST(killed(in_child("4", steps)));
  BOOST_TEST(std::filesystem::exists(a));
  BOOST_TEST(!std::filesystem::exists(b));
  std::filesystem::remove(a);
  // Past the last step: it runs to the end.
  auto status = in_child("rename:3", steps);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  BOOST_TEST(std::filesystem::exists(c));
  // A malformed value ends it at its first step, exit status 2.
  status = in_child("rename:x", steps);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 2));
}

BOOST_AUTO_TEST_CASE(a_killed_write_lands_half_cut_at_a_sector) {
  test::scratch_dir dir;
  auto a = dir.path + "/a";
  auto status = in_child("write:2", [&] {
    posix_file_system fs;
    auto f = fs.open(a, open_mode::create);
    if (!f)
      ::_exit(3);
    (void)(*f)->write_at(0, bytes(100));    // write #1: whole
    (void)(*f)->write_at(100, bytes(5000)); // write #2: 100 + 2500 -> 2560
  });
  BOOST_TEST(killed(status));
  BOOST_TEST(std::filesystem::file_size(a) == 2560u);
}

BOOST_AUTO_TEST_CASE(a_protocol_counts_only_its_own_steps_and_is_named) {
  test::scratch_dir dir;
  auto a = dir.path + "/a", b = dir.path + "/b", c = dir.path + "/c";
  auto err = dir.path + "/err";
  auto status = in_child("rename:1@removal", [&] {
    int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    posix_file_system fs;
    (void)fs.open(a, open_mode::create); // outside: not counted
    (void)fs.rename(a, b);               // outside: not counted
    kill_protocol in{"removal-record"};
    (void)fs.rename(b, c); // the first rename of the protocol
  });
  BOOST_TEST(killed(status));
  BOOST_TEST(std::filesystem::exists(b));
  BOOST_TEST(!std::filesystem::exists(c));
  std::ifstream in{err};
  std::string line{std::istreambuf_iterator<char>{in}, {}};
  BOOST_TEST(line.find("rename #1 of its kind in removal on " + c
                       + " (in removal-record)")
               != std::string::npos,
             line);
}
