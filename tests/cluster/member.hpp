// An embedded service that joins the test cluster (test_cluster.hpp), for
// tests that run several members in one process, each with its own actor
// system: tiny-dense at full scale on an in-memory SSD directory, 4 MiB of
// RAM, a 1 MiB admission budget, no background writes or idle demotion,
// a 4 s storage deadline. A test adds its own options before `start`.
//
// One test thread uses a member.
#pragma once

#include "tests/cluster/test_cluster.hpp"
#include "tests/runtime/service_fixture.hpp"

#include <memory>
#include <string>

namespace kvtier::test {

struct cluster_member {
  tiers::ssd::memory_file_system fs;
  runtime::service_options opts;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;

  explicit cluster_member(const std::string& id) {
    opts.ram_cap_bytes = 4ull << 20;
    opts.ssd_dir = "/ssd";
    opts.io_engine = "threads";
    opts.model = "tiny-dense";
    opts.model_scale = 1.0;
    opts.kv_budget_bytes = 1ull << 20;
    opts.write_behind = false;
    opts.idle_demotion_ms = 0;
    opts.storage_deadline_ms = 4000;
    join_test_cluster(opts, id);
  }

  /// (Re)starts the service with `opts` (the SSD directory stays).
  void start() {
    svc.reset();
    auto g = runtime::running_geometry(opts);
    BOOST_REQUIRE(g);
    oracle = std::make_unique<runtime::oracle_engine>(*g);
    svc = std::make_unique<runtime::service>(opts, runtime::service_parts{&fs});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  runtime::service_report report() {
    auto r = svc->report();
    BOOST_REQUIRE_MESSAGE(r, testing::why(r));
    return *r;
  }
};

} // namespace kvtier::test
