// The bulk lane (messages/bulk_lane.hpp) on loopback: an entry offered by
// a table with a lane arrives intact and verified; a wrong token, a
// withdrawn or expired transfer, a corrupted header checksum, a sender that
// dies mid-transfer and one that never answers all end in an error by the
// deadline, never in bytes. The lane's checksum over blocks
// (messages/block_hash.hpp) equals one computed here from its definition,
// the holder takes the hashes of blocks it sent before from the buffer's
// cache (also for a trimmed export), and a flipped byte, reordered blocks,
// a truncated or extended stream and a wrong piece table are all refused.
#define BOOST_TEST_MODULE messages_bulk_lane
#include <boost/test/unit_test.hpp>

#include "messages/block_hash.hpp"
#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <xxhash.h>

#include <cstring>
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

msg::sealed<msg::RestoreEntryReply> reply_of(const tiers::entry& e) {
  msg::draft<msg::RestoreEntryReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

msg::sealed<msg::RestoreEntryReply> restored(uint32_t tokens, tiers::entry& e) {
  e.ns = "peer";
  e.tokens.assign(tokens, 5);
  auto seg = view::of(test::pattern(uint64_t{tokens} * 4096, tokens));
  e.layers = {tiers::layer_state::kv(4096, tokens, {seg})};
  return reply_of(e);
}

/// The lane checksum from its definition (docs/messages.md), computed
/// without messages/block_hash: XXH3-64 over the piece count, the piece
/// lengths, and the XXH3-64 of every 64 KiB block of every piece.
uint64_t reference_sum(const std::vector<std::vector<std::byte>>& pieces) {
  std::vector<uint64_t> words{pieces.size()};
  for (auto& p : pieces)
    words.push_back(p.size());
  for (auto& p : pieces)
    for (size_t at = 0; at < p.size(); at += 65536)
      words.push_back(
        XXH3_64bits(p.data() + at, std::min<size_t>(65536, p.size() - at)));
  return XXH3_64bits(words.data(), words.size() * 8);
}

std::vector<std::vector<std::byte>> copies(const std::vector<view>& pieces) {
  std::vector<std::vector<std::byte>> out;
  for (auto& p : pieces)
    out.emplace_back(p.bytes().begin(), p.bytes().end());
  return out;
}

uint64_t computed() {
  return block_hashes_now().computed;
}

uint64_t reused() {
  return block_hashes_now().reused;
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
    h.initLanePieces(1).set(0, total);
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

  /// Answers one request: status ok, `bytes`, then `trailer`; then waits
  /// for the receiver to hang up.
  std::thread serve_once(std::vector<std::byte> bytes, uint64_t trailer) {
    return std::thread([this, bytes = std::move(bytes), trailer] {
      int c = ::accept(fd, nullptr, nullptr);
      char req[24];
      [[maybe_unused]] auto n = ::recv(c, req, sizeof req, MSG_WAITALL);
      uint64_t ok = 0;
      [[maybe_unused]] auto w = ::send(c, &ok, sizeof ok, 0);
      w = ::send(c, bytes.data(), bytes.size(), 0);
      w = ::send(c, &trailer, sizeof trailer, 0);
      ::recv(c, req, 1, 0);
      ::close(c);
    });
  }
};

/// A copy of `h` to alter.
struct header_copy {
  capnp::MallocMessageBuilder b;
  msg::TransferHeader::Builder h;
  explicit header_copy(msg::TransferHeader::Reader in)
    : h(copied(b, in)) {}
  static msg::TransferHeader::Builder copied(capnp::MallocMessageBuilder& into,
                                             msg::TransferHeader::Reader in) {
    into.setRoot(in);
    return into.getRoot<msg::TransferHeader>();
  }
  std::vector<uint64_t> pieces() {
    std::vector<uint64_t> out;
    for (auto n : h.asReader().getLanePieces())
      out.push_back(n);
    return out;
  }
  void set_pieces(const std::vector<uint64_t>& lengths) {
    auto l = h.initLanePieces(static_cast<unsigned>(lengths.size()));
    for (unsigned i = 0; i < lengths.size(); ++i)
      l.set(i, lengths[i]);
  }
};

/// Whether `l` counts `n` served transfers within 5 s: the server counts
/// one once its last write returned, which may be a moment after the
/// receiver has every byte (failed here under load when asked at once).
bool served_within(const msg::bulk_server& l, uint64_t n) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (l.stats().served < n) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return l.stats().served == n;
}

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
  BOOST_TEST(served_within(*l, 1u));
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
  // It names the pieces the lane writes: they add up to the length.
  uint64_t sum = 0;
  for (auto n : h.getLanePieces())
    sum += n;
  BOOST_TEST(h.getLanePieces().size() >= 2u);
  BOOST_TEST(sum == h.getTotalLength());
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

BOOST_AUTO_TEST_CASE(the_lane_checksum_is_over_block_hashes_and_piece_lengths) {
  // Pieces of every shape: shorter than a block, exactly one, one and a
  // word, several and a tail, empty, and a view into a buffer's middle.
  auto big = test::pattern(300000, 9);
  std::vector<view> pieces{view::of(test::pattern(40, 1)),
                           view::of(test::pattern(65536, 2)),
                           view::of(test::pattern(65544, 3)),
                           view{big, 8, 262152},
                           view{big, 0, 0},
                           view::of(test::pattern(200000, 4))};
  auto want = reference_sum(copies(pieces));
  BOOST_TEST(lane_checksum_of(pieces) == want);
  // The hashes a sender takes per piece agree with the definition.
  std::vector<uint64_t> lengths;
  for (auto& p : pieces)
    lengths.push_back(p.length);
  lane_checksum sum{lengths};
  for (auto& p : pieces)
    for (auto h : hashes_of(p))
      sum.add(h);
  BOOST_TEST(sum.digest() == want);
  // And so does a receiver fed the flat bytes in runs of any size.
  auto flat = flatten(pieces);
  for (uint64_t run : {1ull, 8ull, 4096ull, 65535ull, 1000000ull}) {
    landing_checksum landing{flat.data(), lengths};
    for (uint64_t at = 0; at < flat.size(); at += run)
      landing.landed(std::min<uint64_t>(run, flat.size() - at));
    BOOST_TEST(landing.digest() == want);
  }
  // Other piece boundaries over the same bytes are another sum.
  auto moved = lengths;
  moved[1] += 8, moved[2] -= 8;
  landing_checksum other{flat.data(), moved};
  other.landed(flat.size());
  BOOST_TEST(other.digest() != want);
}

BOOST_AUTO_TEST_CASE(a_second_fetch_sends_from_the_cached_block_hashes) {
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(1500, e), 1500, 0); // 6144000 bytes
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  uint64_t whole = 6144000 / lane_block; // the payload's whole blocks
  auto c0 = computed(), r0 = reused();
  auto first = msg::bulk_fetch("127.0.0.1", h, soon());
  BOOST_REQUIRE_MESSAGE(first, (first ? "" : describe(first.error())));
  auto c1 = computed(), r1 = reused();
  BOOST_TEST(r1 - r0 == 0u);
  BOOST_TEST(c1 - c0 > whole); // every block, hashed once
  auto second = msg::bulk_fetch("127.0.0.1", h, soon());
  BOOST_REQUIRE(second);
  BOOST_TEST(reused() - r1 == whole);
  // Only the partial last block of the payload and the small pieces (the
  // segment table, the envelope) are hashed again.
  BOOST_TEST(computed() - c1 == c1 - c0 - whole);
  BOOST_TEST((*second)->bytes().size() == (*first)->bytes().size());
  BOOST_TEST(std::memcmp((*second)->data(), (*first)->data(), (*first)->size())
             == 0);
}

BOOST_AUTO_TEST_CASE(a_trimmed_export_reuses_its_whole_blocks) {
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto full = table.offer(restored(1500, e), 1500, 0);
  BOOST_REQUIRE(full);
  BOOST_REQUIRE(msg::bulk_fetch("127.0.0.1", full->root().getTransfer(),
                                soon())); // the cache knows every block now
  // 1000 tokens: a prefix view of the same buffer, 62.5 blocks.
  auto cut = e.trimmed(1000);
  BOOST_REQUIRE(cut);
  auto offer = table.offer(reply_of(*cut), 1000, 0);
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  auto pieces = header_copy{h}.pieces();
  BOOST_REQUIRE(pieces.size() == 3u); // segment table, envelope, payload
  BOOST_REQUIRE(pieces[2] == 4096000u);
  auto c0 = computed(), r0 = reused();
  auto flat = msg::bulk_fetch("127.0.0.1", h, soon());
  BOOST_REQUIRE_MESSAGE(flat, (flat ? "" : describe(flat.error())));
  BOOST_TEST(reused() - r0 == 4096000u / lane_block);
  BOOST_TEST(computed() - c0
             == blocks_of(pieces[0]) + blocks_of(pieces[1]) + 1);
  auto m = msg::sealed<msg::RestoreEntryReply>::from_flat(*flat);
  BOOST_REQUIRE(m);
  auto back = tiers::read_entry(*m, m->root().getEntry());
  BOOST_REQUIRE(back);
  BOOST_TEST(back->tokens == cut->tokens);
  BOOST_TEST(content_hash(back->layers[0].segments)
             == content_hash(cut->layers[0].segments));
  // The receiver verified those blocks as they landed: its buffer knows
  // their hashes, so serving the payload on sends it without hashing.
  auto& seg = back->layers[0].segments[0];
  auto c1 = computed(), r1 = reused();
  auto again = hashes_of(seg);
  BOOST_TEST(reused() - r1 == 4096000u / lane_block);
  BOOST_TEST(computed() - c1 == 1u);
  std::vector<view> one{seg};
  lane_checksum sum{std::vector<uint64_t>{seg.length}};
  for (auto x : again)
    sum.add(x);
  BOOST_TEST(sum.digest() == lane_checksum_of(one));
}

BOOST_AUTO_TEST_CASE(a_flipped_byte_or_reordered_blocks_are_refused) {
  // Three blocks of one piece; the trailer is right for the bytes as they
  // should be.
  auto good = flatten({view::of(test::pattern(3 * 65536, 7))});
  auto sum = reference_sum({good});
  {
    raw_listener srv; // the harness itself: the right bytes pass
    auto peer = srv.serve_once(good, sum);
    fake_header fh{srv.port, good.size()};
    fh.h.setLaneChecksum(true);
    auto r = msg::bulk_fetch("127.0.0.1", fh.h.asReader(), soon());
    peer.join();
    BOOST_REQUIRE_MESSAGE(r, (r ? "" : describe(r.error())));
    BOOST_TEST(std::memcmp((*r)->data(), good.data(), good.size()) == 0);
  }
  auto flipped = good;
  flipped[100000] ^= std::byte{1};
  auto swapped = good;
  std::memcpy(swapped.data() + 65536, good.data() + 2 * 65536, 65536);
  std::memcpy(swapped.data() + 2 * 65536, good.data() + 65536, 65536);
  for (auto* bad : {&flipped, &swapped}) {
    raw_listener srv;
    auto peer = srv.serve_once(*bad, sum);
    fake_header fh{srv.port, good.size()};
    fh.h.setLaneChecksum(true);
    auto r = msg::bulk_fetch("127.0.0.1", fh.h.asReader(), soon());
    peer.join();
    BOOST_REQUIRE(!r);
    BOOST_TEST(code_of(r.error()) == ec::corrupt_data);
  }
}

BOOST_AUTO_TEST_CASE(a_wrong_piece_table_or_length_is_refused) {
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(300, e), 300, 0);
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  BOOST_REQUIRE(msg::bulk_fetch("127.0.0.1", h, soon()));
  auto real = header_copy{h}.pieces();
  BOOST_REQUIRE(real.size() == 3u);
  auto refused = [&](auto alter, ec want) {
    header_copy c{h};
    alter(c);
    auto r = msg::bulk_fetch("127.0.0.1", c.h.asReader(), soon());
    BOOST_REQUIRE(!r);
    BOOST_TEST(code_of(r.error()) == want);
  };
  // Other boundaries, the same length: the sum over them disagrees.
  refused(
    [&](header_copy& c) {
      auto p = real;
      p[1] += 8, p[2] -= 8;
      c.set_pieces(p);
    },
    ec::corrupt_data);
  // Pieces in another order.
  refused(
    [&](header_copy& c) {
      auto p = real;
      std::swap(p[0], p[2]);
      c.set_pieces(p);
    },
    ec::corrupt_data);
  // A table that does not add up to the length, or names no piece.
  refused(
    [&](header_copy& c) {
      auto p = real;
      p[2] += 8;
      c.set_pieces(p);
    },
    ec::corrupt_data);
  refused([&](header_copy& c) { c.set_pieces({}); }, ec::corrupt_data);
  // A truncated stream: the receiver reads the last word as the trailer.
  refused(
    [&](header_copy& c) {
      auto p = real;
      p[2] -= 8;
      c.set_pieces(p);
      c.h.setTotalLength(c.h.getTotalLength() - 8);
    },
    ec::corrupt_data);
  // An extended one: the trailer is read as bytes, then the sender is done.
  refused(
    [&](header_copy& c) {
      auto p = real;
      p[2] += 8;
      c.set_pieces(p);
      c.h.setTotalLength(c.h.getTotalLength() + 8);
    },
    ec::io_error);
}

BOOST_AUTO_TEST_CASE(a_request_of_the_earlier_lane_version_is_refused) {
  // Version 1 hashed the flat bytes whole: a peer of that build gets a
  // refusal, not bytes it would misread.
  auto l = lane();
  msg::transfer_table table{{}, l.get()};
  tiers::entry e;
  auto offer = table.offer(restored(100, e), 100, 0);
  BOOST_REQUIRE(offer);
  auto h = offer->root().getTransfer();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(l->port());
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  struct {
    uint32_t magic, version;
    uint64_t id, token;
  } req{0x4c42564b, 1, h.getTransferId(), h.getBulkToken()};
  BOOST_REQUIRE(::send(fd, &req, sizeof req, 0) == sizeof req);
  uint64_t status = 0;
  BOOST_REQUIRE(::recv(fd, &status, sizeof status, MSG_WAITALL)
                == sizeof status);
  ::close(fd);
  BOOST_TEST(status == 1u); // refused
  BOOST_TEST(l->stats().refused == 1u);
  BOOST_TEST(l->stats().served == 0u);
}

BOOST_AUTO_TEST_CASE(lanes_walking_one_buffer_at_once_agree) {
  // Two senders of the same payload at once: each gets every hash right,
  // and the cache ends up knowing each whole block once, in order.
  auto buf = test::pattern(40 * 65536 + 800, 11);
  view v = view::of(buf);
  auto want = copies({v});
  std::vector<uint64_t> ref;
  for (size_t at = 0; at < want[0].size(); at += 65536)
    ref.push_back(XXH3_64bits(want[0].data() + at,
                              std::min<size_t>(65536, want[0].size() - at)));
  std::vector<uint64_t> a, b;
  std::thread t1([&] {
    for (uint64_t k = 0; k < 41; k += 3)
      for (auto h : hashes_of(v, k, 3))
        a.push_back(h);
  });
  std::thread t2([&] { b = hashes_of(v); });
  t1.join();
  t2.join();
  BOOST_TEST(a == ref);
  BOOST_TEST(b == ref);
  auto& cache = buf->block_hashes();
  std::lock_guard<std::mutex> guard{cache.mtx};
  BOOST_REQUIRE(cache.runs.count(0) == 1u);
  std::vector<uint64_t> whole(ref.begin(), ref.begin() + 40);
  BOOST_TEST(cache.runs[0] == whole);
}
