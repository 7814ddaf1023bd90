#define BOOST_TEST_MODULE tiers_ram_tier
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "check_helpers.hpp"
#include "messages/type_ids.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/geometry.hpp"
#include "tiers/ram_tier.hpp"

#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

using namespace kvtier;
using namespace kvtier::tiers;
using kvtier::testing::ok;
namespace bdata = boost::unit_test::data;

namespace {

const char* const families[] = {"tiny-dense", "tiny-window", "tiny-hybrid"};

runtime::oracle_engine engine(const std::string& name,
                              uint32_t attachment_bytes = 0) {
  return runtime::oracle_engine(*model_geometry::preset(name),
                                attachment_bytes);
}

/// `n` tokens: `base`, base + 1, ...
token_seq run(size_t n, token base = 100) {
  token_seq t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

/// `a` followed by `b`.
token_seq cat(token_seq a, const token_seq& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

put_result must_put(ram_tier& t, entry e, uint64_t now = 0,
                    bool durable = false) {
  auto r = t.put(std::move(e), now, durable);
  if (!r)
    BOOST_FAIL(describe(r.error()));
  return std::move(*r);
}

/// A put that pins its entry, as a session's newest; the pin is in `pin`.
put_result must_pin(ram_tier& t, entry e, uint64_t now = 0,
                    bool durable = false) {
  auto r = t.put(std::move(e), now, durable, protection::pin);
  if (!r)
    BOOST_FAIL(describe(r.error()));
  BOOST_TEST(r->pin != 0u);
  return std::move(*r);
}

std::set<uint64_t> buffer_ids(const entry& e) {
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  std::set<uint64_t> out;
  for (auto& b : bufs)
    out.insert(b->id());
  return out;
}

std::vector<token_seq> keys(const std::vector<spill_order>& v) {
  std::vector<token_seq> out;
  for (auto& s : v)
    out.push_back(s.key.tokens);
  return out;
}

} // namespace

// Every family: the tier serves exactly what the reference definition
// (usable_prefix) allows, byte for byte, without copying the donor.
BOOST_DATA_TEST_CASE(lookups_serve_the_usable_prefix_zero_copy,
                     bdata::make(families), family) {
  auto eng = engine(family);
  ram_tier t(1 << 24);
  std::vector<entry> stored;
  for (size_t n : {6, 12, 40}) {
    stored.push_back(eng.prefill("ns", run(n)));
    auto copy = stored.back();
    must_put(t, std::move(copy));
  }
  for (size_t lcp : {1, 3, 6, 9, 12, 20, 39, 40}) {
    for (size_t extra : {0, 1, 5}) {
      auto prompt = cat(run(lcp), run(extra, 7));
      std::optional<uint64_t> want;
      for (auto& e : stored)
        if (auto p = usable_prefix(e, prompt); p && (!want || *p > *want))
          want = p;
      auto live = buffer::live_count();
      auto hit = t.lookup(prompt, "ns", std::nullopt, 1);
      BOOST_TEST(buffer::live_count() == live, "lookups never copy bytes");
      BOOST_TEST_CONTEXT(family << " lcp " << lcp << " extra " << extra) {
        BOOST_TEST(hit.has_value() == want.has_value());
        BOOST_TEST(t.peek_prefix_len(prompt, "ns") == want.value_or(0));
        if (!hit || !want)
          continue;
        BOOST_TEST(hit->state(prompt).size() == *want);
        BOOST_TEST(ok(eng.verify(hit->state(prompt))));
        auto donor = std::find_if(stored.begin(), stored.end(), [&](auto& e) {
          return e.size() == hit->donor_length;
        });
        for (auto id : buffer_ids(hit->state(prompt)))
          BOOST_TEST(buffer_ids(*donor).contains(id));
      }
    }
  }
  // Dense: 12 and then 40 supersede the shorter ones. Window: 40 has
  // wrapped, so only 12 supersedes 6. Hybrid: nothing trims.
  auto family_entries = std::map<std::string, uint64_t>{
    {"tiny-dense", 1}, {"tiny-window", 2}, {"tiny-hybrid", 3}};
  BOOST_TEST(t.counters().entries == family_entries.at(family));
}

BOOST_AUTO_TEST_CASE(many_lookups_share_one_donor) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(32)));
  auto bytes = t.bytes();
  auto live = buffer::live_count();
  std::vector<ram_hit> lent;
  for (int i = 0; i < 10; ++i) {
    auto hit = t.lookup(cat(run(20), {token(i)}), "ns", std::nullopt, i);
    BOOST_REQUIRE(hit);
    BOOST_TEST(ok(eng.verify(hit->state(cat(run(20), {token(i)})))));
    lent.push_back(std::move(*hit));
  }
  BOOST_TEST(buffer::live_count() == live);
  BOOST_TEST(t.bytes() == bytes);
  BOOST_TEST(t.counters().entries == 1u);
  BOOST_TEST(t.counters().hits == 10u);
  t.clear();
  BOOST_TEST(ok(eng.verify(lent.front().state(cat(run(20), {token(0)})))),
             "lent views outlive the donor");
}

BOOST_AUTO_TEST_CASE(exact_duplicate_replaces_whatever_the_kinds) {
  auto dense = engine("tiny-dense");
  auto hybrid = engine("tiny-hybrid");
  ram_tier t(1 << 24);
  must_put(t, dense.prefill("ns", run(10)));
  t.mark_durable({false, "ns", run(10)});
  auto r = must_put(t, hybrid.prefill("ns", run(10)));
  BOOST_TEST(r.replaced);
  BOOST_TEST(t.counters().entries == 1u);
  BOOST_TEST(t.counters().replacements == 1u);
  auto hit = t.lookup(run(11), "ns", std::nullopt, 1);
  BOOST_REQUIRE(hit);
  BOOST_TEST(ok(hybrid.verify(hit->state(run(11)))), "the newcomer serves");
  BOOST_TEST(!t.lookup(cat(run(5), {1}), "ns", std::nullopt, 2),
             "and it is exact-only now");
  BOOST_TEST(t.bytes() == hybrid.geometry().bytes_at(10));
  auto gone = t.remove({false, "ns", run(10)});
  BOOST_TEST(gone->needs_spill, "a replacement is not known durable");
}

BOOST_DATA_TEST_CASE(trimmable_newcomer_supersedes_its_ancestors,
                     bdata::make(families), family) {
  auto eng = engine(family);
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(4)));
  must_put(t, eng.prefill("other", run(4)));
  auto hit = t.lookup(run(9), "ns", std::nullopt, 1);
  BOOST_REQUIRE(hit);
  auto ext =
    *eng.extend(hit->state(run(9)), run(12)); // shares the donor's segments
  bool trims = ext.trimmable();
  auto r = must_put(t, std::move(ext));
  BOOST_TEST(r.superseded == (trims ? 1u : 0u));
  BOOST_TEST(r.evicted.empty(), "superseded entries are not spilled");
  BOOST_TEST(t.contains("ns", run(4)) == !trims,
             "an untrimmable newcomer leaves shorter ancestors alone");
  BOOST_TEST(t.contains("other", run(4)), "other namespaces are untouched");
  auto again = t.lookup(cat(run(4), {7}), "ns", std::nullopt, 2);
  BOOST_REQUIRE(again);
  BOOST_TEST(again->state(cat(run(4), {7})).size() == 4u);
  BOOST_TEST(again->donor_length == (trims ? 12u : 4u));
  BOOST_TEST(ok(eng.verify(again->state(cat(run(4), {7})))));
}

BOOST_AUTO_TEST_CASE(newcomer_keeps_ancestors_below_its_floor) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(3)));
  auto exact = eng.prefill("ns", run(8));
  for (auto& l : exact.layers)
    l.min_offset = 8; // exact-only: supersedes nothing
  must_put(t, std::move(exact));
  BOOST_TEST(t.contains("ns", run(3)));
  auto e = eng.prefill("ns", run(12));
  for (auto& l : e.layers)
    l.min_offset = 6; // converted at 6: cannot stand in for 3 tokens
  auto r = must_put(t, std::move(e));
  BOOST_TEST(r.superseded == 1u);
  BOOST_TEST(t.contains("ns", run(3)));
  BOOST_TEST(!t.contains("ns", run(8)));
  BOOST_TEST(t.peek_prefix_len(cat(run(5), {1}), "ns") == 3u);
  BOOST_TEST(t.peek_prefix_len(cat(run(7), {1}), "ns") == 7u);
}

BOOST_AUTO_TEST_CASE(lru_eviction_spills_in_order_unless_durable) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(3 * one);
  for (token b : {1000, 2000, 3000})
    must_put(t, eng.prefill("ns", run(8, b)), b);
  t.lookup(run(9, 1000), "ns", std::nullopt, 3500); // 1000 is now recent
  t.mark_durable({false, "ns", run(8, 3000)});
  auto r = must_put(t, eng.prefill("ns", run(8, 4000)), 4000);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 2000)});
  BOOST_TEST(r.evicted[0].needs_spill);
  BOOST_TEST(ok(eng.verify(r.evicted[0].state)), "the spill carries the state");
  r = must_put(t, eng.prefill("ns", run(8, 5000)), 5000);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 3000)});
  BOOST_TEST(!r.evicted[0].needs_spill, "durable on SSD: nothing to write");
  BOOST_TEST(t.counters().evictions == 2u);
  BOOST_TEST(t.bytes() == 3 * one);
}

BOOST_AUTO_TEST_CASE(pending_or_failed_write_is_not_durable) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(one);
  must_put(t, eng.prefill("ns", run(8, 1000)));
  ram_key k{false, "ns", run(8, 1000)};
  BOOST_TEST(t.mark_durable(k, true));
  BOOST_TEST(t.contains("ns", k.tokens), "a finished write keeps the RAM copy");
  BOOST_TEST(t.mark_durable(k, false)); // e.g. the file was lost
  auto r = must_put(t, eng.prefill("ns", run(8, 2000)));
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(r.evicted[0].needs_spill);
  BOOST_TEST(!t.mark_durable(k), "no longer held");
}

BOOST_AUTO_TEST_CASE(entry_larger_than_the_cap_is_handed_back) {
  auto eng = engine("tiny-dense");
  ram_tier t(eng.geometry().bytes_at(8));
  must_put(t, eng.prefill("ns", run(4, 7)));
  int seen = 0;
  t.set_put_observer([&](auto&, auto&) { ++seen; });
  auto r = must_put(t, eng.prefill("ns", run(9)));
  BOOST_TEST(!r.kept);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(r.evicted[0].key.tokens == run(9));
  BOOST_TEST(r.evicted[0].needs_spill);
  BOOST_TEST(ok(eng.verify(r.evicted[0].state)));
  BOOST_TEST(t.contains("ns", run(4, 7)), "nothing else was evicted");
  BOOST_TEST(!t.contains("ns", run(9)));
  BOOST_TEST(seen == 0);
  BOOST_TEST(t.counters().oversize == 1u);
  BOOST_TEST(!t.keeps(eng.geometry().bytes_at(9)));
  BOOST_TEST(t.keeps(eng.geometry().bytes_at(8)));
}

BOOST_AUTO_TEST_CASE(put_observer_sees_every_put_and_cannot_undo_it) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  std::vector<std::pair<token_seq, std::string>> seen;
  t.set_put_observer([&](const token_seq& tok, const std::string& ns) {
    seen.emplace_back(tok, ns);
    if (seen.size() == 2)
      throw std::runtime_error("observer bug");
  });
  must_put(t, eng.prefill("a", run(3)));
  must_put(t, eng.prefill("b", run(5)));
  must_put(t, eng.prefill("a", run(3)));
  BOOST_REQUIRE(seen.size() == 3u);
  BOOST_TEST(seen[1].first == run(5));
  BOOST_TEST(seen[1].second == "b");
  BOOST_TEST(t.contains("b", run(5)), "a throwing observer undoes nothing");
  BOOST_TEST(t.counters().observer_errors == 1u);
}

BOOST_AUTO_TEST_CASE(the_change_observer_sees_every_entry_come_and_go) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one + eng.geometry().bytes_at(4));
  std::vector<std::pair<ram_change_kind, token_seq>> seen;
  t.set_change_observer([&](const ram_change& c) {
    BOOST_TEST(c.ns == "ns");
    BOOST_TEST(c.bytes == eng.geometry().bytes_at(c.tokens.size()));
    BOOST_TEST(c.trimmable);
    seen.emplace_back(c.kind, c.tokens);
  });
  using k = ram_change_kind;
  auto a = run(4, 1), b = run(8, 1); // b extends a: supersedes it
  must_put(t, eng.prefill("ns", a), 1);
  must_put(t, eng.prefill("ns", b), 2);
  must_put(t, eng.prefill("ns", b), 3); // a replace: one stored, no gone
  must_put(t, eng.prefill("ns", run(8, 100)), 4);
  must_put(t, eng.prefill("ns", run(8, 200)), 5); // evicts b (LRU)
  BOOST_TEST(t.remove({false, "ns", run(8, 100)}).has_value());
  t.clear();
  using row = std::pair<ram_change_kind, token_seq>;
  BOOST_TEST((seen
              == std::vector<row>{{k::stored, a},
                                  {k::superseded, a},
                                  {k::stored, b},
                                  {k::stored, b},
                                  {k::stored, run(8, 100)},
                                  {k::evicted, b},
                                  {k::stored, run(8, 200)},
                                  {k::demoted, run(8, 100)},
                                  {k::evicted, run(8, 200)}}));
}

BOOST_AUTO_TEST_CASE(peek_changes_no_lru_order_and_no_counter) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  auto before = t.counters();
  BOOST_TEST(t.peek_prefix_len(run(20, 1000), "ns") == 8u);
  BOOST_TEST(t.peek_prefix_len(run(20, 5), "ns") == 0u);
  auto after = t.counters();
  BOOST_TEST(after.prefix_scans == before.prefix_scans + 2);
  after.prefix_scans = before.prefix_scans;
  BOOST_TEST(std::memcmp(&after, &before, sizeof after) == 0);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)},
             "the peeked entry is still least recently used");
}

BOOST_AUTO_TEST_CASE(hit_miss_and_session_counters) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  auto e = eng.prefill("ns", run(8));
  e.session = "s1";
  must_put(t, std::move(e));
  t.lookup(run(9), "ns", std::string{"s1"}, 1);    // hit, own session
  t.lookup(run(9), "ns", std::string{"s2"}, 2);    // hit, someone else's
  t.lookup(run(9), "ns", std::nullopt, 3);         // hit, no session
  t.lookup(run(9, 5), "ns", std::string{"s1"}, 4); // miss
  t.lookup(run(9), "nope", std::nullopt, 5);       // miss
  auto c = t.counters();
  BOOST_TEST(c.hits == 3u);
  BOOST_TEST(c.misses == 2u);
  BOOST_TEST(c.session_hits == 1u);
  BOOST_TEST(c.session_misses == 2u);
  BOOST_TEST(c.prefix_scans == 5u);
  BOOST_TEST(c.entries == 1u);
}

BOOST_AUTO_TEST_CASE(a_pinned_entry_is_protected_until_cap) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  must_pin(t, eng.prefill("ns", run(8, 1000)), 1); // a session's newest
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  BOOST_TEST(t.is_protected("ns", run(8, 1000)));
  BOOST_TEST(t.counters().protected_entries == 1u);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 2000)},
             "the unprotected entry goes first although more recent");
  must_pin(t, eng.prefill("ns", run(8, 4000)), 4); // evicts 3000
  BOOST_TEST(!t.contains("ns", run(8, 3000)));
  // Only protected entries left: the cap always wins, oldest first.
  r = must_pin(t, eng.prefill("ns", run(8, 5000)), 5);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)});
  BOOST_TEST(t.bytes() <= t.capacity());
  BOOST_TEST(t.counters().protected_entries == 2u, "the evicted pin is gone");
  BOOST_TEST(t.unprotect("ns", run(8, 5000), r.pin));
  BOOST_TEST(!t.is_protected("ns", run(8, 5000)));
  BOOST_TEST(t.contains("ns", run(8, 5000)), "unprotecting deletes nothing");
  BOOST_TEST(t.counters().protected_entries == 1u);
  auto p = t.pop_lru(); // 4000 is older but protected; 5000 is not
  BOOST_TEST(p->key.tokens == run(8, 5000));
}

BOOST_AUTO_TEST_CASE(pins_are_taken_back_one_by_one) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  auto a = must_pin(t, eng.prefill("ns", run(8))).pin;
  auto b = t.protect("ns", run(8)); // a second session names the entry
  BOOST_REQUIRE(b);
  BOOST_TEST(*b != a);
  BOOST_TEST(!t.protect("ns", run(7)), "not held");
  BOOST_TEST(t.counters().protected_entries == 1u, "one entry, two pins");
  BOOST_TEST(t.unprotect("ns", run(8), a));
  BOOST_TEST(!t.unprotect("ns", run(8), a), "each pin is taken back once");
  BOOST_TEST(t.is_protected("ns", run(8)), "the other pin still holds");
  BOOST_TEST(t.unprotect("ns", run(8), *b));
  BOOST_TEST(!t.is_protected("ns", run(8)));
  BOOST_TEST(t.counters().protected_entries == 0u);
  BOOST_TEST(!t.unprotect("ns", run(9), *b), "not held: a late unprotect");
}

BOOST_AUTO_TEST_CASE(pins_follow_the_key_when_a_put_replaces_it) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  auto a = must_pin(t, eng.prefill("ns", run(8))).pin;
  auto r = must_pin(t, eng.prefill("ns", run(8)), 1); // the same key again
  BOOST_TEST(r.replaced);
  BOOST_TEST(t.counters().protected_entries == 1u);
  BOOST_TEST(t.unprotect("ns", run(8), a), "the old pin moved along");
  BOOST_TEST(t.is_protected("ns", run(8)));
  must_put(t, eng.prefill("ns", run(8)), 2); // replaced without a pin
  BOOST_TEST(t.is_protected("ns", run(8)), "a plain put keeps the pins");
  BOOST_TEST(t.unprotect("ns", run(8), r.pin));
  BOOST_TEST(t.counters().protected_entries == 0u);
}

BOOST_AUTO_TEST_CASE(a_pin_leaves_with_its_entry) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  auto a = must_pin(t, eng.prefill("ns", run(8, 1000)), 1).pin;
  BOOST_TEST(t.remove({false, "ns", run(8, 1000)}).has_value()); // demoted
  BOOST_TEST(t.counters().protected_entries == 0u);
  // The key comes back (restored from SSD) and another session pins it.
  must_put(t, eng.prefill("ns", run(8, 1000)), 3, true);
  auto b = t.protect("ns", run(8, 1000));
  BOOST_REQUIRE(b);
  BOOST_TEST(!t.unprotect("ns", run(8, 1000), a),
             "a stale pin takes nobody else's protection");
  BOOST_TEST(t.is_protected("ns", run(8, 1000)));
  // Superseded by a trimmable extension: the pin leaves too.
  auto longer = eng.prefill("ns", cat(run(8, 1000), run(4, 9000)));
  must_put(t, std::move(longer), 4);
  BOOST_TEST(!t.contains("ns", run(8, 1000)));
  BOOST_TEST(t.counters().protected_entries == 0u);
  t.clear();
  BOOST_TEST(t.counters().protected_entries == 0u);
}

BOOST_DATA_TEST_CASE(shared_buffers_are_counted_once, bdata::make(families),
                     family) {
  auto eng = engine(family);
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(10)));
  auto donor_bytes = t.bytes();
  auto hit = t.lookup(run(11), "ns", std::nullopt, 1);
  auto ext = *eng.extend(hit->state(run(11)), run(14));
  for (auto& l : ext.layers) // exact-only: the donor is not superseded
    l.min_offset = l.tokens;
  std::vector<buffer_ref> bufs;
  collect_buffers(ext, bufs);
  uint64_t fresh = 0;
  auto donor_ids = buffer_ids(hit->state(run(11)));
  for (auto& b : bufs)
    if (!donor_ids.contains(b->id()))
      fresh += b->size();
  must_put(t, std::move(ext));
  BOOST_TEST(t.counters().entries == 2u);
  BOOST_TEST(t.bytes() == donor_bytes + fresh, "the extension costs its news");
  auto gone = t.remove({false, "ns", run(10)});
  BOOST_REQUIRE(gone);
  uint64_t still_shared = 0;
  for (auto& b : bufs)
    if (donor_ids.contains(b->id()))
      still_shared += b->size();
  BOOST_TEST(t.bytes() == fresh + still_shared,
             "evicting the donor frees only what nobody else holds");
  t.remove({false, "ns", run(14)});
  BOOST_TEST(t.bytes() == 0u);
}

BOOST_DATA_TEST_CASE(attachments_ride_only_at_the_exact_boundary,
                     bdata::make(families), family) {
  auto eng = engine(family, 48);
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(12)));
  auto exact = t.lookup(run(13), "ns", std::nullopt, 1);
  BOOST_REQUIRE(exact);
  BOOST_TEST(exact->state(run(13)).attachments.size() == 1u);
  BOOST_TEST(ok(eng.verify(exact->state(run(13)))));
  auto cut = t.lookup(cat(run(7), {1}), "ns", std::nullopt, 2);
  BOOST_TEST(cut.has_value() == (family != std::string{"tiny-hybrid"}));
  if (cut) {
    BOOST_TEST(cut->state(cat(run(7), {1})).attachments.empty());
    BOOST_TEST(ok(eng.verify(cut->state(cat(run(7), {1})))));
  }
}

BOOST_AUTO_TEST_CASE(objects_share_the_budget_and_count_hits) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  auto blob = [](size_t n, uint8_t v) {
    std::vector<std::byte> b(n, std::byte{v});
    return std::vector<attachment>{{"enc", {view::of(buffer::copy_of(b))}}};
  };
  BOOST_TEST(t.put_object("img-1", blob(one, 1), 1).kept);
  must_put(t, eng.prefill("ns", run(8)), 2);
  BOOST_TEST(!t.object("img-2", 3));
  auto got = t.object("img-1", 4); // img-1 is now the most recent
  BOOST_REQUIRE(got);
  BOOST_TEST(std::to_integer<int>(flatten(got->front().segments)[0]) == 1);
  auto r = t.put_object("img-3", blob(one, 3), 5);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8)});
  BOOST_TEST(t.contains("ns", run(8)) == false);
  r = t.put_object("img-1", blob(one, 9), 6);
  BOOST_TEST(r.replaced);
  BOOST_TEST(
    std::to_integer<int>(flatten(t.object("img-1", 7)->front().segments)[0])
    == 9);
  r = t.put_object("huge", blob(3 * one, 4), 8);
  BOOST_TEST(!r.kept);
  BOOST_TEST(r.evicted.at(0).key.object);
  auto c = t.counters();
  BOOST_TEST(c.object_hits == 2u);
  BOOST_TEST(c.object_misses == 1u);
  BOOST_TEST(c.objects == 2u);
  BOOST_TEST(c.bytes == 2 * one);
  BOOST_TEST(t.mark_durable({true, "img-3", {}}));
  auto popped = t.pop_lru();
  BOOST_TEST(popped->key.name == "img-3");
  BOOST_TEST(!popped->needs_spill);
}

BOOST_AUTO_TEST_CASE(idle_lists_least_recent_first_and_remove_hands_back) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(4, 10)), 100);
  must_put(t, eng.prefill("ns", run(4, 20)), 200);
  must_put(t, eng.prefill("ns", run(4, 30)), 300);
  t.lookup(run(5, 10), "ns", std::nullopt, 350);
  auto idle = t.idle(400, 100);
  BOOST_REQUIRE(idle.size() == 2u);
  BOOST_TEST(idle[0].tokens == run(4, 20));
  BOOST_TEST(idle[1].tokens == run(4, 30));
  BOOST_TEST(t.idle(400, 1000).empty());
  auto gone = t.remove(idle[0]);
  BOOST_REQUIRE(gone);
  BOOST_TEST(ok(eng.verify(gone->state)));
  BOOST_TEST(!t.remove(idle[0]));
  BOOST_TEST(t.counters().evictions == 0u, "removal is not eviction");
  BOOST_TEST(t.pop_lru()->key.tokens == run(4, 30));
  BOOST_TEST(t.pop_lru()->key.tokens == run(4, 10));
  BOOST_TEST(!t.pop_lru());
  BOOST_TEST(t.bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(refused_put_leaves_ownership_with_the_caller) {
  auto eng = engine("tiny-dense");
  ram_tier t(1 << 24);
  entry empty;
  empty.ns = "ns";
  BOOST_TEST(!t.put(std::move(empty), 0));
  auto bad = eng.prefill("ns", run(6));
  bad.layers[0].tokens = 5;
  auto r = t.put(std::move(bad), 0);
  BOOST_TEST(!r);
  BOOST_TEST(bad.layers.size() == 4u, "the caller still holds its state");
  BOOST_TEST(t.counters().entries == 0u);
}

BOOST_AUTO_TEST_CASE(worked_example_from_the_docs) {
  auto dense = engine("tiny-dense");
  auto hybrid = engine("tiny-hybrid");
  ram_tier t(5120);
  auto S = run(8);
  must_put(t, dense.prefill("chat", S), 1);
  BOOST_TEST(t.bytes() == 2048u);
  auto hit = t.lookup(cat(S, {1}), "chat", std::nullopt, 2);
  BOOST_REQUIRE(hit);
  BOOST_TEST(hit->state(cat(S, {1})).size() == 8u);
  BOOST_TEST(hit->donor_length == 8u);
  auto r =
    must_put(t, *dense.extend(hit->state(cat(S, {1})), cat(S, run(4, 7))), 3);
  BOOST_TEST(r.superseded == 1u);
  BOOST_TEST(t.bytes() == 3072u);
  auto other = t.lookup(cat(S, {2}), "chat", std::nullopt, 4);
  BOOST_REQUIRE(other);
  BOOST_TEST(other->state(cat(S, {2})).size() == 8u);
  BOOST_TEST(other->donor_length == 12u);
  BOOST_TEST(ok(dense.verify(other->state(cat(S, {2})))));
  BOOST_TEST(other->state(cat(S, {2})).layers[0].byte_length() == 512u);
  must_put(t, hybrid.prefill("ssm", run(12, 500)), 5);
  BOOST_TEST(t.bytes() == 3072u + 1152u);
  BOOST_TEST(!t.lookup(cat(run(10, 500), {3}), "ssm", std::nullopt, 6));
  r = must_put(t, dense.prefill("chat", run(8, 900)), 7);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(r.evicted[0].key.tokens == cat(S, run(4, 7)));
  BOOST_TEST(r.evicted[0].needs_spill);
  BOOST_TEST(t.bytes() == 1152u + 2048u);
}

BOOST_AUTO_TEST_CASE(lookup_lends_only_when_better_than_asked) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  // The SSD tier has 8 tokens too: RAM must offer more, and does not.
  BOOST_TEST(!t.lookup(run(12, 1000), "ns", std::nullopt, 3, 8));
  BOOST_TEST(t.counters().misses == 1u);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 4);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)},
             "a refused lookup touches nothing");
  auto hit = t.lookup(run(12, 2000), "ns", std::nullopt, 5, 7);
  BOOST_REQUIRE(hit);
  BOOST_TEST(hit->state(run(12, 2000)).size() == 8u);
}

BOOST_AUTO_TEST_CASE(restored_entry_leaves_without_a_write) {
  auto eng = engine("tiny-dense");
  ram_tier t(eng.geometry().bytes_at(8));
  must_put(t, eng.prefill("ns", run(8, 1000)), 1, true); // from SSD
  auto r = must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(!r.evicted[0].needs_spill);
  r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  BOOST_TEST(r.evicted.at(0).needs_spill, "a fresh put is not durable");
}

BOOST_AUTO_TEST_CASE(a_puts_own_entry_is_never_its_victim) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  for (token b : {1000, 2000})
    must_pin(t, eng.prefill("ns", run(8, b)), b);
  // Both older entries are protected; the newcomer is not, yet it stays.
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3000);
  BOOST_TEST(r.kept);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)});
  BOOST_TEST(t.contains("ns", run(8, 3000)));
}

BOOST_AUTO_TEST_CASE(interest_keeps_an_item_resident_until_dropped) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one);
  must_pin(t, eng.prefill("ns", run(8, 1000)), 1); // protected
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  ram_key held{false, "ns", run(8, 2000)};
  BOOST_TEST(t.add_interest(held, 42));
  BOOST_TEST(!t.add_interest({false, "ns", run(8, 5)}, 42), "not held");
  BOOST_TEST(t.idle(100, 10).size() == 1u, "an item with interest is not idle");
  // Protected and held: the protected one goes first, the held one last.
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)});
  r = must_put(t, eng.prefill("ns", run(8, 4000)), 4);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 3000)});
  BOOST_TEST(t.pop_lru()->key.tokens == run(8, 4000));
  t.drop_interest(42);
  BOOST_TEST(t.contains("ns", held.tokens),
             "dropping interest removes nothing");
  must_put(t, eng.prefill("ns", run(8, 5000)), 5);
  r = must_put(t, eng.prefill("ns", run(8, 6000)), 6);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{held.tokens});
}

BOOST_AUTO_TEST_CASE(
  boundary_reclaim_drops_durable_copies_then_optional_items) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(8 * one);
  for (token b : {1000, 2000, 3000, 4000})
    must_put(t, eng.prefill("ns", run(8, b)), b, b != 2000);
  must_pin(t, eng.prefill("ns", run(8, 5000)), 5000, true);
  t.add_interest({false, "ns", run(8, 3000)}, 1);
  // 1000 and 4000 are durable, unprotected and not held; 2000 is not
  // durable, 3000 is held, 5000 is protected.
  auto r = t.reclaim(one);
  BOOST_TEST(r.released == 1u);
  BOOST_TEST(r.released_bytes == one);
  BOOST_TEST(r.freed_bytes == one);
  BOOST_TEST(r.dropped == 0u, "the durable copy sufficed");
  BOOST_TEST(!t.contains("ns", run(8, 1000)));
  // The engine still needs bytes: after 4000 (durable), 2000 (nowhere
  // else: dropped, not demoted); never the held or the protected one.
  r = t.reclaim(10 * one);
  BOOST_TEST(r.released == 1u);
  BOOST_TEST(r.dropped == 1u);
  BOOST_TEST(r.dropped_bytes == one);
  BOOST_TEST(!t.contains("ns", run(8, 4000)));
  BOOST_TEST(!t.contains("ns", run(8, 2000)));
  BOOST_TEST(t.counters().entries == 2u);
  BOOST_TEST(t.counters().boundary_dropped == 1u);
  BOOST_TEST(t.counters().evictions == 0u);
}

BOOST_AUTO_TEST_CASE(boundary_reclaim_skips_entries_whose_views_are_lent) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(8 * one);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1, true);
  must_put(t, eng.prefill("ns", run(8, 2000)), 2, true);
  // A running request holds views of the older one: dropping it would
  // free nothing, so the newer one goes instead.
  auto lent = t.lookup(cat(run(8, 1000), {1}), "ns", std::nullopt, 3);
  BOOST_REQUIRE(lent);
  auto r = t.reclaim(one);
  BOOST_TEST(r.released == 1u);
  BOOST_TEST(r.freed_bytes == one);
  BOOST_TEST(t.contains("ns", run(8, 1000)), "the lent donor stays");
  BOOST_TEST(!t.contains("ns", run(8, 2000)));
  BOOST_TEST(ok(eng.verify(lent->state(cat(run(8, 1000), {1})))),
             "lent views keep their bytes");
  r = t.reclaim(one);
  BOOST_TEST(r.released == 0u, "nothing would free a byte now");
  lent.reset();
  r = t.reclaim(one);
  BOOST_TEST(r.released == 1u);
  BOOST_TEST(r.freed_bytes == one);
}

BOOST_AUTO_TEST_CASE(a_lost_ssd_file_clears_exactly_the_marks_it_gave) {
  auto eng = engine("tiny-dense");
  ram_tier t(64 * eng.geometry().bytes_at(16));
  // Longest first, so no newcomer supersedes an ancestor.
  must_put(t, eng.prefill("ns", run(16)), 1, true); // its own file
  must_put(t, eng.prefill("ns", run(8)), 2);
  BOOST_TEST(t.mark_durable({false, "ns", run(8)}, true, 16)); // trimmed
  must_put(t, eng.prefill("ns", run(4)), 3, true);             // its own file
  must_put(t, eng.prefill("ns", run(8, 5000)), 4, true);       // unrelated
  must_put(t, eng.prefill("other", run(16)), 5, true);         // other ns
  BOOST_TEST(t.mark_not_durable("ns", run(8)) == 0u,
             "run(8)'s mark came from the 16-token file");
  BOOST_TEST(t.mark_not_durable("ns", run(20)) == 0u, "no mark from it");
  BOOST_TEST(t.mark_not_durable("ns", run(16)) == 2u);
  BOOST_TEST(t.counters().backing_lost == 2u);
  BOOST_TEST(!t.item({false, "ns", run(16)})->durable);
  BOOST_TEST(!t.item({false, "ns", run(8)})->durable);
  BOOST_TEST(t.item({false, "ns", run(4)})->durable);
  BOOST_TEST(t.mark_not_durable("ns", run(16)) == 0u, "cleared once");
  // A boundary asked for the durable copies' bytes keeps what lost its
  // file; eviction writes it again.
  auto g = eng.geometry();
  auto r = t.reclaim(g.bytes_at(4) + g.bytes_at(8) + g.bytes_at(16));
  BOOST_TEST(r.released == 3u);
  BOOST_TEST(r.dropped == 0u);
  BOOST_TEST(t.counters().entries == 2u);
  auto first = t.pop_lru();
  BOOST_REQUIRE(first);
  BOOST_TEST(first->key.tokens == run(16));
  BOOST_TEST(first->needs_spill);
  BOOST_TEST(t.pop_lru()->needs_spill);
}

BOOST_AUTO_TEST_CASE(a_mark_follows_the_item_not_the_key) {
  auto eng = engine("tiny-dense");
  ram_tier t(64 * eng.geometry().bytes_at(16));
  must_put(t, eng.prefill("ns", run(8)), 1, true);
  must_put(t, eng.prefill("ns", run(8)), 2); // replaced: a new, pending item
  BOOST_TEST(!t.item({false, "ns", run(8)})->durable);
  BOOST_TEST(t.mark_not_durable("ns", run(8)) == 0u);
  BOOST_TEST(t.mark_durable({false, "ns", run(8)}));
  BOOST_TEST(t.mark_not_durable("ns", run(8)) == 1u);
  BOOST_TEST(t.mark_durable({false, "ns", run(8)}, false));
  BOOST_TEST(t.mark_not_durable("ns", run(8)) == 0u);
}

// --- handoff to a cold tier (ram_tier built with `cold_tier`) -------------

BOOST_AUTO_TEST_CASE(
  an_evicted_entry_stays_servable_until_its_write_is_durable) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one, true);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  auto& s = r.evicted[0];
  BOOST_TEST(s.key.tokens == run(8, 1000));
  BOOST_TEST(s.leaving);
  BOOST_TEST(s.needs_spill);
  BOOST_TEST(ok(eng.verify(s.state)));
  BOOST_TEST(s.released.empty(), "nothing was let go yet");
  // Still found, counted as held, outside the cap.
  BOOST_TEST(t.peek_prefix_len(cat(run(8, 1000), {7}), "ns") == 8u);
  BOOST_TEST(t.counters().leaving_entries == 1u);
  BOOST_TEST(t.counters().leaving_bytes == one);
  BOOST_TEST(t.bytes() == 3 * one);
  BOOST_TEST(t.resident_bytes() == 2 * one);
  BOOST_TEST(!t.begin_write(s.key).has_value(), "its write is out already");
  auto serial = s.serial;
  auto key = s.key;
  r.evicted.clear(); // the owner's copy went into the write order
  auto left = t.write_settled(key, serial, write_result::durable);
  BOOST_REQUIRE(left);
  BOOST_TEST(!left->leaving);
  left->state = {};
  BOOST_TEST(died_bytes(left->released) == one, "its bytes are free now");
  BOOST_TEST(t.peek_prefix_len(cat(run(8, 1000), {7}), "ns") == 0u);
  BOOST_TEST(t.bytes() == 2 * one);
  BOOST_TEST(t.counters().leaving_entries == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_write_keeps_it_leaving_and_a_drop_is_reported) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(one, true);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  auto r = must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  auto key = r.evicted[0].key;
  auto serial = r.evicted[0].serial;
  BOOST_TEST(!t.write_settled(key, serial, write_result::failed).has_value());
  BOOST_TEST(t.contains("ns", key.tokens), "kept while the SSD retries");
  BOOST_TEST(t.item(key)->leaving);
  BOOST_TEST(
    !t.write_settled(key, serial + 99, write_result::not_stored).has_value(),
    "another item's outcome changes nothing");
  auto left = t.write_settled(key, serial, write_result::not_stored);
  BOOST_REQUIRE(left);
  BOOST_TEST(!t.contains("ns", key.tokens));
  BOOST_TEST(t.counters().leaving_dropped == 1u);
  BOOST_TEST(t.bytes() == one);
}

BOOST_AUTO_TEST_CASE(a_hit_on_a_leaving_entry_makes_it_resident_again) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one, true);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 3);
  auto a = r.evicted.at(0);
  auto hit = t.lookup(cat(run(8, 1000), {7}), "ns", std::nullopt, 4);
  BOOST_REQUIRE(hit);
  BOOST_TEST(ok(eng.verify(hit->state(cat(run(8, 1000), {7})))));
  BOOST_TEST(hit->state(cat(run(8, 1000), {7})).size() == 8u);
  BOOST_TEST(t.counters().rejoined == 1u);
  BOOST_REQUIRE(hit->evicted.size() == 1u); // the cap still holds
  BOOST_TEST(hit->evicted[0].key.tokens == run(8, 2000));
  BOOST_TEST(hit->evicted[0].leaving);
  BOOST_TEST(t.resident_bytes() == 2 * one);
  BOOST_TEST(!t.item(a.key)->leaving);
  // Its first write is still out: evicted again, no second write is asked.
  r = must_put(t, eng.prefill("ns", run(8, 4000)), 5);
  r = must_put(t, eng.prefill("ns", run(8, 5000)), 6);
  bool seen = false;
  for (auto& s : r.evicted)
    if (s.key == a.key) {
      seen = true;
      BOOST_TEST(s.leaving);
      BOOST_TEST(!s.needs_spill);
    }
  BOOST_TEST(seen);
  // A resident item's write that became durable marks it durable.
  auto b = hit->evicted[0];
  BOOST_TEST(
    t.write_settled(b.key, b.serial, write_result::durable).has_value());
  BOOST_TEST(!t.contains("ns", b.key.tokens));
}

BOOST_AUTO_TEST_CASE(
  a_durable_victim_is_dropped_at_once_and_nothing_leaves_without_a_cold_tier) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  for (bool cold : {true, false}) {
    ram_tier t(one, cold);
    must_put(t, eng.prefill("ns", run(8, 1000)), 1, true); // durable
    auto r = must_put(t, eng.prefill("ns", run(8, 2000)), 2);
    BOOST_REQUIRE(r.evicted.size() == 1u);
    BOOST_TEST(!r.evicted[0].leaving);
    BOOST_TEST(!r.evicted[0].needs_spill);
    r = must_put(t, eng.prefill("ns", run(8, 3000)), 3); // not durable
    BOOST_REQUIRE(r.evicted.size() == 1u);
    BOOST_TEST(r.evicted[0].leaving == cold);
    BOOST_TEST(r.evicted[0].needs_spill);
    BOOST_TEST(t.contains("ns", run(8, 2000)) == cold);
    BOOST_TEST(t.bytes() == (cold ? 2 : 1) * one);
  }
}

BOOST_AUTO_TEST_CASE(an_oversize_put_is_held_as_leaving_while_it_is_written) {
  auto eng = engine("tiny-dense");
  ram_tier t(eng.geometry().bytes_at(8), true);
  must_put(t, eng.prefill("ns", run(4, 7)), 1);
  auto r = must_put(t, eng.prefill("ns", run(9)));
  BOOST_TEST(!r.kept);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(r.evicted[0].leaving);
  BOOST_TEST(r.evicted[0].needs_spill);
  BOOST_TEST(t.counters().oversize == 1u);
  BOOST_TEST(t.contains("ns", run(4, 7)), "nothing else was evicted");
  // Servable, and a hit lends it without making it resident (too large).
  auto hit = t.lookup(cat(run(9), {1}), "ns", std::nullopt, 2);
  BOOST_REQUIRE(hit);
  BOOST_TEST(hit->state(cat(run(9), {1})).size() == 9u);
  BOOST_TEST(hit->evicted.empty());
  BOOST_TEST(t.item({false, "ns", run(9)})->leaving);
  BOOST_TEST(t.resident_bytes() == eng.geometry().bytes_at(4));
  BOOST_TEST(t.write_settled(r.evicted[0].key, r.evicted[0].serial,
                             write_result::durable)
               .has_value());
  BOOST_TEST(!t.contains("ns", run(9)));
}

BOOST_AUTO_TEST_CASE(one_write_per_item_a_snapshot_serves_its_eviction) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(one, true);
  auto p = must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  ram_key k{false, "ns", run(8, 1000)};
  BOOST_TEST(!t.begin_write(k, p.serial + 1).has_value(), "not that item");
  auto snap = t.begin_write(k, p.serial);
  BOOST_REQUIRE(snap);
  BOOST_TEST(ok(eng.verify(snap->state)));
  BOOST_TEST(!t.begin_write(k).has_value(), "one write at a time");
  BOOST_TEST(t.undurable().empty(), "a flush leaves it to the SSD's flush");
  auto r = must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  BOOST_REQUIRE(r.evicted.size() == 1u);
  BOOST_TEST(r.evicted[0].leaving);
  BOOST_TEST(!r.evicted[0].needs_spill, "the snapshot on its way serves");
  BOOST_TEST(t.write_settled(k, p.serial, write_result::durable).has_value());
  BOOST_TEST(!t.contains("ns", k.tokens));
}

BOOST_AUTO_TEST_CASE(a_replaced_leaving_entry_leaves_its_old_write_alone) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(one, true);
  must_put(t, eng.prefill("ns", run(8, 1000)), 1);
  auto r = must_put(t, eng.prefill("ns", run(8, 2000)), 2);
  auto old = r.evicted.at(0);
  auto fresh = must_put(t, eng.prefill("ns", run(8, 1000)), 3);
  BOOST_TEST(fresh.replaced);
  BOOST_TEST(
    !t.write_settled(old.key, old.serial, write_result::durable).has_value(),
    "the old item's outcome is not the new one's");
  BOOST_TEST(!t.item(old.key)->durable);
  BOOST_TEST(t.contains("ns", old.key.tokens));
}

// A hit lends the donor once (no per-layer copy): `state(prompt)` cuts it,
// keyed by the prompt, and `write_entry` with the donor's length and the
// prompt's first p tokens writes the same cut without
// building it (what the RAM actor sends an engine). Both read back byte
// for byte as what the oracle expects at that length, exact and trimmed,
// over donors whose layers hold several segments (extended ones).
BOOST_DATA_TEST_CASE(a_hit_lends_the_donor_and_writes_its_cut,
                     bdata::make(families), family) {
  auto eng = engine(family, 16);
  ram_tier t(1 << 24);
  must_put(t, eng.prefill("ns", run(6)));
  auto first = t.lookup(cat(run(6), {1}), "ns", std::nullopt, 1);
  BOOST_REQUIRE(first);
  must_put(t, *eng.extend(first->state(cat(run(6), {1})), run(14)), 2);
  first.reset();
  for (size_t p : {14, 13, 9}) {
    auto prompt = cat(run(p), {1});
    auto hit = t.lookup(prompt, "ns", std::nullopt, 3);
    auto want = t.peek_prefix_len(prompt, "ns");
    if (want == 0) {
      BOOST_TEST(!hit);
      continue;
    }
    BOOST_REQUIRE(hit);
    BOOST_TEST(hit->size() == want);
    // The key is held by the index: the donor's body has only its length.
    BOOST_TEST(hit->donor.length() == hit->donor_length);
    BOOST_TEST(hit->donor.layer_count() == eng.geometry().layers.size());
    auto cut = hit->state(prompt);
    BOOST_TEST(cut.size() == want);
    BOOST_TEST(ok(eng.verify(cut)));
    msg::draft<msg::SaveCheckpoint> d;
    write_entry(d, d.root().initEntry(), hit->donor, hit->ns,
                std::span{prompt}.first(hit->length));
    auto m = std::move(d).seal();
    auto back = read_entry(m, m.root().getEntry());
    BOOST_REQUIRE(back);
    BOOST_TEST(ok(eng.verify(*back)));
    BOOST_TEST(back->tokens == cut.tokens);
    BOOST_TEST(back->attachments.size() == cut.attachments.size());
    BOOST_REQUIRE(back->layers.size() == cut.layers.size());
    for (size_t i = 0; i < cut.layers.size(); ++i) {
      BOOST_TEST(back->layers[i].tokens == cut.layers[i].tokens);
      BOOST_TEST(back->layers[i].min_offset == cut.layers[i].min_offset);
      BOOST_TEST(flatten(back->layers[i].segments)
                   == flatten(cut.layers[i].segments),
                 "layer " << i);
    }
  }
}

namespace {

put_result must_retain(ram_tier& t, entry e, uint64_t now, retention r) {
  auto out = t.put(std::move(e), now, false, protection::none, r);
  if (!out)
    BOOST_FAIL(describe(out.error()));
  return std::move(*out);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lower_priority_is_evicted_before_any_higher_one) {
  for (auto policy : {ram_policy::lru, ram_policy::gdsf}) {
    auto eng = engine("tiny-dense");
    auto one = eng.geometry().bytes_at(8);
    ram_tier t(3 * one, false, policy);
    must_retain(t, eng.prefill("ns", run(8, 1000)), 1, {.priority = 90});
    must_retain(t, eng.prefill("ns", run(8, 2000)), 2, {.priority = 10});
    must_put(t, eng.prefill("ns", run(8, 3000)), 3); // the default, 35
    for (uint64_t now = 4; now < 10; ++now)          // however recently used
      t.lookup(run(9, 2000), "ns", std::nullopt, now);
    auto r = must_put(t, eng.prefill("ns", run(8, 4000)), 10);
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 2000)},
               to_string(policy));
    r = must_put(t, eng.prefill("ns", run(8, 5000)), 11);
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 3000)},
               "then the default ones, oldest first");
    r = must_put(t, eng.prefill("ns", run(8, 6000)), 12);
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 4000)});
    BOOST_TEST(t.contains("ns", run(8, 1000)), "priority 90 stays longest");
    // A priority over the maximum counts as the maximum: then only higher
    // ones are left, and 90 goes before 100.
    r = must_retain(t, eng.prefill("ns", run(8, 7000)), 13, {.priority = 250});
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 5000)});
    r = must_retain(t, eng.prefill("ns", run(8, 8000)), 14, {.priority = 95});
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 6000)});
    r = must_retain(t, eng.prefill("ns", run(8, 9000)), 15, {.priority = 99});
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)});
    r = must_retain(t, eng.prefill("ns", run(8, 9500)), 16, {.priority = 99});
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 8000)});
    BOOST_TEST(t.contains("ns", run(8, 7000)));
  }
}

BOOST_AUTO_TEST_CASE(reclaim_and_idle_walk_a_lower_priority_first) {
  for (auto policy : {ram_policy::lru, ram_policy::gdsf}) {
    auto eng = engine("tiny-dense");
    auto one = eng.geometry().bytes_at(8);
    ram_tier t(8 * one, false, policy);
    // Durable copies, oldest first: 90, the default (35), 10, the default.
    auto put = [&](token base, uint64_t now, uint8_t priority) {
      auto r = t.put(eng.prefill("ns", run(8, base)), now, true,
                     protection::none, {.priority = priority});
      BOOST_REQUIRE(r);
    };
    put(1000, 1, 90);
    put(2000, 2, default_priority);
    put(3000, 3, 10);
    put(4000, 4, default_priority);
    t.lookup(run(9, 2000), "ns", std::nullopt, 5); // 2000 after 4000 now
    std::vector<token_seq> want{run(8, 3000), run(8, 4000), run(8, 2000),
                                run(8, 1000)};
    std::vector<token_seq> idle;
    for (auto& k : t.idle(100, 0))
      idle.push_back(k.tokens);
    BOOST_TEST(idle == want, to_string(policy));
    // One entry's bytes at a time: the newest, priority 10, goes first.
    for (auto& k : want) {
      auto r = t.reclaim(one);
      BOOST_TEST(r.released == 1u);
      BOOST_TEST(!t.contains("ns", k), to_string(policy));
    }
  }
}

BOOST_AUTO_TEST_CASE(gdsf_keeps_an_entry_that_serves_often) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  for (auto policy : {ram_policy::lru, ram_policy::gdsf}) {
    ram_tier t(2 * one, false, policy);
    must_put(t, eng.prefill("ns", run(8, 1000)), 1);
    for (uint64_t now = 2; now < 6; ++now)
      t.lookup(run(9, 1000), "ns", std::nullopt, now);
    must_put(t, eng.prefill("ns", run(8, 2000)), 6);
    auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 7);
    // LRU takes 1000 (used longest ago); GDSF takes 2000 (used once).
    auto want = policy == ram_policy::lru ? run(8, 1000) : run(8, 2000);
    BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{want},
               to_string(policy));
    BOOST_TEST((t.policy() == policy));
  }
}

BOOST_AUTO_TEST_CASE(an_engine_pin_survives_a_flood_ten_times_the_cap) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(64);
  for (auto policy : {ram_policy::lru, ram_policy::gdsf}) {
    ram_tier t(8 * one, false, policy, 2 * one);
    auto system = run(64, 1);
    auto r = must_retain(t, eng.prefill("ns", system), 0, {.pin_ms = 1000});
    BOOST_TEST(r.pinned);
    // One-off prompts, each its own 64 tokens after a shared system prompt
    // (they extend the pinned entry: it is not superseded), ten caps' worth.
    uint64_t now = 1;
    for (token b = 0; b < 80; ++b, ++now) {
      auto hit = t.lookup(cat(system, run(64, 10000 + 100 * b)), "ns",
                          std::nullopt, now);
      BOOST_REQUIRE(hit);
      BOOST_TEST(hit->length == 64u, "the system prompt serves every one-off");
      auto e =
        eng.extend(hit->state(system), cat(system, run(64, 10000 + 100 * b)));
      BOOST_REQUIRE(e);
      must_put(t, std::move(*e), now);
      BOOST_TEST(t.counters().pinned_bytes <= 2 * one);
      BOOST_TEST(t.bytes() <= t.capacity());
    }
    BOOST_TEST(t.contains("ns", system), to_string(policy));
    BOOST_TEST(t.is_pinned("ns", system, now));
    BOOST_TEST(t.counters().evictions >= 70u, "the flood went through RAM");
  }
}

BOOST_AUTO_TEST_CASE(pins_never_exceed_their_budget) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(8 * one, false, ram_policy::lru, 2 * one);
  BOOST_TEST(
    must_retain(t, eng.prefill("ns", run(8, 1000)), 0, {.pin_ms = 50}).pinned);
  BOOST_TEST(
    must_retain(t, eng.prefill("ns", run(8, 2000)), 0, {.pin_ms = 50}).pinned);
  auto r = must_retain(t, eng.prefill("ns", run(8, 3000)), 0, {.pin_ms = 50});
  BOOST_TEST(r.kept, "the put stands");
  BOOST_TEST(!r.pinned);
  BOOST_TEST(r.pin_refused);
  auto c = t.counters();
  BOOST_TEST(c.pinned_entries == 2u);
  BOOST_TEST(c.pinned_bytes == 2 * one);
  BOOST_TEST(c.pins_granted == 2u);
  BOOST_TEST(c.pins_refused == 1u);
  // No budget: no pin at all.
  ram_tier none(8 * one);
  BOOST_TEST(must_retain(none, eng.prefill("ns", run(8, 1)), 0, {.pin_ms = 9})
               .pin_refused);
}

BOOST_AUTO_TEST_CASE(
  a_hit_renews_a_pin_and_an_expired_pin_is_an_ordinary_entry) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(2 * one, false, ram_policy::lru, one);
  must_retain(t, eng.prefill("ns", run(8, 1000)), 0, {.pin_ms = 100});
  BOOST_TEST(
    t.lookup(run(9, 1000), "ns", std::nullopt, 90).has_value()); // until 190
  BOOST_TEST(t.is_pinned("ns", run(8, 1000), 150));
  must_put(t, eng.prefill("ns", run(8, 2000)), 150);
  auto r = must_put(t, eng.prefill("ns", run(8, 3000)), 160);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 2000)},
             "the pinned entry stays although least recently used");
  BOOST_TEST(!t.is_pinned("ns", run(8, 1000), 190), "not renewed since 90");
  r = must_put(t, eng.prefill("ns", run(8, 4000)), 200);
  BOOST_TEST(keys(r.evicted) == std::vector<token_seq>{run(8, 1000)},
             "expired: evicted as any entry, least recently used first");
  auto c = t.counters();
  BOOST_TEST(c.pins_expired == 1u);
  BOOST_TEST(c.pinned_bytes == 0u);
  // Its budget is free again.
  BOOST_TEST(
    must_retain(t, eng.prefill("ns", run(8, 5000)), 201, {.pin_ms = 10})
      .pinned);
}

BOOST_AUTO_TEST_CASE(a_replacing_put_takes_the_pin_over) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(8);
  ram_tier t(4 * one, false, ram_policy::lru, one);
  must_retain(t, eng.prefill("ns", run(8, 1000)), 0, {.pin_ms = 100});
  auto r = must_put(t, eng.prefill("ns", run(8, 1000)), 10);
  BOOST_TEST(r.replaced);
  BOOST_TEST(r.pinned, "the pin follows the key");
  BOOST_TEST(t.is_pinned("ns", run(8, 1000), 105), "from the replacing put");
  BOOST_TEST(t.counters().pinned_bytes == one, "counted once");
}

BOOST_AUTO_TEST_CASE(bookkeeping_is_counted_and_returns_when_entries_leave) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(64);
  ram_tier t(1000 * one);
  auto empty = t.bookkeeping_bytes();
  must_put(t, eng.prefill("ns", run(64, 1000)), 1);
  auto first = t.bookkeeping_bytes();
  BOOST_TEST(first > empty + 64 * sizeof(token), "its key and its record");
  must_put(t, eng.prefill("ns", run(64, 2000)), 2);
  BOOST_TEST(t.bookkeeping_bytes() > first);
  BOOST_TEST(t.counters().bookkeeping_bytes == t.bookkeeping_bytes());
  BOOST_TEST(t.counters().bookkeeping_budget_bytes == 0u, "unbounded");
  t.clear();
  // The index keeps its handle slots' capacity; everything else went.
  BOOST_TEST(t.bookkeeping_bytes() < first);
}

/// What ten distinct entries of 64 tokens cost (`one`: the bytes of one),
/// from a tier without a bookkeeping budget.
template <class Engine>
uint64_t bookkeeping_of_ten(Engine& eng, uint64_t one) {
  ram_tier twin(1000 * one);
  for (token b = 0; b < 10; ++b)
    must_put(twin, eng.prefill("ns", run(64, 1000 * (b + 1))), b);
  return twin.bookkeeping_bytes();
}

BOOST_AUTO_TEST_CASE(over_the_bookkeeping_budget_entries_are_evicted) {
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(64);
  auto budget = bookkeeping_of_ten(eng, one);
  // The cap alone would hold all forty: the budget decides.
  ram_tier t(1000 * one, false, ram_policy::lru, 0, budget);
  BOOST_TEST(t.bookkeeping_budget() == budget);
  for (token b = 0; b < 40; ++b) {
    must_put(t, eng.prefill("ns", run(64, 1000 * (b + 1))), b);
    BOOST_TEST(t.bookkeeping_bytes() <= budget, "after put " << b);
  }
  auto c = t.counters();
  BOOST_TEST(c.entries >= 8u, "the budget holds about ten: " << c.entries);
  BOOST_TEST(c.entries <= 10u);
  BOOST_TEST(c.bookkeeping_evictions == c.evictions);
  BOOST_TEST(c.bookkeeping_evictions >= 30u);
  BOOST_TEST(c.bookkeeping_budget_bytes == budget);
  BOOST_TEST(t.contains("ns", run(64, 40000)), "the newest stays");
  BOOST_TEST(!t.contains("ns", run(64, 1000)), "the oldest went first");
}

BOOST_AUTO_TEST_CASE(
  with_a_cold_tier_the_bookkeeping_budget_does_not_flush_the_cache) {
  // An evicted entry is leaving until its write settles: its bookkeeping
  // is still there, and must not make every resident entry go too.
  auto eng = engine("tiny-dense");
  auto one = eng.geometry().bytes_at(64);
  auto budget = bookkeeping_of_ten(eng, one);
  ram_tier t(1000 * one, true, ram_policy::lru, 0, budget);
  std::vector<spill_order> out;
  for (token b = 0; b < 40; ++b) {
    auto r = must_put(t, eng.prefill("ns", run(64, 1000 * (b + 1))), b);
    for (auto& s : r.evicted)
      out.push_back(std::move(s));
    auto c = t.counters();
    BOOST_TEST(c.entries - c.leaving_entries >= std::min<uint64_t>(b + 1, 5),
               "resident after put " << b);
  }
  // Every write settles: what stays is within the budget.
  for (auto& s : out) {
    auto key = s.key;
    auto serial = s.serial;
    s.state = {};
    t.write_settled(key, serial, write_result::durable);
  }
  BOOST_TEST(t.counters().leaving_entries == 0u);
  BOOST_TEST(t.bookkeeping_bytes() <= budget);
  BOOST_TEST(t.counters().entries >= 5u);
}
