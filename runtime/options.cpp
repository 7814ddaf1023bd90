#include "runtime/options.hpp"

#include <cstdio>

namespace kvtier::runtime {

namespace {

std::string text(uint64_t v) {
  return std::to_string(v);
}

std::string text(bool v) {
  return v ? "true" : "false";
}

std::string text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
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

} // namespace

std::vector<option_value> option_values(const service_options& o) {
  std::vector<option_value> out;
#define KVTIER_VALUE(section, key, member, help)                               \
  out.push_back({section, key, text(o.member)});
  KVTIER_SERVICE_OPTIONS(KVTIER_VALUE)
#undef KVTIER_VALUE
  return out;
}

std::vector<option_value> option_values(const replay_settings& r) {
  std::vector<option_value> out;
#define KVTIER_VALUE(section, key, member, help)                               \
  out.push_back({section, key, text(r.member)});
  KVTIER_REPLAY_OPTIONS(KVTIER_VALUE)
#undef KVTIER_VALUE
  return out;
}

#define KVTIER_DIFFER(section, key, member, help)                              \
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
#define KVTIER_NAME(section, key, member, help)                                \
  out.push_back(std::string{section} + "." + key);
  KVTIER_SERVICE_OPTIONS(KVTIER_NAME)
  KVTIER_REPLAY_OPTIONS(KVTIER_NAME)
#undef KVTIER_NAME
  return out;
}

} // namespace kvtier::runtime
