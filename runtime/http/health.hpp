// What GET /health checks (docs/operations.md, "What /health checks"): a
// service is healthy when its report arrived, it is not closed, every tier
// answered the report within its deadline, and, for a node configured with
// peers (cluster.peers, --join), at least one peer is up once the node has
// had its grace to meet them. Healthy: 200 with status "ok" (or "starting"
// while the grace runs and no peer is up yet); otherwise 503 with the
// status ("unavailable", "closed", "degraded") and every reason in words.
//
// The verdict is a plain function of values (no clock, no service), so
// tests decide it directly; routes.cpp gathers its inputs. Any thread.
#pragma once

#include "runtime/http/endpoint.hpp"
#include "runtime/http/source.hpp"
#include "runtime/service_types.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace kvtier::http {

/// The grace a node has to meet one of its configured peers before
/// /health counts "none up" against it: one connection attempt bounded by
/// `cluster.down-after-ms`, then one retry at the longest backoff
/// (`cluster.reconnect-backoff-max-ms`): 7 s by default.
std::chrono::milliseconds peer_grace(const runtime::service_options& o);

/// The answer to GET /health for `report` (its error: the service did
/// not report) on a node described by `node`.
response health_of(const caf::expected<runtime::service_report>& report,
                   const std::optional<node_health>& node);

} // namespace kvtier::http
