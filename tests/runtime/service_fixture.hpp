// A started embedded service over an in-memory SSD tier, plus the oracle
// engine, for the tests of runtime/service.hpp (one test thread drives the
// blocking API; the actors run on CAF's scheduler). Every served state is
// checked byte for byte with `oracle.verify`.
#pragma once

#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/tiers/check_helpers.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <numeric>
#include <thread>

namespace kvtier::testing {

/// Polls `pred` until it holds or `limit` passed (the service's timers run
/// in real time: retries, write-behind, deadlines). 30 s by default: the
/// suite runs beside other work, and a loaded machine stretches what takes
/// milliseconds on an idle one.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit =
                             std::chrono::milliseconds(30000)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// The error of `r` rendered, or "" when it holds a value (Boost builds
/// a check's message even when the check passes).
template <class T>
std::string why(const caf::expected<T>& r) {
  return r ? std::string{} : describe(r.error());
}

struct service_fixture {
  tiers::ssd::memory_file_system memory;
  tiers::ssd::file_system* fs = &memory;
  runtime::service_options opts;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;

  service_fixture() {
    opts.ram_cap_bytes = 1ull << 20; // 4096 tokens of tiny-dense
    opts.ssd_dir = "/ssd";
    opts.ssd_cap_bytes = 64ull << 20;
    opts.write_behind_cap_bytes = 16ull << 20;
    opts.io_engine = "threads";
    opts.model = "tiny-dense";
    opts.model_scale = 1.0;
    opts.kv_budget_bytes = 1ull << 20;
    opts.position_limit = 8192;
    // Snapshots in the background would make what is durable depend on
    // timing; the tests of write-behind turn it on.
    opts.write_behind = false;
  }

  /// Starts (or restarts) the service with `opts`.
  void start() {
    svc.reset();
    auto g = runtime::running_geometry(opts); // the service's own resolution
    BOOST_REQUIRE(g);
    oracle = std::make_unique<runtime::oracle_engine>(*g);
    svc = std::make_unique<runtime::service>(opts, runtime::service_parts{fs});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  /// Tokens first, first+1, ..., first+n-1.
  static tiers::token_seq seq(size_t n, tiers::token first = 1) {
    tiers::token_seq t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
  }

  /// `a` followed by `b`.
  static tiers::token_seq cat(tiers::token_seq a, const tiers::token_seq& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  static runtime::state_request request(uint64_t id, tiers::token_seq prompt,
                                        uint32_t max_new = 16) {
    return {id, std::move(prompt), max_new, std::nullopt};
  }

  /// Publishes a fresh prefill of `tokens` in `ns`; requires it kept.
  void put(const std::string& ns, const tiers::token_seq& tokens,
           uint64_t id = 1) {
    auto e = oracle->prefill(ns, tokens);
    auto r = svc->publish(request(id, tokens), std::move(e));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_REQUIRE(r->kept);
  }

  /// Acquires `prompt` in `ns`, requiring success and a byte-exact state
  /// that belongs to this request: its namespace, and a prefix of the
  /// prompt (or, from a checkpoint, a generation extending it).
  runtime::acquired_state get(const std::string& ns,
                              const tiers::token_seq& prompt, uint64_t id = 1,
                              uint32_t attempt = 0) {
    auto req = request(id, prompt);
    req.attempt = attempt;
    auto r = svc->acquire(req, ns);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (r->source != runtime::state_source::none) {
      bool resumed = r->source == runtime::state_source::checkpoint;
      BOOST_CHECK(ok(oracle->verify_served(r->state, ns, prompt, resumed)));
      BOOST_CHECK_EQUAL(r->state.size(), r->usable_tokens);
    }
    return std::move(*r);
  }

  runtime::service_report report() {
    auto r = svc->report();
    BOOST_REQUIRE_MESSAGE(r, why(r));
    return *r;
  }
};

} // namespace kvtier::testing
