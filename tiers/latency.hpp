// latency_histogram: how long a kind of call took, as cumulative-ready
// bucket counts (Prometheus histogram semantics: docs/operations.md
// "Metrics"), with fixed bounds from 50 µs to 10 s, and beside them the
// calls of the same kind that failed (errors and missed deadlines: their
// time says little, so they are counted, not timed). Lock-free: any thread
// observes, any thread snapshots (each counter is atomic on its own, so a
// snapshot taken while others observe may be off by the observations in
// flight, never torn).
//
// latency_book: the histograms a service keeps (acquire and publish as the
// engine saw them, SSD restores and remote fetches as the facade saw them),
// shared by the embedded API, the facade and the HTTP endpoint.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace kvtier::tiers {

class latency_histogram {
public:
  /// Upper bounds of the buckets, seconds (a last +Inf bucket follows).
  static constexpr std::array<double, 16> bounds{
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3, 10e-3,
    25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1.0,    2.5,  10.0};

  struct snapshot {
    /// Observations per bucket (not cumulative); the last is +Inf.
    std::vector<uint64_t> counts;
    uint64_t count = 0;
    double sum_seconds = 0;
    /// Calls that failed (not in the buckets).
    uint64_t failed = 0;
  };

  void observe(double seconds) noexcept;
  void observe(std::chrono::steady_clock::duration d) noexcept;
  /// One call failed.
  void fail() noexcept;
  snapshot read() const;

private:
  std::array<std::atomic<uint64_t>, bounds.size() + 1> counts_{};
  /// Sum in nanoseconds (an atomic integer: no lost updates).
  std::atomic<uint64_t> sum_ns_{0};
  std::atomic<uint64_t> failed_{0};
};

struct latency_book {
  latency_histogram acquire;
  latency_histogram publish;
  /// An SSD restore of an acquire (request to installed reply).
  latency_histogram restore;
  /// A peer fetch of an acquire (request to installed reply).
  latency_histogram remote_fetch;
};

} // namespace kvtier::tiers
