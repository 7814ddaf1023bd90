// kvtier._core.Service's state (service.hpp): the gate, the registry of
// leases and subscriptions, construction from the options, and shutdown
// (at deallocation, or at exit for every service still alive).
#include "runtime/python/core/calls.hpp"

#include <algorithm>
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

} // namespace kvtier::python
