// The SSD write budget and the admission rule through the whole service
// (docs/ssd-format.md "Admission and the write budget"): a flush over the
// daily budget answers not durable with an error naming the budget, and
// what it could write is durable; spills over it leave RAM (a future
// miss, never a wrong state), counted, and /metrics carries the counters.
#define BOOST_TEST_MODULE runtime_ssd_write_budget
#include "runtime/http/exposition.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tests/ssd/ssd_fixture.hpp"

#include <algorithm>

using namespace kvtier;
using kvtier::testing::why;

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct budget_service {
  // Declared first, destroyed last: the service's SSD threads use it until
  // the service is gone (it was destroyed first, and a close still writing
  // wrote into freed memory).
  tiers::ssd::memory_file_system fs;
  runtime::service_options opts;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;

  explicit budget_service(uint64_t budget, uint64_t ram_cap = 64 * MiB) {
    opts.ram_cap_bytes = ram_cap;
    opts.ssd_dir = "/budget";
    opts.ssd_cap_bytes = 64 * MiB;
    opts.io_engine = "threads";
    opts.model = "tiny-dense";
    opts.model_scale = 1.0;
    opts.kv_budget_bytes = 4 * MiB;
    opts.write_behind = false; // the flush writes them
    opts.idle_demotion_ms = 0;
    opts.ssd_write_budget_bytes_per_day = budget;
    auto m = runtime::running_model(opts);
    BOOST_REQUIRE(m);
    oracle = std::make_unique<runtime::oracle_engine>(m->geometry);
    svc = std::make_unique<runtime::service>(opts, runtime::service_parts{&fs});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  tiers::token_seq prompt(int i, size_t n = 500) {
    return kvtier::testing::service_fixture::seq(
      n, static_cast<tiers::token>(100000 * (i + 1)));
  }

  /// Publishes a 500-token turn (128 KiB) of conversation `i`.
  void publish(int i) {
    auto tokens = prompt(i);
    auto r = svc->publish({uint64_t(i + 1), tokens, 16, std::nullopt},
                          oracle->prefill("chat", tokens));
    BOOST_REQUIRE_MESSAGE(r, why(r));
  }

  runtime::state_source acquire(int i) {
    auto p = prompt(i, 501);
    auto r = svc->acquire({uint64_t(i + 1), p, 16, std::nullopt}, "chat");
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (r->source != runtime::state_source::none)
      BOOST_CHECK(!oracle->verify_served(r->state, "chat", p, false));
    return r->source;
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_flush_over_the_budget_names_it_and_writes_what_fits) {
  budget_service s{1 * MiB};
  for (int i = 0; i < 12; ++i) // 1.5 MiB of state: more than a day's budget
    s.publish(i);
  auto f = s.svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_TEST(!f->durable);
  BOOST_TEST(f->failed > 0u);
  bool named = false;
  for (auto& e : f->errors)
    named = named || e.find("write budget") != std::string::npos;
  BOOST_TEST(named, "no error names the write budget");
  auto rep = s.svc->report();
  BOOST_REQUIRE(rep);
  BOOST_TEST(rep->ssd.budget_refused > 0u);
  BOOST_TEST(rep->ssd.budget_used_bytes <= 1 * MiB);
  BOOST_TEST(rep->ssd.budget_bytes_per_day == 1 * MiB);
  BOOST_TEST(rep->ssd.file_bytes <= 1 * MiB);
  BOOST_TEST(rep->ssd.files > 0u); // what fitted was written
  BOOST_TEST(rep->ssd.files + rep->ssd.budget_refused >= 12u);
  // A second flush tries again and is refused again, named again.
  auto g = s.svc->flush();
  BOOST_REQUIRE_MESSAGE(g, why(g));
  BOOST_TEST(!g->durable);
  BOOST_TEST(rep->ssd.file_bytes <= 1 * MiB);
}

BOOST_AUTO_TEST_CASE(spills_over_the_budget_leave_ram_as_misses) {
  // RAM holds eight turns, the budget about seven files: evicted turns
  // past it are not written and leave RAM (counted dropped), later a
  // miss, and every state served is exact.
  budget_service s{1 * MiB, 1 * MiB};
  for (int i = 0; i < 24; ++i)
    s.publish(i);
  auto rep = s.svc->report();
  BOOST_REQUIRE(rep);
  BOOST_TEST(rep->ssd.budget_refused > 0u);
  BOOST_TEST(rep->ssd.budget_used_bytes <= 1 * MiB);
  int served = 0;
  for (int i = 0; i < 24; ++i)
    served += s.acquire(i) != runtime::state_source::none;
  BOOST_TEST(served < 24);
  BOOST_TEST(served >= 6);
}

BOOST_AUTO_TEST_CASE(
  the_reused_rule_skips_first_evictions_through_the_service) {
  budget_service s{0, 1 * MiB};
  s.svc.reset();
  s.opts.ssd_admission = "reused";
  s.svc =
    std::make_unique<runtime::service>(s.opts, runtime::service_parts{&s.fs});
  BOOST_REQUIRE(!s.svc->start_error());
  for (int i = 0; i < 16; ++i)
    s.publish(i);
  auto rep = s.svc->report();
  BOOST_REQUIRE(rep);
  BOOST_TEST(rep->ssd.admission_skipped > 0u);
  BOOST_TEST(rep->ssd.admission_skipped_bytes > 0u);
  BOOST_TEST(rep->ssd.writes_ok == 0u); // each was a first eviction
  // A flush still makes every entry RAM holds durable.
  auto f = s.svc->flush();
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_TEST(f->durable);
  auto names = http::metric_names();
  for (auto* name : {"kvtier_ssd_admission_skipped_total",
                     "kvtier_ssd_admission_skipped_bytes_total",
                     "kvtier_ssd_budget_refused_total",
                     "kvtier_ssd_budget_refused_bytes_total",
                     "kvtier_ssd_budget_used_bytes"})
    BOOST_TEST((std::find(names.begin(), names.end(), name) != names.end()),
               name);
}
