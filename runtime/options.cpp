#include "runtime/options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace kvtier::runtime {

namespace {

std::string text(uint64_t v) {
  return std::to_string(v);
}

std::string text(bool v) {
  return v ? "true" : "false";
}

/// A real number as the file writes it: the shortest text that reads back
/// as `v`, with ".0" when it is whole (CAF reads `1` as an integer).
std::string text(double v) {
  auto s = number_text(v);
  if (s.find_first_not_of("-0123456789") == std::string::npos)
    s += ".0";
  return s;
}

std::string text(const std::string& v) {
  return "\"" + v + "\"";
}

std::string text(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i > 0 ? ", " : "") + text(v[i]);
  return out + "]";
}

std::string bound_text(const option_bound& b, std::string_view unit) {
  if (b.key == nullptr)
    return number_text(b.value, unit);
  return b.value == 1 ? std::string{b.key}
                      : number_text(b.value) + " x " + b.key;
}

} // namespace

std::string number_text(double v, std::string_view unit) {
  if (unit.rfind("bytes", 0) == 0) // bytes, bytes/s
    for (auto [size, name] : {std::pair{option_rules::PiB, " PiB"},
                              {option_rules::TiB, " TiB"},
                              {option_rules::GiB, " GiB"},
                              {option_rules::MiB, " MiB"}})
      if (v >= static_cast<double>(size)
          && std::fmod(v, static_cast<double>(size)) == 0)
        return number_text(v / static_cast<double>(size)) + name;
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9e18) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string range_text(const option_rule& r) {
  if (!r.numeric)
    return r.check != nullptr ? r.check->words : r.words;
  auto lo = bound_text(r.min, r.unit), hi = bound_text(r.max, r.unit);
  auto out = r.open_min ? "(" + lo + ", " + hi + "]" : lo + " .. " + hi;
  if (r.zero_too)
    out = "0 or " + out;
  if (r.check != nullptr)
    out = std::string{r.check->words} + ", " + out;
  return out;
}

std::vector<option_value> option_values(const service_options& o) {
  std::vector<option_value> out;
#define KVTIER_VALUE(section, key, member, rule, help)                         \
  out.push_back({section, key, text(o.member)});
  KVTIER_SERVICE_OPTIONS(KVTIER_VALUE)
#undef KVTIER_VALUE
  return out;
}

std::vector<option_value> option_values(const replay_settings& r) {
  std::vector<option_value> out;
#define KVTIER_VALUE(section, key, member, rule, help)                         \
  out.push_back({section, key, text(r.member)});
  KVTIER_REPLAY_OPTIONS(KVTIER_VALUE)
#undef KVTIER_VALUE
  return out;
}

#define KVTIER_DIFFER(section, key, member, rule, help)                        \
  if (!(a.member == b.member))                                                 \
    out.push_back(std::string{section} + "." + key + ": " + text(a.member)     \
                  + ", not " + text(b.member));

std::vector<std::string> differing_options(const service_options& a,
                                           const service_options& b) {
  std::vector<std::string> out;
  KVTIER_SERVICE_OPTIONS(KVTIER_DIFFER)
  return out;
}

std::vector<std::string> differing_options(const replay_settings& a,
                                           const replay_settings& b) {
  std::vector<std::string> out;
  KVTIER_REPLAY_OPTIONS(KVTIER_DIFFER)
  return out;
}

#undef KVTIER_DIFFER

std::vector<std::string> option_names() {
  std::vector<std::string> out;
  for (auto& d : option_declarations())
    out.push_back(d.name);
  return out;
}

std::vector<option_declaration> option_declarations() {
  using namespace option_rules;
  const service_options o;
  const replay_settings r;
  std::vector<option_declaration> out;
#define KVTIER_SERVICE_DECLARATION(section, key, member, rule, help)           \
  out.push_back(                                                               \
    {section "." key, text(o.member), range_text(rule), (rule).unit});
#define KVTIER_REPLAY_DECLARATION(section, key, member, rule, help)            \
  out.push_back(                                                               \
    {section "." key, text(r.member), range_text(rule), (rule).unit});
  KVTIER_SERVICE_OPTIONS(KVTIER_SERVICE_DECLARATION)
  KVTIER_REPLAY_OPTIONS(KVTIER_REPLAY_DECLARATION)
#undef KVTIER_SERVICE_DECLARATION
#undef KVTIER_REPLAY_DECLARATION
  return out;
}

const option_rule* rule_of(std::string_view name) {
  static const auto rules = [] {
    using namespace option_rules;
    std::map<std::string, option_rule, std::less<>> m;
#define KVTIER_RULE(section, key, member, rule, help)                          \
  m.emplace(section "." key, rule);
    KVTIER_SERVICE_OPTIONS(KVTIER_RULE)
    KVTIER_REPLAY_OPTIONS(KVTIER_RULE)
#undef KVTIER_RULE
    return m;
  }();
  auto i = rules.find(name);
  return i == rules.end() ? nullptr : &i->second;
}

} // namespace kvtier::runtime
