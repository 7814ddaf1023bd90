#include "runtime/http/health.hpp"

#include "messages/error.hpp"

#include <nlohmann/json.hpp>

namespace kvtier::http {

std::chrono::milliseconds peer_grace(const runtime::service_options& o) {
  return std::chrono::milliseconds{o.cluster_down_after_ms
                                   + o.cluster_reconnect_backoff_max_ms};
}

namespace {

response answer(unsigned status, const nlohmann::json& body) {
  response out;
  out.status = status;
  // A request's path or a session id echoed back may hold bytes that are
  // not UTF-8: replaced (U+FFFD), never thrown (which ended the process).
  out.body =
    body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return out;
}

} // namespace

response health_of(const caf::expected<runtime::service_report>& report,
                   const std::optional<node_health>& node) {
  nlohmann::json out{{"status", "ok"}};
  if (node) {
    out["node_id"] = node->node_id;
    out["address"] = node->address;
  }
  if (!report) {
    out["status"] = "unavailable";
    out["error"] = describe(report.error());
    out["reasons"] = {"the service did not report: "
                      + out["error"].get<std::string>()};
    return answer(503, out);
  }
  auto& r = *report;
  if (r.closed) {
    out["status"] = "closed";
    out["reasons"] = {"close began: the service refuses new work"};
    return answer(503, out);
  }
  auto reasons = nlohmann::json::array();
  for (auto& tier : r.silent_tiers)
    reasons.push_back("the " + tier
                      + " tier did not answer the report within its "
                        "deadline");
  bool starting = false;
  if (node) {
    auto configured = r.node.configured_peers;
    auto up = r.peer.peers_up;
    out["peers"] = {{"configured", configured}, {"up", up}};
    if (configured > 0 && up == 0) {
      if (node->since_start < node->grace) {
        starting = true;
        out["peers"]["grace_left_ms"] =
          (node->grace - node->since_start).count();
      } else {
        reasons.push_back("none of its " + std::to_string(configured)
                          + " configured peer(s) is up (kvtier members "
                            "shows what it refused)");
      }
    }
  }
  out["reasons"] = reasons;
  if (!reasons.empty()) {
    out["status"] = "degraded";
    return answer(503, out);
  }
  if (starting)
    out["status"] = "starting";
  return answer(200, out);
}

} // namespace kvtier::http
