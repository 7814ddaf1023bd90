// ReadReportReply -> service_report (runtime/service/service_codec.hpp):
// the built-in parts by name (tiers/report_parts.hpp), the sections of the
// tiers added beside them as they came.
#include "actors/tier_counters.hpp"
#include "runtime/service/service_codec.hpp"

namespace kvtier::runtime::codec {

namespace {

io_counters io_part(msg::IoCounters::Reader in) {
  return io_counters{in.getReads(),        in.getWrites(),   in.getBytesRead(),
                     in.getBytesWritten(), in.getFailures(), in.getSubmitted()};
}

/// Whether `name` is a built-in part's.
bool built_in(std::string_view name) {
  bool found = false;
  tiers::report::for_each_part(
    [&]<class Part>() { found = found || Part::name == name; });
  return found;
}

} // namespace

caf::expected<service_report> report(const sealed<msg::ReadReportReply>& r) {
  auto in = r.root();
  service_report out;
  // The node's part is the node's guard's (service_calls.cpp): no member
  // reports it, so it reads zeros here.
  out.each_part([&](auto& part) { actors::read_part(in, part); });
  out.demotions = in.getDemotions();
  out.cold_tiers = in.getColdTiers();
  out.dead_tiers = in.getDeadTiers();
  out.cold_late = in.getColdLate();
  out.closed = in.getClosed();
  for (auto sec : in.getTiers()) {
    auto name = sec.getTier();
    if (built_in({name.cStr(), name.size()}))
      continue;
    auto& to = out.tiers.emplace_back();
    to.tier = name.cStr();
    for (auto c : sec.getCounters())
      to.counters.push_back(
        {c.getName().cStr(), c.getHelp().cStr(), c.getGauge(), c.getValue()});
  }
  for (auto name : in.getSilentTiers())
    out.silent_tiers.emplace_back(name.cStr());
  for (auto io : in.getIo()) {
    if (io.getTier() == msg::Tier::RAM)
      out.ram_io = io_part(io);
    else if (io.getTier() == msg::Tier::SSD)
      out.ssd_io = io_part(io);
  }
  return out;
}

} // namespace kvtier::runtime::codec
