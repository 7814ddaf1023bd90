#include "tiers/admission.hpp"

#include <algorithm>
#include <cstdio>

namespace kvtier::tiers {

std::string human_bytes(uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B",
                  static_cast<unsigned long long>(n));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

admission::admission(model_geometry geometry, admission_limits limits)
  : geometry_(std::move(geometry))
  , limits_(limits) {}

uint64_t admission::projected_bytes(const admission_request& r) const noexcept {
  return geometry_.projected_bytes(r.prompt_tokens, r.max_new_tokens);
}

namespace {

caf::error closed_error(const admission_request& r) {
  return make_error(ec::closed, "admission is closed: request "
                                  + std::to_string(r.id) + " not admitted");
}

} // namespace

caf::error admission::check_possible(const admission_request& r) const {
  auto positions = r.prompt_tokens + r.max_new_tokens;
  if (positions > limits_.position_limit)
    return make_error(ec::position_limit_exceeded,
                      "request " + std::to_string(r.id) + ": prompt "
                        + std::to_string(r.prompt_tokens) + " + max new "
                        + std::to_string(r.max_new_tokens) + " = "
                        + std::to_string(positions)
                        + " tokens exceeds the position limit "
                        + std::to_string(limits_.position_limit) + " by "
                        + std::to_string(positions - limits_.position_limit));
  auto bytes = projected_bytes(r);
  if (bytes > limits_.kv_budget_bytes)
    return make_error(ec::over_budget,
                      "request " + std::to_string(r.id) + ": projected "
                        + human_bytes(bytes) + " exceeds the whole KV budget "
                        + human_bytes(limits_.kv_budget_bytes) + " by "
                        + human_bytes(bytes - limits_.kv_budget_bytes));
  return {};
}

bool admission::room_for(uint64_t bytes) const noexcept {
  return bytes <= limits_.kv_budget_bytes - counters_.held_bytes;
}

void admission::hold(uint64_t id, uint64_t bytes) {
  held_.emplace(id, bytes);
  counters_.held_bytes += bytes;
  counters_.holders = held_.size();
  ++counters_.admitted;
}

caf::expected<bool> admission::fits(const admission_request& r) const {
  if (closed_)
    return closed_error(r);
  if (auto err = check_possible(r))
    return err;
  return queue_.empty() && room_for(projected_bytes(r));
}

caf::expected<bool> admission::admit(const admission_request& r) {
  if (closed_)
    return closed_error(r);
  if (auto err = check_possible(r)) {
    ++counters_.errors;
    return err;
  }
  if (held_.count(r.id) > 0)
    return make_error(ec::invalid_argument, "request " + std::to_string(r.id)
                                              + " is already admitted");
  auto bytes = projected_bytes(r);
  if (!queue_.empty() || !room_for(bytes)) {
    ++counters_.refused;
    return false;
  }
  hold(r.id, bytes);
  return true;
}

caf::expected<bool> admission::enqueue(const admission_request& r) {
  auto now = admit(r);
  if (!now || *now)
    return now;
  auto dup = std::any_of(queue_.begin(), queue_.end(),
                         [&](const auto& q) { return q.id == r.id; });
  if (dup)
    return make_error(ec::invalid_argument, "request " + std::to_string(r.id)
                                              + " is already waiting");
  if (queue_.size() >= limits_.max_queued) {
    ++counters_.queue_full;
    return make_error(ec::queue_full,
                      "request " + std::to_string(r.id) + ": the admission "
                        + "queue is full (" + std::to_string(queue_.size())
                        + " waiting, admission.max-queued = "
                        + std::to_string(limits_.max_queued) + ")");
  }
  queue_.push_back(r);
  counters_.waiting = queue_.size();
  return false;
}

std::vector<uint64_t> admission::release(uint64_t id) {
  if (auto i = held_.find(id); i != held_.end()) {
    counters_.held_bytes -= i->second;
    held_.erase(i);
    counters_.holders = held_.size();
    ++counters_.released;
  } else {
    std::erase_if(queue_, [id](const auto& q) { return q.id == id; });
  }
  std::vector<uint64_t> admitted;
  while (!queue_.empty() && room_for(projected_bytes(queue_.front()))) {
    auto r = queue_.front();
    queue_.pop_front();
    hold(r.id, projected_bytes(r));
    admitted.push_back(r.id);
  }
  counters_.waiting = queue_.size();
  return admitted;
}

std::vector<uint64_t> admission::close() {
  closed_ = true;
  std::vector<uint64_t> dropped;
  for (auto& q : queue_)
    dropped.push_back(q.id);
  queue_.clear();
  counters_.waiting = 0;
  return dropped;
}

} // namespace kvtier::tiers
