#define BOOST_TEST_MODULE runtime_identity
// State identity at the embedded API: services of other models (another
// scale, identity string, or one layer's window) share one SSD root and
// never see each other's files; a forged file in a service's own directory
// is a counted miss, never served, never deleted; publish and checkpoint of
// another shape are refused naming the layer and the field; a second
// service on the same directory does not start. Every served state is
// checked byte for byte with the serving model's oracle.
#include "tests/runtime/forge.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <filesystem>

#include <unistd.h>

using namespace kvtier;
using namespace kvtier::testing;
using runtime::state_source;
using tiers::token_seq;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// One service and its model's oracle, over a file system it shares.
struct node {
  runtime::service_options opts;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;

  void start(tiers::ssd::file_system& fs) {
    svc.reset();
    auto g = runtime::running_geometry(opts);
    BOOST_REQUIRE(g);
    oracle = std::make_unique<runtime::oracle_engine>(*g);
    svc = std::make_unique<runtime::service>(opts, runtime::service_parts{&fs});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(), describe(svc->start_error()));
  }

  std::string fingerprint() const {
    return runtime::running_model(opts)->fingerprint();
  }

  void put(const std::string& ns, const token_seq& t) {
    auto r =
      svc->publish(service_fixture::request(1, t), oracle->prefill(ns, t));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_REQUIRE(r->kept);
  }

  /// Acquires `prompt`; whatever is served must be this model's state.
  runtime::acquired_state get(const std::string& ns, const token_seq& prompt) {
    auto r = svc->acquire(service_fixture::request(1, prompt), ns);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (r->source != state_source::none) {
      auto err = oracle->verify(r->state);
      BOOST_CHECK_MESSAGE(!err, describe(err));
    }
    return std::move(*r);
  }

  runtime::service_report report() {
    auto r = svc->report();
    BOOST_REQUIRE(r);
    return *r;
  }

  std::vector<runtime::saved_prefix> saved() {
    auto r = svc->saved_prefixes();
    BOOST_REQUIRE(r);
    return *r;
  }
};

runtime::service_options base_options() {
  service_fixture f; // its defaults: tiny-dense at scale 1, SSD in /ssd
  return f.opts;
}

/// A model that differs from `base_options()` in one part of its identity.
struct variant {
  const char* what;
  void (*change)(runtime::service_options&);
};

const variant variants[] = {
  {"scale", [](runtime::service_options& o) { o.model_scale = 0.5; }},
  {"identity string",
   [](runtime::service_options& o) { o.model_identity = "kv=fp8"; }},
  {"one layer's window",
   [](runtime::service_options& o) {
     o.model_layers = "ring:64:16,ring:64:8,2*kv:64";
   }},
};

/// `a`'s options for the window variant: the same layers but window 16.
void align_base(runtime::service_options& a, const variant& v) {
  if (std::string{v.what} == "one layer's window")
    a.model_layers = "2*ring:64:16,2*kv:64";
}

token_seq seq(size_t n, tiers::token first = 1) {
  return service_fixture::seq(n, first);
}

} // namespace

BOOST_AUTO_TEST_CASE(services_of_other_models_on_one_root_never_meet) {
  for (auto& v : variants) {
    BOOST_TEST_CONTEXT(v.what) {
      tiers::ssd::memory_file_system disk;
      node a, b;
      a.opts = base_options();
      align_base(a.opts, v);
      b.opts = a.opts;
      v.change(b.opts);
      BOOST_REQUIRE(a.fingerprint() != b.fingerprint());
      a.start(disk);
      b.start(disk); // both at once: other directories, other locks
      a.put("ns", seq(300));
      a.put("ns", seq(120, 9000));
      BOOST_REQUIRE(a.svc->flush()->durable);
      // B shares the root and the prompts, but none of A's state.
      BOOST_TEST(b.saved().empty());
      BOOST_TEST((b.get("ns", seq(301)).source == state_source::none));
      b.put("ns", seq(200));
      BOOST_REQUIRE(b.svc->flush()->durable);
      // Restarted (RAM empty), each finds only its own files.
      a.start(disk);
      b.start(disk);
      BOOST_TEST(a.saved().size() == 2u);
      BOOST_TEST(b.saved().size() == 1u);
      auto ga = a.get("ns", seq(301));
      BOOST_TEST((ga.source == state_source::ssd));
      BOOST_TEST(ga.usable_tokens == 300u);
      // B's longest own prefix of that prompt is its 200 tokens, never
      // A's 300.
      auto gb = b.get("ns", seq(301));
      BOOST_TEST((gb.source == state_source::ssd));
      BOOST_TEST(gb.usable_tokens == 200u);
      // What B was served is its own model's state, not A's (A's oracle
      // tells them apart where the shapes differ).
      if (a.oracle->geometry() != b.oracle->geometry())
        BOOST_TEST(static_cast<bool>(a.oracle->verify(gb.state)));
      auto ra = a.report(), rb = b.report();
      BOOST_TEST(ra.ssd.files == 2u);
      BOOST_TEST(rb.ssd.files == 1u);
      BOOST_TEST(ra.ssd.geometry_mismatched + rb.ssd.geometry_mismatched == 0u);
      BOOST_TEST(ra.ssd.restores_mismatched + rb.ssd.restores_mismatched == 0u);
      BOOST_TEST(ra.ssd.restores_ok == 1u);
      BOOST_TEST(rb.ssd.restores_ok == 1u);
      // The directories are the fingerprints', side by side.
      BOOST_TEST(disk.list("/ssd/" + a.fingerprint())->size() == 4u);
      BOOST_TEST(disk.list("/ssd/" + b.fingerprint())->size() == 3u);
    }
  }
}

namespace {

/// The service's model with another bytes per token in layer 2.
tiers::model_geometry forger_geometry(const runtime::service_options& o) {
  auto g = runtime::running_geometry(o).value();
  g.layers[2].bytes_per_token *= 2;
  return g;
}

bool exists(tiers::ssd::memory_file_system& disk, const std::string& path) {
  return static_cast<bool>(disk.contents(path));
}

} // namespace

BOOST_AUTO_TEST_CASE(a_forged_file_found_at_start_is_a_counted_miss_kept) {
  tiers::ssd::memory_file_system disk;
  node a;
  a.opts = base_options();
  a.start(disk);
  // Right name, checksums and fingerprint; layer 2 is another model's.
  runtime::oracle_engine forger{forger_geometry(a.opts)};
  auto path =
    "/ssd/" + a.fingerprint() + "/" + tiers::ssd::file_name("ns", seq(300));
  plant(disk, path,
        file_image(forger.prefill("ns", seq(300)), a.fingerprint()));
  a.start(disk);
  BOOST_TEST(a.saved().empty());
  BOOST_TEST((a.get("ns", seq(301)).source == state_source::none));
  auto r = a.report();
  BOOST_TEST(r.ssd.geometry_mismatched == 1u);
  BOOST_TEST(r.ssd.files == 0u);
  BOOST_TEST(r.ssd.corrupt_removed == 0u);
  BOOST_TEST(exists(disk, path));
  // The service's own state of that key goes on as usual.
  a.put("ns", seq(300));
  BOOST_TEST((a.get("ns", seq(301)).source == state_source::ram));
}

BOOST_AUTO_TEST_CASE(a_file_replaced_by_a_forgery_is_a_counted_miss_kept) {
  tiers::ssd::memory_file_system disk;
  node a;
  a.opts = base_options();
  a.start(disk);
  a.put("ns", seq(300));
  BOOST_REQUIRE(a.svc->flush()->durable);
  BOOST_REQUIRE_EQUAL(a.svc->boundary()->released, 1u); // RAM lets it go
  auto path =
    "/ssd/" + a.fingerprint() + "/" + tiers::ssd::file_name("ns", seq(300));
  runtime::oracle_engine forger{forger_geometry(a.opts)};
  plant(disk, path,
        file_image(forger.prefill("ns", seq(300)), a.fingerprint()));
  // The index still names the file; the restore re-reads its header.
  auto got = a.get("ns", seq(301));
  BOOST_TEST((got.source == state_source::none));
  auto r = a.report();
  BOOST_TEST(r.ssd.restores_mismatched == 1u);
  BOOST_TEST(r.ssd.restores_ok == 0u);
  BOOST_TEST(r.ssd.corrupt_removed == 0u);
  BOOST_TEST(exists(disk, path));
  // Forgotten, not retried: the next acquire reads nothing.
  BOOST_TEST((a.get("ns", seq(301)).source == state_source::none));
  BOOST_TEST(a.report().ssd.restores_mismatched == 1u);
}

BOOST_AUTO_TEST_CASE(
  publish_and_checkpoint_of_another_shape_name_layer_and_field) {
  tiers::ssd::memory_file_system disk;
  node a;
  a.opts = base_options();
  a.opts.model_layers = "2*ring:64:16,2*kv:64";
  a.opts.checkpoint_every_tokens = 16;
  a.start(disk);
  auto other = runtime::running_geometry(a.opts).value();
  other.layers[1].window = 8;
  runtime::oracle_engine wrong{other};
  auto e = wrong.prefill("ns", seq(40));
  auto r = a.svc->publish(service_fixture::request(1, seq(40)), std::move(e));
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == ec::invalid_argument));
  BOOST_TEST(contains(describe(r.error()),
                      "layer 1 (ring): window 8, the model's is 16"),
             describe(r.error()));
  BOOST_TEST(e.size() == 40u); // a refused state stays the caller's
  auto c = a.svc->checkpoint(service_fixture::request(2, seq(20)),
                             wrong.prefill("ns", seq(40)));
  BOOST_REQUIRE(!c);
  BOOST_TEST((c.error() == ec::invalid_argument));
  BOOST_TEST(contains(describe(c.error()), "layer 1 (ring): window 8"));
  // Too few layers, and a kv layer of another row size.
  auto fewer = other;
  fewer.layers.pop_back();
  auto f = a.svc->publish(service_fixture::request(3, seq(40)),
                          runtime::oracle_engine{fewer}.prefill("ns", seq(40)));
  BOOST_REQUIRE(!f);
  BOOST_TEST(contains(describe(f.error()), "the state has 3 layers"));
  auto rows = runtime::running_geometry(a.opts).value();
  rows.layers[3].bytes_per_token = 32;
  auto k =
    a.svc->checkpoint(service_fixture::request(4, seq(20)),
                      runtime::oracle_engine{rows}.prefill("ns", seq(40)));
  BOOST_REQUIRE(!k);
  BOOST_TEST(contains(describe(k.error()),
                      "layer 3 (kv): bytes per token 32, the model's is 64"));
  // Nothing of them was kept; the right shape still is.
  auto rep = a.report();
  BOOST_TEST(rep.ram.entries == 0u);
  a.put("ns", seq(40));
  BOOST_TEST((a.get("ns", seq(41)).source == state_source::ram));
  BOOST_TEST(*a.svc->checkpoint(service_fixture::request(2, seq(20)),
                                a.oracle->prefill("ns", seq(40))));
}

BOOST_AUTO_TEST_CASE(a_second_service_on_the_same_directory_does_not_start) {
  tiers::ssd::memory_file_system disk;
  node a, b;
  a.opts = b.opts = base_options();
  a.start(disk);
  b.svc =
    std::make_unique<runtime::service>(b.opts, runtime::service_parts{&disk});
  auto err = b.svc->start_error();
  BOOST_REQUIRE(err);
  BOOST_TEST((err == ec::locked));
  BOOST_TEST(contains(describe(err), "/ssd/" + a.fingerprint() + "/LOCK"));
  b.svc.reset();
  // On disk the refusal names the holder's pid; the holder's end (its
  // service destroyed) frees the directory at once.
  char tmpl[] = "/tmp/kvtier-identity-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  tiers::ssd::posix_file_system posix;
  a.opts.ssd_dir = b.opts.ssd_dir = dir;
  a.start(posix);
  a.put("ns", seq(50));
  b.svc =
    std::make_unique<runtime::service>(b.opts, runtime::service_parts{&posix});
  err = b.svc->start_error();
  BOOST_REQUIRE(err);
  BOOST_TEST((err == ec::locked));
  BOOST_TEST(contains(describe(err), "pid " + std::to_string(::getpid())),
             describe(err));
  b.svc.reset();
  a.svc.reset(); // closes: the entry is made durable on the way out
  b.start(posix);
  auto got = b.get("ns", seq(51));
  BOOST_TEST((got.source == state_source::ssd));
  b.svc.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

BOOST_AUTO_TEST_CASE(a_service_in_a_callers_actor_system_frees_its_directory) {
  // Destroying the service waits for its SSD actor (the lock's holder), so
  // a restart in the same actor system finds the directory free at once.
  runtime::kvtier_config cfg;
  char arg0[] = "kvtier";
  char* argv[] = {arg0, nullptr};
  BOOST_REQUIRE(!cfg.load(1, argv));
  caf::actor_system sys{cfg};
  tiers::ssd::memory_file_system disk;
  auto opts = base_options();
  runtime::oracle_engine oracle{runtime::running_geometry(opts).value()};
  for (int i = 0; i < 20; ++i) {
    BOOST_TEST_CONTEXT("restart " << i) {
      runtime::service svc{sys, opts, runtime::service_parts{&disk}};
      BOOST_REQUIRE_MESSAGE(!svc.start_error(), describe(svc.start_error()));
      auto prompt = seq(40 + static_cast<size_t>(i));
      if (i > 0) { // the previous life's entry, from SSD
        auto r = svc.acquire(service_fixture::request(1, prompt), "ns");
        BOOST_REQUIRE(r);
        BOOST_TEST((r->source == state_source::ssd));
        BOOST_TEST(!oracle.verify(r->state));
      }
      auto p = svc.publish(service_fixture::request(1, prompt),
                           oracle.prefill("ns", prompt));
      BOOST_REQUIRE(p);
    }
  }
}
