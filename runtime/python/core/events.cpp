// kvtier._core.Subscription: `subscribe_events` with a Python callback
// (called on the feed listener's actor thread under the GIL, in seq order;
// what it raises is counted and reported as unraisable, never passed on)
// or as an iterator over a queue the listener fills (waits release the GIL
// and end by the subscription's timeout: no wait is forever).
#include "runtime/python/core/service.hpp"
#include "runtime/python/core/values.hpp"

#include <chrono>
#include <cmath>

namespace kvtier::python {

namespace {

struct subscription_handle {
  std::shared_ptr<subscription_slot> slot;
  double timeout = 0; // seconds; inf: no limit

  explicit subscription_handle(std::shared_ptr<subscription_slot> s, double t)
    : slot(std::move(s))
    , timeout(t) {}
  subscription_handle(subscription_handle&&) = default;
  subscription_handle(const subscription_handle&) = default;

  ~subscription_handle() {
    if (slot && slot.use_count() == 1)
      slot->end();
  }
};

enum class waited { event, ended, timed_out };

/// Waits up to `limit` seconds for the next queued event, in slices so
/// that Ctrl-C (a signal Python must handle) ends the wait.
waited next_event(subscription_slot& s, double limit,
                  runtime::feed_event& out) {
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  for (;;) {
    {
      py::gil_scoped_release nogil;
      std::chrono::duration<double> waited_s = clock::now() - start;
      auto left = std::min(limit - waited_s.count(), 0.1);
      std::unique_lock<std::mutex> lock{s.mtx};
      s.cv.wait_for(lock, std::chrono::duration<double>(std::max(left, 0.0)),
                    [&] { return !s.queue.empty() || s.ended; });
      if (!s.queue.empty()) {
        out = std::move(s.queue.front());
        s.queue.pop_front();
        return waited::event;
      }
      if (s.ended)
        return waited::ended;
    }
    if (PyErr_CheckSignals() != 0)
      throw py::error_already_set();
    std::chrono::duration<double> waited_s = clock::now() - start;
    if (waited_s.count() >= limit)
      return waited::timed_out;
  }
}

double seconds(py::handle t, double fallback) {
  if (t.is_none())
    return fallback;
  auto v = t.cast<double>();
  if (std::isnan(v) || v < 0)
    throw py::value_error("timeout: a number of seconds >= 0, or None");
  return v;
}

/// The function the service calls for every event (an actor thread).
std::function<void(const runtime::feed_event&)>
listener_of(std::weak_ptr<subscription_slot> weak) {
  return [weak](const runtime::feed_event& e) {
    auto s = weak.lock();
    if (!s)
      return;
    if (!s->callback) {
      std::lock_guard<std::mutex> guard{s->mtx};
      if (s->ended)
        return;
      s->queue.push_back(e);
      ++s->delivered;
      s->cv.notify_all();
      return;
    }
    if (!python_alive())
      return;
    py::gil_scoped_acquire gil;
    {
      // end() runs under the GIL: no call starts once it returned.
      std::lock_guard<std::mutex> guard{s->mtx};
      if (s->ended)
        return;
    }
    callback_scope scope;
    try {
      s->callback.get()(py::cast(event{e}));
      ++s->delivered;
    } catch (py::error_already_set& err) {
      ++s->errors;
      err.discard_as_unraisable("kvtier: an event callback");
    } catch (const std::exception& err) {
      ++s->errors;
      PyErr_SetString(PyExc_RuntimeError, err.what());
      PyErr_WriteUnraisable(nullptr);
    }
  };
}

} // namespace

void register_events(py::module_& m) {
  py::class_<subscription_handle>(m, "Subscription", R"(
A subscription to the service's event feed: with a callback, the callback
gets every Event in seq order on an actor thread; without, iterate it (each
wait ends by its timeout: kvtier.TimeoutError). end() (or leaving a with
block) ends it: no callback starts after that, iteration stops.)")
    .def("end",
         [](subscription_handle& h) {
           // Under the GIL, so a callback waiting for it sees `ended`.
           return h.slot->end();
         })
    .def_property_readonly("active",
                           [](const subscription_handle& h) {
                             std::lock_guard<std::mutex> g{h.slot->mtx};
                             return !h.slot->ended;
                           })
    .def_property_readonly(
      "errors",
      [](const subscription_handle& h) { return h.slot->errors.load(); },
      "Exceptions the callback raised (each reported as unraisable).")
    .def_property_readonly(
      "delivered",
      [](const subscription_handle& h) { return h.slot->delivered.load(); })
    .def_readwrite("timeout", &subscription_handle::timeout,
                   "Seconds an iteration waits for the next event.")
    .def(
      "get",
      [](subscription_handle& h, py::handle timeout) -> py::object {
        if (h.slot->callback)
          throw py::value_error("get: this subscription has a callback");
        runtime::feed_event e;
        if (next_event(*h.slot, seconds(timeout, h.timeout), e)
            == waited::event)
          return py::cast(event{std::move(e)});
        return py::none();
      },
      py::arg("timeout") = py::none(),
      "The next event, waiting at most timeout seconds (None: the "
      "subscription's timeout); None when none came or it ended.")
    .def(
      "drain",
      [](subscription_handle& h) {
        std::deque<runtime::feed_event> q;
        {
          std::lock_guard<std::mutex> g{h.slot->mtx};
          q.swap(h.slot->queue);
        }
        py::list out;
        for (auto& e : q)
          out.append(py::cast(event{std::move(e)}));
        return out;
      },
      "Every event queued now, without waiting.")
    .def("__iter__", [](py::object self) { return self; })
    .def("__next__",
         [](subscription_handle& h) {
           if (h.slot->callback)
             throw py::type_error("a subscription with a callback is not "
                                  "iterable");
           runtime::feed_event e;
           switch (next_event(*h.slot, h.timeout, e)) {
             case waited::event: return py::cast(event{std::move(e)});
             case waited::ended: throw py::stop_iteration();
             case waited::timed_out:
               raise(make_error(ec::timeout, "no event within "
                                               + std::to_string(h.timeout)
                                               + " s (Subscription.timeout)"));
           }
           throw py::stop_iteration();
         })
    .def("__enter__", [](py::object self) { return self; })
    .def("__exit__", [](subscription_handle& h, py::args) {
      h.slot->end();
      return false;
    });
}

py::object subscribe_events(py_service& s, py::object callback,
                            py::handle timeout) {
  if (in_kvtier_callback())
    throw std::runtime_error("kvtier: subscribe_events from a kvtier "
                             "callback (an actor thread) would stall it");
  if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
    throw py::type_error("subscribe_events: callback must be callable or "
                         "None");
  auto slot = std::make_shared<subscription_slot>();
  if (!callback.is_none())
    slot->callback = shared_pyref{callback};
  auto listener = listener_of(slot);
  caf::error err;
  double api_timeout = 0;
  {
    py::gil_scoped_release nogil;
    auto gate = s.registry->gate;
    if (!gate->enter()) {
      err = make_error(ec::closed, "the service was shut down");
    } else {
      auto& svc = *s.svc();
      auto& o = svc.options();
      api_timeout = static_cast<double>(o.storage_deadline_ms + 1000) / 1000;
      auto r = svc.subscribe_events(std::move(listener));
      if (r) {
        std::lock_guard<std::mutex> g{slot->mtx};
        slot->sub.emplace(std::move(*r));
      } else {
        err = std::move(r.error());
      }
      if (!err)
        s.registry->add(slot);
      gate->leave();
    }
  }
  if (err)
    raise(err);
  return py::cast(subscription_handle{slot, seconds(timeout, api_timeout)});
}

} // namespace kvtier::python
