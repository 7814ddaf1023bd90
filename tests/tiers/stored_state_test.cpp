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
  auto e = every_kind(12, false);
  BOOST_REQUIRE(!e.validate());
  auto copy = e;
  auto s = stored_state::of(std::move(e));
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
  auto e = every_kind(12, true);
  auto copy = e;
  auto s = stored_state::of(std::move(e));
  for (uint64_t n = 3; n < 12; ++n) {
    auto want = copy.trimmed(n);
    BOOST_REQUIRE(want);
    BOOST_TEST(want->attachments.empty());
    same(s.keyed("ns", std::span{copy.tokens}.first(n)), *want);
  }
}

BOOST_AUTO_TEST_CASE(a_body_keeps_its_buffers_alive) {
  auto e = every_kind(12, false);
  std::vector<std::weak_ptr<const buffer>> watch;
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  for (auto& b : bufs)
    watch.emplace_back(b);
  auto want = bufs.size();
  bufs.clear();
  auto s = stored_state::of(std::move(e));
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
  auto e = every_kind(12, false);
  auto copy = e;
  auto s = stored_state::of(std::move(e));
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
  auto e = every_kind(12, true);
  auto copy = e;
  auto s = stored_state::of(std::move(e));
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
  // entries of the bench_memory mixes are.
  BOOST_TEST(stored_state::footprint(1, 1) <= 88u);
}
