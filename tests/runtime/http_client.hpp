// A raw HTTP/1.1 client for the endpoint's tests: one request per
// connection (Connection: close), over a POSIX socket with a receive
// deadline, so a test can also send what no real client would.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace kvtier::testing {

struct http_reply {
  /// 0 when no status line came (refused, closed, timed out).
  int status = 0;
  std::string head;
  std::string body;
};

/// A connected socket to 127.0.0.1:`port` with `bound` as its receive
/// deadline, or -1.
inline int http_connect(uint16_t port, std::chrono::milliseconds bound) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  timeval tv{static_cast<time_t>(bound.count() / 1000),
             static_cast<suseconds_t>((bound.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Everything the peer sends until it closes (or the deadline passes).
inline std::string http_read_all(int fd) {
  std::string out;
  char buf[16384];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

inline http_reply http_parse(const std::string& raw) {
  http_reply r;
  auto end = raw.find("\r\n\r\n");
  r.head = raw.substr(0, end);
  if (end != std::string::npos)
    r.body = raw.substr(end + 4);
  if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() >= 12)
    r.status = std::stoi(raw.substr(9, 3));
  return r;
}

/// Sends `raw` as it is and reads the answer.
inline http_reply http_exchange(
  uint16_t port, const std::string& raw,
  std::chrono::milliseconds bound = std::chrono::milliseconds{10000}) {
  int fd = http_connect(port, bound);
  if (fd < 0)
    return {};
  size_t sent = 0;
  while (sent < raw.size()) {
    auto n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;
    sent += static_cast<size_t>(n);
  }
  auto out = http_parse(http_read_all(fd));
  ::close(fd);
  return out;
}

/// `method target` with `headers` (each ending in \r\n) and `body`.
inline http_reply http_call(uint16_t port, const std::string& method,
                            const std::string& target,
                            const std::string& headers = {},
                            const std::string& body = {}) {
  return http_exchange(port, method + " " + target
                               + " HTTP/1.1\r\nHost: kvtier\r\n"
                                 "Connection: close\r\n"
                               + headers + "Content-Length: "
                               + std::to_string(body.size()) + "\r\n\r\n"
                               + body);
}

/// The port of a HOST:PORT.
inline uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(
    std::stoul(address.substr(address.rfind(':') + 1)));
}

} // namespace kvtier::testing
