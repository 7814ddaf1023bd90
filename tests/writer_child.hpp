// A writer process the crash tests start and kill: `program` with `args`,
// its stdout a pipe the test reads (to see how far it got), optionally its
// stderr to a file and extra environment. Tests only (Boost.Test
// requirements on the fork and the pipe). The caller reads `out`, kills and
// reaps `pid` under its own deadline, and closes `out`.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace kvtier::testing {

struct writer_child {
  pid_t pid = -1;
  /// The read end of its stdout.
  int out = -1;
};

/// Starts `program args...`; `err_path` (when not empty) receives its
/// stderr; `env` is set in the child only; `alarm_s` > 0: the child dies
/// by SIGALRM after that many seconds (it never outlives a stuck test).
inline writer_child
start_writer(const std::string& program, const std::vector<std::string>& args,
             const std::string& err_path = {},
             const std::vector<std::pair<std::string, std::string>>& env = {},
             unsigned alarm_s = 0) {
  std::vector<std::string> argv_text{program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  auto pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    if (!err_path.empty()) {
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(err, 2);
    }
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    if (alarm_s > 0)
      ::alarm(alarm_s);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

} // namespace kvtier::testing
