// The network floors the transfer benchmarks compare against, measured in
// the same run on the same loopback. Shared by bench_peer and
// bench_transfer.
//
//   raw_tcp  one loopback TCP connection moving the same bytes (a sender
//            thread, this thread receiving). Both ends use kvtier's own
//            large buffers (msg::buffer_builder: huge pages, populated and
//            touched before the clock starts), so neither side pays a page
//            fault or a 4 KiB-page TLB miss the fetch does not: on this VM a
//            copy through the socket into 4 KiB pages ran 0.4 GB/s where
//            the same copy into huge pages ran 4-6 GB/s, and a floor that
//            pays that is no floor. Socket buffers are set (1 MiB each
//            way) and every send and recv moves up to 1 MiB; nothing is
//            allocated per chunk.
//   iperf3   Debian's `iperf3` on 127.0.0.1: a one-off server (`-s -1`) on
//            an ephemeral port, a client sending the same byte count in
//            1 MiB writes (`-l 1M`, iperf3's largest) with `-J`; the bytes
//            per second come from its JSON. Both processes are children of
//            the benchmark, bounded in time (killed and reaped at their
//            deadline). When iperf3 is not installed the result says so.
//
// Errors are values: each floor returns the seconds (or bytes per second)
// or nullopt with `error` naming what failed.
#pragma once

#include "messages/buffer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kvtier::bench {

/// What the two ends move from and into.
enum class raw_receive {
  /// From and into one 4 MiB buffer each, reused: the sockets alone, both
  /// ends in cache.
  reused_buffer,
  /// From memory of the whole length into memory of the whole length,
  /// both huge-page buffers populated and touched before the clock starts:
  /// what a fetch moves (the entry from the sender's RAM into one buffer
  /// on the receiver), neither end in cache, no page fault.
  whole_memory,
};

/// Bytes each send or recv moves at most, and each socket buffer's size.
inline constexpr uint64_t raw_io_bytes = uint64_t{1} << 20;

/// Seconds to move `bytes` through a loopback TCP connection, or nullopt
/// with `error` naming the socket call that failed (or a short read).
inline std::optional<double> raw_tcp(uint64_t bytes, raw_receive mode,
                                     std::string& error) {
  using clk = std::chrono::steady_clock;
  auto whole = mode == raw_receive::whole_memory;
  auto length = static_cast<size_t>(whole ? bytes : uint64_t{4} << 20);
  // Allocated, populated and written before the clock starts.
  buffer_builder src(length);
  buffer_builder dst(length);
  std::memset(src.data(), 'x', length);
  std::memset(dst.data(), 'y', length);
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::listen(ls, 1) != 0) {
    error = std::string{"listen: "} + std::strerror(errno);
    if (ls >= 0)
      ::close(ls);
    return std::nullopt;
  }
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  auto tune = [](int fd, int option) {
    int size = static_cast<int>(raw_io_bytes);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, option, &size, sizeof size);
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  };
  std::thread sender([&] {
    int s = ::accept(ls, nullptr, nullptr);
    if (s < 0)
      return; // the receiver sees a short read
    tune(s, SO_SNDBUF);
    for (uint64_t done = 0; done < bytes;) {
      auto at = whole ? done : done % length;
      auto n = ::send(s, src.data() + at,
                      std::min({bytes - done, raw_io_bytes, length - at}),
                      MSG_NOSIGNAL);
      if (n <= 0)
        break; // the receiver sees a short read
      done += static_cast<uint64_t>(n);
    }
    ::close(s);
  });
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  if (c >= 0)
    tune(c, SO_RCVBUF); // before connect, so the window is set from it
  auto t0 = clk::now();
  std::optional<double> out;
  if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    error = std::string{"connect: "} + std::strerror(errno);
  } else {
    uint64_t got = 0;
    while (got < bytes) {
      auto at = whole ? got : got % length;
      auto n = ::recv(c, dst.data() + at,
                      std::min({bytes - got, raw_io_bytes, length - at}), 0);
      if (n <= 0)
        break;
      got += static_cast<uint64_t>(n);
    }
    if (got == bytes)
      out = std::chrono::duration<double>(clk::now() - t0).count();
    else
      error = "short read";
  }
  if (c >= 0)
    ::close(c); // a sender still writing fails and ends
  else
    ::shutdown(ls, SHUT_RDWR); // no connection will come: end the accept
  sender.join();
  ::close(ls);
  return out;
}

/// A child process, killed and reaped at the latest when this goes.
class child_process {
public:
  /// Starts `argv[0]` (searched on PATH) with stdin and stderr on
  /// /dev/null and stdout into a pipe (`stdout_fd`) when `capture`, else
  /// on /dev/null. `error` says why when it could not start.
  child_process(const std::vector<std::string>& argv, bool capture,
                std::string& error) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int out[2] = {-1, -1};
    if (capture && ::pipe2(out, O_CLOEXEC) != 0) {
      error = std::string{"pipe: "} + std::strerror(errno);
      posix_spawn_file_actions_destroy(&fa);
      return;
    }
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (capture)
      posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    else
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = ::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (capture)
      ::close(out[1]);
    if (rc != 0) {
      pid_ = -1;
      error = "cannot start " + argv[0] + ": " + std::strerror(rc);
      if (capture)
        ::close(out[0]);
      return;
    }
    stdout_fd_ = capture ? out[0] : -1;
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    stop();
    if (stdout_fd_ >= 0)
      ::close(stdout_fd_);
  }

  bool running() const noexcept {
    return pid_ > 0;
  }

  /// Reads its stdout until EOF or `deadline`; false at the deadline.
  bool read_all(std::string& out,
                std::chrono::steady_clock::time_point deadline) {
    char chunk[4096];
    while (stdout_fd_ >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
      if (left <= 0)
        return false;
      pollfd p{stdout_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0)
        continue; // timed out (checked above) or interrupted
      auto n = ::read(stdout_fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      out.append(chunk, static_cast<size_t>(n));
    }
    return true;
  }

  /// Waits for it to exit until `deadline` (then kills it): its exit
  /// status, or -1 when it had to be killed or was not running.
  int wait(std::chrono::steady_clock::time_point deadline) {
    while (pid_ > 0) {
      int status = 0;
      auto r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      if (r < 0 && errno != EINTR) {
        pid_ = -1;
        return -1;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        stop();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  /// Kills it (SIGKILL) and reaps it, if it still runs.
  void stop() noexcept {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
};

/// True when `name` is an executable file in a PATH directory.
inline bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    auto end = dirs.find(':', at);
    if (end == std::string::npos)
      end = dirs.size();
    auto dir = dirs.substr(at, end - at);
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0)
      return true;
    at = end + 1;
  }
  return false;
}

/// A loopback TCP port nobody listened on a moment ago (0 if none).
inline uint16_t free_loopback_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0)
    return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
      && ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

/// Bytes per second iperf3 moved sending `bytes` (rounded up to whole
/// 1 MiB writes) over 127.0.0.1: what its receiver counted over its own
/// seconds, or nullopt with `error` saying
/// why: not installed, would not start, timed out, or its JSON had no
/// figure. Bounded by `limit` in all.
inline std::optional<double>
iperf3_loopback(uint64_t bytes, std::string& error,
                std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  using clk = std::chrono::steady_clock;
  if (!on_path("iperf3")) {
    error = "iperf3 is not installed (Debian package iperf3, "
            ".ci/packages.txt)";
    return std::nullopt;
  }
  auto deadline = clk::now() + limit;
  auto port = free_loopback_port();
  if (port == 0) {
    error = "no free loopback port";
    return std::nullopt;
  }
  auto p = std::to_string(port);
  child_process server({"iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", p},
                       false, error);
  if (!server.running())
    return std::nullopt;
  // The server listens a moment after it starts: the client retries a
  // refused connection (each attempt is its own process) until the
  // deadline.
  std::string last;
  while (clk::now() < deadline) {
    child_process client({"iperf3", "-c", "127.0.0.1", "-p", p, "-n",
                          std::to_string(bytes), "-l", "1M", "-J"},
                         true, error);
    if (!client.running())
      return std::nullopt;
    std::string out;
    if (!client.read_all(out, deadline)) {
      error = "iperf3 client did not finish in time";
      return std::nullopt;
    }
    client.wait(deadline);
    auto j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded()) {
      error = "iperf3 printed no JSON";
      return std::nullopt;
    }
    if (j.contains("error")) {
      last = j["error"].is_string() ? j["error"].get<std::string>() : "?";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto sum = j["end"]["sum_received"];
    double got = sum.value("bytes", 0.0);
    double seconds = sum.value("seconds", 0.0);
    server.wait(deadline);
    // The receiver's own count and seconds: it may close its books a
    // little before the last bytes arrive (its count then falls short of
    // what was sent), so this is its rate over what it counted.
    if (got <= 0 || seconds <= 0) {
      error = "iperf3's JSON has no received bytes and seconds";
      return std::nullopt;
    }
    return got / seconds;
  }
  error = "iperf3 did not connect in time: " + last;
  return std::nullopt;
}

} // namespace kvtier::bench
