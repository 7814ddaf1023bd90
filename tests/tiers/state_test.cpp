#define BOOST_TEST_MODULE tiers_state
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/geometry.hpp"
#include "tiers/state.hpp"

#include <cstring>
#include <numeric>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

/// A buffer of `n` bytes where byte i == i % 251.
buffer_ref counting_buffer(size_t n) {
  buffer_builder b(n);
  for (size_t i = 0; i < n; ++i)
    b.data()[i] = static_cast<std::byte>(i % 251);
  return std::move(b).freeze();
}

layer_state ring_layer(uint32_t window, uint64_t tokens) {
  auto rows = std::min<uint64_t>(tokens, window);
  return layer_state::ring(8, window, tokens,
                           {view::of(counting_buffer(rows * 8))});
}

ec code_of(const caf::error& err) {
  return static_cast<ec>(err.code());
}

} // namespace

BOOST_AUTO_TEST_CASE(kv_trims_to_any_shorter_length_as_a_view) {
  auto buf = counting_buffer(10 * 16);
  auto l = layer_state::kv(16, 10, {view::of(buf)});
  BOOST_TEST(l.can_trim_to(1));
  BOOST_TEST(l.can_trim_to(10));
  BOOST_TEST(!l.can_trim_to(11));
  auto t = l.trimmed(4);
  BOOST_REQUIRE(t);
  BOOST_TEST(t->tokens == 4u);
  BOOST_TEST(t->byte_length() == 64u);
  BOOST_REQUIRE(t->segments.size() == 1u);
  // Same buffer, same address: a shorter view, not a copy.
  BOOST_TEST(t->segments[0].buf.get() == buf.get());
  BOOST_TEST(t->segments[0].bytes().data() == buf->data());
  BOOST_TEST(!t->validate());
}

BOOST_AUTO_TEST_CASE(kv_trim_across_segments_cuts_inside_the_right_one) {
  auto a = counting_buffer(3 * 8);
  auto b = counting_buffer(5 * 8);
  auto l = layer_state::kv(8, 8, {view::of(a), view::of(b)});
  auto t = l.trimmed(5);
  BOOST_REQUIRE(t);
  BOOST_REQUIRE(t->segments.size() == 2u);
  BOOST_TEST(t->segments[0].length == 24u);
  BOOST_TEST(t->segments[1].length == 16u);
  BOOST_TEST(t->segments[1].buf.get() == b.get());
  auto t3 = l.trimmed(3);
  BOOST_REQUIRE(t3);
  BOOST_TEST(t3->segments.size() == 1u);
}

BOOST_AUTO_TEST_CASE(ring_trims_only_while_offset_below_window) {
  constexpr uint32_t w = 16;
  auto below = ring_layer(w, w - 1); // offset == window - 1
  BOOST_TEST(!below.wrapped());
  BOOST_TEST(below.can_trim_to(7));
  BOOST_TEST(below.trimmed(7).value().byte_length() == 7u * 8);
  auto full = ring_layer(w, w); // offset == window: wrapped by definition
  BOOST_TEST(full.wrapped());
  BOOST_TEST(!full.can_trim_to(w - 1));
  BOOST_TEST(full.can_trim_to(w));  // identity always works
  auto past = ring_layer(w, w + 5); // offset > window
  BOOST_TEST(!past.can_trim_to(w + 4));
  auto err = past.trimmed(3);
  BOOST_REQUIRE(!err);
  BOOST_TEST(code_of(err.error()) == ec::not_trimmable);
  BOOST_TEST(describe(err.error()).find("wrapped") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(recurrent_and_object_never_trim) {
  auto r = layer_state::recurrent(9, {view::of(counting_buffer(100))});
  BOOST_TEST(!r.can_trim_to(8));
  BOOST_TEST(r.can_trim_to(9));
  BOOST_TEST(!r.trimmed(8));
  auto o = layer_state::object({view::of(counting_buffer(10))});
  BOOST_TEST(o.can_trim_to(0));
  BOOST_TEST(!o.can_trim_to(1));
}

BOOST_AUTO_TEST_CASE(never_trims_below_minimum_reusable_offset) {
  auto kv = layer_state::kv(4, 10, {view::of(counting_buffer(40))}, 6);
  BOOST_TEST(kv.can_trim_to(6));
  BOOST_TEST(!kv.can_trim_to(5));
  auto err = kv.trimmed(5);
  BOOST_REQUIRE(!err);
  BOOST_TEST(describe(err.error()).find("minimum reusable offset")
             != std::string::npos);
  auto ring = layer_state::ring(4, 16, 10, {view::of(counting_buffer(40))}, 3);
  BOOST_TEST(ring.can_trim_to(3));
  BOOST_TEST(!ring.can_trim_to(2));
}

BOOST_AUTO_TEST_CASE(view_keeps_bytes_alive_after_donor_is_dropped) {
  auto before = buffer::live_count();
  view kept;
  {
    auto e =
      runtime::oracle_engine(model_geometry::preset("tiny-dense").value())
        .prefill("ns", token_seq{1, 2, 3, 4, 5});
    kept = e.layers[2].trimmed(3).value().segments.at(0);
    BOOST_TEST(buffer::live_count() > before);
  } // the donor entry is gone; the view's buffer is not
  auto expect =
    runtime::oracle_engine(model_geometry::preset("tiny-dense").value())
      .prefill("ns", token_seq{1, 2, 3});
  auto want = flatten(expect.layers[2].segments);
  BOOST_TEST(buffer::live_count() == before + 1 + 4); // kept + expect's 4
  BOOST_REQUIRE(kept.length == want.size());
  BOOST_TEST(std::memcmp(kept.bytes().data(), want.data(), want.size()) == 0);
}

BOOST_AUTO_TEST_CASE(extension_shares_donor_buffers_without_copying) {
  runtime::oracle_engine eng(model_geometry::preset("tiny-dense").value());
  token_seq toks(40);
  std::iota(toks.begin(), toks.end(), 100u);
  auto donor = eng.prefill("ns", std::span{toks}.first(30));
  auto lent = donor.trimmed(20).value();
  auto ext = eng.extend(lent, toks);
  BOOST_REQUIRE(ext);
  BOOST_TEST(!eng.verify(*ext));
  for (size_t l = 0; l < ext->layers.size(); ++l) {
    auto& segs = ext->layers[l].segments;
    BOOST_REQUIRE(segs.size() == 2u);
    BOOST_TEST(segs[0].buf.get() == donor.layers[l].segments[0].buf.get());
    BOOST_TEST(segs[0].bytes().data()
               == donor.layers[l].segments[0].bytes().data());
    BOOST_TEST(segs[1].length == 20u * 64); // only the new rows were made
  }
}

BOOST_AUTO_TEST_CASE(entry_trim_drops_attachments_below_full_length) {
  runtime::oracle_engine eng(model_geometry::preset("tiny-dense").value(), 32);
  auto e = eng.prefill("ns", token_seq{5, 6, 7, 8});
  BOOST_TEST(e.attachments.size() == 1u);
  BOOST_TEST(e.trimmed(4).value().attachments.size() == 1u);
  BOOST_TEST(e.trimmed(3).value().attachments.empty());
  BOOST_TEST(!eng.verify(e.trimmed(3).value()));
}

BOOST_AUTO_TEST_CASE(usable_prefix_leaves_one_token_and_respects_kinds) {
  runtime::oracle_engine dense(model_geometry::preset("tiny-dense").value());
  auto e = dense.prefill("ns", token_seq{1, 2, 3, 4});
  token_seq same{1, 2, 3, 4};
  BOOST_TEST(usable_prefix(e, same).value() == 3u); // len(P) - 1
  token_seq longer{1, 2, 3, 4, 9};
  BOOST_TEST(usable_prefix(e, longer).value() == 4u);
  token_seq diverge{1, 2, 7, 7, 7};
  BOOST_TEST(usable_prefix(e, diverge).value() == 2u);
  token_seq none{9, 9};
  BOOST_TEST(!usable_prefix(e, none));
  runtime::oracle_engine hybrid(model_geometry::preset("tiny-hybrid").value());
  auto h = hybrid.prefill("ns", token_seq{1, 2, 3, 4});
  BOOST_TEST(!usable_prefix(h, diverge)); // recurrent: exact only
  BOOST_TEST(usable_prefix(h, longer).value() == 4u);
  BOOST_TEST(!usable_prefix(h, same)); // would need a trim to 3
}

BOOST_AUTO_TEST_CASE(validate_rejects_lengths_that_disagree_with_geometry) {
  auto l = layer_state::kv(8, 4, {view::of(counting_buffer(31))});
  auto err = l.validate();
  BOOST_REQUIRE(err);
  BOOST_TEST(code_of(err) == ec::invalid_argument);
  entry e{"ns",
          {1, 2, 3},
          {layer_state::kv(8, 4, {view::of(counting_buffer(32))})},
          {},
          {}};
  BOOST_TEST(describe(e.validate()).find("encodes 4 tokens")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(geometry_presets_have_their_real_per_token_sizes) {
  auto llama = model_geometry::preset("llama-3.1-8b").value();
  BOOST_TEST(llama.layers.size() == 32u);
  BOOST_TEST(llama.bytes_per_token() == 128u * 1024);
  auto gemma = model_geometry::preset("gemma-3-12b").value();
  BOOST_TEST(gemma.count(layer_kind::ring) == 40u);
  BOOST_TEST(gemma.count(layer_kind::kv) == 8u);
  BOOST_TEST(gemma.layers[0].window == 1024u);
  auto qwen = model_geometry::preset("qwen3-next-80b-a3b").value();
  BOOST_TEST(qwen.count(layer_kind::recurrent) == 36u);
  BOOST_TEST(qwen.count(layer_kind::kv) == 12u);
  auto small = model_geometry::preset("llama-3.1-8b", 1.0 / 64).value();
  BOOST_TEST(small.bytes_per_token() == 2u * 1024);
  BOOST_TEST(!model_geometry::preset("gpt-17"));
  BOOST_TEST(!model_geometry::preset("llama-3.1-8b", 0.0));
  BOOST_TEST(describe(model_geometry::preset("nope").error()).find("known:")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(projected_bytes_follow_each_kind) {
  auto gemma = model_geometry::preset("gemma-3-12b").value();
  // Global layers grow with tokens, rings stop at their window.
  auto row = 2u * 8 * 256 * 2;
  BOOST_TEST(gemma.projected_bytes(1000, 24) == 48ull * 1024 * row);
  BOOST_TEST(gemma.projected_bytes(4000, 96)
             == 8ull * 4096 * row + 40ull * 1024 * row);
  auto qwen = model_geometry::preset("qwen3-next-80b-a3b").value();
  BOOST_TEST(qwen.projected_bytes(10, 0) - qwen.projected_bytes(0, 0)
             == 12ull * 10 * 2 * 2 * 256 * 2);
}

BOOST_AUTO_TEST_CASE(an_object_layer_makes_the_entry_exact_only) {
  entry e{"ns",
          {1, 2, 3},
          {layer_state::kv(8, 3, {view::of(counting_buffer(24))}),
           layer_state::object({view::of(counting_buffer(10))})},
          {},
          {}};
  BOOST_TEST(!e.validate());
  BOOST_TEST(e.can_trim_to(3));
  BOOST_TEST(!e.can_trim_to(2));
  BOOST_TEST(!e.trimmable());
  auto same = e.trimmed(3);
  BOOST_REQUIRE(same);
  BOOST_TEST(same->layers[1].segments[0].buf.get()
             == e.layers[1].segments[0].buf.get());
  BOOST_TEST(!e.trimmed(2));
  token_seq longer{1, 2, 3, 4};
  BOOST_TEST(usable_prefix(e, longer).value() == 3u);
}
