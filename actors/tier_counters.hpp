// A tier's counters, declared once: name, help and kind in one table the
// tier owns, values read in the same order. The report carries them as a
// `TierCounters` section (messages/service.capnp), and the report's
// consumers iterate them: /stats under `report.tiers.<tier>`, /metrics as
// `kvtier_<tier>_<name>` (a running total ends in `_total`), Python's
// report()["tiers"]. A tier added beside the built-in ones reports this
// way, so no other file names its counters. Plain functions; any thread.
#pragma once

#include "messages/type_ids.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace kvtier::actors {

/// One counter a tier declares.
struct counter_decl {
  /// lower_snake_case, unique within the tier.
  std::string_view name;
  /// One line for /metrics and the docs.
  std::string_view help;
  /// A level that may go down (entries, bytes); false: a running total.
  bool gauge = false;
};

/// Writes tier `tier`'s section into `out`'s `tiers` (which it initializes:
/// one section per reply): `values[i]` is `decls[i]`'s value, so both have
/// the same length (fewer values: the rest read 0).
void write_counters(msg::ReadReportReply::Builder out, std::string_view tier,
                    std::span<const counter_decl> decls,
                    std::span<const uint64_t> values);

} // namespace kvtier::actors
