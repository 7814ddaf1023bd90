#define BOOST_TEST_MODULE messages_decoding
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <capnp/serialize.h>

#include <random>

using namespace kvtier;
using kvtier::test::code_of;
using publish_msg = msg::sealed<msg::PublishState>;

namespace {

/// Flat bytes of a PublishState carrying a small kv entry and attachment.
buffer_ref publish_flat() {
  auto e = test::sample_entry(tiers::layer_kind::kv, 6, 1);
  msg::draft<msg::PublishState> d;
  d.root().initRequest().setId(11);
  tiers::write_entry(d, d.root().initEntry(), e);
  return *std::move(d).seal().to_flat();
}

buffer_ref bytes_of(const std::vector<std::byte>& b) {
  return buffer::copy_of(b);
}

buffer_ref share(kj::Array<capnp::word> words) {
  return buffer::copy_of(std::as_bytes(std::span<const kj::byte>{
    words.asBytes().begin(), words.asBytes().size()}));
}

/// A hand-made envelope claiming `type` and `protocol`, body left to fill.
msg::Envelope::Builder envelope(capnp::MessageBuilder& b, uint64_t type,
                                uint16_t protocol = msg::PROTOCOL_VERSION) {
  auto env = b.initRoot<msg::Envelope>();
  env.setRootType(type);
  env.setProtocol(protocol);
  return env;
}

/// Checks that every payload view of a decoded message lies in its bytes.
void check_views_inside(const publish_msg& m) {
  for (auto l : m.root().getEntry().getLayers())
    for (auto p : l.getSegments())
      if (auto v = m.payload(p); v && v->length > 0)
        BOOST_TEST(v->offset + v->length <= m.words()->size());
}

} // namespace

BOOST_AUTO_TEST_CASE(valid_bytes_decode) {
  auto m = publish_msg::from_flat(publish_flat());
  BOOST_REQUIRE(m);
  BOOST_TEST(m->root().getRequest().getId() == 11u);
}

BOOST_AUTO_TEST_CASE(truncated_bytes_give_malformed_message_error) {
  auto flat = publish_flat();
  auto all = flat->bytes();
  for (size_t cut = 0; cut < all.size(); ++cut) {
    auto m = publish_msg::from_flat(buffer::copy_of(all.first(cut)));
    BOOST_TEST_INFO("cut at " << cut << " of " << all.size());
    BOOST_REQUIRE(!m);
    BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_give_malformed_message_error) {
  auto flat = publish_flat();
  std::vector<std::byte> longer(flat->bytes().begin(), flat->bytes().end());
  longer.resize(longer.size() + 8);
  auto m = publish_msg::from_flat(bytes_of(longer));
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  BOOST_TEST(describe(m.error()).find("follow the message")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(random_bytes_give_errors_not_crashes) {
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    std::mt19937_64 rng{seed};
    std::vector<std::byte> junk(8 * (1 + rng() % 64));
    for (auto& b : junk)
      b = static_cast<std::byte>(rng());
    if (seed % 2 == 0) // a plausible one-segment table: reach the body
      junk[0] = junk[1] = junk[2] = junk[3] = std::byte{0},
      junk[4] = static_cast<std::byte>(junk.size() / 8 - 1),
      junk[5] = junk[6] = junk[7] = std::byte{0};
    auto m = publish_msg::from_flat(bytes_of(junk));
    BOOST_TEST_INFO("seed " << seed);
    BOOST_REQUIRE(!m);
    auto code = code_of(m.error());
    BOOST_TEST(
      (code == ec::malformed_message || code == ec::message_limit_exceeded));
  }
}

BOOST_AUTO_TEST_CASE(mutated_bytes_never_yield_views_outside_the_message) {
  auto flat = publish_flat();
  int rejected = 0, accepted = 0;
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    std::mt19937_64 rng{seed};
    std::vector<std::byte> bytes(flat->bytes().begin(), flat->bytes().end());
    for (int flips = 1 + rng() % 4; flips > 0; --flips)
      bytes[rng() % bytes.size()] ^= static_cast<std::byte>(1 + rng() % 255);
    auto m = publish_msg::from_flat(bytes_of(bytes));
    if (!m) {
      ++rejected;
      continue;
    }
    check_views_inside(*m);
    ++accepted;
    auto e = tiers::read_entry(*m, m->root().getEntry());
    if (e)
      BOOST_TEST(!e->validate());
  }
  BOOST_TEST_MESSAGE(rejected << " rejected, " << accepted << " accepted");
  BOOST_TEST(rejected > 100);
}

BOOST_AUTO_TEST_CASE(message_of_another_type_gives_malformed_message_error) {
  msg::draft<msg::PeekPrefix> d;
  d.root().setNs("ns");
  auto flat = *std::move(d).seal().to_flat();
  auto m = msg::sealed<msg::AcquireState>::from_flat(flat);
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  BOOST_TEST(describe(m.error()).find("expected AcquireState")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(message_without_envelope_gives_malformed_message_error) {
  capnp::MallocMessageBuilder b;
  auto key = b.initRoot<msg::EntryKey>();
  key.setNs("not an envelope");
  key.initTokens(3);
  auto m = msg::sealed<msg::PeekPrefix>::from_flat(
    share(capnp::messageToFlatArray(b)));
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
}

BOOST_AUTO_TEST_CASE(other_protocol_version_gives_incompatible_format) {
  capnp::MallocMessageBuilder b;
  auto env =
    envelope(b, capnp::typeId<msg::PeekPrefix>(), msg::PROTOCOL_VERSION + 1);
  env.getBody().initAs<msg::PeekPrefix>().setNs("future");
  auto m = msg::sealed<msg::PeekPrefix>::from_flat(
    share(capnp::messageToFlatArray(b)));
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::incompatible_format);
}

BOOST_AUTO_TEST_CASE(side_reference_in_flat_bytes_gives_malformed_message) {
  // The words alone, without to_flat(): payloads still name side buffers.
  auto e = test::sample_entry(tiers::layer_kind::kv, 4, 2);
  msg::draft<msg::PublishState> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  auto m = publish_msg::from_flat(std::move(d).seal().words());
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  BOOST_TEST(describe(m.error()).find("entry.layers[0].descriptor")
             == std::string::npos);
  BOOST_TEST(describe(m.error()).find("side buffer 0 out of range")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(payload_length_disagreeing_with_data_is_malformed) {
  msg::draft<msg::GetObjectReply> d;
  auto seg = d.root().initObject().initAttachments(1)[0].initSegments(1)[0];
  seg.initData(10);
  seg.setLength(11);
  auto m =
    msg::sealed<msg::GetObjectReply>::from_flat(*std::move(d).seal().to_flat());
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  BOOST_TEST(describe(m.error()).find("attachments[0].segments[0]")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_enum_value_gives_malformed_message) {
  msg::draft<msg::SpillEntry> d;
  d.root().setReason(static_cast<msg::SpillReason>(77));
  auto m =
    msg::sealed<msg::SpillEntry>::from_flat(*std::move(d).seal().to_flat());
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::malformed_message);
  BOOST_TEST(describe(m.error()).find("reason") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(nesting_beyond_the_limit_gives_limit_exceeded) {
  auto flat = publish_flat();
  BOOST_TEST(static_cast<bool>(publish_msg::from_flat(flat, {.nesting = 8})));
  auto m = publish_msg::from_flat(flat, {.nesting = 3});
  BOOST_REQUIRE(!m);
  BOOST_TEST_MESSAGE(describe(m.error()));
  BOOST_TEST(code_of(m.error()) == ec::message_limit_exceeded);
}

BOOST_AUTO_TEST_CASE(bytes_beyond_the_traversal_limit_give_limit_exceeded) {
  auto flat = publish_flat();
  auto m = publish_msg::from_flat(flat, {.traversal_words = 16});
  BOOST_REQUIRE(!m);
  BOOST_TEST(code_of(m.error()) == ec::message_limit_exceeded);
}

BOOST_AUTO_TEST_CASE(amplified_traversal_gives_limit_exceeded) {
  // A tiny message whose list claims 2^28 zero-sized elements: reading it
  // would cost far more than its size, so the traversal limit must stop it.
  capnp::MallocMessageBuilder b;
  auto env = envelope(b, capnp::typeId<msg::ListSavedPrefixesReply>());
  auto body = env.getBody().initAsAnyStruct(0, 1);
  body.getPointerSection()[0].initAsAnyList(capnp::ElementSize::VOID, 1u << 28);
  auto flat = share(capnp::messageToFlatArray(b));
  BOOST_TEST(flat->size() < 128u);
  auto m = msg::sealed<msg::ListSavedPrefixesReply>::from_flat(flat);
  BOOST_REQUIRE(!m);
  BOOST_TEST_MESSAGE(describe(m.error()));
  BOOST_TEST(code_of(m.error()) == ec::message_limit_exceeded);
}
