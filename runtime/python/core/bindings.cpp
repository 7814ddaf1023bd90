// kvtier._core.Service's methods: every call of the embedded API in its
// blocking form and its callback form (`_<name>_then(..., done)`, which the
// package's asyncio forms are built on), and what the service is.
#include "runtime/python/core/buffers.hpp"
#include "runtime/python/core/calls.hpp"
#include "runtime/python/core/values.hpp"

#include "runtime/cluster/node.hpp"

namespace kvtier::python {

namespace {

using runtime::service;

std::optional<std::string> opt_str(py::handle h, const char* what) {
  if (h.is_none())
    return std::nullopt;
  if (!py::isinstance<py::str>(h))
    throw py::type_error(std::string{what} + ": a string or None");
  return h.cast<std::string>();
}

double api_timeout_s(const runtime::service_options& o) {
  return static_cast<double>(o.storage_deadline_ms + 1000) / 1000.0;
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
