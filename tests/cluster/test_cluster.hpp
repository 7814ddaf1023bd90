// The cluster settings every cluster test uses, in one place: the model
// identity and the fast membership timing of the generated `kvtier node`
// configurations (node_process.hpp) and of embedded services that join
// them, so a node and an embedded member always agree.
#pragma once

#include "runtime/config.hpp"

#include <cstdint>
#include <string>

namespace kvtier::test {

/// Membership timing of test nodes (milliseconds).
struct test_timing {
  static constexpr uint64_t heartbeat_ms = 100;
  static constexpr uint64_t down_after_ms = 1000;
  static constexpr uint64_t backoff_ms = 100;
  static constexpr uint64_t backoff_max_ms = 400;
};

/// The model identity of test nodes: one with another refuses them.
inline constexpr const char* test_identity = "test-model";

/// Makes `o` an embedded cluster member named `node_id` with the test
/// identity and timing.
inline void join_test_cluster(runtime::service_options& o,
                              const std::string& node_id) {
  o.model_identity = test_identity;
  o.cluster_enabled = true;
  o.cluster_node_id = node_id;
  o.cluster_heartbeat_ms = test_timing::heartbeat_ms;
  o.cluster_down_after_ms = test_timing::down_after_ms;
  o.cluster_reconnect_backoff_ms = test_timing::backoff_ms;
  o.cluster_reconnect_backoff_max_ms = test_timing::backoff_max_ms;
}

} // namespace kvtier::test
