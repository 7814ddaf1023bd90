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
  using namespace tiers::report;
  for (auto n :
       {ram::name, ssd::name, checkpoints::name, sessions::name, objects::name,
        admission::name, peer::name, node::name, tokens::name})
    if (n == name)
      return true;
  return false;
}

} // namespace

caf::expected<service_report> report(const sealed<msg::ReadReportReply>& r) {
  auto in = r.root();
  service_report out;
  actors::read_part(in, out.ram);
  actors::read_part(in, out.ssd);
  actors::read_part(in, out.checkpoints);
  actors::read_part(in, out.sessions);
  actors::read_part(in, out.objects);
  actors::read_part(in, out.admission);
  actors::read_part(in, out.peer);
  actors::read_part(in, out.tokens);
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
