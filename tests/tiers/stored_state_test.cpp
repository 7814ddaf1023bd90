#define BOOST_TEST_MODULE tiers_stored_state
#include <boost/test/unit_test.hpp>

#include "messages/type_ids.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/stored_state.hpp"

#include <numeric>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

/// A buffer of `n` bytes where byte i == (i + salt) % 251.
buffer_ref counting_buffer(size_t n, size_t salt = 0) {
  buffer_builder b(n);
  for (size_t i = 0; i < n; ++i)
    b.data()[i] = static_cast<std::byte>((i + salt) % 251);
  return std::move(b).freeze();
}

token_seq run(size_t n, token base = 100) {
  token_seq t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

/// Every layer kind, several segments, attachments and a session: a kv
/// layer in two buffers (min_offset 3), an unwrapped ring, a wrapped ring,
/// a recurrent state, an object layer (tokens 0).
entry every_kind(size_t n, bool trimmable) {
  entry e;
  e.ns = "ns";
  e.tokens = run(n);
  e.layers.push_back(
    layer_state::kv(8, n,
                    {view::of(counting_buffer(3 * 8, 1)),
                     view::of(counting_buffer((n - 3) * 8, 2))},
                    3));
  e.layers.push_back(
    layer_state::ring(4, 64, n, {view::of(counting_buffer(n * 4, 3))}, 2));
  if (!trimmable) {
    e.layers.push_back(
      layer_state::ring(4, 4, n, {view::of(counting_buffer(16, 4))}));
    e.layers.push_back(
      layer_state::recurrent(n, {view::of(counting_buffer(40, 5))}));
    e.layers.push_back(layer_state::object({view::of(counting_buffer(9, 6))}));
  }
  e.attachments.push_back({"vision", {view::of(counting_buffer(7, 7))}});
  e.session = "s1";
  return e;
}

/// Whether `a` and `b` are the same entry, view for view (same buffers,
/// offsets, lengths).
void same(const entry& a, const entry& b) {
  BOOST_TEST(a.ns == b.ns);
  BOOST_TEST(a.tokens == b.tokens);
  BOOST_TEST((a.session == b.session));
  BOOST_REQUIRE(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    auto& x = a.layers[i];
    auto& y = b.layers[i];
    BOOST_TEST((x.kind == y.kind), "layer " << i);
    BOOST_TEST(x.bytes_per_token == y.bytes_per_token, "layer " << i);
    BOOST_TEST(x.window == y.window, "layer " << i);
    BOOST_TEST(x.tokens == y.tokens, "layer " << i);
    BOOST_TEST(x.min_offset == y.min_offset, "layer " << i);
    BOOST_REQUIRE(x.segments.size() == y.segments.size());
    for (size_t j = 0; j < x.segments.size(); ++j) {
      BOOST_TEST(x.segments[j].buf == y.segments[j].buf);
      BOOST_TEST(x.segments[j].offset == y.segments[j].offset);
      BOOST_TEST(x.segments[j].length == y.segments[j].length);
    }
  }
  BOOST_REQUIRE(a.attachments.size() == b.attachments.size());
  for (size_t i = 0; i < a.attachments.size(); ++i) {
    BOOST_TEST(a.attachments[i].name == b.attachments[i].name);
    BOOST_TEST(flatten(a.attachments[i].segments)
               == flatten(b.attachments[i].segments));
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(a_body_round_trips_every_layer_kind) {
  body_layouts layouts;
  auto e = every_kind(12, false);
  BOOST_REQUIRE(!e.validate());
  auto copy = e;
  auto s = stored_state::of(std::move(e), layouts);
  BOOST_TEST(s.length() == 12u);
  BOOST_TEST(s.layer_count() == copy.layers.size());
  BOOST_TEST(s.layer_bytes() == copy.byte_length() - 7);
  BOOST_TEST((s.session() == copy.session));
  same(s.keyed("ns", copy.tokens), copy);
  same(s.keyed("ns", token_seq(copy.tokens)), copy);
  for (size_t i = 0; i < copy.layers.size(); ++i) {
    auto l = s.layer(i);
    for (uint64_t n = 0; n <= 13; ++n)
      BOOST_TEST(l.can_trim_to(n) == copy.layers[i].can_trim_to(n),
                 "layer " << i << " at " << n);
  }
}

BOOST_AUTO_TEST_CASE(a_body_trims_like_entry_trimmed) {
  body_layouts layouts;
  auto e = every_kind(12, true);
  auto copy = e;
  auto s = stored_state::of(std::move(e), layouts);
  for (uint64_t n = 3; n < 12; ++n) {
    auto want = copy.trimmed(n);
    BOOST_REQUIRE(want);
    BOOST_TEST(want->attachments.empty());
    same(s.keyed("ns", std::span{copy.tokens}.first(n)), *want);
  }
}

BOOST_AUTO_TEST_CASE(a_body_keeps_its_buffers_alive) {
  body_layouts layouts;
  auto e = every_kind(12, false);
  std::vector<std::weak_ptr<const buffer>> watch;
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  for (auto& b : bufs)
    watch.emplace_back(b);
  auto want = bufs.size();
  bufs.clear();
  auto s = stored_state::of(std::move(e), layouts);
  e = entry{}; // nothing of the entry is left
  std::vector<buffer_ref> again;
  s.collect_buffers(again);
  BOOST_TEST(again.size() == want);
  again.clear();
  auto lent = s; // a lent hit
  BOOST_TEST(s.use_count() == 2);
  s = stored_state{};
  for (auto& w : watch)
    BOOST_TEST(!w.expired(), "a lent copy holds every buffer");
  auto view_count = 0;
  lent.for_each_view([&](const view&) { ++view_count; });
  BOOST_TEST(view_count == 7);
  lent = stored_state{};
  for (auto& w : watch)
    BOOST_TEST(w.expired(), "the last handle frees every buffer");
}

BOOST_AUTO_TEST_CASE(release_moves_only_an_unshared_body) {
  body_layouts layouts;
  auto e = every_kind(12, false);
  auto copy = e;
  auto s = stored_state::of(std::move(e), layouts);
  auto lent = s;
  auto out = std::move(s).release("ns", run(12));
  BOOST_TEST(!s);
  same(out, copy);
  same(lent.keyed("ns", copy.tokens), copy); // the lent copy is intact
  auto whole = std::move(lent).release("ns", run(12));
  BOOST_TEST(!lent);
  same(whole, copy);
}

BOOST_AUTO_TEST_CASE(written_as_the_entry_form_writes) {
  body_layouts layouts;
  auto e = every_kind(12, true);
  auto copy = e;
  auto s = stored_state::of(std::move(e), layouts);
  for (uint64_t n : {12, 9, 3}) {
    auto key = std::span{copy.tokens}.first(n);
    msg::draft<msg::SaveCheckpoint> a, b;
    write_entry(a, a.root().initEntry(), s, std::string{"ns"}, key);
    write_entry(b, b.root().initEntry(), copy, n);
    auto ma = std::move(a).seal();
    auto mb = std::move(b).seal();
    auto x = read_entry(ma, ma.root().getEntry());
    auto y = read_entry(mb, mb.root().getEntry());
    BOOST_REQUIRE(x);
    BOOST_REQUIRE(y);
    BOOST_TEST(x->tokens == y->tokens);
    BOOST_TEST((x->session == y->session));
    BOOST_TEST(x->attachments.size() == y->attachments.size());
    BOOST_REQUIRE(x->layers.size() == y->layers.size());
    for (size_t i = 0; i < x->layers.size(); ++i) {
      BOOST_TEST(x->layers[i].tokens == y->layers[i].tokens);
      BOOST_TEST(x->layers[i].min_offset == y->layers[i].min_offset);
      BOOST_TEST(x->layers[i].segments.size() == y->layers[i].segments.size());
      BOOST_TEST(flatten(x->layers[i].segments)
                 == flatten(y->layers[i].segments));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_plain_body_is_one_small_allocation) {
  // One kv layer in one view, no attachments, no session: what most
  // entries of the bench_memory mixes are. Its body is the header, the
  // view's offset and its buffer reference (the length follows from the
  // entry's), nothing of the layer's geometry.
  body_layouts layouts;
  auto buf = counting_buffer(64);
  for (uint64_t min_offset : {uint64_t{0}, uint64_t{8}}) {
    entry e;
    e.tokens = run(8);
    e.layers.push_back(layer_state::kv(8, 8, {view{buf, 0, 64}}, min_offset));
    auto s = stored_state::of(std::move(e), layouts);
    BOOST_TEST(s.footprint() == 40u);
    BOOST_TEST(s.layer(0).min_offset == min_offset);
  }
}

BOOST_AUTO_TEST_CASE(bodies_of_one_shape_share_a_layout) {
  // Every entry of one geometry shares one layout, whatever its length,
  // offsets or buffers; a new shape makes a new one, and a layout no body
  // uses goes once enough new shapes came in.
  body_layouts layouts;
  std::vector<stored_state> held;
  auto buf = counting_buffer(1 << 16);
  for (size_t n = 1; n < 200; ++n) {
    entry e;
    e.tokens = run(n);
    for (int layer = 0; layer < 32; ++layer)
      e.layers.push_back(
        layer_state::kv(16, n, {view{buf, n, 8 * n}, view{buf, 0, 8 * n}}));
    held.push_back(stored_state::of(std::move(e), layouts));
  }
  BOOST_TEST(layouts.size() == 1u);
  // 32 layers of two segments: 16 header + 32 x (3 words + 2 references).
  BOOST_TEST(held.back().footprint() == 16u + 32 * (3 * 8 + 2 * 16));
  for (size_t i = 0; i < held.size(); ++i) {
    auto n = i + 1;
    auto l = held[i].layer(31);
    BOOST_REQUIRE(l.segment_count() == 2u);
    BOOST_TEST(l.segment(0).offset == n);
    BOOST_TEST(l.segment(0).length == 8 * n);
    BOOST_TEST(l.segment(1).offset == 0u);
    BOOST_TEST(l.segment(1).length == 8 * n, "derived from the length");
  }
  held.clear(); // the shape is unused now
  for (uint32_t bpt = 1; bpt <= 200; ++bpt) {
    entry e;
    e.tokens = run(2);
    e.layers.push_back(layer_state::kv(bpt, 2, {view{buf, 0, 2 * bpt}}));
    held.push_back(stored_state::of(std::move(e), layouts));
  }
  BOOST_TEST(layouts.size() <= 200u, "unused layouts were dropped");
  BOOST_TEST(layouts.size() >= 64u);
  for (uint32_t bpt = 1; bpt <= 200; ++bpt)
    BOOST_TEST(held[bpt - 1].layer(0).bytes_per_token == bpt);
}

BOOST_AUTO_TEST_CASE(a_body_outlives_its_layouts_owner) {
  auto e = every_kind(12, false);
  auto copy = e;
  stored_state s;
  {
    body_layouts layouts;
    s = stored_state::of(std::move(e), layouts);
  }
  same(s.keyed("ns", copy.tokens), copy);
}
