// A tier's counters on the wire: every member of the service writes its
// counters into its ReadReportReply as `TierCounters` sections
// (messages/service.capnp), one per part, each counter by name. The
// built-in parts are declared once in tiers/report_parts.hpp (their
// structs and field tables); a tier added beside them declares its own
// counters here (`counter_decl`: name, help, kind) and reports them the
// same way. The report's consumers iterate the sections: the service
// decodes the built-in parts by name (`read_part`) and keeps the others as
// they came; /stats shows them under `report.tiers.<tier>`, /metrics as
// `kvtier_<tier>_<name>` (a running total ends in `_total`), Python's
// report()["tiers"]. Plain functions; any thread.
#pragma once

#include "messages/type_ids.hpp"
#include "tiers/report_parts.hpp"

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::actors {

/// One counter a tier added beside the built-in ones declares.
struct counter_decl {
  /// lower_snake_case, unique within the tier.
  std::string_view name;
  /// One line for /metrics and the docs.
  std::string_view help;
  /// A level that may go down (entries, bytes); false: a running total.
  bool gauge = false;
};

/// The sections one reply carries, gathered and then written at once.
class report_sections {
public:
  /// Part `p`'s counters (those named in `only`; all when empty). Its help
  /// stays home: every reader knows the built-in parts' declarations.
  template <class Part>
  report_sections& add(const Part& p,
                       std::initializer_list<std::string_view> only = {}) {
    auto& s = sections_.emplace_back();
    s.tier = Part::name;
    for (auto& f : Part::fields()) {
      if (only.size() != 0 && !contains(only, f.info.name))
        continue;
      s.counters.push_back({f.info.name,
                            {},
                            f.info.kind != tiers::report::kind::total,
                            p.*f.member});
    }
    return *this;
  }

  /// Tier `tier`'s counters as it declares them: `values[i]` is
  /// `decls[i]`'s value (fewer values: the rest read 0).
  report_sections& add(std::string_view tier,
                       std::span<const counter_decl> decls,
                       std::span<const uint64_t> values);

  /// Writes the sections into `out`'s `tiers` (which it initializes).
  void write(msg::ReadReportReply::Builder out) const;

private:
  struct counter {
    std::string_view name, help;
    bool gauge = false;
    uint64_t value = 0;
  };
  struct section {
    std::string_view tier;
    std::vector<counter> counters;
  };

  static bool contains(std::initializer_list<std::string_view> names,
                       std::string_view name);

  std::vector<section> sections_;
};

/// Writes tier `tier`'s declared counters as the only section of `out`.
void write_counters(msg::ReadReportReply::Builder out, std::string_view tier,
                    std::span<const counter_decl> decls,
                    std::span<const uint64_t> values);

/// Whether `r` carries a section of part `name`.
bool has_part(msg::ReadReportReply::Reader r, std::string_view name);

/// Adds each counter of `r`'s sections of part `Part` to `out` (by name;
/// several sections of one part are summed: each member writes what it
/// counts). A name the part does not declare is ignored.
template <class Part>
void read_part(msg::ReadReportReply::Reader r, Part& out) {
  for (auto sec : r.getTiers()) {
    auto tier = sec.getTier();
    if (std::string_view{tier.cStr(), tier.size()} != Part::name)
      continue;
    for (auto c : sec.getCounters()) {
      auto n = c.getName();
      tiers::report::add_named(out, {n.cStr(), n.size()}, c.getValue());
    }
  }
}

/// Part `Part` as `r` carries it (zeros when it does not).
template <class Part>
Part read_part(msg::ReadReportReply::Reader r) {
  Part out;
  read_part(r, out);
  return out;
}

} // namespace kvtier::actors
