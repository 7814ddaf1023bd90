#include "runtime/service/http_source.hpp"

#include "runtime/cluster/node.hpp"
#include "runtime/http/health.hpp"

namespace kvtier::runtime {

namespace {

class service_source final : public http::source {
public:
  explicit service_source(service& svc)
    : svc_(svc) {}

  caf::expected<service_report> report() override {
    return svc_.report();
  }

  caf::expected<persistence_stats> stats() override {
    return svc_.stats();
  }

  latency_report latency() const override {
    return svc_.latency();
  }

  std::optional<http::node_health> node() const override {
    auto* n = svc_.cluster();
    if (!n)
      return std::nullopt;
    return http::node_health{
      n->node_id(), n->address(),
      std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - n->started()),
      http::peer_grace(svc_.options())};
  }

  caf::expected<durability_result> flush() override {
    return svc_.flush();
  }

  caf::expected<uint32_t> close_session(const std::string& id) override {
    return svc_.close_session(id);
  }

  caf::expected<reclaim_result> boundary(uint64_t want_bytes) override {
    return svc_.boundary(want_bytes);
  }

private:
  service& svc_;
};

} // namespace

std::unique_ptr<http::source> http_source_of(service& svc) {
  return std::make_unique<service_source>(svc);
}

} // namespace kvtier::runtime
