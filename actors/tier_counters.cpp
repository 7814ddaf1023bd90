#include "actors/tier_counters.hpp"

#include <cstring>

namespace kvtier::actors {

namespace {

/// Copies `v` into a text field made by `init(size)`: a string_view need
/// not end in NUL (a Text reader of one would read past it) and may be
/// null when empty.
template <class Init>
void set_text(Init init, std::string_view v) {
  auto t = init(static_cast<unsigned>(v.size()));
  if (!v.empty())
    std::memcpy(t.begin(), v.data(), v.size());
}

} // namespace

report_sections& report_sections::add(std::string_view tier,
                                      std::span<const counter_decl> decls,
                                      std::span<const uint64_t> values) {
  auto& s = sections_.emplace_back();
  s.tier = tier;
  for (size_t i = 0; i < decls.size(); ++i)
    s.counters.push_back({decls[i].name, decls[i].help, decls[i].gauge,
                          i < values.size() ? values[i] : 0});
  return *this;
}

void report_sections::write(msg::ReadReportReply::Builder out) const {
  auto secs = out.initTiers(static_cast<unsigned>(sections_.size()));
  for (size_t i = 0; i < sections_.size(); ++i) {
    auto& from = sections_[i];
    auto sec = secs[static_cast<unsigned>(i)];
    set_text([&](unsigned n) { return sec.initTier(n); }, from.tier);
    auto cs = sec.initCounters(static_cast<unsigned>(from.counters.size()));
    for (size_t j = 0; j < from.counters.size(); ++j) {
      auto& c = from.counters[j];
      auto to = cs[static_cast<unsigned>(j)];
      set_text([&](unsigned n) { return to.initName(n); }, c.name);
      set_text([&](unsigned n) { return to.initHelp(n); }, c.help);
      to.setGauge(c.gauge);
      to.setValue(c.value);
    }
  }
}

bool report_sections::contains(std::initializer_list<std::string_view> names,
                               std::string_view name) {
  for (auto n : names)
    if (n == name)
      return true;
  return false;
}

void write_counters(msg::ReadReportReply::Builder out, std::string_view tier,
                    std::span<const counter_decl> decls,
                    std::span<const uint64_t> values) {
  report_sections{}.add(tier, decls, values).write(out);
}

bool has_part(msg::ReadReportReply::Reader r, std::string_view name) {
  for (auto sec : r.getTiers()) {
    auto tier = sec.getTier();
    if (std::string_view{tier.cStr(), tier.size()} == name)
      return true;
  }
  return false;
}

} // namespace kvtier::actors
