// A `kvtier node` child process (the multi-node replay, multi-process
// tests): started with a program path and arguments, its stderr appended
// to a log file, its stdout read until the listening line ("kvtier node
// listening HOST:PORT [http=HOST:PORT] node-id=NAME") within a bound. `stop`
// sends SIGTERM and reaps within a bound, then SIGKILL; the destructor kills a
// child still running (also a stopped one), and every child has
// PR_SET_PDEATHSIG, so a crashing parent leaves no process behind.
//
// Errors are `caf::error`s (`ec::io_error` when the fork or pipe fails,
// `ec::timeout` or `ec::io_error` naming the line the child printed
// instead and pointing at its log), never aborts. One thread uses a
// `node_child`.
#pragma once

#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace kvtier::runtime {

class node_child {
public:
  using ms = std::chrono::milliseconds;

  /// Starts `program` with `args` (argv[1..]), stderr to `log`, and waits
  /// at most `bound` for the listening line.
  static caf::expected<std::unique_ptr<node_child>>
  start(const std::string& program, const std::vector<std::string>& args,
        const std::filesystem::path& log, ms bound = ms{10000});

  ~node_child();
  node_child(const node_child&) = delete;
  node_child& operator=(const node_child&) = delete;

  /// HOST:PORT and node id from the listening line.
  const std::string& address() const noexcept {
    return address_;
  }
  const std::string& node_id() const noexcept {
    return node_id_;
  }
  uint16_t port() const noexcept {
    return port_;
  }
  /// HOST:PORT of the node's HTTP endpoint (the line's `http=`), empty
  /// when it has none.
  const std::string& http_address() const noexcept {
    return http_address_;
  }
  pid_t pid() const noexcept {
    return pid_;
  }
  bool running() const noexcept {
    return pid_ > 0;
  }
  const std::filesystem::path& log_path() const noexcept {
    return log_;
  }

  /// SIGTERM, then the exit status within `bound` (else SIGKILL and -1).
  int stop(ms bound = ms{8000});

  /// Sends `sig`.
  void signal(int sig);

  /// SIGKILL and reap.
  void kill9();

  /// The child's log so far.
  std::string log() const;

private:
  node_child() = default;
  std::string read_line(ms bound);
  int reap(ms bound);

  pid_t pid_ = -1;
  int out_ = -1;
  std::filesystem::path log_;
  std::string address_;
  std::string node_id_;
  std::string http_address_;
  uint16_t port_ = 0;
};

} // namespace kvtier::runtime
