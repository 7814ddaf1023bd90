// Admission: the KV byte budget and the position limit (docs/api.md
// "Calls": admit; docs/state-model.md "Byte accounting"). Plain single-threaded
// C++; the admission actor owns the only instance.
//
// Policy. A request's projected bytes are the model geometry's bytes after
// prompt + max new tokens (kv grows per token, rings stop at their window,
// recurrent layers are fixed). `admit` holds those bytes until `release`;
// `fits` answers the same question without holding. A request that can never
// be admitted — prompt + max new tokens past the position limit, or projected
// bytes over the whole budget alone — is an error naming the limit and by how
// much, not a wait.
//
// Fairness. Beyond a plain admit, `enqueue` is an awaitable admit: a request
// that does not fit now waits in arrival order, and `release` admits waiters
// from the head while they fit. The queue is strict FIFO (a small request never
// overtakes a large one ahead of it), so no request starves; for the same
// reason a plain `admit` answers false while anyone is waiting.
//
// Bounds. The queue holds at most `max_queued` requests; an `enqueue` that
// would wait beyond that is `ec::queue_full` naming the bound (nothing is
// queued or held). `close` ends admission for good: it drops every queued
// request (returning their ids, so the owner can answer them `closed`),
// and later `admit`, `enqueue` and `fits` fail with `ec::closed`. Requests
// already holding bytes keep them until `release`, which still works.
//
// Not an error: `admit` returning false (the caller waits); releasing an id
// that holds nothing (a no-op returning no bytes, so release is idempotent).
#pragma once

#include "tiers/geometry.hpp"

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

/// What admission needs to know of a request.
struct admission_request {
  uint64_t id = 0;
  uint64_t prompt_tokens = 0;
  uint64_t max_new_tokens = 0;
};

struct admission_limits {
  /// Bytes all admitted requests may hold together.
  uint64_t kv_budget_bytes = 0;
  /// Largest prompt + max new tokens a request may reach.
  uint64_t position_limit = 0;
  /// Requests `enqueue` may hold waiting at once (admission.max-queued;
  /// the service sets all three, this default equals the shipped one,
  /// checked by tests/runtime/options_test.cpp).
  uint64_t max_queued = 4096;
};

struct admission_counters {
  uint64_t admitted = 0;   // requests that started holding bytes
  uint64_t refused = 0;    // admit/enqueue answers "wait"
  uint64_t errors = 0;     // requests that can never be admitted
  uint64_t released = 0;   // requests that gave their bytes back
  uint64_t waiting = 0;    // requests queued by enqueue right now
  uint64_t queue_full = 0; // enqueues refused over max_queued
  uint64_t held_bytes = 0;
  uint64_t holders = 0;
};

class admission {
public:
  admission(model_geometry geometry, admission_limits limits);

  /// Bytes `r` would hold: geometry bytes after prompt + max new tokens.
  uint64_t projected_bytes(const admission_request& r) const noexcept;

  /// Whether `admit(r)` would admit now; holds nothing.
  caf::expected<bool> fits(const admission_request& r) const;

  /// True: `r` now holds its projected bytes until `release(r.id)`.
  /// False: wait. Error: `r` can never be admitted, or already holds bytes.
  caf::expected<bool> admit(const admission_request& r);

  /// Awaitable admit: true when admitted now; false when queued (a later
  /// `release` returns its id once it is admitted, in arrival order).
  /// `ec::queue_full` when it would wait and `max_queued` already do.
  caf::expected<bool> enqueue(const admission_request& r);

  /// Returns `id`'s bytes (if it held any) or drops it from the queue, then
  /// admits queued requests from the head while they fit. Returns the ids
  /// admitted by this call, in order.
  std::vector<uint64_t> release(uint64_t id);

  /// Ends admission: drops every queued request and returns their ids in
  /// arrival order; from now on admit, enqueue and fits fail `ec::closed`.
  /// Idempotent (a second call returns nothing).
  std::vector<uint64_t> close();

  bool closed() const noexcept {
    return closed_;
  }

  const admission_counters& counters() const noexcept {
    return counters_;
  }

  const admission_limits& limits() const noexcept {
    return limits_;
  }

private:
  caf::error check_possible(const admission_request& r) const;
  bool room_for(uint64_t bytes) const noexcept;
  void hold(uint64_t id, uint64_t bytes);

  model_geometry geometry_;
  admission_limits limits_;
  std::unordered_map<uint64_t, uint64_t> held_; // id -> bytes
  std::deque<admission_request> queue_;
  admission_counters counters_;
  bool closed_ = false;
};

/// "1.50 GiB"-style rendering for messages.
std::string human_bytes(uint64_t n);

} // namespace kvtier::tiers
