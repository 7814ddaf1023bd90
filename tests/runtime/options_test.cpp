// The one list of options (runtime/options.hpp) against everything that
// states a default: conf/kvtier.conf as compiled in must set every option
// to exactly `service_options{}`'s and `replay_settings{}`'s value, name no
// key the list lacks and lack none it has; docs/configuration.md states
// every option's default, range and unit as the list declares them;
// validate() refuses every number just outside its declared range. A
// failure names the option. Also the defaults that matter:
// idle demotion on with an SSD tier, its timer never faster than once a
// second.
#define BOOST_TEST_MODULE runtime_options
#include <boost/test/unit_test.hpp>

#include "actors/cache_service.hpp"
#include "actors/checkpoints_actor.hpp"
#include "actors/feed_actor.hpp"
#include "actors/peer_tier_actor.hpp"
#include "actors/ram_tier_actor.hpp"
#include "actors/serve_actor.hpp"
#include "actors/sessions_actor.hpp"
#include "actors/ssd_tier_actor.hpp"
#include "messages/transfer_table.hpp"
#include "messages/wire_guard.hpp"
#include "runtime/http/endpoint.hpp"
#include "runtime/net/port_guard.hpp"
#include "runtime/options.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/simulate.hpp"
#include "tiers/admission.hpp"
#include "tiers/membership.hpp"
#include "tiers/routing.hpp"
#include "tiers/ssd/memory_file_system.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

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

/// The default, range and unit cells of every row of `md`'s option tables
/// (`| `section.key` | default | range | unit | meaning |`), by key.
std::map<std::string, std::array<std::string, 3>>
doc_rows(const std::string& md) {
  std::map<std::string, std::array<std::string, 3>> out;
  std::istringstream in(md);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0)
      continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    std::string cell;
    while (std::getline(row, cell, '|')) {
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    if (cells.size() < 5)
      continue;
    out[cells[0].substr(1, cells[0].size() - 2)] = {cells[1], cells[2],
                                                    cells[3]};
  }
  return out;
}

template <class T>
constexpr bool is_number = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

/// `member` as a number (0 for another type).
template <class T>
double number_of(const T& member) {
  if constexpr (is_number<T>)
    return static_cast<double>(member);
  else
    return 0;
}

/// `member` set to `v` (numbers only); false for another type.
template <class T>
bool set_number(T& member, double v) {
  if constexpr (is_number<T>) {
    member = static_cast<T>(v);
    return true;
  } else {
    return false;
  }
}

/// Values just outside `r`'s range, with `o` giving the bounds that name
/// another option (integers for an integer option).
template <class T>
std::vector<double> just_outside(const option_rule& r,
                                 const service_options& o) {
  auto resolve = [&](const option_bound& bound) {
    if (bound.key == nullptr)
      return bound.value;
    std::string_view named{bound.key};
    double v = 0;
#define KVTIER_NUMBER(section, key, member, rule, help)                        \
  if (named == section "." key)                                                \
    v = number_of(o.member);
    KVTIER_SERVICE_OPTIONS(KVTIER_NUMBER)
#undef KVTIER_NUMBER
    return bound.value * v;
  };
  auto lo = resolve(r.min), hi = resolve(r.max);
  constexpr bool whole = std::is_integral_v<T>;
  std::vector<double> out{whole ? hi + 1 : std::nextafter(hi, 2 * hi + 1)};
  if (r.open_min)
    out.push_back(lo);
  else if (lo > 0)
    out.push_back(whole ? lo - 1 : std::nextafter(lo, -1.0));
  if (r.zero_too)
    std::erase(out, 0.0);
  return out;
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

BOOST_AUTO_TEST_CASE(the_embedded_file_states_every_numbers_range) {
  // The comment lines right above a number's key end with
  // "; Range: RANGE (UNIT)", as the list declares them.
  std::map<std::string, std::vector<std::string>> comments;
  std::istringstream in(embedded_default_config());
  std::string line, section;
  std::vector<std::string> block;
  while (std::getline(in, line)) {
    if (line.rfind(";", 0) == 0) {
      block.push_back(line);
      continue;
    }
    if (line.rfind("[", 0) == 0)
      section = line.substr(1, line.find(']') - 1);
    else if (auto eq = line.find('='); eq != std::string::npos)
      comments[section + "." + line.substr(0, eq)] = block;
    block.clear();
  }
  for (auto& d : option_declarations()) {
    if (d.unit.empty())
      continue;
    auto want = "; Range: " + d.range + " (" + d.unit + ")";
    auto& c = comments[d.name];
    BOOST_TEST((!c.empty() && c.back() == want),
               d.name << ": conf/kvtier.conf says '"
                      << (c.empty() ? std::string{"nothing"} : c.back())
                      << "' above it, runtime/options.hpp '" << want << "'");
  }
}

BOOST_AUTO_TEST_CASE(the_docs_state_every_options_default_range_and_unit) {
  auto rows = doc_rows(read_source("docs/configuration.md"));
  std::set<std::string> sections;
  for (auto& d : option_declarations()) {
    sections.insert(d.name.substr(0, d.name.find('.')));
    auto row = rows.find(d.name);
    if (row == rows.end()) {
      BOOST_ERROR(d.name << " has no row in docs/configuration.md");
      continue;
    }
    auto& [dflt, range, unit] = row->second;
    auto stated = "`" + d.default_text + "`";
    BOOST_TEST((dflt == stated || dflt.rfind(stated + " (", 0) == 0),
               d.name << ": docs/configuration.md says default '" << dflt
                      << "', runtime/options.hpp '" << stated << "'");
    BOOST_TEST(range == d.range, d.name << ": docs/configuration.md says "
                                           "range '"
                                        << range << "', runtime/options.hpp '"
                                        << d.range << "'");
    BOOST_TEST(unit == d.unit, d.name << ": docs/configuration.md says unit '"
                                      << unit << "', runtime/options.hpp '"
                                      << d.unit << "'");
  }
  // A row for a key of kvtier's sections that the list lacks is stale.
  auto names = option_names();
  for (auto& [name, cells] : rows)
    if (sections.count(name.substr(0, name.find('.'))) > 0)
      BOOST_TEST(std::count(names.begin(), names.end(), name) == 1,
                 name << " is in docs/configuration.md but not in "
                         "runtime/options.hpp");
}

BOOST_AUTO_TEST_CASE(a_doc_row_that_disagrees_is_found) {
  // The parser the test above relies on: a row's cells, trimmed.
  auto rows = doc_rows("| key | default | range | unit | meaning |\n"
                       "|---|---|---|---|---|\n"
                       "| `ram-tier.cap-bytes` | `1` (one) | 0 .. 1 | ms | "
                       "x |\n");
  BOOST_REQUIRE_EQUAL(rows.size(), 1u);
  auto& [dflt, range, unit] = rows.at("ram-tier.cap-bytes");
  BOOST_TEST(dflt == "`1` (one)");
  BOOST_TEST(range == "0 .. 1");
  BOOST_TEST(unit == "ms");
}

BOOST_AUTO_TEST_CASE(every_numeric_option_is_refused_just_outside_its_range) {
  // validate() is generated from the list: each numeric option, set just
  // past either end of its declared range, is refused naming the key, the
  // value and the range as the docs state it.
  using namespace option_rules;
  size_t tried = 0;
  auto expect_refused = [&](const char* name, const option_rule& r,
                            const caf::error& err) {
    ++tried;
    BOOST_REQUIRE_MESSAGE(err, name << ": a value outside " << range_text(r)
                                    << " was accepted");
    auto t = describe(err);
    BOOST_TEST(t.find(std::string{name} + " = ") != std::string::npos, t);
    BOOST_TEST(t.find("accepted range " + range_text(r)) != std::string::npos,
               t);
  };
#define KVTIER_SERVICE_TRY(section, key, member, rule, help)                   \
  for (auto v : just_outside<decltype(service_options::member)>(               \
         rule, service_options{})) {                                           \
    service_options o;                                                         \
    if (set_number(o.member, v))                                               \
      expect_refused(section "." key, rule, o.validate());                     \
  }
#define KVTIER_REPLAY_TRY(section, key, member, rule, help)                    \
  for (auto v : just_outside<decltype(replay_settings::member)>(               \
         rule, service_options{})) {                                           \
    replay_settings r;                                                         \
    if (set_number(r.member, v))                                               \
      expect_refused(section "." key, rule, r.validate());                     \
  }
  KVTIER_SERVICE_OPTIONS(KVTIER_SERVICE_TRY)
  KVTIER_REPLAY_OPTIONS(KVTIER_REPLAY_TRY)
#undef KVTIER_SERVICE_TRY
#undef KVTIER_REPLAY_TRY
  BOOST_TEST(tried > 60u);
}

BOOST_AUTO_TEST_CASE(every_rule_is_sound) {
  // Defaults inside their ranges, a unit for every number and none for
  // the rest, and every bound that names an option names a number of the
  // service list.
  BOOST_TEST(!service_options{}.validate(),
             describe(service_options{}.validate()));
  BOOST_TEST(!replay_settings{}.validate(),
             describe(replay_settings{}.validate()));
  for (auto& d : option_declarations()) {
    auto* r = rule_of(d.name);
    BOOST_REQUIRE(r != nullptr);
    BOOST_TEST(!d.range.empty(), d.name << " states no accepted values");
    BOOST_TEST(r->numeric == !d.unit.empty(),
               d.name << ": a unit for every number and only for numbers");
    for (auto* b : {&r->min, &r->max})
      if (b->key != nullptr) {
        auto* named = rule_of(b->key);
        BOOST_TEST((named != nullptr && named->numeric
                    && std::string_view{b->key}.rfind("replay.", 0) != 0),
                   d.name << ": bound " << b->key << " is no numeric option");
      }
  }
}

BOOST_AUTO_TEST_CASE(ranges_and_numbers_are_written_as_the_docs_write_them) {
  using namespace option_rules;
  BOOST_TEST(range_text(bytes(MiB, 16 * TiB)) == "1 MiB .. 16 TiB");
  BOOST_TEST(range_text(bytes(4096, TiB)) == "4096 .. 1 TiB");
  BOOST_TEST(range_text(bytes(512, MiB).and_is(checks::power_of_two))
             == "a power of two, 512 .. 1 MiB");
  BOOST_TEST(range_text(number("ratio", 0, 1).exclusive_min().or_zero())
             == "0 or (0, 1]");
  BOOST_TEST(range_text(millis(times(2, "cluster.heartbeat-ms"), 3600000))
             == "2 x cluster.heartbeat-ms .. 3600000");
  BOOST_TEST(range_text(millis(0, times(1, "cluster.handshake-timeout-ms")))
             == "0 .. cluster.handshake-timeout-ms");
  BOOST_TEST(range_text(checked(checks::io_engine)) == "auto, uring, threads");
  BOOST_TEST(range_text(flag()) == "true, false");
  BOOST_TEST(number_text(0.1) == "0.1");
  BOOST_TEST(number_text(1e9) == "1000000000");
  BOOST_TEST(number_text(1.0 / 4096) == "0.000244140625");
  BOOST_TEST(number_text(3 * double(MiB) / 2, "bytes") == "1572864");
}

BOOST_AUTO_TEST_CASE(a_word_option_set_in_code_is_refused_naming_its_words) {
  service_options o;
  o.io_engine = "fast";
  BOOST_TEST(describe(o.validate())
               == "kvtier: invalid_config: ssd-tier.io-engine = \"fast\" is "
                  "not one of auto, uring, threads",
             describe(o.validate()));
  o = {};
  o.alignment = 3000;
  BOOST_TEST(describe(o.validate())
               == "kvtier: invalid_config: ssd-tier.alignment = 3000 is "
                  "outside the accepted range a power of two, 512 .. 1 MiB",
             describe(o.validate()));
  o = {};
  o.cluster_down_after_ms = 400; // below 2 x the heartbeat (250)
  BOOST_TEST(describe(o.validate())
               == "kvtier: invalid_config: cluster.down-after-ms = 400 is "
                  "outside the accepted range 2 x cluster.heartbeat-ms .. "
                  "3600000",
             describe(o.validate()));
}

BOOST_AUTO_TEST_CASE(config_struct_defaults_agree_with_the_shipped_options) {
  // The service builds every actor's and tier's config from
  // service_options (runtime/service/spawn.cpp); a config struct's own
  // default is for tests, and where an option also has one it must be the
  // shipped one, never a second value that pretends to be it.
  const service_options o;
  using ms = std::chrono::milliseconds;
  const actors::ram_tier_config ram;
  BOOST_TEST(ram.cap_bytes == o.ram_cap_bytes);
  BOOST_TEST(ram.objects == o.objects);
  BOOST_TEST(ram.deadline_ms == o.storage_deadline_ms);
  BOOST_TEST(ram.write_behind_bytes_per_s == o.write_behind_bytes_per_s);
  BOOST_TEST(ram.write_behind_delay_ms == o.write_behind_delay_ms);
  BOOST_TEST(ram.write_behind_cap_bytes == o.write_behind_cap_bytes);
  const tiers::ssd::ssd_config ssd;
  BOOST_TEST(ssd.byte_cap == o.ssd_cap_bytes);
  BOOST_TEST(ssd.queue_cap == o.write_behind_cap_bytes);
  BOOST_TEST(ssd.alignment == o.alignment);
  BOOST_TEST(ssd.max_chain == o.max_chain);
  const actors::ssd_parts ssd_actor;
  BOOST_TEST(ssd_actor.index_batch == o.ssd_index_batch);
  const actors::peer_tier_config peer;
  BOOST_TEST(peer.fetch_max_bytes == o.cluster_fetch_max_bytes);
  BOOST_TEST(peer.fetch_deadline_ms == o.cluster_fetch_deadline_ms);
  BOOST_TEST(peer.fetched_to_ssd == o.cluster_fetched_to_ssd);
  BOOST_TEST(peer.max_prompt_tokens == o.position_limit);
  BOOST_TEST(peer.ssd_deadline_ms == o.storage_deadline_ms);
  const actors::serve_config serve;
  BOOST_TEST(serve.limits.max_bytes == o.cluster_serve_max_bytes);
  BOOST_TEST(serve.limits.idle_ms == o.cluster_serve_idle_ms);
  BOOST_TEST(serve.lane_address == o.cluster_listen_address);
  BOOST_TEST(serve.tier_deadline_ms == o.cluster_fetch_deadline_ms / 2);
  BOOST_TEST(serve.max_prompt_tokens == o.position_limit);
  BOOST_TEST(actors::feed_config{}.ring == o.cluster_feed_ring);
  BOOST_TEST(actors::feed_config{}.ring_bytes == o.cluster_feed_ring_bytes);
  BOOST_TEST(tiers::admission_limits{}.max_queued == o.max_queued);
  const tiers::route_costs costs;
  BOOST_TEST(costs.prefill == o.route_prefill_cost);
  BOOST_TEST(costs.ram == o.route_ram_cost);
  BOOST_TEST(costs.ssd == o.route_ssd_cost);
  BOOST_TEST(costs.peer == o.route_peer_cost);
  BOOST_TEST(costs.peer_ssd == o.route_peer_ssd_cost);
  BOOST_TEST(costs.load_weight == o.route_load_weight);
  BOOST_TEST(costs.load_window == o.route_load_window);
  BOOST_TEST(costs.full_penalty == o.route_full_penalty);
  const net::port_limits port;
  BOOST_TEST(port.max_unproven == o.cluster_max_unproven_connections);
  BOOST_TEST(port.handshakes_per_s == double(o.cluster_handshakes_per_s));
  BOOST_TEST(port.burst == o.cluster_handshakes_per_s);
  BOOST_TEST((port.penalty_base == ms{o.cluster_failed_handshake_penalty_ms}));
  BOOST_TEST((port.penalty_max == ms{o.cluster_handshake_timeout_ms}));
  BOOST_TEST((port.handshake_deadline == ms{o.cluster_handshake_timeout_ms}));
  const tiers::timing t;
  BOOST_TEST((t.heartbeat == ms{o.cluster_heartbeat_ms}));
  BOOST_TEST((t.down_after == ms{o.cluster_down_after_ms}));
  BOOST_TEST((t.reconnect.base == ms{o.cluster_reconnect_backoff_ms}));
  BOOST_TEST((t.reconnect.cap == ms{o.cluster_reconnect_backoff_max_ms}));
  const http::endpoint_options http;
  BOOST_TEST(http.address == o.http_address);
  BOOST_TEST(http.max_connections == o.http_max_connections);
  BOOST_TEST((http.timeout == ms{o.http_timeout_ms}));
  BOOST_TEST(msg::default_max_message_bytes == o.cluster_max_message_bytes);
  // Actor states the service sets from the same options at spawn.
  // Default-initialized: `{}` would copy-list-initialize its route_load,
  // whose default constructor is explicit.
  const actors::cache_service_state service_state;
  BOOST_TEST(service_state.deadline_ms == o.storage_deadline_ms);
  BOOST_TEST(service_state.objects == o.objects);
  BOOST_TEST((actors::sessions_state{}.deadline == ms{o.storage_deadline_ms}));
  BOOST_TEST(
    (actors::checkpoints_state{}.deadline == ms{o.storage_deadline_ms}));
  const actors::ssd_parts parts;
  BOOST_TEST(parts.retry_backoff_ms == o.retry_backoff_ms);
  BOOST_TEST(parts.deadline_ms == o.storage_deadline_ms);
  const simulate_options reference;
  BOOST_TEST(reference.alignment == o.alignment);
  BOOST_TEST(reference.position_limit == o.position_limit);
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
