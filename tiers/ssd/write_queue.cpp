#include "tiers/ssd/write_queue.hpp"

#include <algorithm>

namespace kvtier::tiers::ssd {

const char* to_string(write_reason r) {
  switch (r) {
    case write_reason::spill: return "spill";
    case write_reason::demotion: return "demotion";
    case write_reason::snapshot: return "snapshot";
    case write_reason::checkpoint: return "checkpoint";
  }
  return "unknown";
}

write_item write_queue::remove(iterator i) {
  bytes_ -= i->bytes;
  --reasons_[static_cast<size_t>(i->reason)];
  --kinds_[static_cast<size_t>(i->kind)];
  if (i->in_flight)
    --in_flight_;
  else if (i->failed)
    failed_.erase(i->id);
  else
    ready_.erase(i->id);
  by_id_.erase(i->id);
  auto k = by_key_.find(i->key);
  std::erase(k->second, i);
  if (k->second.empty())
    by_key_.erase(k);
  auto out = std::move(*i);
  items_.erase(i);
  return out;
}

bool write_queue::key_in_flight(const std::string& key) const {
  auto k = by_key_.find(key);
  return k != by_key_.end()
         && std::any_of(k->second.begin(), k->second.end(),
                        [](const iterator& i) { return i->in_flight; });
}

push_result write_queue::push(std::string key, entry e, write_reason reason,
                              const storage_key& owner) {
  push_result out;
  if (auto k = by_key_.find(key); k != by_key_.end()) {
    auto same = k->second; // remove edits the list
    for (auto i : same)
      if (!i->in_flight) {
        out.superseded_items.push_back(remove(i));
        ++out.superseded;
      }
  }
  auto bytes = e.byte_length();
  out.id = next_id_++;
  items_.push_back(write_item{out.id, std::move(key), std::move(e), owner.kind,
                              owner.request, owner.attempt, bytes, reason});
  auto newest = std::prev(items_.end());
  bytes_ += bytes;
  ++reasons_[static_cast<size_t>(reason)];
  ++kinds_[static_cast<size_t>(owner.kind)];
  by_id_.emplace(out.id, newest);
  by_key_[newest->key].push_back(newest);
  ready_.emplace(out.id, newest);
  // Items in flight are passed over: at most the writes running, so making
  // room costs O(1) per item dropped.
  for (auto i = items_.begin(); bytes_ > byte_cap_ && i != newest;) {
    auto next = std::next(i);
    if (!i->in_flight) {
      out.dropped_items.push_back(remove(i));
      ++out.dropped;
    }
    i = next;
  }
  return out;
}

write_item* write_queue::start_next(const std::multiset<std::string>& blocked) {
  // Passed over: items of keys in flight or blocked, a few per such key.
  for (auto r = ready_.begin(); r != ready_.end(); ++r) {
    auto i = r->second;
    if (key_in_flight(i->key) || blocked.count(i->key) > 0)
      continue;
    ready_.erase(r);
    i->in_flight = true;
    ++in_flight_;
    ++i->attempts;
    return &*i;
  }
  return nullptr;
}

write_item* write_queue::find(uint64_t id) {
  auto i = by_id_.find(id);
  return i == by_id_.end() ? nullptr : &*i->second;
}

bool write_queue::holds(const std::string& key) const noexcept {
  return by_key_.count(key) > 0;
}

std::vector<const write_item*>
write_queue::items_of(const std::string& key) const {
  std::vector<const write_item*> out;
  if (auto k = by_key_.find(key); k != by_key_.end())
    for (auto i : k->second)
      out.push_back(&*i);
  return out;
}

void write_queue::done(uint64_t id) {
  if (auto i = by_id_.find(id); i != by_id_.end())
    remove(i->second); // its buffers go here
}

std::vector<write_item> write_queue::cancel(const std::string& key) {
  std::vector<write_item> out;
  auto k = by_key_.find(key);
  if (k == by_key_.end())
    return out;
  auto same = k->second; // remove edits the list
  for (auto i : same)
    if (!i->in_flight) {
      out.push_back(remove(i));
    }
  return out;
}

std::optional<write_item> write_queue::take(uint64_t id) {
  auto i = by_id_.find(id);
  if (i == by_id_.end())
    return std::nullopt;
  return remove(i->second);
}

void write_queue::fail(uint64_t id) {
  auto i = by_id_.find(id);
  if (i == by_id_.end() || !i->second->in_flight)
    return;
  i->second->in_flight = false;
  --in_flight_;
  i->second->failed = true;
  failed_.insert(id);
}

bool write_queue::retry(uint64_t id) {
  auto i = by_id_.find(id);
  if (i == by_id_.end() || !i->second->failed)
    return false;
  i->second->failed = false;
  failed_.erase(id);
  ready_.emplace(id, i->second);
  return true;
}

uint64_t write_queue::retry_failed() {
  uint64_t n = 0;
  for (auto id : failed_ids())
    n += retry(id) ? 1 : 0;
  return n;
}

std::vector<uint64_t> write_queue::failed_ids() const {
  return {failed_.begin(), failed_.end()};
}

} // namespace kvtier::tiers::ssd
