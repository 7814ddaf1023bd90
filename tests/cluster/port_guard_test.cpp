// What a local process that is not a peer can make a node do through its
// port without TLS (runtime/net/port_guard.hpp, docs/cluster.md
// "Security"): a CAF frame header announcing a 4 GiB payload before any
// handshake, garbage, and a frame over `cluster.max-message-bytes` after a
// real handshake. Each is refused before anything is allocated: the node's
// peak RSS stays put, it keeps answering member queries, and its peer keeps
// it up. `kvtier node` processes on loopback (node_process.hpp); every wait
// is bounded.
#define BOOST_TEST_MODULE cluster_port_guard
#include "tests/cluster/node_process.hpp"
#include "tests/runtime/http_client.hpp"

#include "messages/wire_guard.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <fstream>

using namespace kvtier;
using namespace kvtier::test;
using cluster::peer_state;

namespace {

/// `pid`'s peak resident set (VmHWM), in bytes; 0 when unreadable.
uint64_t peak_rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024; // kB
  return 0;
}

/// A plain TCP connection to 127.0.0.1:`port`, with 10 s receive timeouts.
struct raw_socket {
  int fd = -1;

  explicit raw_socket(uint16_t port)
    : fd(testing::http_connect(port, 10000ms)) {
    BOOST_REQUIRE(fd >= 0);
  }
  ~raw_socket() {
    if (fd >= 0)
      ::close(fd);
  }

  void send_all(const void* data, size_t n) {
    BOOST_REQUIRE(::send(fd, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n));
  }

  /// Reads until the node closes the connection (true) or 10 s pass with
  /// nothing read.
  bool closed_by_peer() {
    std::array<char, 4096> buf;
    for (;;) {
      auto n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n == 0)
        return true;
      if (n < 0)
        return errno == ECONNRESET;
    }
  }
};

/// A CAF frame header (32 bytes, network order): `op`, then `payload`.
std::array<unsigned char, 32> header(unsigned char op, uint32_t payload) {
  std::array<unsigned char, 32> h{};
  h[0] = op;
  h[4] = static_cast<unsigned char>(payload >> 24);
  h[5] = static_cast<unsigned char>(payload >> 16);
  h[6] = static_cast<unsigned char>(payload >> 8);
  h[7] = static_cast<unsigned char>(payload);
  return h;
}

struct fixture : nodes_fixture {

  static node_settings settings(std::string id,
                                std::vector<std::string> joins = {},
                                std::vector<std::string> lines = {}) {
    node_settings s;
    s.node_id = std::move(id);
    s.joins = std::move(joins);
    s.cluster_lines = std::move(lines);
    return s;
  }

  /// For `span`: every 200 ms `a` answers a member query within 2 s and
  /// `a` and `b` see each other up.
  void both_stay_up(const node_process& a, const node_process& b, ms span) {
    auto until = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < until) {
      auto v = view(a);
      BOOST_REQUIRE_MESSAGE(v, "a did not answer a member query");
      BOOST_REQUIRE(v->in_state(peer_state::up)
                    == std::vector<std::string>{"b"});
      BOOST_REQUIRE(state_of(b, "a") == peer_state::up);
      std::this_thread::sleep_for(200ms);
    }
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_4_gib_frame_before_the_handshake_is_refused_unread,
                        fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  BOOST_REQUIRE(wait_for(
    [&] {
      return state_of(a, "b") == peer_state::up
             && state_of(b, "a") == peer_state::up;
    },
    10000ms));
  auto before = peak_rss(a.pid());
  BOOST_REQUIRE(before > 0);
  // A client handshake header announcing 4 GiB - 16, then the sender goes.
  for (int i = 0; i < 2; ++i) {
    raw_socket s{a.port()};
    auto h = header(0x01, 0xFFFFFFF0u);
    s.send_all(h.data(), h.size());
    BOOST_TEST(s.closed_by_peer(), "the node kept the connection open");
  }
  both_stay_up(a, b, 3000ms);
  auto after = peak_rss(a.pid());
  BOOST_TEST(after < before + (uint64_t{64} << 20),
             "peak RSS " << before << " -> " << after);
  BOOST_TEST(a.log().find("announced a frame of 4294967280 bytes before its "
                          "handshake")
               != std::string::npos,
             a.log());
  BOOST_TEST(a.stop() == 0, a.log());
  BOOST_TEST(b.stop() == 0, b.log());
}

BOOST_FIXTURE_TEST_CASE(connections_over_the_unproven_bound_are_closed_at_once,
                        fixture) {
  node_process a{dir.path, settings("a", {}, {"max-unproven-connections=2"})};
  BOOST_REQUIRE(view(a));
  {
    // Two connections that never send their handshake hold the bound; a
    // third is closed at once, counted.
    raw_socket s1{a.port()};
    raw_socket s2{a.port()};
    raw_socket s3{a.port()};
    BOOST_TEST(s3.closed_by_peer(), "a third unproven connection was kept");
  }
  // The two gone, a client is admitted again and sees the refusal.
  std::optional<cluster::members_view> v;
  BOOST_TEST(wait_for(
    [&] {
      v = view(a);
      return v && v->refused_connections >= 1;
    },
    10000ms));
  BOOST_TEST(a.stop() == 0, a.log());
}

BOOST_FIXTURE_TEST_CASE(garbage_on_the_port_closes_only_its_connection,
                        fixture) {
  node_process a{dir.path, settings("a")};
  node_process b{dir.path, settings("b", {a.address()})};
  BOOST_REQUIRE(
    wait_for([&] { return state_of(a, "b") == peer_state::up; }, 10000ms));
  {
    raw_socket s{a.port()};
    std::array<unsigned char, 64> junk;
    junk.fill(0xFF);
    s.send_all(junk.data(), junk.size());
    BOOST_TEST(s.closed_by_peer(), "the node kept the connection open");
  }
  both_stay_up(a, b, 1000ms);
  BOOST_TEST(a.stop() == 0, a.log());
  BOOST_TEST(b.stop() == 0, b.log());
}

BOOST_FIXTURE_TEST_CASE(
  a_frame_over_the_message_bound_after_the_handshake_is_refused_unread,
  fixture) {
  // A node that takes messages of at most 1 MiB; a client that completed
  // CAF's handshake sends one of 3 MiB (its carrier padded by the test
  // hook): the frame is refused before the payload is read.
  node_process a{dir.path, settings("a", {}, {"max-message-bytes=1048576"})};
  node_process b{dir.path, settings("b", {a.address()})};
  BOOST_REQUIRE(
    wait_for([&] { return state_of(a, "b") == peer_state::up; }, 10000ms));
  {
    client_config padded_cfg;
    caf::actor_system padded{padded_cfg};
    msg::set_wire_mutator(
      [](std::string& flat) { flat.append(3u << 20, '\0'); });
    auto v = cluster::query_members(padded, a.address(), 3000ms);
    msg::set_wire_mutator({});
    BOOST_TEST(!v, "a 3 MiB message was answered");
  }
  both_stay_up(a, b, 1000ms);
  BOOST_TEST(a.log().find("cluster.max-message-bytes is 1048576")
               != std::string::npos,
             a.log());
  BOOST_TEST(a.stop() == 0, a.log());
  BOOST_TEST(b.stop() == 0, b.log());
}
