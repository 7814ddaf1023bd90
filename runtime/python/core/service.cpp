// kvtier._core.Service (service.hpp): construction from the options,
// every call in its blocking form (GIL released) and its callback form
// (`<name>_then(..., done)`: `done(ok, value_or_error)` runs on an actor
// thread under the GIL; the package's asyncio forms are built on it), the
// lease and the object cache.
#include "runtime/python/core/service.hpp"

#include "runtime/python/core/buffers.hpp"
#include "runtime/python/core/values.hpp"

#include "runtime/cluster/node.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace kvtier::python {

// --- gate, registry, slots -------------------------------------------------

bool call_gate::enter() noexcept {
  active_.fetch_add(1);
  if (closed_.load()) {
    leave();
    return false;
  }
  return true;
}

void call_gate::leave() noexcept {
  if (active_.fetch_sub(1) == 1 && closed_.load()) {
    std::lock_guard<std::mutex> guard{mtx_};
    cv_.notify_all();
  }
}

void call_gate::close_and_wait() {
  closed_.store(true);
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return active_.load() == 0; });
}

bool lease_slot::release() {
  std::lock_guard<std::mutex> guard{mtx};
  if (!lease)
    return false;
  auto out = lease->release();
  lease.reset();
  return out;
}

bool subscription_slot::end() {
  std::optional<runtime::event_subscription> s;
  {
    std::lock_guard<std::mutex> guard{mtx};
    if (ended)
      return false;
    ended = true;
    s = std::move(sub);
    sub.reset();
    cv.notify_all();
  }
  if (s)
    s->end();
  return true;
}

void service_registry::add(const std::shared_ptr<lease_slot>& l) {
  std::lock_guard<std::mutex> guard{mtx};
  std::erase_if(leases, [](auto& w) { return w.expired(); });
  leases.push_back(l);
}

void service_registry::add(const std::shared_ptr<subscription_slot>& s) {
  std::lock_guard<std::mutex> guard{mtx};
  std::erase_if(subscriptions, [](auto& w) { return w.expired(); });
  subscriptions.push_back(s);
}

void service_registry::end_all() {
  std::vector<std::weak_ptr<lease_slot>> ls;
  std::vector<std::weak_ptr<subscription_slot>> ss;
  {
    std::lock_guard<std::mutex> guard{mtx};
    ls.swap(leases);
    ss.swap(subscriptions);
  }
  for (auto& w : ls)
    if (auto l = w.lock())
      l->release();
  for (auto& w : ss)
    if (auto s = w.lock())
      s->end();
}

namespace {

std::mutex live_mtx;
std::vector<std::weak_ptr<service_core>> live;

caf::error shut_down_error() {
  return make_error(ec::closed, "the service was shut down (its Python "
                                "object went, or the interpreter is exiting)");
}

/// The gate left when it goes.
struct gate_exit {
  std::shared_ptr<call_gate> gate;
  ~gate_exit() {
    if (gate)
      gate->leave();
  }
};

void refuse_in_callback() {
  if (in_kvtier_callback())
    throw std::runtime_error(
      "kvtier: a blocking call from a kvtier callback (an actor thread) "
      "would stall the service: use subscribe_events' iterator or the "
      "*_async calls");
}

/// `f(service)` inside the gate with the GIL released: f answers a
/// caf::expected, raised after the GIL is back when it is an error.
template <class F>
auto blocking(py_service& s, F f) {
  using answer = decltype(f(std::declval<runtime::service&>()));
  refuse_in_callback();
  auto out = [&]() -> answer {
    py::gil_scoped_release nogil;
    auto gate = s.registry->gate;
    if (!gate->enter())
      return answer{shut_down_error()};
    gate_exit leave{gate};
    return f(*s.svc());
  }();
  return take(std::move(out));
}

/// The callback handed to the service's callback form of a call, entered
/// in the gate by `start_then`: converts the answer with `conv` under the
/// GIL and calls `done(True, value)` or `done(False, error)`.
template <class T, class Conv>
runtime::callback<T> then_callback(std::shared_ptr<call_gate> gate,
                                   py::handle done, Conv conv) {
  return [gate, ref = shared_pyref{done}, conv](caf::expected<T> x) {
    gate_exit leave{gate};
    auto answer = std::move(x); // dropped before the gate is left
    if (!python_alive())
      return;
    py::gil_scoped_acquire gil;
    callback_scope scope;
    try {
      if (answer)
        ref.get()(true, conv(std::move(*answer)));
      else
        ref.get()(false, error_object(answer.error()));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("kvtier: completing an async call");
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      PyErr_WriteUnraisable(nullptr);
    }
  };
}

/// Starts the callback form `start(service, callback)` (with the GIL held:
/// it returns at once) or settles `done` as closed after a shutdown.
template <class T, class Start, class Conv>
void start_then(py_service& s, py::handle done, Start start, Conv conv) {
  auto gate = s.registry->gate;
  if (!gate->enter()) {
    done(false, error_object(shut_down_error()));
    return;
  }
  start(*s.svc(), then_callback<T>(gate, done, conv));
}

// Conversions of answers into Python values (under the GIL).
template <class T>
py::object as_py(T&& x) {
  return py::cast(std::forward<T>(x));
}
template <class T>
py::object as_dict(T&& x) {
  return to_dict(x);
}

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

py::object lease_object(std::shared_ptr<service_registry> reg,
                        runtime::prefetch_lease&& l) {
  auto slot = std::make_shared<lease_slot>();
  slot->info = l.info();
  slot->lease.emplace(std::move(l));
  reg->add(slot);
  return py::cast(lease_handle{std::move(slot)});
}

std::optional<std::string> opt_str(py::handle h, const char* what) {
  if (h.is_none())
    return std::nullopt;
  if (!py::isinstance<py::str>(h))
    throw py::type_error(std::string{what} + ": a string or None");
  return h.cast<std::string>();
}

model_desc descs_of(py::handle layers, const tiers::model_geometry& geo) {
  auto out = std::make_shared<std::vector<layer_desc>>();
  if (layers.is_none()) {
    // No Model: every layer is raw bytes of the configured geometry.
    for (auto& l : geo.layers) {
      layer_desc d;
      d.kind = l.kind;
      d.row_bytes = d.per_token() ? l.bytes_per_token : l.state_bytes;
      d.window = l.window;
      d.dtype = "uint8";
      d.format = "B";
      d.itemsize = 1;
      d.shape = {static_cast<py::ssize_t>(d.row_bytes)};
      out->push_back(std::move(d));
    }
    return out;
  }
  for (auto item : py::reinterpret_borrow<py::sequence>(layers)) {
    auto t = item.cast<py::tuple>();
    layer_desc d;
    auto kind = t[0].cast<std::string>();
    d.kind = kind == "kv"          ? tiers::layer_kind::kv
             : kind == "ring"      ? tiers::layer_kind::ring
             : kind == "recurrent" ? tiers::layer_kind::recurrent
                                   : tiers::layer_kind::object;
    d.row_bytes = t[1].cast<uint64_t>();
    d.window = t[2].cast<uint32_t>();
    d.dtype = t[3].cast<std::string>();
    d.format = t[4].cast<std::string>();
    d.itemsize = t[5].cast<size_t>();
    d.shape = t[6].cast<std::vector<py::ssize_t>>();
    out->push_back(std::move(d));
  }
  if (out->size() != geo.layers.size())
    raise(make_error(ec::invalid_config,
                     "model: " + std::to_string(out->size())
                       + " layers given, the configuration's model.layers "
                         "has "
                       + std::to_string(geo.layers.size())));
  for (size_t i = 0; i < out->size(); ++i) {
    auto& d = (*out)[i];
    auto& g = geo.layers[i];
    auto bytes = d.per_token() ? g.bytes_per_token : g.state_bytes;
    if (d.kind != g.kind || d.row_bytes != bytes || d.window != g.window)
      raise(make_error(ec::invalid_config,
                       "model: layer " + std::to_string(i)
                         + " differs from the configuration's model.layers"));
  }
  return out;
}

double api_timeout_s(const runtime::service_options& o) {
  return static_cast<double>(o.storage_deadline_ms + 1000) / 1000.0;
}

} // namespace

// --- construction and shutdown ----------------------------------------------

py_service::py_service(py::object layers, std::vector<std::string> args,
                       std::optional<std::string> config_file)
  : registry(core_->registry) {
  auto& cfg = core_->cfg;
  cfg = std::make_unique<runtime::kvtier_config>();
  std::vector<std::string> argv_s{"kvtier"};
  if (config_file)
    argv_s.push_back("--config-file=" + *config_file);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  if (auto err = cfg->load(static_cast<int>(argv.size()), argv.data()))
    raise(err);
  auto geo = runtime::running_geometry(cfg->options);
  if (!geo)
    raise(geo.error());
  model = descs_of(layers, *geo);
  identity = cfg->options.model_identity;
  caf::error err;
  {
    py::gil_scoped_release nogil;
    core_->svc = std::make_unique<runtime::service>(*cfg);
    err = core_->svc->start_error();
    if (err)
      core_->svc.reset();
  }
  if (err)
    raise(err);
  std::lock_guard<std::mutex> guard{live_mtx};
  std::erase_if(live, [](auto& w) { return w.expired(); });
  live.push_back(core_);
}

py_service::~py_service() {
  if (in_kvtier_callback()) {
    // Gone on one of kvtier's own threads (a callback held the last
    // reference): stopping the service there would wait on itself.
    std::thread([core = std::move(core_)] { core->shutdown(); }).detach();
    return;
  }
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release nogil;
    core_->shutdown();
  } else {
    core_->shutdown();
  }
}

void service_core::shutdown() {
  std::lock_guard<std::mutex> guard{mtx};
  if (!svc)
    return;
  // Close first: an admit_queued still waiting completes (closed) and
  // leaves the gate; then wait for every call, end what refers to the
  // service, and let it go.
  svc->close();
  registry->gate->close_and_wait();
  registry->end_all();
  svc.reset();
  cfg.reset();
}

void shutdown_all_services() {
  mark_python_exiting();
  std::vector<std::shared_ptr<service_core>> all;
  {
    std::lock_guard<std::mutex> guard{live_mtx};
    for (auto& w : live)
      if (auto c = w.lock())
        all.push_back(std::move(c));
  }
  py::gil_scoped_release nogil;
  for (auto& c : all)
    c->shutdown();
}

// --- the module's Service ---------------------------------------------------

namespace {

using runtime::service;

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
      (void)s.svc()->release(q.r, false);
    }
    f.wait(); // settles at once: cancelled, or admitted and now released
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

} // namespace

void register_service(py::module_& m) {
  register_lease(m);
  register_objects(m);
  using S = py_service;
  auto acquired_of = [](S& s) {
    return [model = s.model](runtime::acquired_state&& st) {
      return make_acquired(std::move(st), model);
    };
  };
  auto lease_of = [](S& s) {
    return [reg = s.registry](runtime::prefetch_lease&& l) {
      return lease_object(reg, std::move(l));
    };
  };
  auto want_of = [](py::handle want) -> uint64_t {
    return want.is_none() ? UINT64_MAX : want.cast<uint64_t>();
  };
  auto to_py = [](auto&& x) { return as_py(std::forward<decltype(x)>(x)); };
  auto to_pydict = [](auto&& x) {
    return py::object(to_dict(std::forward<decltype(x)>(x)));
  };
  auto to_pylist = [](std::vector<runtime::saved_prefix>&& x) {
    return py::object(to_list(x));
  };
  py::class_<S>(m, "Service")
    .def(py::init<py::object, std::vector<std::string>,
                  std::optional<std::string>>(),
         py::arg("layers"), py::arg("args"), py::arg("config_file"))
    // lookups
    .def(
      "acquire",
      [=](S& s, const request& q, const std::string& ns) {
        return acquired_of(s)(
          blocking(s, [&](service& x) { return x.acquire(q.r, ns); }));
      },
      py::arg("req"), py::arg("ns") = "")
    .def(
      "_acquire_then",
      [=](S& s, const request& q, const std::string& ns, py::handle done) {
        start_then<runtime::acquired_state>(
          s, done,
          [&](service& x, auto cb) { x.acquire_async(q.r, ns, std::move(cb)); },
          acquired_of(s));
      },
      py::arg("req"), py::arg("ns"), py::arg("done"))
    .def(
      "peek_prefix_len",
      [](S& s, py::handle prompt, const std::string& ns) {
        auto p = to_tokens(prompt, "prompt");
        return blocking(s,
                        [&](service& x) { return x.peek_prefix_len(p, ns); });
      },
      py::arg("prompt"), py::arg("ns") = "")
    .def("_peek_prefix_len_then",
         [=](S& s, py::handle prompt, const std::string& ns, py::handle done) {
           auto p = to_tokens(prompt, "prompt");
           start_then<uint64_t>(
             s, done,
             [&](service& x, auto cb) {
               x.peek_prefix_len_async(p, ns, std::move(cb));
             },
             to_py);
         })
    .def(
      "route",
      [](S& s, py::handle prompt, const std::string& ns, uint32_t max_new) {
        auto p = to_tokens(prompt, "prompt");
        return to_dict(
          blocking(s, [&](service& x) { return x.route(p, ns, max_new); }));
      },
      py::arg("prompt"), py::arg("ns") = "", py::arg("max_new_tokens") = 0)
    .def("_route_then",
         [=](S& s, py::handle prompt, const std::string& ns, uint32_t max_new,
             py::handle done) {
           auto p = to_tokens(prompt, "prompt");
           start_then<runtime::route_decision>(
             s, done,
             [&](service& x, auto cb) {
               x.route_async(p, ns, max_new, std::move(cb));
             },
             to_pydict);
         })
    // publishing
    .def(
      "publish",
      [](S& s, const request& q, py::handle tokens, py::handle layers,
         const std::string& ns, py::handle attachments) {
        auto e = to_entry(s.model, to_tokens(tokens, "tokens"), layers, ns);
        e.attachments = to_attachments(attachments, "attachments");
        return blocking(
          s, [&](service& x) { return x.publish(q.r, std::move(e)); });
      },
      py::arg("req"), py::arg("tokens"), py::arg("layers"), py::arg("ns") = "",
      py::arg("attachments") = py::none())
    .def("_publish_then",
         [=](S& s, const request& q, py::handle tokens, py::handle layers,
             const std::string& ns, py::handle attachments, py::handle done) {
           auto e = to_entry(s.model, to_tokens(tokens, "tokens"), layers, ns);
           e.attachments = to_attachments(attachments, "attachments");
           start_then<runtime::publish_result>(
             s, done,
             [&](service& x, auto cb) {
               x.publish_async(q.r, std::move(e), std::move(cb));
             },
             to_py);
         })
    .def(
      "checkpoint",
      [](S& s, const request& q, py::handle tokens, py::handle layers,
         const std::string& ns) {
        auto e = to_entry(s.model, to_tokens(tokens, "tokens"), layers, ns);
        return blocking(
          s, [&](service& x) { return x.checkpoint(q.r, std::move(e)); });
      },
      py::arg("req"), py::arg("tokens"), py::arg("layers"), py::arg("ns") = "")
    .def("_checkpoint_then",
         [=](S& s, const request& q, py::handle tokens, py::handle layers,
             const std::string& ns, py::handle done) {
           auto e = to_entry(s.model, to_tokens(tokens, "tokens"), layers, ns);
           start_then<bool>(
             s, done,
             [&](service& x, auto cb) {
               x.checkpoint_async(q.r, std::move(e), std::move(cb));
             },
             to_py);
         })
    .def(
      "keeps",
      [](S& s, const request& q) {
        return blocking(s, [&](service& x) { return x.keeps(q.r); });
      },
      py::arg("req"))
    .def("_keeps_then",
         [=](S& s, const request& q, py::handle done) {
           start_then<bool>(
             s, done,
             [&](service& x, auto cb) { x.keeps_async(q.r, std::move(cb)); },
             to_py);
         })
    // admission
    .def(
      "admit",
      [](S& s, const request& q) {
        return blocking(s, [&](service& x) { return x.admit(q.r); });
      },
      py::arg("req"))
    .def("_admit_then",
         [=](S& s, const request& q, py::handle done) {
           start_then<runtime::admit_decision>(
             s, done,
             [&](service& x, auto cb) { x.admit_async(q.r, std::move(cb)); },
             to_py);
         })
    .def(
      "fits",
      [](S& s, const request& q) {
        return blocking(s, [&](service& x) { return x.fits(q.r); });
      },
      py::arg("req"))
    .def("_fits_then",
         [=](S& s, const request& q, py::handle done) {
           start_then<runtime::admit_decision>(
             s, done,
             [&](service& x, auto cb) { x.fits_async(q.r, std::move(cb)); },
             to_py);
         })
    .def("admit_queued", &admit_queued_blocking, py::arg("req"),
         py::arg("timeout") = py::none())
    .def("_admit_queued_then",
         [=](S& s, const request& q, py::handle done) {
           start_then<runtime::admit_decision>(
             s, done,
             [&](service& x, auto cb) { x.admit_queued(q.r, std::move(cb)); },
             to_py);
         })
    .def(
      "release",
      [](S& s, const request& q, bool completed) {
        return blocking(s,
                        [&](service& x) { return x.release(q.r, completed); });
      },
      py::arg("req"), py::arg("completed"))
    .def("_release_then",
         [=](S& s, const request& q, bool completed, py::handle done) {
           start_then<runtime::release_result>(
             s, done,
             [&](service& x, auto cb) {
               x.release_async(q.r, completed, std::move(cb));
             },
             to_py);
         })
    // sessions and prefetch
    .def(
      "close_session",
      [](S& s, const std::string& session) {
        return blocking(s,
                        [&](service& x) { return x.close_session(session); });
      },
      py::arg("session"))
    .def("_close_session_then",
         [=](S& s, const std::string& session, py::handle done) {
           start_then<uint32_t>(
             s, done,
             [&](service& x, auto cb) {
               x.close_session_async(session, std::move(cb));
             },
             to_py);
         })
    .def(
      "prefetch",
      [=](S& s, py::handle prompt, const std::string& ns, py::handle session) {
        auto p = to_tokens(prompt, "prompt");
        auto sess = opt_str(session, "session");
        return lease_of(s)(
          blocking(s, [&](service& x) { return x.prefetch(p, ns, sess); }));
      },
      py::arg("prompt"), py::arg("ns") = "", py::arg("session") = py::none())
    .def("_prefetch_then",
         [=](S& s, py::handle prompt, const std::string& ns, py::handle session,
             py::handle done) {
           auto p = to_tokens(prompt, "prompt");
           auto sess = opt_str(session, "session");
           start_then<runtime::prefetch_lease>(
             s, done,
             [&](service& x, auto cb) {
               x.prefetch_async(p, ns, sess, std::move(cb));
             },
             lease_of(s));
         })
    // durability and lifecycle
    .def("flush",
         [](S& s) {
           return to_dict(blocking(s, [](service& x) { return x.flush(); }));
         })
    .def("_flush_then",
         [=](S& s, py::handle done) {
           start_then<runtime::durability_result>(
             s, done,
             [&](service& x, auto cb) { x.flush_async(std::move(cb)); },
             to_pydict);
         })
    .def("close",
         [](S& s) {
           auto out = blocking(s, [](service& x) { return x.close(); });
           s.closed_by_python = true;
           return to_dict(out);
         })
    .def("_close_then",
         [=](S& s, py::handle done) {
           s.closed_by_python = true;
           start_then<runtime::durability_result>(
             s, done,
             [&](service& x, auto cb) { x.close_async(std::move(cb)); },
             to_pydict);
         })
    .def_property_readonly(
      "closed", [](const S& s) { return s.closed_by_python || !s.svc(); })
    .def(
      "boundary",
      [=](S& s, py::handle want) {
        auto w = want_of(want);
        return to_dict(blocking(s, [&](service& x) { return x.boundary(w); }));
      },
      py::arg("want_bytes") = py::none())
    .def("_boundary_then",
         [=](S& s, py::handle want, py::handle done) {
           auto w = want_of(want);
           start_then<runtime::reclaim_result>(
             s, done,
             [&](service& x, auto cb) { x.boundary_async(w, std::move(cb)); },
             to_pydict);
         })
    .def(
      "demote_idle",
      [](S& s, uint64_t idle_ms) {
        return blocking(s, [&](service& x) { return x.demote_idle(idle_ms); });
      },
      py::arg("idle_ms"))
    .def("_demote_idle_then",
         [=](S& s, uint64_t idle_ms, py::handle done) {
           start_then<uint64_t>(
             s, done,
             [&](service& x, auto cb) {
               x.demote_idle_async(idle_ms, std::move(cb));
             },
             to_py);
         })
    .def("stop_idle_demotion",
         [](S& s) {
           return blocking(s,
                           [](service& x) { return x.stop_idle_demotion(); });
         })
    .def("_stop_idle_demotion_then",
         [=](S& s, py::handle done) {
           start_then<bool>(
             s, done,
             [&](service& x, auto cb) {
               x.stop_idle_demotion_async(std::move(cb));
             },
             to_py);
         })
    .def("relieve_pressure", &relieve_blocking, py::arg("check"))
    // reporting
    .def("stats",
         [](S& s) {
           return to_dict(blocking(s, [](service& x) { return x.stats(); }));
         })
    .def("_stats_then",
         [=](S& s, py::handle done) {
           start_then<runtime::persistence_stats>(
             s, done,
             [&](service& x, auto cb) { x.stats_async(std::move(cb)); },
             to_pydict);
         })
    .def("report",
         [](S& s) {
           return to_dict(blocking(s, [](service& x) { return x.report(); }));
         })
    .def("_report_then",
         [=](S& s, py::handle done) {
           start_then<runtime::service_report>(
             s, done,
             [&](service& x, auto cb) { x.report_async(std::move(cb)); },
             to_pydict);
         })
    .def("latency",
         [](S& s) {
           return to_dict(blocking(s, [](service& x) {
             return caf::expected<runtime::latency_report>{x.latency()};
           }));
         })
    .def("saved_prefixes",
         [](S& s) {
           return to_list(
             blocking(s, [](service& x) { return x.saved_prefixes(); }));
         })
    .def(
      "_saved_prefixes_then",
      [=](S& s, py::handle done) {
        start_then<std::vector<runtime::saved_prefix>>(
          s, done,
          [&](service& x, auto cb) { x.saved_prefixes_async(std::move(cb)); },
          to_pylist);
      })
    .def(
      "set_ssd_limit",
      [](S& s, uint64_t bytes) {
        return to_dict(
          blocking(s, [&](service& x) { return x.set_ssd_limit(bytes); }));
      },
      py::arg("nbytes"))
    .def("_set_ssd_limit_then",
         [=](S& s, uint64_t bytes, py::handle done) {
           start_then<runtime::ssd_limit_result>(
             s, done,
             [&](service& x, auto cb) {
               x.set_ssd_limit_async(bytes, std::move(cb));
             },
             to_pydict);
         })
    // what the service is
    .def("_has_objects",
         [](S& s) {
           return blocking(s, [](service& x) {
             return caf::expected<bool>{x.objects() != nullptr};
           });
         })
    .def_property_readonly("node_address",
                           [](S& s) -> std::optional<std::string> {
                             auto a = blocking(s, [](service& x) {
                               return caf::expected<std::string>{
                                 x.cluster() ? x.cluster()->address()
                                             : std::string{}};
                             });
                             if (a.empty())
                               return std::nullopt;
                             return a;
                           })
    .def_property_readonly("http_address",
                           [](S& s) -> std::optional<std::string> {
                             auto a = blocking(s, [](service& x) {
                               return caf::expected<std::string>{
                                 x.http_address()};
                             });
                             if (a.empty())
                               return std::nullopt;
                             return a;
                           })
    .def_property_readonly("checkpoint_every_tokens",
                           [](S& s) {
                             return blocking(s, [](service& x) {
                               return caf::expected<std::optional<uint64_t>>{
                                 x.checkpoint_every_tokens()};
                             });
                           })
    .def_property_readonly("_identity", [](const S& s) { return s.identity; })
    .def_property_readonly(
      "_layers",
      [](const S& s) {
        py::list out;
        for (auto& d : *s.model)
          out.append(py::make_tuple(tiers::to_string(d.kind), d.row_bytes,
                                    d.window, d.dtype, d.format, d.itemsize,
                                    py::tuple(py::cast(d.shape))));
        return out;
      })
    .def_property_readonly("_api_timeout",
                           [](S& s) {
                             return blocking(s, [](service& x) {
                               return caf::expected<double>{
                                 api_timeout_s(x.options())};
                             });
                           })
    .def("subscribe_events", &subscribe_events,
         py::arg("callback") = py::none(), py::arg("timeout") = py::none())
    .def("_shutdown", [](S& s) {
      py::gil_scoped_release nogil;
      s.shutdown();
    });
}

} // namespace kvtier::python
