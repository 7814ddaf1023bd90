// The bulk lane (messages/bulk_lane.hpp) on loopback: an entry offered by
// a table with a lane arrives intact and verified; a wrong token, a
// withdrawn or expired transfer, a corrupted header checksum, a sender that
// dies mid-transfer and one that never answers all end in an error by the
// deadline, never in bytes.
#define BOOST_TEST_MODULE messages_bulk_lane
#include <boost/test/unit_test.hpp>

#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace kvtier;
using kvtier::test::code_of;
using kvtier::test::content_hash;
using clock_type = std::chrono::steady_clock;

namespace {

msg::sealed<msg::RestoreEntryReply> restored(uint32_t tokens, tiers::entry& e) {
  e.ns = "peer";
  e.tokens.assign(tokens, 5);
  auto seg = view::of(test::pattern(uint64_t{tokens} * 4096, tokens));
  e.layers = {tiers::layer_state::kv(4096, tokens, {seg})};
  msg::draft<msg::RestoreEntryReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

std::unique_ptr<msg::bulk_server> lane() {
  auto s =
    msg::bulk_server::start("127.0.0.1", 0, std::chrono::milliseconds(2000));
  BOOST_REQUIRE(s);
  BOOST_REQUIRE((*s)->port() != 0);
  return std::move(*s);
}

auto soon(int ms = 3000) {
  return clock_type::now() + std::chrono::milliseconds(ms);
}

/// A header naming `port` and `token` for a transfer of `total` bytes.
struct fake_header {
  capnp::MallocMessageBuilder b;
  msg::TransferHeader::Builder h = b.initRoot<msg::TransferHeader>();
  fake_header(uint16_t port, uint64_t total) {
    h.setTransferId(1);
    h.setTotalLength(total);
    h.setChunkSize(msg::default_chunk_size);
    h.setChunkCount(1);
    h.setBulkPort(port);
    h.setBulkToken(42);
  }
};

/// A listening socket on loopback that a test drives by hand.
struct raw_listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  uint16_t port = 0;
  raw_listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~raw_listener() {
    ::close(fd);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(an_offered_entry_arrives_intact_over_the_lane) {
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(1500, e), 1500, 0); // about 6 MiB
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  BOOST_TEST(h.getBulkPort() == l->port());
  BOOST_TEST(h.getBulkToken() != 0u);
  auto flat = msg::bulk_fetch("127.0.0.1", h, soon());
  BOOST_REQUIRE_MESSAGE(flat, (flat ? "" : describe(flat.error())));
  auto m = msg::sealed<msg::RestoreEntryReply>::from_flat(*flat);
  BOOST_REQUIRE(m);
  auto back = tiers::read_entry(*m, m->root().getEntry());
  BOOST_REQUIRE(back);
  BOOST_TEST(back->tokens == e.tokens);
  BOOST_TEST(content_hash(back->layers[0].segments)
             == content_hash(e.layers[0].segments));
  BOOST_TEST(l->stats().served == 1u);
  // Twice is fine until the receiver cancels; then it is refused.
  BOOST_REQUIRE(msg::bulk_fetch("127.0.0.1", h, soon()));
  BOOST_TEST(table.cancel(h.getTransferId()));
  auto gone = msg::bulk_fetch("127.0.0.1", h, soon());
  BOOST_REQUIRE(!gone);
  BOOST_TEST(code_of(gone.error()) == ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_wrong_token_or_an_expired_transfer_is_refused) {
  auto l = lane();
  msg::transfer_limits limits;
  limits.idle_ms = 100;
  msg::transfer_table table{limits, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(100, e), 100, 0);
  BOOST_REQUIRE(offer);
  capnp::MallocMessageBuilder b;
  b.setRoot(offer->root().getTransfer());
  auto forged = b.getRoot<msg::TransferHeader>();
  forged.setBulkToken(forged.getBulkToken() ^ 1);
  auto r = msg::bulk_fetch("127.0.0.1", forged.asReader(), soon());
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::invalid_argument);
  BOOST_TEST(l->stats().refused == 1u);
  BOOST_TEST(table.expire(100) == 1u);
  r = msg::bulk_fetch("127.0.0.1", offer->root().getTransfer(), soon());
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_lane_transfer_carries_its_checksum_after_the_bytes) {
  // The header of a lane transfer carries no checksum (the lane hashes as
  // it writes) and its chunks are refused: one path, one sum.
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(100, e), 100, 0);
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  BOOST_TEST(h.getLaneChecksum());
  BOOST_TEST(h.getChecksum() == 0u);
  msg::draft<msg::FetchChunk> pull;
  pull.root().setTransferId(h.getTransferId());
  pull.root().setIndex(0);
  auto c = table.chunk(std::move(pull).seal().root(), 0);
  BOOST_REQUIRE(!c);
  BOOST_TEST(code_of(c.error()) == ec::invalid_argument);
  BOOST_TEST(to_string(c.error()).find("bulk lane only") != std::string::npos);
  auto in = msg::incoming_transfer::start(h);
  BOOST_REQUIRE(!in);
  BOOST_TEST(code_of(in.error()) == ec::malformed_message);
  // Without the lane the same table offers chunks under a checksum.
  auto chunked = table.offer(restored(100, e), 100, 0, false);
  BOOST_REQUIRE(chunked);
  BOOST_TEST(!chunked->root().getTransfer().getLaneChecksum());
  BOOST_TEST(chunked->root().getTransfer().getBulkPort() == 0u);
  BOOST_TEST(chunked->root().getTransfer().getChecksum() != 0u);
}

BOOST_AUTO_TEST_CASE(a_header_checksum_mismatch_yields_no_bytes) {
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(100, e), 100, 0);
  BOOST_REQUIRE(offer);
  capnp::MallocMessageBuilder b;
  b.setRoot(offer->root().getTransfer());
  auto h = b.getRoot<msg::TransferHeader>();
  // A header that names a checksum is held to it, beside the lane's own.
  h.setLaneChecksum(false);
  h.setChecksum(12345);
  auto r = msg::bulk_fetch("127.0.0.1", h.asReader(), soon());
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::corrupt_data);
}

BOOST_AUTO_TEST_CASE(bytes_that_disagree_with_the_lanes_checksum_yield_none) {
  // A sender whose trailer does not match the bytes it wrote (damage on
  // the way or at the source): corrupt_data, no bytes.
  raw_listener srv;
  std::thread peer([&] {
    int c = ::accept(srv.fd, nullptr, nullptr);
    char req[24];
    [[maybe_unused]] auto n = ::recv(c, req, sizeof req, MSG_WAITALL);
    uint64_t ok = 0, wrong = 7;
    std::vector<char> body(8192, 'x');
    [[maybe_unused]] auto w = ::send(c, &ok, sizeof ok, 0);
    w = ::send(c, body.data(), body.size(), 0);
    w = ::send(c, &wrong, sizeof wrong, 0);
    ::recv(c, req, 1, 0); // until the receiver hangs up
    ::close(c);
  });
  fake_header fh{srv.port, 8192};
  fh.h.setLaneChecksum(true);
  auto r = msg::bulk_fetch("127.0.0.1", fh.h.asReader(), soon());
  peer.join();
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::corrupt_data);
}

BOOST_AUTO_TEST_CASE(a_sender_that_dies_mid_transfer_is_an_error) {
  raw_listener srv;
  std::thread peer([&] {
    int c = ::accept(srv.fd, nullptr, nullptr);
    char req[24];
    [[maybe_unused]] auto n = ::recv(c, req, sizeof req, MSG_WAITALL);
    uint64_t ok = 0;
    std::vector<char> half(4096, 'x');
    [[maybe_unused]] auto w = ::send(c, &ok, sizeof ok, 0);
    w = ::send(c, half.data(), half.size(), 0); // of 8192
    ::close(c);                                 // and dies
  });
  fake_header fh{srv.port, 8192};
  auto r = msg::bulk_fetch("127.0.0.1", fh.h.asReader(), soon());
  peer.join();
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::io_error);
}

BOOST_AUTO_TEST_CASE(a_sender_that_never_answers_times_out_by_the_deadline) {
  raw_listener srv; // accepts into the backlog, never answers
  fake_header fh{srv.port, 8192};
  auto t0 = clock_type::now();
  auto r = msg::bulk_fetch("127.0.0.1", fh.h.asReader(), soon(300));
  auto took = clock_type::now() - t0;
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::timeout);
  BOOST_TEST(took < std::chrono::milliseconds(2000));
}

BOOST_AUTO_TEST_CASE(no_lane_or_too_large_is_refused_before_connecting) {
  fake_header none{0, 8192};
  auto r = msg::bulk_fetch("127.0.0.1", none.h.asReader(), soon());
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::invalid_argument);
  fake_header big{1, uint64_t{1} << 31};
  r = msg::bulk_fetch("127.0.0.1", big.h.asReader(), soon(), 1 << 20);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == ec::message_limit_exceeded);
  auto bad = msg::bulk_server::start("not-an-address", 0);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == ec::invalid_config);
}
