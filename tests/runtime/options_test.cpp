// The one list of options (runtime/options.hpp) against everything that
// states a default: conf/kvtier.conf as compiled in must set every option
// to exactly `service_options{}`'s and `replay_settings{}`'s value, name no
// key the list lacks and lack none it has; docs/configuration.md names
// every key. A failure names the option. Also the defaults that matter:
// idle demotion on with an SSD tier, its timer never faster than once a
// second.
#define BOOST_TEST_MODULE runtime_options
#include <boost/test/unit_test.hpp>

#include "actors/cache_service.hpp"
#include "runtime/options.hpp"
#include "runtime/service.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace kvtier;
using namespace kvtier::runtime;

namespace {

kvtier_config loaded_default() {
  kvtier_config cfg;
  char arg0[] = "kvtier";
  char* argv[] = {arg0};
  auto err = cfg.load(1, argv, embedded_default_config());
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  return cfg;
}

/// "section.key" of every `key=value` line of `ini`, per kvtier section
/// (sections the list does not name, e.g. [scheduler], are CAF's).
std::set<std::string> keys_in(const std::string& ini,
                              const std::set<std::string>& sections) {
  std::set<std::string> out;
  std::istringstream in(ini);
  std::string line, section;
  while (std::getline(in, line)) {
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == ';')
      continue;
    if (line[first] == '[') {
      section = line.substr(first + 1, line.find(']') - first - 1);
      continue;
    }
    auto eq = line.find('=');
    if (eq != std::string::npos && sections.count(section) > 0)
      out.insert(section + "." + line.substr(first, eq - first));
  }
  return out;
}

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string{KVTIER_SOURCE_DIR} + "/" + rel);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << rel);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

BOOST_AUTO_TEST_CASE(the_embedded_configuration_agrees_with_service_options) {
  auto cfg = loaded_default();
  for (auto& d : differing_options(cfg.options, service_options{}))
    BOOST_ERROR("conf/kvtier.conf and service_options{} disagree on " << d);
  for (auto& d : differing_options(cfg.replay, replay_settings{}))
    BOOST_ERROR("conf/kvtier.conf and replay_settings{} disagree on " << d);
}

BOOST_AUTO_TEST_CASE(the_comparison_names_the_option_that_differs) {
  service_options a, b;
  b.idle_demotion_ms = 7;
  b.objects = false;
  auto d = differing_options(a, b);
  BOOST_REQUIRE_EQUAL(d.size(), 2u);
  BOOST_TEST(d[0] == "ram-tier.objects: true, not false");
  BOOST_TEST(d[1] == "service.idle-demotion-ms: 300000, not 7");
  replay_settings r;
  r.ssd_dir = "x";
  BOOST_TEST(differing_options(replay_settings{}, r).at(0)
             == "replay.ssd-dir: \"demo-data/ssd\", not \"x\"");
}

BOOST_AUTO_TEST_CASE(the_embedded_file_sets_every_option_and_no_other) {
  auto names = option_names();
  std::set<std::string> listed(names.begin(), names.end());
  BOOST_TEST(listed.size() == names.size()); // each declared once
  std::set<std::string> sections;
  for (auto& n : names)
    sections.insert(n.substr(0, n.find('.')));
  auto in_file = keys_in(embedded_default_config(), sections);
  for (auto& n : listed)
    BOOST_TEST(in_file.count(n) == 1u, n << " is missing in conf/kvtier.conf");
  for (auto& n : in_file)
    BOOST_TEST(listed.count(n) == 1u,
               n << " is in conf/kvtier.conf but not in runtime/options.hpp");
  // The compiled-in text is the file in the tree.
  BOOST_TEST(read_source("conf/kvtier.conf") == embedded_default_config());
}

BOOST_AUTO_TEST_CASE(the_docs_name_every_option) {
  auto docs = read_source("docs/configuration.md");
  for (auto& n : option_names())
    BOOST_TEST(docs.find("`" + n + "`") != std::string::npos,
               n << " is not in docs/configuration.md");
}

BOOST_AUTO_TEST_CASE(kvtier_config_prints_every_option) {
  auto cfg = loaded_default();
  auto values = option_values(cfg.options);
  BOOST_TEST(values.size() == option_values(service_options{}).size());
  BOOST_TEST(values.front().section == "ram-tier");
  BOOST_TEST(values.front().key == "cap-bytes");
  BOOST_TEST(values.front().text == "2147483648");
}

BOOST_AUTO_TEST_CASE(idle_demotion_is_on_by_default_with_an_ssd_tier) {
  BOOST_TEST(service_options{}.idle_demotion_ms == 300000u);
  tiers::ssd::memory_file_system memory;
  auto opts = service_options{};
  opts.model = "tiny-dense";
  opts.model_scale = 1;
  opts.ram_cap_bytes = 1u << 20;
  opts.ssd_dir = "/ssd";
  opts.ssd_cap_bytes = 16u << 20;
  opts.io_engine = "threads";
  {
    service with_ssd{opts, service_parts{&memory}};
    BOOST_REQUIRE(!with_ssd.start_error());
    BOOST_TEST(*with_ssd.stop_idle_demotion()); // it was running
  }
  opts.ssd_dir.clear();
  service without{opts};
  BOOST_REQUIRE(!without.start_error());
  BOOST_TEST(!*without.stop_idle_demotion()); // demoting to nowhere: off
}

BOOST_AUTO_TEST_CASE(the_idle_timer_never_runs_more_than_once_a_second) {
  using std::chrono::milliseconds;
  BOOST_TEST((actors::min_idle_period == milliseconds{1000}));
  BOOST_TEST((actors::idle_period(1) == milliseconds{1000}));
  BOOST_TEST((actors::idle_period(0) == milliseconds{1000}));
  BOOST_TEST((actors::idle_period(4000) == milliseconds{1000}));
  BOOST_TEST((actors::idle_period(8000) == milliseconds{2000}));
  BOOST_TEST((actors::idle_period(300000) == milliseconds{75000}));
}
