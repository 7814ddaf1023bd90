// The RAM tier's object cache (declared in tiers/ram_tier.hpp): exact tensor
// objects keyed exactly, in the same LRU and under the same byte cap as the
// prefix entries, with the same durable marks (the owner spills evicted
// objects and snapshots them at a flush).
#include "tiers/ram_tier.hpp"

namespace kvtier::tiers {

put_result ram_tier::put_object(std::string key,
                                std::vector<attachment> tensors, uint64_t now,
                                bool durable) {
  entry holder; // collect_buffers walks entries
  holder.attachments = tensors;
  std::vector<buffer_ref> bufs;
  collect_buffers(holder, bufs);
  if (distinct_bytes(bufs) > capacity_)
    return hand_back({.key = {true, std::move(key), {}},
                      .state = {},
                      .object = std::move(tensors),
                      .needs_spill = !durable,
                      .leaving = false,
                      .serial = 0,
                      .released = {}});
  put_result out;
  auto r = emplace(record{.is_object = true,
                          .durable = durable,
                          .object_key = key,
                          .object = std::move(tensors)},
                   bufs, now);
  auto [it, fresh] = objects_.try_emplace(std::move(key), r);
  if (!fresh) {
    auto old = it->second;
    it->second = r;
    r->leases = std::move(old->leases); // interests follow the key
    drop(old);
    ++counters_.replacements;
    out.replaced = true;
  }
  out.serial = r->serial;
  out.evicted = evict_over_cap(r);
  out.kept = true;
  return out;
}

std::optional<std::vector<attachment>> ram_tier::object(const std::string& key,
                                                        uint64_t now) {
  auto o = objects_.find(key);
  if (o == objects_.end()) {
    ++counters_.object_misses;
    return std::nullopt;
  }
  ++counters_.object_hits;
  touch(o->second, now);
  return o->second->object;
}

std::optional<ram_object> ram_tier::peek_object(const std::string& key) const {
  auto o = objects_.find(key);
  if (o == objects_.end())
    return std::nullopt;
  auto& r = *o->second;
  return ram_object{r.serial, r.durable, r.object};
}

std::vector<std::string> ram_tier::undurable_objects() const {
  std::vector<std::string> out;
  for (auto& r : lru_)
    if (r.is_object && !r.durable)
      out.push_back(r.object_key);
  return out;
}

bool ram_tier::object_not_durable(const std::string& key) {
  auto o = objects_.find(key);
  if (o == objects_.end() || !o->second->durable)
    return false;
  o->second->durable = false;
  ++counters_.backing_lost;
  return true;
}

} // namespace kvtier::tiers
