// The RAM tier's retention: what keeps an item in RAM (leases, session and
// engine pins, their budget and expiry) and what goes first (the order
// within and across priorities under `ram-tier.policy`, the victim a put's
// eviction takes, supersession of shorter ancestors). Part of `ram_tier`
// (tiers/ram_tier.hpp); the rest of the class is in ram_tier.cpp and
// ram_tier_writes.cpp.
#include "tiers/ram_tier.hpp"

#include "messages/assert.hpp"

#include <algorithm>

namespace kvtier::tiers {

bool ram_tier::protects(record_id r) const {
  return !pins(r).empty();
}

void ram_tier::pin(record_id r, uint64_t id) {
  if (pins(r).empty())
    ++protected_;
  records_.extras(r).pins.push_back(id);
}

bool ram_tier::any(record_id) const {
  return true;
}

bool ram_tier::unleased(record_id r) const {
  return leases(r).empty();
}

bool ram_tier::evictable(record_id r) const {
  return !fl(r).has_extras
         || (leases(r).empty() && !protects(r) && !engine_pinned(r));
}

ram_tier::record_id ram_tier::lru_where(bool (ram_tier::*ok)(record_id) const,
                                        record_id skip) {
  // The resident lists' order under lru, the ranking's under gdsf.
  auto fits = [&](record_id i) { return i != skip && (this->*ok)(i); };
  auto r = gdsf() ? rank_.first(fits) : lru_.first(links(), fits);
  return r == entry_ranking::none ? record::none : r;
}

namespace {

/// Whether the engine pin in `x` (if any) still holds at `now`.
bool pin_holds(const ram_record_extras* x, uint64_t now) {
  return x && x->pin_ms != 0 && x->pin_until > now;
}

} // namespace

bool ram_tier::engine_pinned(record_id r) const {
  return fl(r).has_extras && pin_holds(records_.find_extras(r), now_);
}

bool ram_tier::pin_for(record_id r, uint64_t pin_ms, uint64_t now) {
  if (pin_ms == 0)
    return false;
  auto bytes = distinct_bytes(buffers_of(r));
  if (pinned_bytes_ + bytes > pin_budget_) {
    ++counters_.pins_refused;
    return false;
  }
  auto& x = records_.extras(r);
  x.pin_ms = pin_ms;
  x.pin_until = now + pin_ms;
  x.pinned_bytes = bytes;
  pinned_bytes_ += bytes;
  pinned_.push_back(r);
  ++counters_.pins_granted;
  return true;
}

void ram_tier::unpin(record_id r) {
  if (!fl(r).has_extras)
    return;
  auto x = records_.find_extras(r);
  if (!x || x->pin_ms == 0)
    return;
  pinned_bytes_ -= x->pinned_bytes;
  x->pin_ms = x->pin_until = x->pinned_bytes = 0;
  std::erase(pinned_, r);
  records_.shrink(r);
}

void ram_tier::expire_pins(uint64_t now) {
  now_ = std::max(now_, now);
  for (size_t i = 0; i < pinned_.size();) {
    auto r = pinned_[i];
    if (records_.find_extras(r)->pin_until <= now_) {
      unpin(r); // erases pinned_[i]
      ++counters_.pins_expired;
    } else {
      ++i;
    }
  }
}

void ram_tier::rank(record_id r, uint8_t priority, std::span<const token> key,
                    std::string_view ns, uint32_t inherited) {
  if (gdsf())
    rank_.insert(r, key.size(), std::min(priority, max_priority),
                 ranking_key(ns, key), inherited);
}

ram_tier::record_id ram_tier::victim(record_id skip) {
  // Plain items first, then protected ones, then those an interest holds:
  // the cap wins in the end. `skip` (a put's newcomer) is never chosen.
  auto r = lru_where(&ram_tier::evictable, skip);
  if (r == record::none)
    r = lru_where(&ram_tier::unleased, skip);
  if (r == record::none)
    r = lru_where(&ram_tier::any, skip);
  return r;
}

std::vector<spill_order> ram_tier::evict_over_cap(record_id keep) {
  // `keep` alone fits the cap (puts refuse larger items), so evicting
  // everything else always gets under it.
  // Over the bookkeeping budget alone, `keep` may be all that is left: it
  // stays (a put's own item is never evicted for it).
  std::vector<spill_order> out;
  for (;;) {
    bool over_cap = resident_.bytes() > capacity_;
    if (!over_cap && !over_bookkeeping())
      break;
    auto v = victim(keep);
    KVTIER_ASSERT(v != record::none || !over_cap);
    if (v == record::none)
      break;
    rank_.evicted(v);
    out.push_back(leaves(v) ? leave(v) : take(v));
    ++counters_.evictions;
    if (!over_cap)
      ++counters_.bookkeeping_evictions;
  }
  return out;
}

size_t ram_tier::supersede(record_id id, uint32_t& counts) {
  auto ref = rec(id).ref;
  auto floor = index_.floor(ref);
  if (floor >= length_of(id))
    return 0; // untrimmable: shorter ancestors must survive
  size_t n = 0;
  for (auto a : index_.ancestors(ref)) {
    if (index_.length(a) < floor)
      break; // ancestors come nearest first: the rest are shorter still
    auto old = index_.handle(a).record;
    if (engine_pinned(old))
      continue; // an engine's pin keeps it in place
    counts = std::max(counts, rank_.count(old));
    fl(old).gone_as = static_cast<uint8_t>(ram_change_kind::superseded);
    ++n;
    if (cold_ && fl(old).writing) {
      // Its write still holds its bytes: it stays findable (leaving)
      // until that write settles, then leaves without a second one.
      if (!fl(old).leaving)
        leave(old);
      continue;
    }
    drop(old);
  }
  return n;
}

std::optional<uint64_t> ram_tier::protect(std::string_view ns,
                                          std::span<const token> tokens) {
  auto ref = index_.find(ns, tokens);
  if (!ref)
    return std::nullopt;
  auto id = ++pins_;
  pin(index_.handle(ref).record, id);
  return id;
}

bool ram_tier::unprotect(std::string_view ns, std::span<const token> tokens,
                         uint64_t pin) {
  auto ref = index_.find(ns, tokens);
  if (!ref)
    return false;
  auto id = index_.handle(ref).record;
  if (pins(id).empty())
    return false;
  auto& held = records_.extras(id).pins;
  auto it = std::find(held.begin(), held.end(), pin);
  if (it == held.end())
    return false;
  held.erase(it);
  if (held.empty())
    --protected_;
  records_.shrink(id);
  return true;
}

bool ram_tier::is_protected(std::string_view ns,
                            std::span<const token> tokens) const {
  auto ref = index_.find(ns, tokens);
  return ref && protects(index_.handle(ref).record);
}

bool ram_tier::is_pinned(std::string_view ns, std::span<const token> tokens,
                         uint64_t now) const {
  auto ref = index_.find(ns, tokens);
  if (!ref)
    return false;
  return pin_holds(records_.find_extras(index_.handle(ref).record), now);
}

} // namespace kvtier::tiers
