#include "actors/tier_counters.hpp"

namespace kvtier::actors {

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
    sec.setTier({from.tier.data(), from.tier.size()});
    auto cs = sec.initCounters(static_cast<unsigned>(from.counters.size()));
    for (size_t j = 0; j < from.counters.size(); ++j) {
      auto& c = from.counters[j];
      auto to = cs[static_cast<unsigned>(j)];
      to.setName({c.name.data(), c.name.size()});
      to.setHelp({c.help.data(), c.help.size()});
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
