// The rules of kvtier's options (runtime/options.hpp declares each option
// with one): a numeric option's range and unit, the words of one taken as
// given, and the named checks of rules that are not a range, written once
// in runtime/config.cpp. `option_rules` holds the words the list is
// written in: `bytes(MiB, 16 * TiB)`, `millis(times(2, "cluster.heartbeat-ms"),
// 3600000)`, `bytes(512, MiB).and_is(checks::power_of_two)`.
//
// Constant values; any thread.
#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <string_view>

namespace kvtier::runtime {

struct service_options;

/// A rule that is not a range, written once (runtime/config.cpp) and
/// reached from the rules of the options it governs.
struct option_check {
  /// What it accepts, in words: the range the docs and the errors state.
  const char* words;
  /// A number's test (with the range: `a power of two, 512 .. 1 MiB`).
  bool (*number)(double) = nullptr;
  /// A word's test: `KEY = "V" is not one of WORDS`, and in a file
  /// `FILE:LINE: KEY: expected one of WORDS, not 'V'`.
  bool (*word)(std::string_view) = nullptr;
  /// A rule over the options (an address, the model, TLS files), with its
  /// own error naming the key.
  caf::error (*options)(const service_options&) = nullptr;
};

namespace checks {
extern const option_check power_of_two, io_engine, ram_policy, ssd_admission,
  log_level, model_identity, model_preset, model_layers, listen_address,
  peer_addresses, node_id, tls_file, http_address, admin_token;
} // namespace checks

/// One end of a numeric range: a number, or `value` times another
/// option's value (`key`, "section.key", of the same list).
struct option_bound {
  double value = 0;
  const char* key = nullptr;
  constexpr option_bound(double v)
    : value(v) {} // NOLINT: a number
  constexpr option_bound(double factor, const char* k)
    : value(factor)
    , key(k) {}
};

/// How one option's value is checked, and its unit.
struct option_rule {
  /// What a number is counted in ("bytes", "ms", ...); "" for the rest.
  const char* unit = "";
  bool numeric = false;
  option_bound min = 0, max = 0;
  /// The range is (min, max]: min itself is refused.
  bool open_min = false;
  /// 0 is accepted besides the range (it keeps another option's value).
  bool zero_too = false;
  /// The accepted values in words when there is no range or check
  /// ("true, false", "a path"; not checked).
  const char* words = "";
  const option_check* check = nullptr;

  constexpr option_rule exclusive_min() const {
    auto r = *this;
    r.open_min = true;
    return r;
  }
  constexpr option_rule or_zero() const {
    auto r = *this;
    r.zero_too = true;
    return r;
  }
  constexpr option_rule and_is(const option_check& c) const {
    auto r = *this;
    r.check = &c;
    return r;
  }
};

/// The words of the list's rules (`using namespace option_rules` where the
/// list is expanded with its rules).
namespace option_rules {
inline constexpr uint64_t KiB = 1024, MiB = KiB << 10, GiB = MiB << 10,
                          TiB = GiB << 10, PiB = TiB << 10;
constexpr option_bound times(double factor, const char* key) {
  return {factor, key};
}
constexpr option_rule number(const char* unit, option_bound lo,
                             option_bound hi) {
  option_rule r;
  r.unit = unit;
  r.numeric = true;
  r.min = lo;
  r.max = hi;
  return r;
}
constexpr option_rule bytes(option_bound lo, option_bound hi) {
  return number("bytes", lo, hi);
}
constexpr option_rule millis(option_bound lo, option_bound hi) {
  return number("ms", lo, hi);
}
constexpr option_rule tokens(option_bound lo, option_bound hi) {
  return number("tokens", lo, hi);
}
constexpr option_rule count(option_bound lo, option_bound hi) {
  return number("count", lo, hi);
}
/// Route costs: prefill-token equivalents per token.
constexpr option_rule cost(option_bound lo, option_bound hi) {
  return number("per token", lo, hi);
}
constexpr option_rule flag() {
  option_rule r;
  r.words = "true, false";
  return r;
}
/// A string or list taken as given, described by `words`.
constexpr option_rule text(const char* words) {
  option_rule r;
  r.words = words;
  return r;
}
constexpr option_rule checked(const option_check& c) {
  option_rule r;
  r.check = &c;
  return r;
}
} // namespace option_rules

} // namespace kvtier::runtime
