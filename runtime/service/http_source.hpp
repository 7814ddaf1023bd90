// The operator's endpoint's view of a service (runtime/http/source.hpp):
// the service's calls, and its cluster node's side of /health. The
// service owns both the endpoint and this source (the composition root,
// runtime/service/service_impl.hpp); the endpoint sees only the interface.
//
// Any thread (the service's calls are).
#pragma once

#include "runtime/http/source.hpp"
#include "runtime/service.hpp"

#include <memory>

namespace kvtier::runtime {

/// A source over `svc` (which must outlive it).
std::unique_ptr<http::source> http_source_of(service& svc);

} // namespace kvtier::runtime
