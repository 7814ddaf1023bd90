#define BOOST_TEST_MODULE messages_transfer
#include <boost/test/unit_test.hpp>

#include "messages/transfer.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <algorithm>

using namespace kvtier;
using kvtier::test::code_of;
using kvtier::test::content_hash;
using restore_msg = msg::sealed<msg::RestoreEntryReply>;

namespace {

/// A RestoreEntryReply with a kv entry of `tokens` x 4 KiB, by reference.
restore_msg restored(uint32_t tokens, tiers::entry& e) {
  e.ns = "peer";
  e.tokens.assign(tokens, 3);
  auto seg = view::of(test::pattern(uint64_t{tokens} * 4096, tokens));
  e.layers = {tiers::layer_state::kv(4096, tokens, {seg})};
  msg::draft<msg::RestoreEntryReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

/// The header as the receiver sees it: through flat bytes.
msg::sealed<msg::FetchEntryReply> announce(const msg::outgoing_transfer& t) {
  msg::draft<msg::FetchEntryReply> d;
  t.write_header(d.root().initTransfer());
  auto flat = *std::move(d).seal().to_flat();
  return *msg::sealed<msg::FetchEntryReply>::from_flat(flat);
}

/// Chunk `i` as the receiver sees it: through flat bytes.
msg::sealed<msg::FetchChunkReply> pull(const msg::outgoing_transfer& t,
                                       uint32_t i) {
  auto c = t.chunk(i);
  BOOST_REQUIRE(c);
  BOOST_REQUIRE(!c->has_side_buffers());
  return *msg::sealed<msg::FetchChunkReply>::from_flat(*c->to_flat());
}

/// A transfer of a 100-token entry in 64 KiB chunks.
msg::outgoing_transfer small_transfer(uint64_t id) {
  tiers::entry e;
  auto out = msg::outgoing_transfer::make(id, restored(100, e), 64 * 1024);
  BOOST_REQUIRE(out);
  return std::move(*out);
}

/// The receiving side of `out`, started from its announced header.
msg::incoming_transfer receiver_of(const msg::outgoing_transfer& out) {
  auto in = msg::incoming_transfer::start(announce(out).root().getTransfer());
  BOOST_REQUIRE(in);
  return std::move(*in);
}

} // namespace

BOOST_AUTO_TEST_CASE(entry_arrives_intact_from_chunks_in_any_order) {
  tiers::entry e;
  auto sent = restored(2600, e); // about 10 MiB: three 4 MiB chunks
  auto out = msg::outgoing_transfer::make(5, sent);
  BOOST_REQUIRE(out);
  BOOST_TEST(out->chunk_count() == 3u);
  auto header = announce(*out);
  auto in = msg::incoming_transfer::start(header.root().getTransfer());
  BOOST_REQUIRE(in);
  for (uint32_t i : {2u, 0u, 2u, 1u}) // out of order, one repeated
    BOOST_REQUIRE(!in->add(pull(*out, i).root()));
  BOOST_TEST(in->complete());
  auto got = std::move(*in).finish<msg::RestoreEntryReply>();
  BOOST_REQUIRE(got);
  auto back = tiers::read_entry(*got, got->root().getEntry());
  BOOST_REQUIRE(back);
  BOOST_TEST(back->tokens == e.tokens);
  BOOST_TEST(content_hash(back->layers[0].segments)
             == content_hash(e.layers[0].segments));
  BOOST_TEST(back->layers[0].segments[0].buf->id() == got->words()->id());
}

BOOST_AUTO_TEST_CASE(corrupted_chunk_fails_verification_before_decoding) {
  auto out = small_transfer(6);
  auto in = receiver_of(out);
  for (uint32_t i = 0; i < out.chunk_count(); ++i) {
    auto c = pull(out, i);
    if (i != 1) {
      BOOST_REQUIRE(!in.add(c.root()));
      continue;
    }
    msg::draft<msg::FetchChunkReply> bad; // same chunk, one bit flipped
    bad.root().setTransferId(c.root().getTransferId());
    bad.root().setIndex(i);
    bad.root().setOffset(c.root().getOffset());
    bad.root().setData(c.root().getData());
    bad.root().getData()[100] ^= 1;
    BOOST_REQUIRE(!in.add(std::move(bad).seal().root()));
  }
  auto got = std::move(in).finish<msg::RestoreEntryReply>();
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == ec::corrupt_data);
}

BOOST_AUTO_TEST_CASE(missing_chunk_is_an_error_not_a_partial_entry) {
  auto out = small_transfer(7);
  auto in = receiver_of(out);
  BOOST_REQUIRE(!in.add(pull(out, 0).root()));
  BOOST_TEST(!in.complete());
  auto got = std::move(in).finish<msg::RestoreEntryReply>();
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == ec::malformed_message);
}

BOOST_AUTO_TEST_CASE(foreign_or_misplaced_chunks_are_rejected) {
  auto out = small_transfer(8);
  auto other = small_transfer(9);
  auto in = receiver_of(out);
  auto err = in.add(pull(other, 0).root());
  BOOST_TEST(code_of(err) == ec::malformed_message);
  msg::draft<msg::FetchChunkReply> shifted;
  shifted.root().setTransferId(8);
  shifted.root().setIndex(1);
  shifted.root().setOffset(3);
  shifted.root().initData(10);
  err = in.add(std::move(shifted).seal().root());
  BOOST_TEST(code_of(err) == ec::malformed_message);
}

BOOST_AUTO_TEST_CASE(header_beyond_the_limits_or_inconsistent_is_refused) {
  capnp::MallocMessageBuilder b;
  auto h = b.initRoot<msg::TransferHeader>();
  h.setTotalLength(uint64_t{1} << 40);
  h.setChunkSize(msg::default_chunk_size);
  h.setChunkCount(static_cast<uint32_t>((uint64_t{1} << 40) >> 22));
  auto big = msg::incoming_transfer::start(h.asReader());
  BOOST_REQUIRE(!big);
  BOOST_TEST(code_of(big.error()) == ec::message_limit_exceeded);
  h.setTotalLength(4096);
  h.setChunkCount(5);
  auto odd = msg::incoming_transfer::start(h.asReader());
  BOOST_REQUIRE(!odd);
  BOOST_TEST(code_of(odd.error()) == ec::malformed_message);
}
