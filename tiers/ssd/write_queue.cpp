#include "tiers/ssd/write_queue.hpp"

#include <algorithm>
#include <unordered_set>

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

void write_queue::erase(std::list<write_item>::iterator i) {
  bytes_ -= i->bytes;
  items_.erase(i);
}

push_result write_queue::push(std::string key, entry e, write_reason reason,
                              const storage_key& owner) {
  push_result out;
  for (auto i = items_.begin(); i != items_.end();) {
    auto next = std::next(i);
    if (i->key == key && !i->in_flight) {
      out.superseded_items.push_back(std::move(*i));
      erase(i);
      ++out.superseded;
    }
    i = next;
  }
  auto bytes = e.byte_length();
  out.id = next_id_++;
  items_.push_back(write_item{out.id, std::move(key), std::move(e), owner.kind,
                              owner.request, owner.attempt, bytes, reason});
  bytes_ += bytes;
  auto newest = std::prev(items_.end());
  for (auto i = items_.begin(); bytes_ > byte_cap_ && i != newest;) {
    auto next = std::next(i);
    if (!i->in_flight) {
      out.dropped_items.push_back(std::move(*i));
      erase(i);
      ++out.dropped;
    }
    i = next;
  }
  return out;
}

write_item* write_queue::start_next(const std::multiset<std::string>& blocked) {
  std::unordered_set<std::string> busy;
  for (auto& i : items_)
    if (i.in_flight)
      busy.insert(i.key);
  for (auto& i : items_) {
    if (i.in_flight || i.failed || busy.count(i.key) > 0
        || blocked.count(i.key) > 0)
      continue;
    i.in_flight = true;
    ++i.attempts;
    return &i;
  }
  return nullptr;
}

write_item* write_queue::find(uint64_t id) {
  auto i = std::find_if(items_.begin(), items_.end(),
                        [id](const write_item& w) { return w.id == id; });
  return i == items_.end() ? nullptr : &*i;
}

bool write_queue::holds(const std::string& key) const noexcept {
  return std::any_of(items_.begin(), items_.end(),
                     [&](const write_item& w) { return w.key == key; });
}

void write_queue::done(uint64_t id) {
  auto i = std::find_if(items_.begin(), items_.end(),
                        [id](const write_item& w) { return w.id == id; });
  if (i != items_.end())
    erase(i);
}

std::vector<write_item> write_queue::cancel(const std::string& key) {
  std::vector<write_item> out;
  for (auto i = items_.begin(); i != items_.end();) {
    auto next = std::next(i);
    if (i->key == key && !i->in_flight) {
      out.push_back(std::move(*i));
      erase(i);
    }
    i = next;
  }
  return out;
}

std::optional<write_item> write_queue::take(uint64_t id) {
  auto i = std::find_if(items_.begin(), items_.end(),
                        [id](const write_item& w) { return w.id == id; });
  if (i == items_.end())
    return std::nullopt;
  auto out = std::move(*i);
  erase(i);
  return out;
}

void write_queue::fail(uint64_t id) {
  if (auto* w = find(id)) {
    w->in_flight = false;
    w->failed = true;
  }
}

uint64_t write_queue::retry_failed() {
  uint64_t n = 0;
  for (auto& i : items_)
    if (i.failed) {
      i.failed = false;
      ++n;
    }
  return n;
}

size_t write_queue::in_flight() const noexcept {
  return static_cast<size_t>(std::count_if(
    items_.begin(), items_.end(), [](auto& i) { return i.in_flight; }));
}

size_t write_queue::failed() const noexcept {
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(),
                                           [](auto& i) { return i.failed; }));
}

bool write_queue::active() const noexcept {
  return std::any_of(items_.begin(), items_.end(),
                     [](auto& i) { return !i.failed; });
}

} // namespace kvtier::tiers::ssd
