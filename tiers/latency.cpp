#include "tiers/latency.hpp"

#include <algorithm>

namespace kvtier::tiers {

void latency_histogram::observe(double seconds) noexcept {
  if (!(seconds >= 0))
    seconds = 0;
  auto i = static_cast<size_t>(
    std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(seconds * 1e9),
                    std::memory_order_relaxed);
}

void latency_histogram::observe(
  std::chrono::steady_clock::duration d) noexcept {
  observe(std::chrono::duration<double>(d).count());
}

void latency_histogram::fail() noexcept {
  failed_.fetch_add(1, std::memory_order_relaxed);
}

latency_histogram::snapshot latency_histogram::read() const {
  snapshot s;
  s.counts.reserve(counts_.size());
  for (auto& c : counts_)
    s.counts.push_back(c.load(std::memory_order_relaxed));
  s.count = 0;
  for (auto c : s.counts)
    s.count += c; // consistent with the buckets, whatever raced
  s.sum_seconds =
    static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  s.failed = failed_.load(std::memory_order_relaxed);
  return s;
}

} // namespace kvtier::tiers
