#include "tiers/report_parts.hpp"

namespace kvtier::tiers::report {

#define KVTIER_REPORT_FIELD_(name, k, metric, label, help)                     \
  field<self>{{#name, kind::k, metric, label, help}, &self::name},
#define KVTIER_REPORT_FIELDS_(type, LIST)                                      \
  std::span<const field<type>> type::fields() {                                \
    using self = type;                                                         \
    static const field<type> all[] = {LIST(KVTIER_REPORT_FIELD_)};             \
    return all;                                                                \
  }

KVTIER_REPORT_FIELDS_(ram, KVTIER_REPORT_RAM)
KVTIER_REPORT_FIELDS_(ssd, KVTIER_REPORT_SSD)
KVTIER_REPORT_FIELDS_(checkpoints, KVTIER_REPORT_CHECKPOINTS)
KVTIER_REPORT_FIELDS_(sessions, KVTIER_REPORT_SESSIONS)
KVTIER_REPORT_FIELDS_(objects, KVTIER_REPORT_OBJECTS)
KVTIER_REPORT_FIELDS_(admission, KVTIER_REPORT_ADMISSION)
KVTIER_REPORT_FIELDS_(peer, KVTIER_REPORT_PEER)
KVTIER_REPORT_FIELDS_(node, KVTIER_REPORT_NODE)
KVTIER_REPORT_FIELDS_(process, KVTIER_REPORT_PROCESS)
KVTIER_REPORT_FIELDS_(tokens, KVTIER_REPORT_TOKENS)

std::string metric_of(std::string_view part, const counter_info& c) {
  if (!c.metric.empty())
    return std::string{c.metric};
  std::string name = "kvtier_";
  name.append(part).append("_").append(c.name);
  constexpr std::string_view total = "_total";
  if (c.kind == kind::total
      && !(name.size() >= total.size()
           && name.compare(name.size() - total.size(), total.size(), total)
                == 0))
    name += total;
  return name;
}

} // namespace kvtier::tiers::report
