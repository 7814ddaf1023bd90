#define BOOST_TEST_MODULE tiers_ram_records
#include <boost/test/unit_test.hpp>

#include "check_helpers.hpp"
#include "tiers/ram_records.hpp"
#include "tiers/ram_tier.hpp"

#include <cstring>
#include <numeric>
#include <set>
#include <vector>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

using rid = ram_record::id;

/// The ids on `l`, head to tail, walking the links both ways.
std::vector<rid> ids(const ram_records& s, const ram_record_list& l) {
  std::vector<rid> out;
  for (auto r = l.head; r != ram_record::none; r = s[r].next)
    out.push_back(r);
  std::vector<rid> back;
  for (auto r = l.tail; r != ram_record::none; r = s[r].prev)
    back.insert(back.begin(), r);
  BOOST_TEST(out == back, "the links disagree");
  BOOST_TEST(out.size() == l.size);
  return out;
}

token_seq run(size_t n, token base = 100) {
  token_seq t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

/// `a` and then `x`.
token_seq cat_of(token_seq a, token x) {
  a.push_back(x);
  return a;
}

/// An entry of one kv layer of 4 bytes per token in a buffer of its own,
/// filled with `fill`.
entry kv_entry(token_seq key, std::byte fill, uint64_t min_offset = 0) {
  buffer_builder b(key.size() * 4);
  std::memset(b.data(), static_cast<int>(fill), b.size());
  entry e;
  e.ns = "ns";
  auto n = key.size();
  e.tokens = std::move(key);
  e.layers.push_back(
    layer_state::kv(4, n, {view::of(std::move(b).freeze())}, min_offset));
  return e;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_record_stays_small) {
  // The point of the slab: a record is its body, its place in the index
  // and its two links; the rest is a byte of flags beside it, the index
  // handle, or extras most items lack (docs/ram-tier.md).
  BOOST_TEST(sizeof(ram_record) == 24u);
  BOOST_TEST(sizeof(ram_handle) == 8u);
  BOOST_TEST(prefix_index<ram_handle>::in_node);
}

BOOST_AUTO_TEST_CASE(lists_keep_order_through_unlinks) {
  ram_records s;
  ram_record_list a, b;
  std::vector<rid> made;
  for (int i = 0; i < 5; ++i) {
    made.push_back(s.make());
    s.link_back(a, made.back());
  }
  BOOST_TEST(ids(s, a) == made);
  s.unlink(a, made[0]); // head
  s.unlink(a, made[4]); // tail
  s.unlink(a, made[2]); // middle
  BOOST_TEST(ids(s, a) == (std::vector<rid>{made[1], made[3]}));
  s.link_back(b, made[2]);
  s.link_back(a, made[0]);
  BOOST_TEST(ids(s, a) == (std::vector<rid>{made[1], made[3], made[0]}));
  BOOST_TEST(ids(s, b) == (std::vector<rid>{made[2]}));
  s.unlink(b, made[2]);
  BOOST_TEST(b.empty());
  BOOST_TEST(b.head == ram_record::none);
  BOOST_TEST(b.tail == ram_record::none);
}

BOOST_AUTO_TEST_CASE(a_reused_id_is_a_fresh_record) {
  ram_records s;
  body_layouts layouts;
  auto r = s.make();
  auto buf = buffer::copy_of(std::vector<std::byte>(8));
  std::weak_ptr<const buffer> watch = buf;
  {
    entry e;
    e.tokens = {1};
    e.layers.push_back(layer_state::kv(8, 1, {view::of(std::move(buf))}));
    s[r].state = stored_state::of(std::move(e), layouts);
  }
  s.flags(r).durable = true;
  s.extras(r).file_tokens = 9;
  s.extras(r).pins.push_back(3);
  s.free(r);
  BOOST_TEST(watch.expired(), "freeing a record lets go of its state");
  BOOST_TEST(s.live() == 0u);
  auto again = s.make();
  BOOST_TEST(again == r, "a freed id is reused");
  auto& x = s[again];
  BOOST_TEST(!x.state);
  BOOST_TEST(!x.ref);
  BOOST_TEST(!bool{s.flags(again).durable});
  BOOST_TEST(!bool{s.flags(again).has_extras});
  BOOST_TEST(!s.find_extras(again), "the old extras went with it");
  BOOST_TEST(x.prev == ram_record::none);
  BOOST_TEST(x.next == ram_record::none);
}

BOOST_AUTO_TEST_CASE(records_stay_put_across_chunks) {
  ram_records s;
  std::vector<rid> made;
  std::vector<const ram_record*> where;
  for (int i = 0; i < 3000; ++i) { // three chunks
    made.push_back(s.make());
    s.extras(made.back()).file_tokens = i + 1;
    where.push_back(&s[made.back()]);
  }
  BOOST_TEST(std::set<rid>(made.begin(), made.end()).size() == made.size());
  for (int i = 0; i < 3000; i += 2)
    s.free(made[i]);
  for (int i = 0; i < 1500; ++i)
    s.make(); // reuses every freed id, makes no new chunk
  BOOST_TEST(s.live() == 3000u);
  for (int i = 1; i < 3000; i += 2) {
    BOOST_TEST(&s[made[i]] == where[i]);
    BOOST_REQUIRE(s.find_extras(made[i]));
    BOOST_TEST(s.find_extras(made[i])->file_tokens
               == static_cast<uint32_t>(i + 1));
  }
}

BOOST_AUTO_TEST_CASE(extras_come_and_go) {
  ram_records s;
  auto r = s.make();
  BOOST_TEST(!s.find_extras(r));
  s.extras(r).leases.push_back(1);
  BOOST_TEST(s.find_extras(r)->leases.size() == 1u);
  s.shrink(r);
  BOOST_TEST(bool{s.flags(r).has_extras}, "still holds a lease");
  s.extras(r).leases.clear();
  s.extras(r).file_tokens = 5;
  s.shrink(r);
  BOOST_TEST(bool{s.flags(r).has_extras}, "still names a longer file");
  s.extras(r).file_tokens = 0;
  s.shrink(r);
  BOOST_TEST(!bool{s.flags(r).has_extras});
  BOOST_TEST(!s.find_extras(r));
  s.flags(r).is_object = true; // an object keeps its extras (key, tensors)
  s.extras(r);
  s.shrink(r);
  BOOST_TEST(bool{s.flags(r).has_extras});
}

// A record freed by a removal and reused by the next put names the new
// item only: the old key misses, the old serial is stale everywhere.
BOOST_AUTO_TEST_CASE(a_reused_record_does_not_resurrect_the_old_entry) {
  ram_tier t(1 << 20, true);
  auto first = t.put(kv_entry(run(8), std::byte{1}), 1);
  BOOST_REQUIRE(first && first->kept);
  ram_key old_key{false, "ns", run(8)};
  BOOST_REQUIRE(t.begin_write(old_key, first->serial));
  BOOST_REQUIRE(t.add_interest(old_key, 42));
  BOOST_REQUIRE(t.remove(old_key));
  auto second = t.put(kv_entry(run(6, 500), std::byte{2}), 2);
  BOOST_REQUIRE(second && second->kept);
  BOOST_TEST(second->serial != first->serial);
  ram_key new_key{false, "ns", run(6, 500)};

  BOOST_TEST(!t.contains("ns", run(8)));
  BOOST_TEST(!t.lookup(run(9), "ns", std::nullopt, 3));
  BOOST_TEST(!t.item(old_key));
  BOOST_TEST(!t.begin_write(old_key));
  // The old write settling names a key no item has any more, and the old
  // serial under the new key is stale: the new item is not concerned.
  BOOST_TEST(!t.write_settled(old_key, first->serial, write_result::durable));
  BOOST_TEST(
    !t.write_settled(new_key, first->serial, write_result::not_stored));
  t.drop_interest(42);
  auto it = t.item(new_key);
  BOOST_REQUIRE(it);
  BOOST_TEST(it->serial == second->serial);
  BOOST_TEST(!it->durable);
  BOOST_TEST(!it->writing, "the old item's write does not follow its record");
  BOOST_TEST(!t.is_protected("ns", run(6, 500)));
  BOOST_TEST(t.counters().entries == 1u);
  auto hit = t.lookup(cat_of(run(6, 500), 1), "ns", std::nullopt, 4);
  BOOST_REQUIRE(hit);
  BOOST_TEST(hit->donor_serial == second->serial);
  auto e = hit->state(cat_of(run(6, 500), 1));
  BOOST_REQUIRE(e.layers.size() == 1u);
  BOOST_TEST(flatten(e.layers[0].segments)
             == std::vector<std::byte>(24, std::byte{2}));
}

// A lent hit keeps its donor's state after the donor left RAM and its
// record was reused by another put.
BOOST_AUTO_TEST_CASE(a_lent_hit_outlives_its_record) {
  ram_tier t(1 << 20);
  BOOST_REQUIRE(t.put(kv_entry(run(8), std::byte{5}), 1));
  auto prompt = run(9);
  auto hit = t.lookup(prompt, "ns", std::nullopt, 2);
  BOOST_REQUIRE(hit);
  BOOST_REQUIRE(t.remove({false, "ns", run(8)}));
  BOOST_REQUIRE(t.put(kv_entry(run(8, 900), std::byte{6}), 3));
  auto e = hit->state(prompt);
  BOOST_TEST(e.tokens == run(8));
  BOOST_REQUIRE(e.layers.size() == 1u);
  BOOST_TEST(flatten(e.layers[0].segments)
             == std::vector<std::byte>(32, std::byte{5}));
}
