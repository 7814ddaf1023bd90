// The checks of kvtier's options: every value against its rule in the one
// list (runtime/options.hpp: ranges, named checks, bounds naming other
// options), the cluster's and the HTTP endpoint's settings, the running
// model (`running_model`), and the replay's settings. Errors name the
// option and what was wrong (`ec::invalid_config`). Reading the file and
// the command line is config.cpp's.
#include "runtime/config.hpp"
#include "runtime/options.hpp"

#include "runtime/net/address.hpp"
#include "runtime/net/tls.hpp"

#include "tiers/geometry.hpp"

#include "messages/assert.hpp"
#include "messages/log.hpp"
#include "tiers/entry_ranking.hpp"
#include "tiers/ssd/io_engine.hpp"
#include "tiers/ssd/write_admission.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

namespace kvtier::runtime {

namespace {

caf::error out_of_range(const std::string& key, const std::string& value,
                        const std::string& range) {
  return make_error(ec::invalid_config, key + " = " + value
                                          + " is outside the accepted range "
                                          + range);
}

template <class T>
double as_number(const T& v) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
    return static_cast<double>(v);
  else
    return std::nan(""); // no number: every comparison with it fails
}

/// The value of numeric option `name` of `o` (a bound naming it).
double number_of(const service_options& o, std::string_view name) {
#define KVTIER_NUMBER(section, key, member, rule, help)                        \
  if (name == section "." key)                                                 \
    return as_number(o.member);
  KVTIER_SERVICE_OPTIONS(KVTIER_NUMBER)
#undef KVTIER_NUMBER
  return std::nan("");
}

double bound_of(const option_bound& b, const service_options* o) {
  if (b.key == nullptr)
    return b.value;
  KVTIER_ASSERT(o != nullptr); // the replay list's bounds name no option
  return b.value * number_of(*o, b.key);
}

template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, double>)
    return number_text(v);
  else
    return std::to_string(v);
}

/// `v`, the value of option `name` with rule `r`, checked: a number against
/// its range (a bound naming another option is read from `o`) and its
/// number check, a word against its word check, and `o` against an
/// options check. `o` is null for the replay list (whose rules have no
/// options checks and no bounds naming an option).
template <class T>
caf::error check_value(const service_options* o, const char* name,
                       const option_rule& r, const T& v) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    auto x = static_cast<double>(v);
    auto lo = bound_of(r.min, o), hi = bound_of(r.max, o);
    bool in_range = (r.open_min ? x > lo : x >= lo) && x <= hi;
    bool checked =
      r.check == nullptr || r.check->number == nullptr || r.check->number(x);
    if (!((in_range && checked) || (r.zero_too && x == 0)))
      return out_of_range(name, value_text(v), range_text(r));
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (r.check != nullptr && r.check->word != nullptr && !r.check->word(v))
      return make_error(ec::invalid_config, std::string{name} + " = \"" + v
                                              + "\" is not one of "
                                              + r.check->words);
  }
  if (r.check != nullptr && r.check->options != nullptr) {
    KVTIER_ASSERT(o != nullptr);
    return r.check->options(*o);
  }
  return {};
}

/// Whether `r` is checked without the service's options: no options check
/// and no bound naming an option (the replay list's rules).
constexpr bool stands_alone(const option_rule& r) {
  return (r.check == nullptr || r.check->options == nullptr)
         && r.min.key == nullptr && r.max.key == nullptr;
}

/// Every option of `o` in `section` (all when empty), in the list's order.
caf::error validate_section(const service_options& o,
                            std::string_view section) {
  using namespace option_rules;
#define KVTIER_CHECK(sec, key, member, rule, help)                             \
  if (section.empty() || section == sec)                                       \
    if (auto e = check_value(&o, sec "." key, rule, o.member))                 \
      return e;
  KVTIER_SERVICE_OPTIONS(KVTIER_CHECK)
#undef KVTIER_CHECK
  return {};
}

// The named checks (runtime/options.hpp's `checks`): the rules that are
// not a range.

bool is_power_of_two(double v) {
  auto n = static_cast<uint64_t>(v);
  return v >= 1 && static_cast<double>(n) == v && (n & (n - 1)) == 0;
}

caf::error model_error(const service_options& o) {
  auto m = running_model(o);
  return m ? caf::error{} : std::move(m.error());
}

} // namespace

net::tls_files tls_files_of(const service_options& o) {
  if (!o.cluster_tls)
    return {};
  return {o.cluster_tls_certificate, o.cluster_tls_key, o.cluster_tls_ca,
          o.cluster_tls_passphrase};
}

namespace {

caf::error listen_address_error(const service_options& o) {
  return net::check_node_addresses(o.cluster_listen_address, {}, o.cluster_tls);
}

caf::error peer_addresses_error(const service_options& o) {
  // (The listen address is checked by its own rule; checked again here,
  // it passes or that rule failed first.)
  return net::check_node_addresses(o.cluster_listen_address, o.cluster_peers,
                                   o.cluster_tls);
}

caf::error node_id_error(const service_options& o) {
  if (o.cluster_node_id.size() > net::max_node_id_bytes)
    return out_of_range(
      "cluster.node-id", std::to_string(o.cluster_node_id.size()) + " bytes",
      "at most " + std::to_string(net::max_node_id_bytes) + " bytes");
  for (char c : o.cluster_node_id)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return make_error(ec::invalid_config,
                        "cluster.node-id: spaces and control characters are "
                        "not allowed");
  return {};
}

caf::error tls_file_error(const service_options& o) {
  if (o.cluster_tls)
    for (auto [key, value] :
         {std::pair{"cluster.tls-certificate", &o.cluster_tls_certificate},
          std::pair{"cluster.tls-key", &o.cluster_tls_key},
          std::pair{"cluster.tls-ca", &o.cluster_tls_ca}})
      if (value->empty())
        return make_error(ec::invalid_config,
                          std::string{"cluster.tls = true needs "} + key
                            + " (a PEM file; docs/cluster.md \"Security\")");
  return {};
}

caf::error http_address_error(const service_options& o) {
  if (o.http_address.empty())
    return make_error(ec::invalid_config,
                      "http.address: expected an address (e.g. "
                      "\"127.0.0.1\"), not ''");
  return net::check_allowed("http.address", o.http_address, o.http_address,
                            !o.http_admin_token.empty(),
                            "set http.admin-token to serve the endpoint on "
                            "any other address");
}

caf::error admin_token_error(const service_options& o) {
  for (char c : o.http_admin_token)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return make_error(ec::invalid_config,
                        "http.admin-token: expected printable characters "
                        "without spaces");
  return {};
}

} // namespace

namespace checks {
const option_check power_of_two{"a power of two", is_power_of_two};
const option_check io_engine{
  "auto, uring, threads", nullptr, [](std::string_view w) {
    return static_cast<bool>(tiers::ssd::parse_engine_choice(w));
  }};
const option_check ram_policy{"lru, gdsf", nullptr, [](std::string_view w) {
                                return static_cast<bool>(
                                  tiers::parse_ram_policy(w));
                              }};
const option_check ssd_admission{
  "all, reused", nullptr, [](std::string_view w) {
    return static_cast<bool>(tiers::ssd::parse_admission_rule(w));
  }};
const option_check log_level{
  log::level_names(), nullptr,
  [](std::string_view w) { return log::parse_level(w).has_value(); }};
const option_check model_identity{"one line, at most 4096 bytes", nullptr,
                                  nullptr, model_error};
const option_check model_preset{"a geometry preset", nullptr, nullptr,
                                model_error};
const option_check model_layers{"a layer description, or empty", nullptr,
                                nullptr, model_error};
const option_check listen_address{"a loopback address; any with cluster.tls",
                                  nullptr, nullptr, listen_address_error};
const option_check peer_addresses{
  "a list of HOST:PORT, loopback unless cluster.tls", nullptr, nullptr,
  peer_addresses_error};
const option_check node_id{"at most 128 bytes, no spaces", nullptr, nullptr,
                           node_id_error};
const option_check tls_file{"a PEM file, needed with cluster.tls", nullptr,
                            nullptr, tls_file_error};
const option_check http_address{
  "an address; loopback unless http.admin-token is set", nullptr, nullptr,
  http_address_error};
const option_check admin_token{"printable, no spaces", nullptr, nullptr,
                               admin_token_error};
} // namespace checks

caf::error service_options::validate() const {
  return validate_section(*this, "");
}

caf::error service_options::validate_cluster() const {
  return validate_section(*this, "cluster");
}

caf::error service_options::validate_http() const {
  return validate_section(*this, "http");
}

caf::error check_option(const service_options& o, std::string_view name) {
  using namespace option_rules;
#define KVTIER_CHECK(section, key, member, rule, help)                         \
  if (name == section "." key)                                                 \
    return check_value(&o, section "." key, rule, o.member);
  KVTIER_SERVICE_OPTIONS(KVTIER_CHECK)
#undef KVTIER_CHECK
  return make_error(ec::invalid_config,
                    "no option " + std::string{name} + " to check");
}

caf::expected<tiers::model_identity> running_model(const service_options& o) {
  if (auto e = check_option(o, "model.scale"))
    return e;
  auto preset = tiers::model_geometry::preset(o.model, o.model_scale);
  if (!preset)
    return make_error(ec::invalid_config,
                      "model.preset: " + context_of(preset.error()));
  if (o.model_identity.size() > 4096)
    return out_of_range("model.identity",
                        std::to_string(o.model_identity.size()) + " bytes",
                        "at most 4096 bytes");
  for (char c : o.model_identity)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return make_error(ec::invalid_config,
                        "model.identity: control characters are not "
                        "allowed (one line of text)");
  tiers::model_identity m{std::move(*preset), o.model_identity};
  if (!o.model_layers.empty()) {
    auto g = tiers::model_geometry::parse_layers(o.model_layers);
    if (!g)
      return make_error(ec::invalid_config,
                        "model.layers: " + context_of(g.error()));
    m.geometry = std::move(*g);
  }
  return m;
}

caf::expected<tiers::model_geometry>
running_geometry(const service_options& o) {
  auto m = running_model(o);
  if (!m)
    return m.error();
  return std::move(m->geometry);
}

caf::error replay_settings::validate() const {
  using namespace option_rules;
#define KVTIER_CHECK(section, key, member, rule, help)                         \
  static_assert(stands_alone(rule), "replay rules need no service_options");   \
  if (auto e = check_value(nullptr, section "." key, rule, member))            \
    return e;
  KVTIER_REPLAY_OPTIONS(KVTIER_CHECK)
#undef KVTIER_CHECK
  return {};
}

service_options replay_settings::apply(service_options o) const {
  if (model_scale > 0)
    o.model_scale = model_scale;
  if (ram_cap_bytes > 0)
    o.ram_cap_bytes = ram_cap_bytes;
  if (ssd_cap_bytes > 0)
    o.ssd_cap_bytes = ssd_cap_bytes;
  if (!ssd_dir.empty())
    o.ssd_dir = ssd_dir;
  // Always: the reference models no idle demotion (docs/replay.md).
  o.idle_demotion_ms = idle_demotion_ms;
  o.write_behind = o.write_behind && write_behind;
  // Settled runs are the reference's: every acquire waits for the SSD's
  // answer, however late a loaded machine makes it (no cold wait).
  if (settle)
    o.cold_wait_ms = 0;
  return o;
}

} // namespace kvtier::runtime
