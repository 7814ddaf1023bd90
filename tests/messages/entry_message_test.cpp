#define BOOST_TEST_MODULE messages_entry_message
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"

#include <capnp/any.h>
#include <capnp/message.h>

#include <cstring>

using namespace kvtier;
using kvtier::test::code_of;
using kvtier::test::content_hash;
using tiers::layer_kind;

namespace {

const layer_kind all_kinds[] = {layer_kind::kv, layer_kind::ring,
                                layer_kind::recurrent, layer_kind::object};

msg::sealed<msg::SaveCheckpoint> sealed_entry(const tiers::entry& e) {
  msg::draft<msg::SaveCheckpoint> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

caf::expected<tiers::entry>
read_back(const msg::sealed<msg::SaveCheckpoint>& m) {
  return tiers::read_entry(m, m.root().getEntry());
}

/// Writes `e`, lets `spoil` change the message, and reads the entry back,
/// which must fail with `code` mentioning `text`.
template <class Spoil>
void check_rejected(const tiers::entry& e, Spoil spoil, std::string text,
                    ec code) {
  msg::draft<msg::SaveCheckpoint> d;
  auto out = d.root().initEntry();
  tiers::write_entry(d, out, e);
  spoil(out);
  auto got = read_back(std::move(d).seal());
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == code);
  BOOST_TEST(describe(got.error()).find(text) != std::string::npos,
             describe(got.error()));
}

/// Everything but the bytes' location must match.
void check_same_entry(const tiers::entry& got, const tiers::entry& want) {
  BOOST_TEST(got.ns == want.ns);
  BOOST_TEST(got.tokens == want.tokens);
  BOOST_TEST((got.session == want.session));
  BOOST_REQUIRE(got.layers.size() == want.layers.size());
  for (size_t i = 0; i < got.layers.size(); ++i) {
    auto& g = got.layers[i];
    auto& w = want.layers[i];
    BOOST_TEST((g.kind == w.kind));
    BOOST_TEST(g.bytes_per_token == w.bytes_per_token);
    BOOST_TEST(g.window == w.window);
    BOOST_TEST(g.tokens == w.tokens);
    BOOST_TEST(g.min_offset == w.min_offset);
    BOOST_TEST(g.byte_length() == w.byte_length());
    BOOST_TEST(content_hash(g.segments) == content_hash(w.segments));
  }
  BOOST_REQUIRE(got.attachments.size() == want.attachments.size());
  for (size_t i = 0; i < got.attachments.size(); ++i) {
    BOOST_TEST(got.attachments[i].name == want.attachments[i].name);
    BOOST_TEST(content_hash(got.attachments[i].segments)
               == content_hash(want.attachments[i].segments));
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(entry_round_trips_in_process_without_copying_bytes) {
  for (auto kind : all_kinds) {
    BOOST_TEST_CONTEXT("kind " << tiers::to_string(kind)) {
      // 12 tokens: past the ring window of 8, so the ring has wrapped.
      auto e = test::sample_entry(kind, 12, 3);
      auto got = read_back(sealed_entry(e));
      BOOST_REQUIRE(got);
      check_same_entry(*got, e);
      for (size_t s = 0; s < e.layers[0].segments.size(); ++s) {
        auto& g = got->layers[0].segments[s];
        auto& w = e.layers[0].segments[s];
        BOOST_TEST(g.buf->id() == w.buf->id());
        BOOST_TEST(g.bytes().data() == w.bytes().data());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(entry_round_trips_through_flat_bytes) {
  for (auto kind : all_kinds) {
    BOOST_TEST_CONTEXT("kind " << tiers::to_string(kind)) {
      auto e = test::sample_entry(kind, 5, 4);
      auto flat = sealed_entry(e).to_flat();
      BOOST_REQUIRE(flat);
      auto m = msg::sealed<msg::SaveCheckpoint>::from_flat(*flat);
      BOOST_REQUIRE(m);
      auto got = read_back(*m);
      BOOST_REQUIRE(got);
      check_same_entry(*got, e);
      for (auto& s : got->layers[0].segments)
        BOOST_TEST(s.buf->id() == (*flat)->id());
    }
  }
}

BOOST_AUTO_TEST_CASE(entry_without_session_stays_without_one) {
  auto e = test::sample_entry(layer_kind::kv, 3, 5);
  e.session.reset();
  auto got = read_back(sealed_entry(e));
  BOOST_REQUIRE(got);
  BOOST_TEST(!got->session.has_value());
}

BOOST_AUTO_TEST_CASE(unknown_layer_kind_is_a_malformed_message) {
  check_rejected(
    test::sample_entry(layer_kind::kv, 3, 6),
    [](msg::Entry::Builder out) {
      auto kind = static_cast<msg::LayerKind>(9);
      out.getLayers()[0].getDescriptor().setKind(kind);
    },
    "unknown layer kind 9", ec::malformed_message);
}

BOOST_AUTO_TEST_CASE(descriptor_length_disagreeing_with_segments_is_invalid) {
  check_rejected(
    test::sample_entry(layer_kind::recurrent, 3, 7),
    [](msg::Entry::Builder out) {
      out.getLayers()[0].getDescriptor().setByteLength(1);
    },
    "layer 0: byteLength: descriptor says 1 bytes", ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(out_of_range_side_index_is_a_malformed_message) {
  check_rejected(
    test::sample_entry(layer_kind::kv, 3, 8),
    [](msg::Entry::Builder out) {
      out.getLayers()[0].getSegments()[1].setSide(7);
    },
    "side buffer 7 out of range", ec::malformed_message);
}

BOOST_AUTO_TEST_CASE(
  geometry_that_does_not_add_up_is_invalid_naming_the_layer) {
  auto e = test::sample_entry(layer_kind::kv, 4, 9);
  e.tokens.push_back(1); // the kv layer still encodes 4 tokens
  auto got = read_back(sealed_entry(e));
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == ec::invalid_argument);
  BOOST_TEST(describe(got.error())
                 .find("entry: layer 0: tokens: encodes 4 "
                       "tokens, entry has 5")
               != std::string::npos,
             describe(got.error()));
  // A ring layer whose window is 0, one whose bytes disagree with its
  // geometry: each named by layer and field.
  auto ring = test::sample_entry(layer_kind::ring, 4, 10);
  ring.layers[0].window = 0;
  got = read_back(sealed_entry(ring));
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == ec::invalid_argument);
  BOOST_TEST(describe(got.error()).find("layer 0: window") != std::string::npos,
             describe(got.error()));
  auto kv = test::sample_entry(layer_kind::kv, 4, 11);
  kv.layers[0].bytes_per_token += 1;
  got = read_back(sealed_entry(kv));
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == ec::invalid_argument);
  BOOST_TEST(describe(got.error()).find("layer 0: segments: kv layer holds")
               != std::string::npos,
             describe(got.error()));
}

BOOST_AUTO_TEST_CASE(object_spill_round_trips_through_flat_bytes) {
  std::vector<tiers::attachment> object{
    {"encoder", {view::of(test::pattern(5000, 1))}},
    {"pooled",
     {view::of(test::pattern(64, 2)), view::of(test::pattern(8, 3))}}};
  msg::draft<msg::SpillEntry> d;
  d.root().setReason(msg::SpillReason::SPILL);
  auto out = d.root().getItem().initObject();
  out.setKey("image-sha256:ab12");
  tiers::write_attachments(d, out.initAttachments(object.size()), object);
  BOOST_TEST(d.sides().size() == 3u);
  auto flat = std::move(d).seal().to_flat();
  BOOST_REQUIRE(flat);
  auto m = msg::sealed<msg::SpillEntry>::from_flat(*flat);
  BOOST_REQUIRE(m);
  BOOST_REQUIRE(m->root().getItem().isObject());
  auto in = m->root().getItem().getObject();
  BOOST_TEST(std::string{in.getKey().cStr()} == "image-sha256:ab12");
  auto back = tiers::read_attachments(*m, in.getAttachments());
  BOOST_REQUIRE(back);
  BOOST_REQUIRE(back->size() == 2u);
  for (size_t i = 0; i < 2; ++i) {
    BOOST_TEST((*back)[i].name == object[i].name);
    BOOST_TEST(content_hash((*back)[i].segments)
               == content_hash(object[i].segments));
  }
}

BOOST_AUTO_TEST_CASE(descriptor_and_key_round_trip) {
  auto l = tiers::layer_state::ring(32, 16, 10, {}, 2);
  capnp::MallocMessageBuilder b;
  auto out = b.initRoot<msg::LayerDescriptor>();
  tiers::write_descriptor(out, l);
  auto back = tiers::read_descriptor(out.asReader());
  BOOST_REQUIRE(back);
  BOOST_TEST((back->kind == layer_kind::ring));
  BOOST_TEST(back->window == 16u);
  BOOST_TEST(back->tokens == 10u);
  BOOST_TEST(back->min_offset == 2u);
  capnp::MallocMessageBuilder kb;
  auto key = kb.initRoot<msg::EntryKey>();
  std::vector<uint32_t> tokens{4, 5, 6};
  tiers::write_key(key, "ns-k", tokens);
  BOOST_TEST(std::string{key.asReader().getNs().cStr()} == "ns-k");
  BOOST_TEST(tiers::read_tokens(key.asReader().getTokens()) == tokens);
}

BOOST_AUTO_TEST_CASE(token_lists_are_read_in_place_when_packed) {
  tiers::token_seq tokens{7, 0, 0xffffffffu, 42, 3};
  capnp::MallocMessageBuilder b;
  auto list = b.initRoot<capnp::AnyPointer>().initAs<capnp::List<uint32_t>>(
    static_cast<unsigned>(tokens.size()));
  tiers::write_tokens(list, tokens);
  auto r =
    b.getRoot<capnp::AnyPointer>().asReader().getAs<capnp::List<uint32_t>>();
  auto v = tiers::token_view(r);
  BOOST_REQUIRE(v.has_value());
  BOOST_TEST(std::vector<tiers::token>(v->begin(), v->end()) == tokens);
  BOOST_TEST(tiers::read_tokens(r) == tokens);
  tiers::tokens_of held{r};
  BOOST_TEST(held.span().data() == v->data()); // no copy
}

BOOST_AUTO_TEST_CASE(token_lists_in_another_layout_are_copied_correctly) {
  // Cap'n Proto lets a struct list stand in for a primitive list (the
  // first data field of each element): same values, another stride, so
  // reading it in place would be wrong.
  tiers::token_seq tokens{5, 6, 7};
  capnp::MallocMessageBuilder b;
  auto structs = b.initRoot<capnp::AnyPointer>().initAsListOfAnyStruct(
    2, 0, static_cast<unsigned>(tokens.size()));
  for (unsigned i = 0; i < tokens.size(); ++i) {
    auto data = structs[i].getDataSection();
    std::memcpy(data.begin(), &tokens[i], sizeof(tiers::token));
  }
  auto r =
    b.getRoot<capnp::AnyPointer>().asReader().getAs<capnp::List<uint32_t>>();
  BOOST_TEST(!tiers::token_view(r).has_value());
  BOOST_TEST(tiers::read_tokens(r) == tokens);
  tiers::tokens_of held{r};
  BOOST_TEST(std::vector<tiers::token>(held.span().begin(), held.span().end())
             == tokens);
}
