// Both ends of a peer fetch (messages/transfer_table.hpp): an entry offered
// by a sender's table arrives intact through a windowed pull with answers
// out of order, lost requests retried, and every chunk through flat bytes;
// the table holds its byte cap, expires idle transfers and forgets
// cancelled ones; a pull never yields a partial or corrupted message.
#define BOOST_TEST_MODULE messages_transfer_table
#include <boost/test/unit_test.hpp>

#include "messages/transfer_table.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <algorithm>
#include <random>

using namespace kvtier;
using kvtier::test::code_of;
using kvtier::test::content_hash;

namespace {

/// A RestoreEntryReply with a kv entry of `tokens` x 4 KiB, by reference.
msg::sealed<msg::RestoreEntryReply> restored(uint32_t tokens, tiers::entry& e,
                                             uint8_t salt = 0) {
  e.ns = "peer";
  e.tokens.assign(tokens, 3);
  auto seg = view::of(test::pattern(uint64_t{tokens} * 4096, tokens + salt));
  e.layers = {tiers::layer_state::kv(4096, tokens, {seg})};
  msg::draft<msg::RestoreEntryReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

/// `m` as the other node sees it: through flat bytes.
template <class Root>
msg::sealed<Root> across(msg::sealed<Root> m) {
  auto flat = m.to_flat();
  BOOST_REQUIRE(flat);
  auto back = msg::sealed<Root>::from_flat(*flat);
  BOOST_REQUIRE(back);
  return std::move(*back);
}

msg::sealed<msg::FetchChunk> request(uint64_t id, uint32_t index) {
  msg::draft<msg::FetchChunk> d;
  d.root().setTransferId(id);
  d.root().setIndex(index);
  return across(std::move(d).seal());
}

msg::transfer_limits small_chunks() {
  msg::transfer_limits l;
  l.chunk_size = 64 * 1024;
  l.idle_ms = 1000;
  return l;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_offered_entry_arrives_intact_through_a_window) {
  msg::transfer_table table{small_chunks()};
  tiers::entry e;
  auto offer = table.offer(restored(200, e), 200, 0); // 800 KiB: 13 chunks
  BOOST_REQUIRE_MESSAGE(offer, (offer ? "" : describe(offer.error())));
  auto reply = across(std::move(*offer));
  BOOST_TEST(reply.root().getUsableTokens() == 200u);
  BOOST_REQUIRE(reply.root().isTransfer());
  auto pull = msg::transfer_pull::start(reply.root().getTransfer(), 3);
  BOOST_REQUIRE(pull);
  BOOST_TEST(pull->chunk_count() > 3u);
  BOOST_TEST(table.bytes() > 0u);
  std::mt19937 rng{7};
  std::vector<uint32_t> asked;
  bool lost_one = false;
  while (!pull->complete()) {
    for (auto i : pull->next())
      asked.push_back(i);
    BOOST_REQUIRE(pull->in_flight() <= 3u);
    BOOST_REQUIRE(!asked.empty());
    // Answers arrive in any order; one request is lost and retried.
    std::shuffle(asked.begin(), asked.end(), rng);
    auto i = asked.back();
    asked.pop_back();
    if (!lost_one && i == 2) {
      lost_one = true;
      pull->retry(i);
      continue;
    }
    auto c = table.chunk(request(pull->id(), i).root(), 10);
    BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
    BOOST_REQUIRE(!pull->add(across(std::move(*c)).root()));
  }
  BOOST_TEST(lost_one);
  auto got = std::move(*pull).finish<msg::RestoreEntryReply>();
  BOOST_REQUIRE(got);
  auto back = tiers::read_entry(*got, got->root().getEntry());
  BOOST_REQUIRE(back);
  BOOST_TEST(back->tokens == e.tokens);
  BOOST_TEST(content_hash(back->layers[0].segments)
             == content_hash(e.layers[0].segments));
  // The receiver is done: the sender forgets it.
  BOOST_TEST(table.cancel(reply.root().getTransfer().getTransferId()));
  BOOST_TEST(table.bytes() == 0u);
  BOOST_TEST(table.size() == 0u);
}

BOOST_AUTO_TEST_CASE(offers_over_the_byte_cap_are_refused) {
  auto limits = small_chunks();
  limits.max_bytes = 1 << 20; // one 800 KiB entry fits, two do not
  msg::transfer_table table{limits};
  tiers::entry a, b;
  BOOST_REQUIRE(table.offer(restored(200, a), 200, 0));
  auto second = table.offer(restored(200, b, 1), 200, 0);
  BOOST_REQUIRE(!second);
  BOOST_TEST(code_of(second.error()) == ec::queue_full);
  BOOST_TEST(table.stats().refused_over_cap == 1u);
  BOOST_TEST(table.size() == 1u);
  BOOST_TEST(table.bytes() <= limits.max_bytes);
}

BOOST_AUTO_TEST_CASE(idle_transfers_expire_and_pulled_ones_stay) {
  msg::transfer_table table{small_chunks()};
  tiers::entry a, b;
  auto first = table.offer(restored(50, a), 50, 0);
  auto second = table.offer(restored(50, b, 1), 50, 0);
  BOOST_REQUIRE(first && second);
  auto id1 = first->root().getTransfer().getTransferId();
  auto id2 = second->root().getTransfer().getTransferId();
  BOOST_TEST(id1 != id2);
  BOOST_REQUIRE(table.chunk(request(id2, 0).root(), 900)); // in use
  BOOST_TEST(table.expire(1000) == 1u);                    // id1 idle 1 s
  BOOST_TEST(table.size() == 1u);
  auto gone = table.chunk(request(id1, 0).root(), 1000);
  BOOST_REQUIRE(!gone);
  BOOST_TEST(code_of(gone.error()) == ec::invalid_argument);
  BOOST_TEST(table.stats().unknown_pulls == 1u);
  BOOST_TEST(table.expire(1899) == 0u);
  BOOST_TEST(table.expire(1900) == 1u);
  BOOST_TEST(table.bytes() == 0u);
  BOOST_TEST(table.stats().expired == 2u);
}

BOOST_AUTO_TEST_CASE(cancelled_or_unknown_transfers_and_bad_indices_fail) {
  msg::transfer_table table{small_chunks()};
  tiers::entry e;
  auto offer = table.offer(restored(50, e), 50, 0);
  BOOST_REQUIRE(offer);
  auto id = offer->root().getTransfer().getTransferId();
  auto count = offer->root().getTransfer().getChunkCount();
  auto past = table.chunk(request(id, count).root(), 0);
  BOOST_REQUIRE(!past);
  BOOST_TEST(code_of(past.error()) == ec::invalid_argument);
  BOOST_TEST(table.cancel(id));
  BOOST_TEST(!table.cancel(id));
  BOOST_TEST(!table.chunk(request(id, 0).root(), 0));
  BOOST_TEST(!table.chunk(request(12345, 0).root(), 0));
}

BOOST_AUTO_TEST_CASE(a_pull_yields_nothing_partial_or_corrupted) {
  msg::transfer_table table{small_chunks()};
  tiers::entry e;
  auto offer = table.offer(restored(100, e), 100, 0);
  BOOST_REQUIRE(offer);
  auto header = offer->root().getTransfer();
  // Missing chunks: an error, never a message.
  {
    auto pull = msg::transfer_pull::start(header, 2);
    BOOST_REQUIRE(pull);
    auto first = pull->next();
    BOOST_REQUIRE(!first.empty());
    BOOST_REQUIRE(
      !pull->add(table.chunk(request(pull->id(), first[0]).root(), 0)->root()));
    BOOST_TEST(!pull->complete());
    auto got = std::move(*pull).finish<msg::RestoreEntryReply>();
    BOOST_REQUIRE(!got);
    BOOST_TEST(code_of(got.error()) == ec::malformed_message);
  }
  // One flipped bit: the checksum fails before anything is decoded.
  {
    auto pull = msg::transfer_pull::start(header, 4);
    BOOST_REQUIRE(pull);
    while (!pull->complete())
      for (auto i : pull->next()) {
        auto c = table.chunk(request(pull->id(), i).root(), 0);
        BOOST_REQUIRE(c);
        msg::draft<msg::FetchChunkReply> d;
        d.root().setTransferId(c->root().getTransferId());
        d.root().setIndex(i);
        d.root().setOffset(c->root().getOffset());
        d.root().setData(c->root().getData());
        if (i == 1)
          d.root().getData()[7] ^= 0x10;
        BOOST_REQUIRE(!pull->add(std::move(d).seal().root()));
      }
    auto got = std::move(*pull).finish<msg::RestoreEntryReply>();
    BOOST_REQUIRE(!got);
    BOOST_TEST(code_of(got.error()) == ec::corrupt_data);
  }
  // A window of 0 is refused.
  auto none = msg::transfer_pull::start(header, 0);
  BOOST_REQUIRE(!none);
  BOOST_TEST(code_of(none.error()) == ec::invalid_argument);
}
