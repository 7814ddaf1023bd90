// The differential harness for the RAM tier (header-only, one test thread):
// a deliberately naive store that scans every entry for every question (the
// way the seed's store did), and a driver that applies the same random
// operation to the tier and to it and compares every answer: served length
// and donor, put outcome (kept, replaced, superseded, evicted keys in order
// with their spill flags, pins), popped items, bytes held and entry count;
// sessions pin their newest entries through a real session table and take
// the pins back as `tiers::sessions` says, on both sides. Every
// served and spilled state is checked byte for byte by the oracle. Used by
// ram_tier_diff_test.cpp (default suite) and ram_tier_long_soak.cpp.
#pragma once

#include "check_helpers.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/geometry.hpp"
#include "tiers/ram_tier.hpp"
#include "tiers/sessions.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace kvtier::testing {

using namespace kvtier::tiers;

struct naive_ram {
  struct item {
    entry e;
    uint64_t serial;
    uint64_t stamp;
    bool durable = false;
    std::multiset<uint64_t> leases{};
    std::multiset<uint64_t> pins{};
  };
  explicit naive_ram(uint64_t c)
    : cap(c) {}

  uint64_t cap;
  std::vector<item> items;
  uint64_t clock = 0;
  uint64_t serials = 0;
  uint64_t pin_ids = 0;

  static uint64_t union_bytes(const std::vector<const entry*>& es) {
    std::map<uint64_t, uint64_t> seen;
    for (auto e : es) {
      std::vector<buffer_ref> bufs;
      collect_buffers(*e, bufs);
      for (auto& b : bufs)
        seen[b->id()] = b->size();
    }
    uint64_t n = 0;
    for (auto& [id, size] : seen)
      n += size;
    return n;
  }

  uint64_t bytes() const {
    std::vector<const entry*> es;
    for (auto& i : items)
      es.push_back(&i.e);
    return union_bytes(es);
  }

  std::vector<item>::iterator find(const std::string& ns, const token_seq& t) {
    return std::find_if(items.begin(), items.end(), [&](const item& i) {
      return i.e.ns == ns && i.e.tokens == t;
    });
  }

  static bool protects(const item& i) {
    return !i.pins.empty();
  }

  item take(std::vector<item>::iterator it) {
    auto out = std::move(*it);
    items.erase(it);
    return out;
  }

  bool unprotect(const pinned_entry& p) {
    auto it = find(p.ns, p.tokens);
    if (it == items.end())
      return false;
    auto pin = it->pins.find(p.pin);
    if (pin == it->pins.end())
      return false;
    it->pins.erase(pin);
    return true;
  }

  put_result put(entry e, bool durable = false, bool pin = false) {
    put_result out;
    if (union_bytes({&e}) > cap) {
      spill_order s;
      s.key = {false, e.ns, e.tokens};
      s.state = std::move(e);
      out.evicted.push_back(std::move(s));
      return out;
    }
    std::multiset<uint64_t> leases, pins; // interests and pins follow the key
    if (auto old = find(e.ns, e.tokens); old != items.end()) {
      auto gone = take(old);
      leases = std::move(gone.leases);
      pins = std::move(gone.pins);
      out.replaced = true;
    }
    out.kept = true;
    out.serial = ++serials;
    if (pin) {
      out.pin = ++pin_ids;
      pins.insert(out.pin);
    }
    if (e.trimmable()) {
      for (size_t k = 0; k < items.size();) {
        auto& a = items[k].e;
        bool ancestor = a.ns == e.ns && a.size() < e.size()
                        && common_prefix(a.tokens, e.tokens) == a.size();
        if (ancestor && e.can_trim_to(a.size())) {
          take(items.begin() + k);
          ++out.superseded;
        } else {
          ++k;
        }
      }
    }
    items.push_back(
      {std::move(e), out.serial, ++clock, durable, leases, std::move(pins)});
    while (bytes() > cap)
      out.evicted.push_back(pop(out.serial));
    return out;
  }

  /// The least recently used item: plain ones first, then protected ones,
  /// then those held by an interest; never the item `skip`.
  std::vector<item>::iterator victim(uint64_t skip) {
    auto lru = [&](auto&& ok) {
      auto best = items.end();
      for (auto it = items.begin(); it != items.end(); ++it)
        if (it->serial != skip && ok(*it)
            && (best == items.end() || it->stamp < best->stamp))
          best = it;
      return best;
    };
    auto v =
      lru([&](const item& i) { return i.leases.empty() && !protects(i); });
    if (v == items.end())
      v = lru([](const item& i) { return i.leases.empty(); });
    if (v == items.end())
      v = lru([](const item&) { return true; });
    return v;
  }

  spill_order pop(uint64_t skip = 0) {
    auto i = take(victim(skip));
    auto key = ram_key{false, i.e.ns, i.e.tokens};
    spill_order s;
    s.key = std::move(key);
    s.state = std::move(i.e);
    s.needs_spill = !i.durable;
    return s;
  }

  /// Drops durable, plain items, least recent first, until `want` bytes
  /// were freed, then plain items that are not durable (the boundary's
  /// optional state): {released, their bytes, dropped, their bytes}.
  std::tuple<uint64_t, uint64_t, uint64_t, uint64_t> reclaim(uint64_t want) {
    uint64_t freed = 0;
    auto pass = [&](bool durable, uint64_t& n, uint64_t& bytes_out) {
      std::vector<item*> by_stamp;
      for (auto& i : items)
        by_stamp.push_back(&i);
      std::sort(by_stamp.begin(), by_stamp.end(),
                [](auto a, auto b) { return a->stamp < b->stamp; });
      std::vector<uint64_t> order; // serials by stamp
      for (auto i : by_stamp)
        if (i->durable == durable && i->leases.empty() && !protects(*i))
          order.push_back(i->serial);
      for (auto serial : order) {
        if (freed >= want)
          break;
        auto before = bytes();
        take(std::find_if(items.begin(), items.end(),
                          [&](const item& i) { return i.serial == serial; }));
        freed += before - bytes();
        bytes_out += before - bytes();
        ++n;
      }
    };
    uint64_t released = 0, released_bytes = 0, dropped = 0, dropped_bytes = 0;
    pass(true, released, released_bytes);
    pass(false, dropped, dropped_bytes);
    return {released, released_bytes, dropped, dropped_bytes};
  }

  /// (usable length, donor serial, donor length), the donor touched.
  std::optional<std::tuple<uint64_t, uint64_t, uint64_t>>
  lookup(const token_seq& prompt, const std::string& ns, bool touch,
         uint64_t better_than = 0) {
    item* best = nullptr;
    uint64_t best_p = 0;
    for (auto& i : items) {
      if (i.e.ns != ns)
        continue;
      auto p = usable_prefix(i.e, prompt);
      if (!p)
        continue;
      bool exact = *p == i.e.size();
      bool best_exact = best && best_p == best->e.size();
      if (!best || *p > best_p || (*p == best_p && exact && !best_exact)
          || (*p == best_p && exact == best_exact && i.stamp > best->stamp)) {
        best = &i;
        best_p = *p;
      }
    }
    if (!best || best_p <= better_than)
      return std::nullopt;
    if (touch)
      best->stamp = ++clock;
    return std::tuple{best_p, best->serial, uint64_t{best->e.size()}};
  }
};

struct run_state {
  runtime::oracle_engine eng;
  ram_tier tier;
  naive_ram ref;
  std::mt19937_64 rng;
  sessions table{};
  uint64_t alphabet = 3;
  uint64_t now = 0;
  size_t lookups = 0, hits = 0, evictions = 0, supersessions = 0;
  /// What the change observer says is held, and the put observer's last
  /// report: keys the tier rebuilds from its index (it keeps no copy).
  std::set<std::pair<std::string, token_seq>> fed{};
  std::optional<std::pair<std::string, token_seq>> observed{};

  /// Hooks both observers up (once `this` sits where it stays).
  void observe() {
    tier.set_change_observer([this](const ram_change& c) {
      if (c.kind == ram_change_kind::stored)
        fed.emplace(c.ns, c.tokens);
      else
        BOOST_REQUIRE(fed.erase({c.ns, c.tokens}) == 1);
    });
    tier.set_put_observer([this](const token_seq& t, const std::string& ns) {
      observed.emplace(ns, t);
    });
  }

  /// Every key the tier hands out (change notices, `idle`, `undurable`,
  /// `item`) is exactly the model's, whatever splits and merges the tree
  /// went through.
  void compare_keys() {
    std::set<std::pair<std::string, token_seq>> held;
    std::set<std::pair<std::string, token_seq>> unleased, undurable;
    for (auto& i : ref.items) {
      held.emplace(i.e.ns, i.e.tokens);
      if (i.leases.empty())
        unleased.emplace(i.e.ns, i.e.tokens);
      if (!i.durable)
        undurable.emplace(i.e.ns, i.e.tokens);
      auto got = tier.item({false, i.e.ns, i.e.tokens});
      BOOST_REQUIRE(got);
      BOOST_REQUIRE(got->state.tokens == i.e.tokens);
      BOOST_REQUIRE(got->state.ns == i.e.ns);
    }
    BOOST_REQUIRE(fed == held);
    auto as_set = [](const std::vector<ram_key>& keys) {
      std::set<std::pair<std::string, token_seq>> out;
      for (auto& k : keys)
        out.emplace(k.name, k.tokens);
      BOOST_REQUIRE(out.size() == keys.size());
      return out;
    };
    BOOST_REQUIRE(as_set(tier.idle(now, 0)) == unleased);
    BOOST_REQUIRE(as_set(tier.undurable()) == undurable);
  }

  uint64_t pick(uint64_t n) {
    return rng() % n;
  }

  token_seq random_tokens(size_t max_len) {
    token_seq t(1 + pick(max_len));
    for (auto& x : t)
      x = static_cast<token>(pick(alphabet));
    return t;
  }

  std::string random_ns() {
    return pick(6) == 0 ? "b" : "a";
  }

  /// Takes a pin back on both sides (the sessions actor's unprotect).
  void compare_unprotect(const std::optional<pinned_entry>& p) {
    if (p)
      BOOST_REQUIRE(tier.unprotect(p->ns, p->tokens, p->pin)
                    == ref.unprotect(*p));
  }

  /// A put; one naming a session (not a restore) pins its entry as that
  /// session's newest and unpins the previous newest, as the service does.
  void compare_put(entry e, bool durable = false) {
    auto session = e.session;
    auto ns = e.ns;
    auto tokens = e.tokens;
    bool pin = session && !durable;
    auto copy = e;
    observed.reset();
    auto got = tier.put(std::move(e), now, durable,
                        pin ? protection::pin : protection::none);
    BOOST_REQUIRE(got);
    if (got->kept)
      BOOST_REQUIRE(observed == std::pair(ns, tokens));
    auto want = ref.put(std::move(copy), durable, pin);
    BOOST_REQUIRE(got->kept == want.kept);
    BOOST_REQUIRE(got->serial == want.serial);
    BOOST_REQUIRE(got->pin == want.pin);
    BOOST_REQUIRE(got->replaced == want.replaced);
    BOOST_REQUIRE(got->superseded == want.superseded);
    BOOST_REQUIRE(got->evicted.size() == want.evicted.size());
    for (size_t i = 0; i < got->evicted.size(); ++i) {
      BOOST_REQUIRE(got->evicted[i].key == want.evicted[i].key);
      BOOST_REQUIRE(got->evicted[i].needs_spill == want.evicted[i].needs_spill);
      BOOST_REQUIRE(ok(eng.verify(got->evicted[i].state)));
      BOOST_REQUIRE(got->evicted[i].state.tokens == want.evicted[i].key.tokens);
    }
    evictions += got->evicted.size();
    supersessions += got->superseded;
    if (got->pin != 0)
      compare_unprotect(table.note_put(*session, {ns, tokens, got->pin}));
  }

  void compare_lookup(const token_seq& prompt, const std::string& ns,
                      uint64_t better_than = 0) {
    auto got = tier.lookup(prompt, ns, std::nullopt, now, better_than);
    auto want = ref.lookup(prompt, ns, true, better_than);
    ++lookups;
    BOOST_REQUIRE(got.has_value() == want.has_value());
    if (!got)
      return;
    ++hits;
    auto [p, serial, len] = *want;
    BOOST_REQUIRE(got->state(prompt).size() == p);
    BOOST_REQUIRE(got->donor_serial == serial);
    BOOST_REQUIRE(got->donor_length == len);
    BOOST_REQUIRE(ok(eng.verify(got->state(prompt))));
    if (pick(2) == 0) { // extend what was lent and publish it
      auto longer = prompt;
      auto more = random_tokens(6);
      longer.insert(longer.end(), more.begin(), more.end());
      auto ext = eng.extend(got->state(prompt), longer);
      BOOST_REQUIRE(ext);
      maybe_decorate(*ext);
      compare_put(std::move(*ext));
    }
  }

  void maybe_decorate(entry& e) {
    if (pick(4) == 0)
      e.session = "s" + std::to_string(pick(3));
    if (pick(6) == 0) { // converted at some offset
      auto at = pick(e.size() + 1);
      for (auto& l : e.layers)
        if (l.kind != layer_kind::object)
          l.min_offset = at;
    }
  }

  void step() {
    ++now;
    auto op = pick(24);
    auto ns = random_ns();
    if (op < 6) {
      auto e = eng.prefill(ns, random_tokens(10));
      maybe_decorate(e);
      compare_put(std::move(e), pick(5) == 0); // sometimes a restore
    } else if (op < 13) {
      compare_lookup(random_tokens(14), ns);
    } else if (op < 15) {
      auto prompt = random_tokens(14);
      auto want = ref.lookup(prompt, ns, false);
      BOOST_REQUIRE(tier.peek_prefix_len(prompt, ns)
                    == (want ? std::get<0>(*want) : 0));
    } else if (op < 17 && !ref.items.empty()) {
      auto& i = ref.items[pick(ref.items.size())];
      bool d = pick(3) != 0;
      BOOST_REQUIRE(tier.mark_durable({false, i.e.ns, i.e.tokens}, d));
      i.durable = d;
    } else if (op == 17) {
      compare_unprotect(table.close("s" + std::to_string(pick(3))));
    } else if (op == 18 && !ref.items.empty()) {
      auto got = tier.pop_lru();
      auto want = ref.pop();
      BOOST_REQUIRE(got);
      BOOST_REQUIRE(got->key == want.key);
      BOOST_REQUIRE(got->needs_spill == want.needs_spill);
      BOOST_REQUIRE(got->state.tokens == want.key.tokens);
      BOOST_REQUIRE(ok(eng.verify(got->state)));
    } else if (op == 19) {
      auto t = random_tokens(10);
      auto got = tier.remove({false, ns, t});
      auto it = ref.find(ns, t);
      BOOST_REQUIRE(got.has_value() == (it != ref.items.end()));
      if (got) {
        BOOST_REQUIRE(got->key.tokens == t);
        BOOST_REQUIRE(got->state.tokens == t);
        BOOST_REQUIRE(ok(eng.verify(got->state)));
        ref.take(it);
      }
    } else if (op == 20 && !ref.items.empty()) {
      auto& i = ref.items[pick(ref.items.size())];
      auto lease = 1 + pick(3);
      BOOST_REQUIRE(tier.add_interest({false, i.e.ns, i.e.tokens}, lease));
      i.leases.insert(lease);
    } else if (op == 21) {
      auto lease = 1 + pick(3);
      tier.drop_interest(lease);
      for (auto& i : ref.items)
        i.leases.erase(lease);
    } else if (op == 22) {
      auto want = pick(4 * tier.capacity() / 3);
      auto got = tier.reclaim(want, reclaim_order::lru);
      BOOST_REQUIRE(std::tuple(got.released, got.released_bytes, got.dropped,
                               got.dropped_bytes)
                    == ref.reclaim(want));
    } else if (op == 23) {
      compare_lookup(random_tokens(14), ns, pick(8));
    }
    BOOST_REQUIRE(tier.bytes() == ref.bytes());
    BOOST_REQUIRE(tier.counters().entries == ref.items.size());
    compare_keys();
    BOOST_REQUIRE(tier.counters().protected_entries
                  == static_cast<uint64_t>(std::count_if(
                    ref.items.begin(), ref.items.end(), naive_ram::protects)));
  }
};

/// One geometry preset of each family: dense, sliding-window, hybrid.
inline const char* const families[] = {"tiny-dense", "tiny-window",
                                       "tiny-hybrid"};

/// Totals of what a batch of runs exercised.
struct diff_totals {
  size_t steps = 0, lookups = 0, hits = 0, evictions = 0, supersessions = 0;
};

/// Runs `seeds` random sequences of `steps` steps over `family`, keys of up
/// to `max_len` tokens over `alphabet` tokens.
inline diff_totals run_differential(const std::string& family, uint64_t seeds,
                                    int steps, uint64_t alphabet) {
  auto geo = *tiers::model_geometry::preset(family);
  diff_totals out;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    // A cap of about four 8-token entries: evictions are frequent.
    auto cap = 4 * geo.bytes_at(8);
    run_state s{runtime::oracle_engine(geo), tiers::ram_tier(cap),
                naive_ram(cap), std::mt19937_64(seed)};
    s.alphabet = alphabet;
    s.observe();
    for (int i = 0; i < steps; ++i, ++out.steps) {
      BOOST_TEST_CONTEXT(family << " seed " << seed << " step " << i) {
        s.step();
      }
    }
    out.lookups += s.lookups;
    out.hits += s.hits;
    out.evictions += s.evictions;
    out.supersessions += s.supersessions;
  }
  BOOST_TEST_MESSAGE(family << ": " << out.steps << " steps, " << out.lookups
                            << " lookups (" << out.hits << " hits), "
                            << out.evictions << " evictions, "
                            << out.supersessions << " supersessions");
  return out;
}

} // namespace kvtier::testing
