// What the operator's endpoint serves (runtime/http/endpoint.hpp): the
// calls its routes make, as an interface the endpoint's owner implements.
// The embedded service owns the endpoint (runtime/service/, the
// composition root), so the endpoint cannot know the service: the owner
// hands it a source over itself and its cluster node
// (runtime/service/http_source.hpp).
//
// Every call may block up to the service's own deadline, and is made from
// a connection's thread: an implementation is safe to call from several
// threads at once.
#pragma once

#include "runtime/service_types.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtier::http {

/// A node's side of the /health verdict (absent without a cluster).
struct node_health {
  std::string node_id;
  std::string address;
  /// How long ago the node was published, and its grace for meeting a
  /// configured peer (`peer_grace`, runtime/http/health.hpp).
  std::chrono::milliseconds since_start{0};
  std::chrono::milliseconds grace{0};
};

class source {
public:
  virtual ~source() = default;

  /// The service's report (GET /metrics, /stats, /health).
  virtual caf::expected<runtime::service_report> report() = 0;
  /// What waits for the disk (GET /metrics, /stats).
  virtual caf::expected<runtime::persistence_stats> stats() = 0;
  /// The call latencies (GET /metrics, /stats).
  virtual runtime::latency_report latency() const = 0;
  /// The node's side of /health; nullopt without a cluster.
  virtual std::optional<node_health> node() const = 0;
  /// POST /admin/cache/flush.
  virtual caf::expected<runtime::durability_result> flush() = 0;
  /// POST /admin/sessions/{id}/close: the entries unpinned.
  virtual caf::expected<uint32_t> close_session(const std::string& id) = 0;
  /// POST /admin/ram/drop?bytes=N.
  virtual caf::expected<runtime::reclaim_result>
  boundary(uint64_t want_bytes) = 0;
};

} // namespace kvtier::http
