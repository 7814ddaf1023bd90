// The value types of kvtier._core: Request, Event and the small answers
// (PublishResult, AdmitDecision, ReleaseResult, PrefetchInfo) as classes
// with read-only attributes, and the larger answers (reports, durability
// evidence, routes) as plain dicts. Conversions run with the GIL held.
#pragma once

#include "runtime/python/core/common.hpp"

namespace kvtier::python {

/// kvtier.Request: one engine request (immutable once made).
struct request {
  runtime::state_request r;
};

/// kvtier.Event: one numbered change of what the service holds.
struct event {
  runtime::feed_event e;
};

py::dict to_dict(const runtime::durability_result& d);
py::dict to_dict(const runtime::reclaim_result& r);
py::dict to_dict(const runtime::ssd_limit_result& r);
py::dict to_dict(const runtime::route_decision& r);
py::dict to_dict(const runtime::service_report& r);
py::dict to_dict(const runtime::persistence_stats& s);
py::dict to_dict(const runtime::latency_report& l);
py::list to_list(const std::vector<runtime::saved_prefix>& p);

} // namespace kvtier::python
