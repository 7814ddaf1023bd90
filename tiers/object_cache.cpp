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
  ram_flags flags;
  flags.is_object = true;
  flags.durable = durable;
  auto r = emplace(record{}, flags, bufs);
  if (gdsf())
    rank_.insert(r, 0, default_priority); // an object: no key, no count
  auto& x = records_.extras(r);
  x.object_key = key;
  x.object = std::move(tensors);
  x.serial = next_serial();
  x.last_used = now;
  auto [it, fresh] = objects_.try_emplace(std::move(key), r);
  if (!fresh) {
    auto old = it->second;
    it->second = r;
    adopt_leases(r, old); // interests follow the key
    drop(old);
    ++counters_.replacements;
    out.replaced = true;
  }
  out.serial = x.serial;
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
  return records_.find_extras(o->second)->object;
}

std::optional<ram_object> ram_tier::peek_object(const std::string& key) const {
  auto o = objects_.find(key);
  if (o == objects_.end())
    return std::nullopt;
  auto r = o->second;
  return ram_object{serial_of(r), fl(r).durable,
                    records_.find_extras(r)->object};
}

std::vector<std::string> ram_tier::undurable_objects() const {
  std::vector<std::string> out;
  for (auto id = lru_.front(); id != record::none;
       id = lru_.next(links(), id, priority_of(id)))
    if (auto f = fl(id); f.is_object && !f.durable)
      out.push_back(records_.find_extras(id)->object_key);
  return out;
}

bool ram_tier::object_not_durable(const std::string& key) {
  auto o = objects_.find(key);
  if (o == objects_.end() || !fl(o->second).durable)
    return false;
  fl(o->second).durable = false;
  ++counters_.backing_lost;
  return true;
}

} // namespace kvtier::tiers
