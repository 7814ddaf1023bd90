// Adding a tier is one actor and one line where tiers are wired: a store
// that holds entries in a map (tests/actors/map_store.hpp), given to the
// service as a `store_plan`, takes part in lookup, spill, flush, close, the
// report and /metrics, with no other file naming it. Every served state is
// checked byte for byte with the oracle.
#define BOOST_TEST_MODULE runtime_added_store
#include "tests/actors/map_store.hpp"
#include "tests/runtime/service_fixture.hpp"

#include "runtime/http/exposition.hpp"

#include <nlohmann/json.hpp>

using namespace kvtier;
using runtime::state_source;
using testing::service_fixture;

namespace {

/// A service without an SSD tier, whose one store is a map of 64 MiB.
struct map_fixture : service_fixture {
  map_fixture() {
    opts.ssd_dir.clear();
    opts.ram_cap_bytes = 1ull << 20; // 4096 tokens of tiny-dense
    opts.idle_demotion_ms = 0;
  }

  void start_with_map() {
    auto g = runtime::running_geometry(opts);
    BOOST_REQUIRE(g);
    oracle = std::make_unique<runtime::oracle_engine>(*g);
    runtime::service_parts parts;
    // The one line that wires the tier.
    parts.stores.push_back(
      {"map", [](caf::actor_system& sys) {
         return caf::expected<caf::actor>{caf::actor_cast<caf::actor>(
           sys.spawn(testing::map_store, uint64_t{64} << 20))};
       }});
    svc = std::make_unique<runtime::service>(opts, std::move(parts));
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  /// The map's counter `name` in the report (nullopt: no such counter).
  static std::optional<uint64_t> counter(const runtime::service_report& r,
                                         const std::string& name) {
    for (auto& t : r.tiers)
      if (t.tier == "map")
        for (auto& c : t.counters)
          if (c.name == name)
            return c.value;
    return std::nullopt;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(added_store, map_fixture)

BOOST_AUTO_TEST_CASE(
  ram_evictions_spill_to_the_store_and_acquires_restore_them) {
  start_with_map();
  // Eight prefixes of 1000 tokens in 1 MiB of RAM (4096 tokens): the
  // older ones leave RAM for the map.
  for (uint32_t i = 0; i < 8; ++i)
    put("ns", seq(1000, 10000 * (i + 1)), i + 1);
  BOOST_REQUIRE(testing::eventually(
    [&] { return counter(report(), "spills").value_or(0) >= 4; }));
  // The first prefix is gone from RAM and served from the map.
  auto prompt = cat(seq(1000, 10000), seq(20, 9));
  auto got = get("ns", prompt, 50);
  BOOST_CHECK(got.source == state_source::store);
  BOOST_CHECK_EQUAL(got.usable_tokens, 1000u);
  auto r = report();
  BOOST_CHECK_GE(counter(r, "restores").value_or(0), 1u);
  BOOST_CHECK_GE(r.tokens.store, 1000u);
  BOOST_CHECK_EQUAL(r.cold_tiers, 1u);
  BOOST_CHECK(r.silent_tiers.empty());
}

BOOST_AUTO_TEST_CASE(flush_makes_what_ram_holds_durable_in_the_store) {
  start_with_map();
  put("ns", seq(64), 1);
  put("ns", seq(80, 500), 2);
  auto f = svc->flush();
  BOOST_REQUIRE_MESSAGE(f, testing::why(f));
  BOOST_CHECK(f->durable);
  BOOST_CHECK_EQUAL(f->entries, 2u);
  BOOST_CHECK_EQUAL(f->longest_durable_prefix, 80u);
  BOOST_CHECK_EQUAL(counter(report(), "flushes").value_or(0), 1u);
}

BOOST_AUTO_TEST_CASE(close_closes_the_store_after_the_flush) {
  start_with_map();
  put("ns", seq(64), 1);
  auto c = svc->close();
  BOOST_REQUIRE_MESSAGE(c, testing::why(c));
  BOOST_CHECK(c->durable);
  BOOST_CHECK_EQUAL(c->entries, 1u);
  // Closed: the map offers nothing any more.
  auto got = svc->acquire(request(9, cat(seq(64), seq(5, 900))), "ns");
  BOOST_CHECK(!got || got->source == state_source::none);
}

BOOST_AUTO_TEST_CASE(the_store_s_declared_counters_reach_stats_and_metrics) {
  start_with_map();
  put("ns", seq(64), 1);
  BOOST_REQUIRE(svc->flush());
  http::scrape s;
  s.report = report();
  auto text = http::metrics_text(s);
  BOOST_CHECK(text.find("kvtier_map_entries 1") != std::string::npos);
  BOOST_CHECK(text.find("# HELP kvtier_map_spills_total entries spilled to "
                        "the map")
              != std::string::npos);
  BOOST_CHECK(text.find("kvtier_map_flushes_total 1") != std::string::npos);
  BOOST_CHECK(text.find("kvtier_tokens_served_total{tier=\"store\"}")
              != std::string::npos);
  auto json = http::stats_json(s);
  BOOST_CHECK_EQUAL(json["report"]["tiers"]["map"]["entries"], 1u);
}

BOOST_AUTO_TEST_CASE(a_store_that_does_not_start_fails_the_start_naming_it) {
  runtime::service_parts parts;
  parts.stores.push_back({"broken", [](caf::actor_system&) {
                            return caf::expected<caf::actor>{
                              make_error(ec::io_error, "no device")};
                          }});
  opts.ssd_dir.clear();
  runtime::service svc{opts, std::move(parts)};
  auto err = describe(svc.start_error());
  BOOST_CHECK(err.find("broken") != std::string::npos);
  BOOST_CHECK(err.find("no device") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
