// Several services sharing one SSD root stay under one budget together:
// their owner splits the budget with `set_ssd_limit` and shrinks it live;
// each tier evicts its least recently used files at once, so the files on
// the root (counted on the file system itself) never exceed the budget.
// Two models (same shape, other identities) on one root, over the
// in-memory file system and real files on both I/O engines. Every state
// served is checked byte for byte with the oracle.
#define BOOST_TEST_MODULE runtime_ssd_budget
#include "tests/runtime/service_fixture.hpp"
#include "tests/ssd/ssd_fixture.hpp"

using namespace kvtier;
using kvtier::testing::why;

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct model_service {
  runtime::service_options opts;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;
  std::string dir; // <root>/<fingerprint>

  model_service(runtime::service_options o, tiers::ssd::file_system* fs)
    : opts(std::move(o)) {
    auto m = runtime::running_model(opts);
    BOOST_REQUIRE(m);
    dir = tiers::ssd::join_path(opts.ssd_dir, m->fingerprint());
    oracle = std::make_unique<runtime::oracle_engine>(m->geometry);
    svc = std::make_unique<runtime::service>(opts, runtime::service_parts{fs});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  /// Publishes a 500-token conversation turn (128 KiB) of session `i`.
  void publish(int i) {
    auto tokens = kvtier::testing::service_fixture::seq(
      500, static_cast<tiers::token>(100000 * (i + 1)));
    auto r = svc->publish({uint64_t(i + 1), tokens, 16, std::nullopt},
                          oracle->prefill("chat", tokens));
    BOOST_REQUIRE_MESSAGE(r, why(r));
  }

  /// Acquires turn `i` again; the state served (from RAM or SSD, or none
  /// when it is gone) is verified byte for byte.
  runtime::state_source acquire(int i) {
    auto prompt = kvtier::testing::service_fixture::seq(
      501, static_cast<tiers::token>(100000 * (i + 1)));
    auto r = svc->acquire({uint64_t(i + 1), prompt, 16, std::nullopt}, "chat");
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (r->source != runtime::state_source::none)
      BOOST_CHECK(!oracle->verify_served(r->state, "chat", prompt, false));
    return r->source;
  }

  uint64_t file_bytes() {
    auto r = svc->report();
    BOOST_REQUIRE(r);
    return r->ssd.file_bytes;
  }

  runtime::ssd_limit_result limit(uint64_t bytes) {
    auto r = svc->set_ssd_limit(bytes);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_CHECK_EQUAL(r->cap_bytes, bytes);
    BOOST_CHECK_LE(r->file_bytes, bytes);
    return *r;
  }
};

/// Bytes of every entry file under `dirs`, as the file system has them.
uint64_t on_disk(tiers::ssd::file_system& fs,
                 const std::vector<std::string>& dirs) {
  uint64_t n = 0;
  for (auto& d : dirs) {
    auto names = fs.list(d);
    BOOST_REQUIRE(names);
    for (auto& name : *names) {
      if (name.size() < 4 || name.substr(name.size() - 4) != ".kvt")
        continue;
      auto f =
        fs.open(tiers::ssd::join_path(d, name), tiers::ssd::open_mode::read);
      if (!f)
        continue; // removed between the listing and the open
      auto size = (*f)->size();
      BOOST_REQUIRE(size);
      n += *size;
    }
  }
  return n;
}

/// The budget scenario on one file system and engine.
void two_services_share_one_budget(tiers::ssd::file_system& fs,
                                   const std::string& root,
                                   const std::string& engine) {
  runtime::service_options base;
  base.ram_cap_bytes = 1 * MiB; // eight turns
  base.ssd_dir = root;
  base.ssd_cap_bytes = 64 * MiB; // until the owner says otherwise
  base.write_behind_cap_bytes = 16 * MiB;
  base.io_engine = engine;
  base.model = "tiny-dense";
  base.model_scale = 1.0;
  base.kv_budget_bytes = 4 * MiB;
  auto a_opts = base, b_opts = base;
  a_opts.model_identity = "model A";
  b_opts.model_identity = "model B";
  model_service a{a_opts, &fs}, b{b_opts, &fs};
  BOOST_REQUIRE(a.dir != b.dir); // two directories under one root
  std::vector<std::string> dirs{a.dir, b.dir};
  auto under = [&](uint64_t budget) {
    BOOST_CHECK_LE(a.file_bytes() + b.file_bytes(), budget);
    BOOST_CHECK_LE(on_disk(fs, dirs), budget);
  };

  // A budget of 3 MiB, split evenly.
  uint64_t budget = 3 * MiB;
  a.limit(budget / 2);
  b.limit(budget / 2);
  for (int i = 0; i < 24; ++i) { // 3 MiB per service: most go to SSD
    a.publish(i);
    b.publish(i);
  }
  BOOST_REQUIRE(a.svc->flush());
  BOOST_REQUIRE(b.svc->flush());
  under(budget);
  BOOST_CHECK_GT(a.file_bytes(), budget / 4); // the SSD tiers are in use
  BOOST_CHECK_GT(b.file_bytes(), budget / 4);

  // Shrunk live to 1.5 MiB, A's share now twice B's: both obey at once.
  budget = 3 * MiB / 2;
  auto ra = a.limit(budget * 2 / 3);
  auto rb = b.limit(budget / 3);
  BOOST_CHECK_GT(ra.evicted + rb.evicted, 0u);
  under(budget);

  // Work goes on under the new shares; served state stays exact.
  for (int i = 24; i < 40; ++i) {
    a.publish(i);
    b.publish(i);
  }
  // Everything RAM holds moves to SSD (written, then out of RAM): the
  // newest turns are served from SSD below.
  BOOST_REQUIRE(a.svc->demote_idle(0));
  BOOST_REQUIRE(b.svc->demote_idle(0));
  BOOST_REQUIRE(a.svc->flush()); // (a flush waits for evictions' unlinks)
  BOOST_REQUIRE(b.svc->flush());
  under(budget);
  int from_ssd = 0;
  for (int i = 0; i < 40; ++i)
    for (auto* s : {&a, &b})
      from_ssd += s->acquire(i) == runtime::state_source::ssd;
  BOOST_CHECK_GT(from_ssd, 0);
  BOOST_REQUIRE(a.svc->flush());
  BOOST_REQUIRE(b.svc->flush());
  under(budget);
  auto rep = a.svc->report();
  BOOST_REQUIRE(rep);
  BOOST_CHECK_EQUAL(rep->ssd.cap_bytes, budget * 2 / 3);
}

} // namespace

BOOST_AUTO_TEST_CASE(two_services_on_one_root_stay_under_one_budget_in_memory) {
  tiers::ssd::memory_file_system memory;
  two_services_share_one_budget(memory, "/ssd", "threads");
}

BOOST_AUTO_TEST_CASE(two_services_on_one_root_stay_under_one_budget_on_disk) {
  for (auto engine : tiers::ssd::test::all_engines()) {
    auto name =
      engine == tiers::ssd::engine_choice::uring ? "uring" : "threads";
    BOOST_TEST_CONTEXT(name) {
      tiers::ssd::test::scratch_dir dir;
      tiers::ssd::posix_file_system posix;
      two_services_share_one_budget(posix, dir.path, name);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_limit_without_an_ssd_tier_is_unsupported) {
  runtime::service_options o;
  o.ssd_dir.clear();
  o.model = "tiny-dense";
  o.model_scale = 1.0;
  o.ram_cap_bytes = MiB;
  runtime::service svc{o};
  auto r = svc.set_ssd_limit(MiB);
  BOOST_REQUIRE(!r);
  BOOST_CHECK(r.error() == ec::unsupported);
  BOOST_REQUIRE(svc.close());
  auto after = svc.set_ssd_limit(MiB);
  BOOST_REQUIRE(!after);
}
