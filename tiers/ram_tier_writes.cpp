// The RAM tier's write-behind side: the items the actor writes to the tier
// below (idle, not yet durable), a write's start and settlement, removal,
// reclaiming bytes under pressure, and the interests (leases) that keep an
// item resident while a request or prefetch needs it. Part of `ram_tier`
// (tiers/ram_tier.hpp); the rest of the class is in ram_tier.cpp and
// ram_tier_retention.cpp.
#include "tiers/ram_tier.hpp"

#include "messages/assert.hpp"

#include <algorithm>

namespace kvtier::tiers {

std::vector<ram_key> ram_tier::idle(uint64_t now, uint64_t idle_ms) const {
  std::vector<ram_key> out;
  for (auto id = lru_.front(); id != record::none; id = next_resident(id)) {
    auto used = last_used(id);
    if (leases(id).empty() && used <= now && now - used >= idle_ms)
      out.push_back(key_of(id));
  }
  return out;
}

std::optional<ram_item> ram_tier::item(const ram_key& key) const {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  auto f = fl(id);
  return ram_item{serial_of(id), f.durable, keyed(id), f.leaving, f.writing};
}

std::vector<ram_key> ram_tier::undurable() const {
  std::vector<ram_key> out;
  for (auto id = lru_.front(); id != record::none; id = next_resident(id))
    if (auto f = fl(id); !f.is_object && !f.durable && !f.writing)
      out.push_back(key_of(id));
  return out;
}

std::optional<ram_item> ram_tier::begin_write(const ram_key& key,
                                              uint64_t serial) {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  auto& f = fl(id);
  if (f.is_object || f.durable || f.writing
      || (serial != 0 && serial_of(id) != serial))
    return std::nullopt;
  f.writing = true;
  return ram_item{serial_of(id), f.durable, keyed(id), f.leaving, f.writing};
}

std::optional<spill_order> ram_tier::write_settled(const ram_key& key,
                                                   uint64_t serial,
                                                   write_result result,
                                                   uint64_t file_tokens) {
  auto id = find(key);
  if (id == record::none || serial_of(id) != serial
      || result == write_result::failed)
    return std::nullopt;
  auto& f = fl(id);
  f.writing = false;
  bool durable = result == write_result::durable;
  if (f.leaving) {
    if (!durable)
      ++counters_.leaving_dropped;
    return take(id); // durable elsewhere, or dropped by the SSD's policy
  }
  if (durable) {
    f.durable = true;
    set_file_tokens(id, file_tokens);
  }
  return std::nullopt;
}

std::optional<spill_order> ram_tier::remove(const ram_key& key) {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  fl(id).gone_as = static_cast<uint8_t>(ram_change_kind::demoted);
  return take(id);
}

std::optional<spill_order> ram_tier::pop_lru() {
  if (lru_.empty())
    return std::nullopt;
  ++counters_.evictions;
  auto v = victim(record::none);
  rank_.evicted(v);
  return leaves(v) ? leave(v) : take(v);
}

reclaim_counts& ram_tier::reclaim_pass(reclaim_counts& out, uint64_t want,
                                       reclaim_order order, bool durable_pass) {
  auto counted = [&] {
    return order == reclaim_order::freeing
             ? out.freed_bytes
             : out.released_bytes + out.dropped_bytes;
  };
  for (auto r = lru_.front(); r != record::none && counted() < want;) {
    auto next = next_resident(r);
    // A write out holds the bytes anyway (and will make the item durable).
    // Durable objects go with the durable pass; optional state is entries.
    auto f = fl(r);
    bool candidate = (durable_pass || !f.is_object) && f.durable == durable_pass
                     && evictable(r) && !f.writing;
    if (candidate && (order == reclaim_order::lru || would_free(r) > 0)) {
      std::vector<released_buffer> rel;
      auto ledger = drop(r, &rel);
      auto died = died_bytes(rel);
      auto n = order == reclaim_order::freeing ? died : ledger;
      out.freed_bytes += died;
      if (durable_pass) {
        ++out.released;
        out.released_bytes += n;
      } else {
        ++out.dropped;
        out.dropped_bytes += n;
        ++counters_.boundary_dropped;
      }
    }
    r = next;
  }
  return out;
}

reclaim_counts ram_tier::reclaim(uint64_t want_bytes, reclaim_order order) {
  reclaim_counts out;
  reclaim_pass(out, want_bytes, order, true); // copies durable on SSD
  if (want_bytes != all_durable)
    reclaim_pass(out, want_bytes, order, false); // optional state, dropped
  return out;
}

bool ram_tier::add_interest(const ram_key& key, uint64_t lease) {
  auto r = find(key);
  if (r == record::none)
    return false;
  records_.extras(r).leases.push_back(lease);
  leases_[lease].push_back(key);
  return true;
}

void ram_tier::drop_interest(uint64_t lease) {
  auto l = leases_.find(lease);
  if (l == leases_.end())
    return;
  for (auto& key : l->second) {
    auto id = find(key); // maybe gone, or another item under the same key
    if (id == record::none || leases(id).empty())
      continue;
    auto& held = records_.extras(id).leases;
    if (auto it = std::find(held.begin(), held.end(), lease); it != held.end())
      held.erase(it);
    records_.shrink(id);
  }
  leases_.erase(l);
}

} // namespace kvtier::tiers
