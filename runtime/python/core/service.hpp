// kvtier._core.Service: one embedded `runtime::service` for Python, with
// the rules that make it safe from many Python threads and from kvtier's
// actor threads.
//
// - Every call into the service runs with the GIL released (it may wait
//   on actors, and actors may wait for the GIL to drop a Python buffer).
// - A `call_gate` counts the calls in progress (blocking calls, and the
//   callback calls until their callback ran); `shutdown` (at deallocation,
//   or at interpreter exit for a service never closed) closes the service,
//   waits for the gate, ends leases and subscriptions, then destroys it.
//   A call after that raises kvtier.ClosedError.
// - Leases and subscriptions are registered here so that none outlives
//   the C++ service they refer to.
#pragma once

#include "runtime/python/core/common.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace kvtier::python {

/// Counts calls in progress; once closed, admits none and lets its closer
/// wait until the last one left. Thread-safe, never blocks on entry.
class call_gate {
public:
  /// False once closed (then the call must not touch the service).
  bool enter() noexcept;
  void leave() noexcept;
  /// Closes and waits for every call inside to leave.
  void close_and_wait();

private:
  std::atomic<int64_t> active_{0};
  std::atomic<bool> closed_{false};
  std::mutex mtx_;
  std::condition_variable cv_;
};

/// One prefetch lease Python holds.
struct lease_slot {
  std::mutex mtx;
  std::optional<runtime::prefetch_lease> lease;
  runtime::prefetch_info info;

  /// Ends the interest (once); false when already ended or empty.
  bool release();
};

/// One event subscription Python holds: a callback, or a queue the
/// iterator drains.
struct subscription_slot {
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<runtime::feed_event> queue;
  bool ended = false;
  std::optional<runtime::event_subscription> sub;
  shared_pyref callback;
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> delivered{0};

  /// Ends it (once); false when already ended.
  bool end();
};

/// What outlives a `py_service` for the callbacks still running: its gate
/// and the leases and subscriptions it must end.
struct service_registry {
  std::shared_ptr<call_gate> gate = std::make_shared<call_gate>();
  std::mutex mtx;
  std::vector<std::weak_ptr<lease_slot>> leases;
  std::vector<std::weak_ptr<subscription_slot>> subscriptions;

  void add(const std::shared_ptr<lease_slot>& l);
  void add(const std::shared_ptr<subscription_slot>& s);
  /// Releases every lease and ends every subscription still held.
  void end_all();
};

/// The C++ service and what it needs, shared with the atexit hook and
/// with a thread that shuts it down when its Python object went on one of
/// kvtier's own threads.
struct service_core {
  std::unique_ptr<runtime::kvtier_config> cfg;
  std::unique_ptr<runtime::service> svc;
  std::shared_ptr<service_registry> registry =
    std::make_shared<service_registry>();
  std::mutex mtx;

  /// Close, wait for calls in progress, end leases and subscriptions,
  /// destroy. Idempotent; the GIL must not be held.
  void shutdown();
};

class py_service {
  // First: `registry` is initialized from it.
  std::shared_ptr<service_core> core_ = std::make_shared<service_core>();

public:
  py_service(py::object layers, std::vector<std::string> args,
             std::optional<std::string> config_file);
  ~py_service();

  void shutdown() {
    core_->shutdown();
  }

  /// The service for a call inside the gate, or null when shut down.
  runtime::service* svc() const noexcept {
    return core_->svc.get();
  }

  std::shared_ptr<service_registry> registry;
  model_desc model;
  std::string identity;
  bool closed_by_python = false;
};

/// `subscribe_events(callback=None, timeout=None)` (events.cpp).
py::object subscribe_events(py_service& s, py::object callback,
                            py::handle timeout);

/// Every live service (for the atexit hook).
void shutdown_all_services();

} // namespace kvtier::python
