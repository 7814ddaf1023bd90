// kvtier._core's Lease and ObjectCache, and the two calls whose blocking
// forms do more than wait: admit_queued (a timeout, Ctrl-C, leaving the
// queue) and relieve_pressure (the engine's check under the GIL).
#include "runtime/python/core/buffers.hpp"
#include "runtime/python/core/calls.hpp"
#include "runtime/python/core/values.hpp"

#include <chrono>
#include <cmath>

namespace kvtier::python {

namespace {

using runtime::service;

/// A prefetch lease Python holds (kvtier.Lease): released at `release()`,
/// on leaving a `with`, or when it goes.
struct lease_handle {
  std::shared_ptr<lease_slot> slot;

  explicit lease_handle(std::shared_ptr<lease_slot> s)
    : slot(std::move(s)) {}
  lease_handle(lease_handle&&) = default;
  lease_handle(const lease_handle&) = default;

  ~lease_handle() {
    if (slot && slot.use_count() == 1) {
      if (PyGILState_Check()) {
        py::gil_scoped_release nogil;
        slot->release();
      } else {
        slot->release();
      }
    }
  }
};

} // namespace

py::object lease_object(std::shared_ptr<service_registry> reg,
                        runtime::prefetch_lease&& l) {
  auto slot = std::make_shared<lease_slot>();
  slot->info = l.info();
  slot->lease.emplace(std::move(l));
  reg->add(slot);
  return py::cast(lease_handle{std::move(slot)});
}

/// Blocking admit_queued: waits in slices (Ctrl-C works) up to `timeout`
/// seconds (None: until admitted, refused or the service closes); on a
/// timeout or an interrupt the request leaves the queue (released) first.
py::object admit_queued_blocking(py_service& s, const request& q,
                                 py::handle timeout) {
  refuse_in_callback();
  double limit = timeout.is_none() ? INFINITY : timeout.cast<double>();
  if (std::isnan(limit) || limit < 0)
    throw py::value_error("timeout: a number of seconds >= 0, or None");
  std::future<caf::expected<runtime::admit_decision>> f;
  {
    py::gil_scoped_release nogil;
    auto gate = s.registry->gate;
    if (gate->enter()) {
      gate_exit leave{gate};
      f = s.svc()->admit_queued(q.r);
    }
  }
  if (!f.valid())
    raise(shut_down_error());
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  auto withdraw = [&] {
    py::gil_scoped_release nogil;
    auto gate = s.registry->gate;
    if (gate->enter()) {
      gate_exit leave{gate};
      // Answered: the queued admit settles at once (cancelled, or admitted
      // and now released). Not answered (a silent service, its deadline
      // passed): nothing more is waited for.
      if (s.svc()->release(q.r, false))
        f.wait();
    }
  };
  for (;;) {
    bool ready;
    {
      py::gil_scoped_release nogil;
      ready =
        f.wait_for(std::chrono::milliseconds{100}) == std::future_status::ready;
    }
    if (ready)
      return py::cast(take(f.get()));
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set interrupted;
      withdraw();
      throw interrupted;
    }
    std::chrono::duration<double> waited = clock::now() - start;
    if (waited.count() >= limit) {
      withdraw();
      raise(make_error(ec::timeout, "admit_queued: not admitted within "
                                      + std::to_string(limit)
                                      + " s; the request left the queue"));
    }
  }
}

/// relieve_pressure's check: the Python callable, under the GIL; an
/// exception ends the relief and is raised when the call returns.
py::object relieve_blocking(py_service& s, py::object check) {
  if (!PyCallable_Check(check.ptr()))
    throw py::type_error("relieve_pressure: check must be a callable "
                         "answering whether enough memory is free");
  std::optional<py::error_already_set> failed;
  auto f = [&]() -> bool {
    py::gil_scoped_acquire gil;
    try {
      return py::bool_(check());
    } catch (py::error_already_set& e) {
      failed.emplace(std::move(e));
      return true;
    }
  };
  auto out = blocking(s, [&](service& x) { return x.relieve_pressure(f); });
  if (failed)
    throw std::move(*failed);
  return to_dict(out);
}

/// kvtier._core.ObjectCache: the service's exact tensor objects.
struct object_cache_handle {
  py::object owner;
  py_service& svc() const {
    return owner.cast<py_service&>();
  }
};

py::object found_object(std::optional<std::vector<tiers::attachment>>&& o) {
  if (!o)
    return py::none();
  return attachments_dict(*o);
}

void register_lease(py::module_& m) {
  py::class_<lease_handle>(m, "Lease", R"(
A prefetch's interest: keeps the restored prefix in RAM until released
(release(), leaving a with block, or when it goes).)")
    .def_property_readonly("info",
                           [](const lease_handle& l) { return l.slot->info; })
    .def_property_readonly("active",
                           [](const lease_handle& l) {
                             std::lock_guard<std::mutex> g{l.slot->mtx};
                             return l.slot->lease.has_value();
                           })
    .def("release",
         [](lease_handle& l) {
           refuse_in_callback();
           py::gil_scoped_release nogil;
           return l.slot->release();
         })
    .def("__enter__", [](py::object self) { return self; })
    .def("__exit__",
         [](lease_handle& l, py::args) {
           py::gil_scoped_release nogil;
           l.slot->release();
           return false;
         })
    .def("__repr__", [](const lease_handle& l) {
      return "<kvtier.Lease " + std::to_string(l.slot->info.lease)
             + " tokens=" + std::to_string(l.slot->info.tokens) + ">";
    });
}

void register_objects(py::module_& m) {
  py::class_<object_cache_handle>(m, "ObjectCache", R"(
Exact tensor objects (encoder outputs) under the RAM budget, spilled to and
restored from SSD: put(key, {name: buffer}) -> kept, get(key) -> {name:
[Segment, ...]} or None.)")
    .def(py::init([](py::object svc) {
      svc.cast<py_service&>(); // a Service, or TypeError
      return object_cache_handle{std::move(svc)};
    }))
    .def("put",
         [](const object_cache_handle& h, const std::string& key,
            py::handle tensors) {
           auto t = to_attachments(tensors, "tensors");
           return blocking(h.svc(), [&](service& x) {
             return x.objects() ? x.objects()->put(key, std::move(t))
                                : caf::expected<bool>{make_error(
                                  ec::unsupported, "objects: ram-tier.objects "
                                                   "is false")};
           });
         })
    .def("get",
         [](const object_cache_handle& h, const std::string& key) {
           return found_object(blocking(h.svc(), [&](service& x) {
             using out_t = std::optional<std::vector<tiers::attachment>>;
             return x.objects() ? x.objects()->get(key)
                                : caf::expected<out_t>{make_error(
                                  ec::unsupported, "objects: ram-tier.objects "
                                                   "is false")};
           }));
         })
    .def("_put_then",
         [](const object_cache_handle& h, const std::string& key,
            py::handle tensors, py::handle done) {
           auto t = to_attachments(tensors, "tensors");
           start_then<bool>(
             h.svc(), done,
             [&](service& x, runtime::callback<bool> cb) {
               if (x.objects())
                 x.objects()->put_async(key, std::move(t), std::move(cb));
               else
                 cb(make_error(ec::unsupported, "objects: ram-tier.objects "
                                                "is false"));
             },
             [](bool b) { return py::object(py::bool_(b)); });
         })
    .def("_get_then", [](const object_cache_handle& h, const std::string& key,
                         py::handle done) {
      using out_t = std::optional<std::vector<tiers::attachment>>;
      start_then<out_t>(
        h.svc(), done,
        [&](service& x, runtime::callback<out_t> cb) {
          if (x.objects())
            x.objects()->get_async(key, std::move(cb));
          else
            cb(make_error(ec::unsupported, "objects: ram-tier.objects is "
                                           "false"));
        },
        [](out_t&& o) { return found_object(std::move(o)); });
    });
}

} // namespace kvtier::python
