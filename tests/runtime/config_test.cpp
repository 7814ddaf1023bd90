#define BOOST_TEST_MODULE runtime_config
#include <boost/test/unit_test.hpp>

#include "messages/log.hpp"
#include "runtime/affine_sharing.hpp"
#include "runtime/config.hpp"

#include <caf/actor_system.hpp>
#include <caf/scheduler/coordinator.hpp>

#include <fstream>
#include <vector>

using namespace kvtier;
using kvtier::runtime::kvtier_config;

namespace {

/// Loads `ini` with command-line `args` (argv[0] added here).
caf::error load(kvtier_config& cfg, const std::string& ini,
                std::vector<std::string> args = {}) {
  std::vector<char*> argv{const_cast<char*>("kvtier")};
  for (auto& a : args)
    argv.push_back(a.data());
  return cfg.load(static_cast<int>(argv.size()), argv.data(), ini);
}

std::string error_text(const std::string& ini,
                       std::vector<std::string> args = {}) {
  kvtier_config cfg;
  auto err = load(cfg, ini, std::move(args));
  BOOST_REQUIRE(err);
  BOOST_TEST(static_cast<ec>(err.code()) == ec::invalid_config);
  return describe(err);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(embedded_default_loads_and_validates) {
  kvtier_config cfg;
  auto err = load(cfg, runtime::embedded_default_config());
  BOOST_TEST(!err, describe(err));
  BOOST_TEST(cfg.options.ram_cap_bytes == 2ull << 30);
  BOOST_TEST(cfg.options.ssd_dir.empty());           // no cold tier by default
  BOOST_TEST(cfg.replay.ssd_dir == "demo-data/ssd"); // the demo's
  BOOST_TEST(cfg.options.model == "llama-3.1-8b");
  BOOST_TEST(cfg.options.model_scale == 1.0 / 64);
  BOOST_TEST(caf::get_or(cfg, "scheduler.policy", caf::atom("none"))
             == caf::atom("affine"));
}

BOOST_AUTO_TEST_CASE(scheduler_policy_is_checked_and_installed) {
  auto t = error_text("[scheduler]\npolicy='fastest'\n");
  BOOST_TEST(contains(t, "scheduler.policy"), t);
  BOOST_TEST(contains(t, "fastest"), t);
  BOOST_TEST(contains(t, "'affine', 'sharing', 'stealing'"), t);
  // 'affine' is kvtier's own: the actor system runs it, not CAF's default.
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, "[scheduler]\npolicy='affine'\n"));
  caf::actor_system sys{cfg};
  using affine = caf::scheduler::coordinator<runtime::affine_sharing>;
  BOOST_TEST(dynamic_cast<affine*>(&sys.scheduler()) != nullptr);
  // CAF's own names are left to CAF.
  kvtier_config sharing;
  BOOST_REQUIRE(!load(sharing, "[scheduler]\npolicy='sharing'\n"));
  caf::actor_system sys2{sharing};
  BOOST_TEST(dynamic_cast<affine*>(&sys2.scheduler()) == nullptr);
}

BOOST_AUTO_TEST_CASE(the_shipped_scheduler_bounds_an_actors_turn) {
  // Unbounded (CAF's default), an actor with a deep mailbox (the SSD actor
  // under a write backlog) kept its worker until the mailbox was empty,
  // and the facade's reply it had queued on that worker waited for it.
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, runtime::embedded_default_config()));
  caf::actor_system sys{cfg};
  auto n = sys.scheduler().max_throughput();
  BOOST_TEST(n >= 1u);
  BOOST_TEST(n <= 1000u);
}

BOOST_AUTO_TEST_CASE(command_line_overrides_the_file) {
  kvtier_config cfg;
  auto err = load(cfg, runtime::embedded_default_config(),
                  {"--ram-tier.cap-bytes=4194304", "--ssd-tier.dir=/x"});
  BOOST_TEST(!err, describe(err));
  BOOST_TEST(cfg.options.ram_cap_bytes == 4194304u);
  BOOST_TEST(cfg.options.ssd_dir == "/x");
}

BOOST_AUTO_TEST_CASE(out_of_range_values_name_key_and_range) {
  auto t = error_text("[ram-tier]\ncap-bytes=1000\n");
  BOOST_TEST(contains(t, "ram-tier.cap-bytes = 1000"), t);
  BOOST_TEST(contains(t, "1 MiB .. 16 TiB"), t);
  t = error_text("[ssd-tier]\nalignment=3000\n");
  BOOST_TEST(contains(t, "ssd-tier.alignment = 3000"), t);
  BOOST_TEST(contains(t, "power of two"), t);
  t = error_text("[ssd-tier]\nio-engine=\"fast\"\n");
  BOOST_TEST(contains(t, ":2: ssd-tier.io-engine: expected one of auto, "
                         "uring, threads, not 'fast'"),
             t);
  t = error_text("[model]\npreset=\"gpt-9\"\n");
  BOOST_TEST(contains(t, "unknown geometry preset 'gpt-9'"), t);
  t = error_text("[model]\nscale=2.0\n");
  BOOST_TEST(
    contains(t, "model.scale = 2 is outside the accepted range (0, 1]"), t);
  t = error_text("", {"--admission.position-limit=0"});
  BOOST_TEST(contains(t, "admission.position-limit = 0"), t);
  t = error_text("[cluster]\nmax-unproven-connections=0\n");
  BOOST_TEST(contains(t, "cluster.max-unproven-connections = 0"), t);
  BOOST_TEST(contains(t, "1 .. 65536"), t);
  t = error_text("[cluster]\nhandshake-timeout-ms=50\n");
  BOOST_TEST(contains(t, "cluster.handshake-timeout-ms = 50"), t);
  // The penalty doubles up to the timeout: it may not start above it.
  t = error_text("[cluster]\nhandshake-timeout-ms=1000\n"
                 "failed-handshake-penalty-ms=2000\n");
  BOOST_TEST(contains(t, "cluster.failed-handshake-penalty-ms = 2000"), t);
  BOOST_TEST(contains(t, "0 .. cluster.handshake-timeout-ms"), t);
}

BOOST_AUTO_TEST_CASE(admission_max_queued_is_read_and_range_checked) {
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, runtime::embedded_default_config()));
  BOOST_TEST(cfg.options.max_queued == 4096u);
  kvtier_config one;
  BOOST_REQUIRE(!load(one, "[admission]\nmax-queued=1\n"));
  BOOST_TEST(one.options.max_queued == 1u);
  auto t = error_text("[admission]\nmax-queued=0\n");
  BOOST_TEST(contains(t, "admission.max-queued = 0"), t);
  BOOST_TEST(contains(t, "1 .. 1048576"), t);
  t = error_text("", {"--admission.max-queued=1048577"});
  BOOST_TEST(contains(t, "admission.max-queued = 1048577"), t);
}

BOOST_AUTO_TEST_CASE(dotted_sections_and_unknown_keys_are_refused) {
  auto t = error_text("[kvtier.ram-tier]\ncap-bytes=4194304\n");
  BOOST_TEST(contains(t, "section [kvtier.ram-tier] has a dot"), t);
  BOOST_TEST(contains(t, "[ram-tier]"), t);
  t = error_text("[ram-tier]\ncapacity=4194304\n");
  BOOST_TEST(contains(t, ":2: unknown key ram-tier.capacity"), t);
}

BOOST_AUTO_TEST_CASE(an_unknown_section_is_refused_naming_the_nearest) {
  // CAF would skip the section whole: a node without its SSD tier.
  auto t = error_text("[ram-tier]\ncap-bytes=4194304\n[ssd_tier]\n"
                      "dir=\"/mnt/kv\"\n");
  BOOST_TEST(contains(t, ":3: unknown section [ssd_tier] (did you mean "
                         "[ssd-tier]? kvtier's are in conf/kvtier.conf)"),
             t);
  t = error_text("[wholly-unrelated]\nx=1\n");
  BOOST_TEST(contains(t, ":1: unknown section [wholly-unrelated]"), t);
  BOOST_TEST(!contains(t, "did you mean"), t);
  // CAF's own sections stay CAF's.
  kvtier_config cfg;
  auto err = load(cfg, "[scheduler]\nmax-throughput=100\n");
  BOOST_TEST(!err, describe(err));
}

BOOST_AUTO_TEST_CASE(bad_command_line_options_get_kvtiers_own_words) {
  // An unknown section or key: named, with the nearest option.
  auto t = error_text("", {"--ssd_tier.dir=/mnt/kv"});
  BOOST_TEST(t
               == "kvtier: invalid_config: --ssd_tier.dir=/mnt/kv: unknown "
                  "option (did you mean --ssd-tier.dir? `kvtier config` "
                  "prints kvtier's options)",
             t);
  t = error_text("", {"--ram-tier.cap-byte=1"});
  BOOST_TEST(contains(t, "--ram-tier.cap-byte: unknown option (did you mean "
                         "--ram-tier.cap-bytes?"),
             t);
  t = error_text("", {"--scheduler.max-thread=2"});
  BOOST_TEST(contains(t, "(did you mean --scheduler.max-threads?"), t);
  // One of CAF's options with a value of another type.
  t = error_text("", {"--scheduler.max-threads=-3"});
  BOOST_TEST(contains(t, "--scheduler.max-threads=-3: scheduler.max-threads: "
                         "expected a non-negative integer, not '-3'"),
             t);
  for (auto& text : {t, error_text("", {"--no-such-option=1"})})
    BOOST_TEST(!contains(text, "parser_error"), text);
  // CAF's options still reach CAF.
  kvtier_config cfg;
  auto err = load(cfg, runtime::embedded_default_config(),
                  {"--scheduler.policy=sharing", "--scheduler.max-threads=3"});
  BOOST_TEST(!err, describe(err));
  BOOST_TEST(caf::get_or(cfg, "scheduler.max-threads", size_t{0}) == 3u);
}

BOOST_AUTO_TEST_CASE(malformed_values_and_options_are_refused) {
  auto t = error_text("", {"--ram-tier.cap-bytes=lots"});
  BOOST_TEST(contains(t, "--ram-tier.cap-bytes=lots: ram-tier.cap-bytes: "
                         "expected a non-negative size"),
             t);
  t = error_text("", {"--no-such-option=1"});
  BOOST_TEST(contains(t, "no-such-option"), t);
}

BOOST_AUTO_TEST_CASE(config_file_flag_reads_another_file) {
  auto path = std::string{"/tmp/kvtier_config_test.conf"};
  {
    std::ofstream out(path);
    out << "[ram-tier]\ncap-bytes=8388608\n";
  }
  kvtier_config cfg;
  std::string flag = "--config-file=" + path;
  char* argv[] = {const_cast<char*>("kvtier"), flag.data()};
  auto err = cfg.load(2, argv);
  BOOST_TEST(!err, describe(err));
  BOOST_TEST(cfg.options.ram_cap_bytes == 8388608u);
  std::remove(path.c_str());
  std::string missing = "--config-file=/nonexistent/kvtier.conf";
  char* argv2[] = {const_cast<char*>("kvtier"), missing.data()};
  kvtier_config cfg2;
  auto err2 = cfg2.load(2, argv2);
  BOOST_REQUIRE(err2);
  BOOST_TEST(contains(describe(err2), "/nonexistent/kvtier.conf"));
}

BOOST_AUTO_TEST_CASE(model_section_holds_preset_scale_identity_and_layers) {
  kvtier_config cfg;
  auto err = load(cfg,
                  "[model]\nidentity=\"llama-3.1-8b-instruct kv=fp8\"\n"
                  "preset=\"tiny-dense\"\nscale=0.5\n",
                  {"--model.layers=8*(5*ring:8192:1024,kv:8192)"});
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  auto& o = cfg.options;
  BOOST_TEST(o.model == "tiny-dense");
  BOOST_TEST(o.model_scale == 0.5);
  BOOST_TEST(o.model_identity == "llama-3.1-8b-instruct kv=fp8");
  BOOST_TEST(o.model_layers == "8*(5*ring:8192:1024,kv:8192)");
  // The layers replace the preset, taken as given (scale not applied).
  auto m = runtime::running_model(o);
  BOOST_REQUIRE(m);
  BOOST_TEST(m->identity == o.model_identity);
  BOOST_TEST(m->geometry.layers.size() == 48u);
  BOOST_TEST(m->geometry.count(tiers::layer_kind::ring) == 40u);
  BOOST_TEST(m->geometry.layers[5].bytes_per_token == 8192u);
  BOOST_TEST(m->geometry.layers[0].window == 1024u);
  // Without layers the preset at its scale.
  o.model_layers.clear();
  auto p = runtime::running_geometry(o);
  BOOST_REQUIRE(p);
  BOOST_TEST(p->name == "tiny-dense");
  BOOST_TEST(p->layers[0].bytes_per_token == 32u);
}

BOOST_AUTO_TEST_CASE(moved_admission_model_keys_are_refused_naming_the_new) {
  auto t = error_text("[admission]\nmodel=\"tiny-dense\"\n");
  BOOST_TEST(contains(t, "admission.model has moved: use model.preset"), t);
  t = error_text("[admission]\nmodel-scale=0.5\n");
  BOOST_TEST(contains(t, "admission.model-scale has moved: use model.scale"),
             t);
  t = error_text("", {"--admission.model-scale=0.5"});
  BOOST_TEST(contains(t, "use model.scale"), t);
  t = error_text("", {"--admission.model=tiny-dense"});
  BOOST_TEST(contains(t, "use model.preset"), t);
}

BOOST_AUTO_TEST_CASE(layer_descriptions_that_do_not_parse_name_the_position) {
  auto t = error_text("", {"--model.layers=32*kv"});
  BOOST_TEST(contains(t, "model.layers: at character 6"), t);
  BOOST_TEST(contains(t, "expected ':' and the bytes per token"), t);
  t = error_text("[model]\nlayers=\"4*(kv:64,ring:32)\"\n");
  BOOST_TEST(contains(t, "at character 17"), t);
  BOOST_TEST(contains(t, "window"), t);
  t = error_text("[model]\nlayers=\"4*lstm:9\"\n");
  BOOST_TEST(contains(t, "at character 3"), t);
  BOOST_TEST(contains(t, "a layer kind (kv, ring, recurrent, object)"), t);
  t = error_text("[model]\nlayers=\"kv:0\"\n");
  BOOST_TEST(contains(t, "at character 4"), t);
  BOOST_TEST(contains(t, "positive"), t);
  t = error_text("[model]\nlayers=\"2*(kv:8\"\n");
  BOOST_TEST(contains(t, "expected ')'"), t);
  t = error_text("[model]\nidentity=\"a\tb\"\n");
  BOOST_TEST(contains(t, "model.identity"), t);
  t = error_text("[model]\nflavour=\"x\"\n");
  BOOST_TEST(contains(t, "unknown key model.flavour"), t);
}

BOOST_AUTO_TEST_CASE(an_integer_for_a_real_option_is_that_real) {
  // CAF 0.17's INI reader drops a value of another type without a word;
  // kvtier takes an integer for a real number as that number.
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, "[model]\nscale=1\n[replay]\nspeed=2\n"));
  BOOST_TEST(cfg.options.model_scale == 1.0);
  BOOST_TEST(cfg.replay.speed == 2.0);
}

BOOST_AUTO_TEST_CASE(a_value_of_another_type_is_refused_naming_the_key) {
  kvtier_config cfg;
  auto err = load(cfg, "[cluster]\npeers=\"127.0.0.1:7400\"\n");
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err).find("cluster.peers") != std::string::npos,
             describe(err));
  kvtier_config ok;
  BOOST_REQUIRE(!load(ok, "[cluster]\npeers=[\"127.0.0.1:7400\"]\n"));
  BOOST_TEST(ok.options.cluster_peers
             == std::vector<std::string>{"127.0.0.1:7400"});
  kvtier_config bad;
  err = load(bad, "[ram-tier]\ncap-bytes=\"big\"\n");
  BOOST_REQUIRE(err);
  BOOST_TEST(describe(err).find("ram-tier.cap-bytes") != std::string::npos,
             describe(err));
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_line_and_key_and_what_was_expected) {
  kvtier_config cfg;
  std::vector<char*> argv{const_cast<char*>("kvtier")};
  auto err = cfg.load(1, argv.data(), "[ram-tier]\n\ncap-bytes=-5\n",
                      "/etc/kvtier.conf");
  BOOST_REQUIRE(err);
  auto t = describe(err);
  BOOST_TEST(contains(t, "/etc/kvtier.conf:3: ram-tier.cap-bytes: expected a "
                         "non-negative size (e.g. 4096, 512MB, 8GiB), not "
                         "'-5'"),
             t);
  t = error_text("[ram-tier]\ncap-bytes=\n");
  BOOST_TEST(contains(t, ":2: ram-tier.cap-bytes: expected"), t);
  BOOST_TEST(contains(t, "not nothing"), t);
  t = error_text("[ram-tier]\nobjects=\"no\"\n");
  BOOST_TEST(contains(t, "ram-tier.objects: expected true or false"), t);
  t = error_text("[model]\nscale=\"small\"\n");
  BOOST_TEST(contains(t, "model.scale: expected a number"), t);
  // One prefix, not two.
  BOOST_TEST(t.find("kvtier: kvtier:") == std::string::npos, t);
}

BOOST_AUTO_TEST_CASE(sizes_take_units) {
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg,
                      "[ram-tier]\ncap-bytes=8GiB\n[ssd-tier]\n"
                      "cap-bytes=512MB\nwrite-behind-cap-bytes=64 MiB\n",
                      {"--admission.kv-budget-bytes=1.5GiB"}));
  BOOST_TEST(cfg.options.ram_cap_bytes == 8ull << 30);
  BOOST_TEST(cfg.options.ssd_cap_bytes == 512000000u);
  BOOST_TEST(cfg.options.write_behind_cap_bytes == 64ull << 20);
  BOOST_TEST(cfg.options.kv_budget_bytes == 3ull << 29);
  // A unit it does not know, or a fraction of a byte, is refused.
  auto t = error_text("[ram-tier]\ncap-bytes=8GB2\n");
  BOOST_TEST(contains(t, "ram-tier.cap-bytes: expected a non-negative size"),
             t);
  t = error_text("[ram-tier]\ncap-bytes=1.5B\n");
  BOOST_TEST(contains(t, "not '1.5B'"), t);
}

BOOST_AUTO_TEST_CASE(booleans_take_true_and_false_on_the_command_line) {
  kvtier_config off;
  BOOST_REQUIRE(!load(off, runtime::embedded_default_config(),
                      {"--ram-tier.objects=false"}));
  BOOST_TEST(!off.options.objects);
  kvtier_config on;
  BOOST_REQUIRE(
    !load(on, "[ram-tier]\nobjects=false\n", {"--ram-tier.objects"}));
  BOOST_TEST(on.options.objects);
  auto t = error_text("", {"--ram-tier.objects=maybe"});
  BOOST_TEST(contains(t, "--ram-tier.objects=maybe: ram-tier.objects: "
                         "expected true or false"),
             t);
  t = error_text("", {"--ram-tier.cap-bytes"});
  BOOST_TEST(contains(t, "--ram-tier.cap-bytes: expected a non-negative size"),
             t);
}

BOOST_AUTO_TEST_CASE(
  command_line_strings_need_no_quotes_and_unknown_keys_fail) {
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, "", {"--model.identity=my model \"v2\""}));
  BOOST_TEST(cfg.options.model_identity == "my model \"v2\"");
  auto t = error_text("", {"--ram-tier.capacity=1"});
  BOOST_TEST(contains(t, "--ram-tier.capacity: unknown option"), t);
}

BOOST_AUTO_TEST_CASE(log_level_takes_its_words_and_refuses_others) {
  auto before = log::current_level();
  kvtier_config cfg;
  BOOST_REQUIRE(!load(cfg, "[log]\nlevel=\"debug\"\n"));
  BOOST_TEST(cfg.options.log_level == "debug");
  BOOST_TEST((log::current_level() == log::level::debug));
  kvtier_config cli;
  BOOST_REQUIRE(!load(cli, "[log]\nlevel=\"debug\"\n", {"--log.level=off"}));
  BOOST_TEST(cli.options.log_level == "off");
  BOOST_TEST((log::current_level() == log::level::off));
  log::set_level(before);
  // The file's line and the command line's argument, each named.
  std::vector<char*> argv{const_cast<char*>("kvtier")};
  kvtier_config bad;
  auto err = bad.load(1, argv.data(), "[log]\n; loud\nlevel=\"loud\"\n",
                      "/etc/kvtier.conf");
  BOOST_REQUIRE(err);
  auto t = describe(err);
  BOOST_TEST(t
               == "kvtier: invalid_config: /etc/kvtier.conf:3: log.level: "
                  "expected one of trace, debug, info, warn, error, off, not "
                  "'loud'",
             t);
  t = error_text("", {"--log.level=WARN"});
  BOOST_TEST(contains(t, "--log.level=WARN: log.level: expected one of trace, "
                         "debug, info, warn, error, off, not 'WARN'"),
             t);
  t = error_text("[log]\nlevel=3\n");
  BOOST_TEST(contains(t, ":2: log.level: expected a string in quotes, not '3'"),
             t);
  // A level the file did not pass through (set in code) is refused too.
  runtime::service_options o;
  o.log_level = "verbose";
  auto v = o.validate();
  BOOST_REQUIRE(v);
  BOOST_TEST(describe(v)
               == "kvtier: invalid_config: log.level = \"verbose\" "
                  "is not one of trace, debug, info, warn, error, "
                  "off",
             describe(v));
}
