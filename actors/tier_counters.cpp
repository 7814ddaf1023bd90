#include "actors/tier_counters.hpp"

namespace kvtier::actors {

void write_counters(msg::ReadReportReply::Builder out, std::string_view tier,
                    std::span<const counter_decl> decls,
                    std::span<const uint64_t> values) {
  auto sec = out.initTiers(1)[0];
  sec.setTier({tier.data(), tier.size()});
  auto cs = sec.initCounters(static_cast<unsigned>(decls.size()));
  for (size_t i = 0; i < decls.size(); ++i) {
    auto c = cs[i];
    c.setName({decls[i].name.data(), decls[i].name.size()});
    c.setHelp({decls[i].help.data(), decls[i].help.size()});
    c.setGauge(decls[i].gauge);
    c.setValue(i < values.size() ? values[i] : 0);
  }
}

} // namespace kvtier::actors
