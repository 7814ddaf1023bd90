#include "tiers/ssd/write_admission.hpp"

#include "messages/error.hpp"

#include <xxhash.h>

#include <algorithm>

namespace kvtier::tiers::ssd {

caf::expected<admission_rule> parse_admission_rule(std::string_view word) {
  if (word == "all")
    return admission_rule::all;
  if (word == "reused")
    return admission_rule::reused;
  return make_error(ec::invalid_config, "admission rule '" + std::string{word}
                                          + "': expected all or reused");
}

const char* to_string(admission_rule r) {
  return r == admission_rule::reused ? "reused" : "all";
}

spill_admission::spill_admission(admission_rule rule, uint64_t memory_keys)
  : rule_(rule)
  , cap_(std::max<uint64_t>(memory_keys, 1)) {}

uint64_t spill_admission::memory_for(uint64_t cap_bytes) {
  return std::clamp<uint64_t>(cap_bytes >> 16, 1024, uint64_t{4} << 20);
}

uint64_t spill_admission::key_of(std::string_view ns,
                                 std::span<const token> tokens) {
  auto n = std::min<uint64_t>(tokens.size(), lead_tokens);
  auto seed = XXH3_64bits(ns.data(), ns.size());
  return XXH3_64bits_withSeed(tokens.data(), n * sizeof(token), seed);
}

bool spill_admission::admit(std::string_view ns,
                            std::span<const token> tokens) {
  if (rule_ == admission_rule::all)
    return true;
  auto k = key_of(ns, tokens);
  auto at = where_.find(k);
  if (at != where_.end()) {
    order_.splice(order_.end(), order_, at->second); // most recently asked
    return true;
  }
  order_.push_back(k);
  where_.emplace(k, std::prev(order_.end()));
  if (where_.size() > cap_) {
    where_.erase(order_.front());
    order_.pop_front();
  }
  return false;
}

namespace {

constexpr uint64_t ring_minutes = write_budget::day_ms / write_budget::minute_ms
                                  + 1; // the oldest minute, partly in

} // namespace

write_budget::write_budget(uint64_t bytes_per_day)
  : limit_(bytes_per_day)
  , minutes_(bytes_per_day > 0 ? ring_minutes : 0, 0) {}

void write_budget::advance(uint64_t now_ms) {
  auto m = now_ms / minute_ms;
  if (m <= newest_)
    return; // the same minute, or a clock that stepped back
  // Minutes newest_+1 .. m start empty; at most the whole ring is cleared.
  auto steps = std::min<uint64_t>(m - newest_, ring_minutes);
  for (uint64_t i = 1; i <= steps; ++i) {
    auto& slot = minutes_[(m - steps + i) % ring_minutes];
    sum_ -= slot;
    slot = 0;
  }
  newest_ = m;
}

bool write_budget::charge(uint64_t bytes, uint64_t now_ms) {
  if (limit_ == 0)
    return true;
  advance(now_ms);
  if (bytes > limit_ || sum_ > limit_ - bytes)
    return false;
  minutes_[newest_ % ring_minutes] += bytes;
  sum_ += bytes;
  return true;
}

uint64_t write_budget::used(uint64_t now_ms) const {
  auto m = now_ms / minute_ms;
  if (limit_ == 0 || m - std::min(m, newest_) >= ring_minutes)
    return 0;
  auto s = sum_;
  // Each newer minute reuses the slot of the minute that falls out.
  for (auto fresh = newest_ + 1; fresh <= m; ++fresh)
    s -= minutes_[fresh % ring_minutes];
  return s;
}

} // namespace kvtier::tiers::ssd
