#include "tiers/sessions.hpp"

#include <utility>

namespace kvtier::tiers {

std::optional<pinned_entry> sessions::note_put(const std::string& session,
                                               pinned_entry newest) {
  auto [it, inserted] = open_.try_emplace(session, std::move(newest));
  if (inserted) {
    ++opened_;
    return std::nullopt;
  }
  return std::exchange(it->second, std::move(newest));
}

std::optional<pinned_entry> sessions::close(const std::string& session) {
  auto it = open_.find(session);
  if (it == open_.end())
    return std::nullopt;
  auto out = std::move(it->second);
  open_.erase(it);
  ++closed_;
  return out;
}

const pinned_entry* sessions::newest(const std::string& session) const {
  auto it = open_.find(session);
  return it == open_.end() ? nullptr : &it->second;
}

void sessions::clear() {
  open_.clear();
}

session_counters sessions::counters() const {
  return {opened_, closed_, open_.size()};
}

} // namespace kvtier::tiers
