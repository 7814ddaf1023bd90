#define BOOST_TEST_MODULE messages_carrier
#include <boost/test/unit_test.hpp>

#include "messages/sealed.hpp"
#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>

#include <thread>

using namespace kvtier;
using kvtier::test::content_hash;
using kvtier::test::pattern;

namespace {

msg::sealed<msg::PeekPrefix> peek(std::string ns, std::vector<uint32_t> p) {
  msg::draft<msg::PeekPrefix> d;
  d.root().setNs(ns);
  tiers::write_tokens(d.root().initPrompt(p.size()), p);
  return std::move(d).seal();
}

/// A SpillEntry whose single kv layer holds `seg` (by reference).
msg::sealed<msg::SpillEntry> spill_of(view seg, uint32_t bpt) {
  tiers::entry e;
  e.ns = "big";
  e.tokens.resize(seg.length / bpt, 42);
  e.layers.push_back(tiers::layer_state::kv(bpt, e.tokens.size(), {seg}));
  msg::draft<msg::SpillEntry> d;
  d.root().setOrderId(7);
  d.root().setReason(msg::SpillReason::DEMOTE);
  tiers::write_entry(d, d.root().getItem().initEntry(), e);
  return std::move(d).seal();
}

} // namespace

BOOST_AUTO_TEST_CASE(sealed_message_reads_back_what_was_built) {
  auto m = peek("ns-1", {5, 6, 7});
  BOOST_TEST(m.valid());
  BOOST_TEST(m.root_name() == "PeekPrefix");
  BOOST_TEST(m.root_type() == capnp::typeId<msg::PeekPrefix>());
  BOOST_TEST(std::string{m.root().getNs().cStr()} == "ns-1");
  BOOST_TEST(tiers::read_tokens(m.root().getPrompt())
             == (std::vector<uint32_t>{5, 6, 7}));
  BOOST_TEST(!m.has_side_buffers());
}

BOOST_AUTO_TEST_CASE(copies_share_one_frame_and_default_is_empty) {
  auto m = peek("ns", {1});
  auto copy = m;
  BOOST_TEST(copy.words().get() == m.words().get());
  BOOST_TEST(copy.root().getNs().begin() == m.root().getNs().begin());
  msg::sealed<msg::PeekPrefix> empty;
  BOOST_TEST(!empty.valid());
  BOOST_TEST(msg::to_string(empty) == "sealed(empty)");
}

BOOST_AUTO_TEST_CASE(to_flat_without_side_buffers_shares_the_words) {
  auto m = peek("ns", {1, 2});
  auto flat = m.to_flat();
  BOOST_REQUIRE(flat);
  BOOST_TEST(flat->get() == m.words().get());
  auto back = msg::sealed<msg::PeekPrefix>::from_flat(*flat);
  BOOST_REQUIRE(back);
  BOOST_TEST(std::string{back->root().getNs().cStr()} == "ns");
}

BOOST_AUTO_TEST_CASE(in_process_payloads_are_the_senders_buffers) {
  auto seg = view::of(pattern(64 * 100, 3));
  auto m = spill_of(seg, 64);
  BOOST_TEST(m.has_side_buffers());
  auto p =
    m.payload(m.root().getItem().getEntry().getLayers()[0].getSegments()[0]);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->buf->id() == seg.buf->id());
  BOOST_TEST(p->bytes().data() == seg.bytes().data());
  BOOST_TEST(m.words()->size() < 1024); // the bytes are not in the message
}

BOOST_AUTO_TEST_CASE(flat_round_trip_turns_payloads_into_views_of_the_bytes) {
  auto seg = view::of(pattern(64 * 10, 4));
  auto flat = spill_of(seg, 64).to_flat();
  BOOST_REQUIRE(flat);
  auto m = msg::sealed<msg::SpillEntry>::from_flat(*flat);
  BOOST_REQUIRE(m);
  BOOST_TEST(!m->has_side_buffers());
  BOOST_TEST(m->root().getOrderId() == 7u);
  BOOST_TEST((m->root().getReason() == msg::SpillReason::DEMOTE));
  auto p =
    m->payload(m->root().getItem().getEntry().getLayers()[0].getSegments()[0]);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->buf->id() == (*flat)->id()); // zero-copy: inside the flat
  BOOST_TEST(content_hash({*p}) == content_hash({seg}));
}

BOOST_AUTO_TEST_CASE(payload_of_64_mib_survives_the_flat_round_trip) {
  const uint32_t bpt = 128 * 1024; // an 8B model's bytes per token
  auto seg = view::of(pattern(uint64_t{bpt} * 520, 5)); // 65 MiB
  auto want = content_hash({seg});
  auto flat = spill_of(seg, bpt).to_flat();
  BOOST_REQUIRE(flat);
  BOOST_TEST((*flat)->size() > seg.length);
  auto m = msg::sealed<msg::SpillEntry>::from_flat(*flat);
  BOOST_REQUIRE(m);
  auto e = tiers::read_entry(*m, m->root().getItem().getEntry());
  BOOST_REQUIRE(e);
  auto& got = e->layers.at(0).segments;
  BOOST_REQUIRE(got.size() == 1u);
  BOOST_TEST(got[0].length == seg.length);
  BOOST_TEST(got[0].buf->id() == (*flat)->id());
  for (uint64_t at : {uint64_t{0}, seg.length / 3, seg.length - 1})
    BOOST_TEST(std::to_integer<int>(got[0].bytes()[at])
               == std::to_integer<int>(seg.bytes()[at]));
  BOOST_TEST(content_hash(got) == want);
}

/// The bytes of `pieces` one after another, as a receiver gets them.
buffer_ref joined(const std::vector<view>& pieces) {
  buffer_builder b(total_length(pieces));
  uint64_t at = 0;
  for (auto& p : pieces) {
    std::memcpy(b.data() + at, p.bytes().data(), p.length);
    at += p.length;
  }
  return std::move(b).freeze();
}

BOOST_AUTO_TEST_CASE(pieces_send_large_payloads_from_their_own_memory) {
  // A 1 MiB layer and a 100-byte attachment: the layer is a piece that is
  // the side's memory itself, the attachment is copied inline; joined, the
  // pieces decode to the same message as to_flat's bytes.
  auto big = view::of(pattern(64 * 16384, 8));
  auto small = view::of(pattern(100, 9));
  tiers::entry e;
  e.ns = "pieces";
  e.tokens.assign(16384, 3);
  e.layers.push_back(tiers::layer_state::kv(64, e.tokens.size(), {big}));
  e.attachments.push_back({"tail", {small}});
  msg::draft<msg::RestoreEntryReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  auto m = std::move(d).seal();
  auto pieces = m.to_pieces();
  BOOST_REQUIRE(pieces);
  size_t referenced = 0;
  for (auto& p : *pieces) {
    referenced += p.bytes().data() == big.bytes().data() ? 1 : 0;
    BOOST_TEST(p.bytes().data() != small.bytes().data());
  }
  BOOST_TEST(referenced == 1u);
  auto flat = m.to_flat();
  BOOST_REQUIRE(flat);
  auto bytes = joined(*pieces);
  BOOST_TEST(bytes->size() <= (*flat)->size() + 64);
  for (auto& source : {bytes, *flat}) {
    auto back = msg::sealed<msg::RestoreEntryReply>::from_flat(source);
    BOOST_REQUIRE(back);
    BOOST_TEST(!back->has_side_buffers());
    auto got = tiers::read_entry(*back, back->root().getEntry());
    BOOST_REQUIRE(got);
    BOOST_TEST(got->tokens == e.tokens);
    BOOST_TEST(content_hash(got->layers.at(0).segments) == content_hash({big}));
    BOOST_REQUIRE(got->attachments.size() == 1u);
    BOOST_TEST(content_hash(got->attachments[0].segments)
               == content_hash({small}));
  }
}

BOOST_AUTO_TEST_CASE(pieces_copy_a_payload_that_is_not_whole_words) {
  // 64 KiB + 3 bytes cannot be a segment of its own (segments are whole
  // words): it is inlined, and the pieces still decode to it.
  auto odd = view::of(pattern(65539, 10));
  auto m = spill_of(odd, 65539);
  auto pieces = m.to_pieces();
  BOOST_REQUIRE(pieces);
  for (auto& p : *pieces)
    BOOST_TEST(p.bytes().data() != odd.bytes().data());
  auto back = msg::sealed<msg::SpillEntry>::from_flat(joined(*pieces));
  BOOST_REQUIRE(back);
  auto p = back->payload(
    back->root().getItem().getEntry().getLayers()[0].getSegments()[0]);
  BOOST_REQUIRE(p);
  BOOST_TEST(content_hash({*p}) == content_hash({odd}));
}

BOOST_AUTO_TEST_CASE(released_large_buffers_are_reused_but_never_as_zeroed) {
  // A large buffer that goes is kept for the next one of its size; memory
  // that must be zero (a Cap'n Proto builder's) never comes from the pool.
  auto before = populated_pool_now();
  std::byte* first = nullptr;
  {
    buffer_builder b(size_t{6} << 20);
    first = b.data();
    std::memset(b.data(), 0xab, b.size());
    auto frozen = std::move(b).freeze();
  }
  auto kept = populated_pool_now();
  BOOST_TEST(kept.kept == before.kept + 1);
  size_t mapped = 0;
  auto* zero = allocate_populated(size_t{6} << 20, mapped);
  BOOST_REQUIRE(zero != nullptr);
  BOOST_TEST(zero != first);
  BOOST_TEST(std::to_integer<int>(zero[12345]) == 0);
  release_populated(zero, mapped);
  buffer_builder again(size_t{5} << 20);
  BOOST_TEST(populated_pool_now().reused > kept.reused);
  BOOST_TEST((again.data() == first || again.data() == zero));
}

BOOST_AUTO_TEST_CASE(prefault_keeps_the_bytes_of_a_buffer_populated_later) {
  // A large buffer mapped now and populated later (an SSD restore's) holds
  // whatever was written before and after `prefault`, over any range.
  buffer_builder b(size_t{6} << 20, 4096, populate_when::later);
  auto half = b.size() / 2;
  for (size_t i = 0; i < half; ++i)
    b.data()[i] = static_cast<std::byte>(i * 7);
  prefault(b.bytes().subspan(123, b.size() - 1000)); // unaligned ends
  prefault(b.bytes().first(100));                    // inside one page
  for (size_t i = half; i < b.size(); ++i)
    b.data()[i] = static_cast<std::byte>(i * 7);
  bool same = true;
  for (size_t i = 0; i < b.size(); ++i)
    same = same && b.data()[i] == static_cast<std::byte>(i * 7);
  BOOST_TEST(same);
}

BOOST_AUTO_TEST_CASE(unaligned_flat_bytes_are_read_from_an_aligned_copy) {
  auto flat = *peek("odd", {9}).to_flat();
  auto raw = std::make_shared<std::vector<std::byte>>(flat->size() + 1);
  std::memcpy(raw->data() + 1, flat->data(), flat->size());
  auto odd = buffer::adopt(raw->data() + 1, flat->size(), [raw] {});
  auto m = msg::sealed<msg::PeekPrefix>::from_flat(odd);
  BOOST_REQUIRE(m);
  BOOST_TEST(std::string{m->root().getNs().cStr()} == "odd");
}

BOOST_AUTO_TEST_CASE(caf_serialization_carries_a_carrier_without_sides) {
  auto m = peek("wire", {1, 2, 3});
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  BOOST_REQUIRE(!sink(m));
  msg::sealed<msg::PeekPrefix> back;
  caf::binary_deserializer source{nullptr, bytes};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST(std::string{back.root().getNs().cStr()} == "wire");
  BOOST_TEST(back.root().getPrompt().size() == 3u);
}

BOOST_AUTO_TEST_CASE(caf_serialization_refuses_side_buffers) {
  auto m = spill_of(view::of(pattern(640, 6)), 64);
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  auto err = sink(m);
  BOOST_REQUIRE(err);
  BOOST_TEST(test::code_of(err) == ec::invalid_argument);
  BOOST_TEST(describe(err).find("side buffers") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(caf_deserialization_rejects_a_wrong_schema) {
  auto m = peek("wire", {1});
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  BOOST_REQUIRE(!sink(m));
  msg::sealed<msg::AcquireState> wrong;
  caf::binary_deserializer source{nullptr, bytes};
  auto err = source(wrong);
  BOOST_TEST(test::code_of(err) == ec::malformed_message);
  BOOST_TEST(!wrong.valid());
}

BOOST_AUTO_TEST_CASE(logs_describe_a_carrier_without_its_bytes) {
  auto m = spill_of(view::of(pattern(640, 9)), 64);
  auto text = caf::deep_to_string(m);
  BOOST_TEST(text.find("sealed<SpillEntry>") != std::string::npos, text);
  BOOST_TEST(text.find("1 side buffers") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(threads_read_one_carrier_at_once) {
  auto m = spill_of(view::of(pattern(64 * 32, 7)), 64);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([m, &wrong] {
      for (int i = 0; i < 2000; ++i) {
        auto e = tiers::read_entry(m, m.root().getItem().getEntry());
        if (!e || e->tokens.size() != 32 || e->layers[0].byte_length() != 2048)
          ++wrong;
      }
    });
  for (auto& r : readers)
    r.join();
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_CASE(buffers_are_released_with_the_last_carrier) {
  auto before = buffer::live_count();
  {
    auto seg = view::of(pattern(4096, 8));
    auto m = spill_of(seg, 64);
    auto flat = m.to_flat();
    auto back = msg::sealed<msg::SpillEntry>::from_flat(*flat);
    BOOST_TEST(buffer::live_count() > before);
  }
  BOOST_TEST(buffer::live_count() == before);
}
