// The network floor the transfer benchmarks compare against: one loopback
// TCP connection moving the same bytes in the same run (a sender thread
// writing from a 4 MiB buffer, this thread reading). Shared by bench_peer
// and bench_transfer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kvtier::bench {

/// Where the receiver puts the bytes.
enum class raw_receive {
  /// Into one fresh buffer of the whole length, as a bulk lane reads.
  fresh_buffer,
  /// Into one reused 4 MiB buffer: sockets alone.
  reused_buffer,
  /// From and into memory of the whole length, both touched before the
  /// clock starts: the same bytes moved memory to memory, neither end's
  /// buffer in cache (what a fetch moves), no page fault.
  whole_memory,
};

/// Seconds to move `bytes` through a loopback TCP connection, or nullopt
/// with `error` naming the socket call that failed (or a short read).
inline std::optional<double> raw_tcp(uint64_t bytes, raw_receive mode,
                                     std::string& error) {
  using clk = std::chrono::steady_clock;
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
      || ::listen(ls, 1) != 0) {
    error = "listen";
    return std::nullopt;
  }
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  std::vector<char> src(mode == raw_receive::whole_memory ? bytes : 4 << 20,
                        'x');
  std::thread sender([&] {
    int s = ::accept(ls, nullptr, nullptr);
    uint64_t left = bytes;
    while (left > 0) {
      auto at = mode == raw_receive::whole_memory ? bytes - left : 0;
      auto n = ::send(
        s, src.data() + at,
        std::min<uint64_t>(left, std::min<uint64_t>(src.size() - at, 4 << 20)),
        0);
      if (n <= 0)
        break; // the receiver sees a short read
      left -= static_cast<uint64_t>(n);
    }
    ::close(s);
  });
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  std::vector<char> whole;
  if (mode == raw_receive::whole_memory)
    whole.assign(bytes, 'y');
  auto t0 = clk::now();
  std::optional<double> out;
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    error = "connect";
  } else {
    std::unique_ptr<char[]> fresh;
    std::vector<char> reused;
    if (mode == raw_receive::fresh_buffer)
      fresh.reset(new char[bytes]);
    else if (mode == raw_receive::reused_buffer)
      reused.resize(4 << 20);
    uint64_t got = 0;
    while (got < bytes) {
      auto n = mode == raw_receive::fresh_buffer
                 ? ::recv(c, fresh.get() + got, bytes - got, 0)
               : mode == raw_receive::whole_memory
                 ? ::recv(c, whole.data() + got, bytes - got, 0)
                 : ::recv(c, reused.data(), reused.size(), 0);
      if (n <= 0)
        break;
      got += static_cast<uint64_t>(n);
    }
    if (got == bytes)
      out = std::chrono::duration<double>(clk::now() - t0).count();
    else
      error = "short read";
  }
  ::close(c); // a sender still writing fails and ends
  sender.join();
  ::close(ls);
  return out;
}

} // namespace kvtier::bench
