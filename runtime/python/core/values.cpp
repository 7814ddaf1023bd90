// Value types and answers of kvtier._core (values.hpp). The report, the
// pending persistence and the latency histograms reuse the JSON the HTTP
// endpoint serves (runtime/http/exposition.hpp: one table names every
// field), converted to dicts, so the three views never disagree.
#include "runtime/python/core/values.hpp"

#include "runtime/http/exposition.hpp"

#include <nlohmann/json.hpp>

#include <limits>

namespace kvtier::python {

namespace {

py::object from_json(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto& [k, v] : j.items())
        d[py::str(k)] = from_json(v);
      return d;
    }
    case nlohmann::json::value_t::array: {
      py::list l;
      for (auto& v : j)
        l.append(from_json(v));
      return l;
    }
    case nlohmann::json::value_t::string: return py::str(j.get<std::string>());
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    default: return py::none();
  }
}

py::object error_text(const caf::error& err) {
  if (!err)
    return py::none();
  return py::str(reason(err));
}

uint64_t checked_u64(py::handle v, const char* what, uint64_t max) {
  if (!PyLong_Check(v.ptr()) && !PyIndex_Check(v.ptr()))
    throw py::type_error(std::string{what} + ": an integer, not a "
                         + Py_TYPE(v.ptr())->tp_name);
  auto i = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!i)
    throw py::error_already_set();
  int overflow = 0;
  auto x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && x < 0))
    throw py::value_error(std::string{what} + ": "
                          + py::str(v).cast<std::string>() + " is negative");
  uint64_t u = overflow > 0 ? PyLong_AsUnsignedLongLong(i.ptr())
                            : static_cast<uint64_t>(x);
  if (PyErr_Occurred() || u > max) {
    PyErr_Clear();
    throw py::value_error(std::string{what} + ": "
                          + py::str(v).cast<std::string>() + " is over "
                          + std::to_string(max));
  }
  return u;
}

py::dict option_dict(const runtime::route_option& o) {
  py::dict d;
  d["node_id"] = o.node_id;
  d["address"] = o.address;
  d["source"] = runtime::to_string(o.source);
  d["from_ssd"] = o.from_ssd;
  d["usable_tokens"] = o.usable_tokens;
  d["cost"] = o.cost;
  d["recent_tokens"] = o.recent_tokens;
  d["full"] = o.full;
  return d;
}

std::string feed_kind_name(runtime::feed_kind k) {
  switch (k) {
    case runtime::feed_kind::put: return "put";
    case runtime::feed_kind::evict: return "evict";
    case runtime::feed_kind::demote: return "demote";
    case runtime::feed_kind::durable: return "durable";
    case runtime::feed_kind::superseded: return "superseded";
    case runtime::feed_kind::removed: return "removed";
  }
  return "?";
}

} // namespace

py::dict to_dict(const runtime::durability_result& d) {
  auto out = from_json(http::to_json(d)).cast<py::dict>();
  out["abandoned"] = d.abandoned;
  out["already_closed"] = d.already_closed;
  return out;
}

py::dict to_dict(const runtime::reclaim_result& r) {
  auto out = from_json(http::to_json(r)).cast<py::dict>();
  out["held_bytes"] = r.held_bytes;
  out["pending"] = r.pending;
  out["error"] = error_text(r.error);
  return out;
}

py::dict to_dict(const runtime::ssd_limit_result& r) {
  py::dict d;
  d["cap_bytes"] = r.cap_bytes;
  d["evicted"] = r.evicted;
  d["file_bytes"] = r.file_bytes;
  return d;
}

py::dict to_dict(const runtime::route_decision& r) {
  py::dict d;
  d["chosen"] = option_dict(r.chosen);
  d["best"] = r.best;
  py::list options;
  for (auto& o : r.options)
    options.append(option_dict(o));
  d["options"] = options;
  return d;
}

py::dict to_dict(const runtime::service_report& r) {
  http::scrape s;
  s.report = r;
  return from_json(http::stats_json(s)["report"]).cast<py::dict>();
}

py::dict to_dict(const runtime::persistence_stats& p) {
  http::scrape s;
  s.persistence = p;
  return from_json(http::stats_json(s)["persistence"]).cast<py::dict>();
}

py::dict to_dict(const runtime::latency_report& l) {
  http::scrape s;
  s.latency = l;
  return from_json(http::stats_json(s)["latency"]).cast<py::dict>();
}

py::list to_list(const std::vector<runtime::saved_prefix>& p) {
  py::list out;
  for (auto& x : p)
    out.append(py::make_tuple(x.ns, tokens_array(x.tokens)));
  return out;
}

void register_values(py::module_& m) {
  py::class_<request>(m, "Request", R"(
One engine request: id (unique while it lives; the same id resumes its
checkpoint), prompt (a list of ints, a numpy or torch integer array),
max_new_tokens, session (conversation affinity), attempt (a retry's
number), priority (0..100, default 35: every RAM entry of a lower priority
is evicted before any of a higher one) and pin_ms (pin the state it
publishes in RAM this long, renewed by every hit, within the pin budget;
0: no pin). Immutable.)")
    .def(
      py::init([](py::handle id, py::handle prompt, py::handle max_new_tokens,
                  std::optional<std::string> session, py::handle attempt,
                  py::handle priority, py::handle pin_ms) {
        request q;
        q.r.id =
          checked_u64(id, "Request id", std::numeric_limits<uint64_t>::max());
        q.r.prompt = to_tokens(prompt, "prompt");
        q.r.max_new_tokens = static_cast<uint32_t>(
          checked_u64(max_new_tokens, "max_new_tokens",
                      std::numeric_limits<uint32_t>::max()));
        q.r.session = std::move(session);
        q.r.attempt = static_cast<uint32_t>(checked_u64(
          attempt, "attempt", std::numeric_limits<uint32_t>::max()));
        q.r.priority = static_cast<uint8_t>(
          checked_u64(priority, "priority", tiers::max_priority));
        q.r.pin_ms =
          checked_u64(pin_ms, "pin_ms", std::numeric_limits<uint64_t>::max());
        return q;
      }),
      py::arg("id"), py::arg("prompt"), py::arg("max_new_tokens") = 0,
      py::arg("session") = py::none(), py::arg("attempt") = 0,
      py::arg("priority") = tiers::default_priority, py::arg("pin_ms") = 0)
    .def_property_readonly("id", [](const request& q) { return q.r.id; })
    .def_property_readonly("prompt",
                           [](py::object self) {
                             return tokens_view(
                               self.cast<const request&>().r.prompt, self);
                           })
    .def_property_readonly("max_new_tokens",
                           [](const request& q) { return q.r.max_new_tokens; })
    .def_property_readonly("session",
                           [](const request& q) { return q.r.session; })
    .def_property_readonly("attempt",
                           [](const request& q) { return q.r.attempt; })
    .def_property_readonly("priority",
                           [](const request& q) { return q.r.priority; })
    .def_property_readonly("pin_ms",
                           [](const request& q) { return q.r.pin_ms; })
    .def("__repr__", [](const request& q) {
      return "kvtier.Request(id=" + std::to_string(q.r.id) + ", prompt=<"
             + std::to_string(q.r.prompt.size())
             + " tokens>, max_new_tokens=" + std::to_string(q.r.max_new_tokens)
             + (q.r.session ? ", session='" + *q.r.session + "'" : "")
             + ", attempt=" + std::to_string(q.r.attempt) + ")";
    });

  py::class_<event>(m, "Event", R"(
One numbered change of what the service holds: seq (from 1, no holes),
kind (put, evict, demote, durable, superseded, removed), tier (ram, ssd),
ns, tokens, bytes of the layers, trimmable.)")
    .def_property_readonly("seq", [](const event& e) { return e.e.seq; })
    .def_property_readonly(
      "kind", [](const event& e) { return feed_kind_name(e.e.kind); })
    .def_property_readonly("tier",
                           [](const event& e) {
                             return e.e.tier == runtime::feed_tier::ram ? "ram"
                                                                        : "ssd";
                           })
    .def_property_readonly("ns", [](const event& e) { return e.e.ns; })
    .def_property_readonly("tokens",
                           [](py::object self) {
                             return tokens_view(
                               self.cast<const event&>().e.tokens, self);
                           })
    .def_property_readonly("bytes", [](const event& e) { return e.e.bytes; })
    .def_property_readonly("trimmable",
                           [](const event& e) { return e.e.trimmable; })
    .def("__repr__", [](const event& e) {
      return "<kvtier.Event seq=" + std::to_string(e.e.seq) + " "
             + feed_kind_name(e.e.kind) + " "
             + (e.e.tier == runtime::feed_tier::ram ? "ram" : "ssd") + " ns='"
             + e.e.ns + "' tokens=" + std::to_string(e.e.tokens.size())
             + " bytes=" + std::to_string(e.e.bytes) + ">";
    });

  py::class_<runtime::publish_result>(m, "PublishResult")
    .def_readonly("kept", &runtime::publish_result::kept)
    .def_property_readonly("outcome",
                           [](const runtime::publish_result& p) {
                             return runtime::to_string(p.outcome);
                           })
    .def_readonly("superseded", &runtime::publish_result::superseded)
    .def_readonly("pinned", &runtime::publish_result::pinned)
    .def_readonly("pin_refused", &runtime::publish_result::pin_refused)
    .def("__repr__", [](const runtime::publish_result& p) {
      return std::string{"PublishResult(kept="} + (p.kept ? "True" : "False")
             + ", outcome='" + runtime::to_string(p.outcome) + "', superseded="
             + std::to_string(p.superseded) + (p.pinned ? ", pinned=True" : "")
             + (p.pin_refused ? ", pin_refused=True" : "") + ")";
    });

  py::class_<runtime::admit_decision>(m, "AdmitDecision")
    .def_readonly("admitted", &runtime::admit_decision::admitted)
    .def_readonly("projected_bytes", &runtime::admit_decision::projected_bytes)
    .def_readonly("available_bytes", &runtime::admit_decision::available_bytes)
    .def("__bool__",
         [](const runtime::admit_decision& a) { return a.admitted; })
    .def("__repr__", [](const runtime::admit_decision& a) {
      return std::string{"AdmitDecision(admitted="}
             + (a.admitted ? "True" : "False")
             + ", projected_bytes=" + std::to_string(a.projected_bytes)
             + ", available_bytes=" + std::to_string(a.available_bytes) + ")";
    });

  py::class_<runtime::release_result>(m, "ReleaseResult")
    .def_readonly("released_bytes", &runtime::release_result::released_bytes)
    .def_readonly("checkpoints_removed",
                  &runtime::release_result::checkpoints_removed)
    .def_readonly("checkpoints_kept",
                  &runtime::release_result::checkpoints_kept)
    .def_readonly("removal_pending", &runtime::release_result::removal_pending)
    .def_readonly("removal_error", &runtime::release_result::removal_error)
    .def("__repr__", [](const runtime::release_result& r) {
      return "ReleaseResult(released_bytes=" + std::to_string(r.released_bytes)
             + ", checkpoints_removed=" + std::to_string(r.checkpoints_removed)
             + ", checkpoints_kept=" + std::to_string(r.checkpoints_kept)
             + ", removal_pending=" + (r.removal_pending ? "True" : "False")
             + ")";
    });

  py::class_<runtime::prefetch_info>(m, "PrefetchInfo")
    .def_readonly("lease", &runtime::prefetch_info::lease)
    .def_readonly("reads_started", &runtime::prefetch_info::reads_started)
    .def_readonly("reads_joined", &runtime::prefetch_info::reads_joined)
    .def_readonly("tokens", &runtime::prefetch_info::tokens)
    .def_readonly("ram_tokens", &runtime::prefetch_info::ram_tokens)
    .def("__repr__", [](const runtime::prefetch_info& i) {
      return "PrefetchInfo(lease=" + std::to_string(i.lease)
             + ", reads_started=" + std::to_string(i.reads_started)
             + ", reads_joined=" + std::to_string(i.reads_joined)
             + ", tokens=" + std::to_string(i.tokens)
             + ", ram_tokens=" + std::to_string(i.ram_tokens) + ")";
    });
}

} // namespace kvtier::python
