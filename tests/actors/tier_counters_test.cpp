// Counters declared once (tiers/report_parts.hpp, actors/tier_counters.hpp):
// every declared counter of every built-in part survives the trip a
// member's report takes (written by name, read by name), several sections
// of one part add up, a counter another member reports is left alone, the
// engines' counters of the same names are copied, and the declarations
// are well formed (names unique within a part, metrics that follow the
// Prometheus conventions, labels as key=value).
#define BOOST_TEST_MODULE actors_tier_counters
#include <boost/test/unit_test.hpp>

#include "actors/tier_counters.hpp"
#include "messages/sealed.hpp"
#include "tiers/admission.hpp"
#include "tiers/ram_types.hpp"
#include "tiers/ssd/ssd_stats.hpp"

#include <set>
#include <string>

using namespace kvtier;
namespace report = tiers::report;

namespace {

/// A part whose i-th counter holds `base + i`.
template <class Part>
Part numbered(uint64_t base) {
  Part p;
  uint64_t i = 0;
  for (auto& f : Part::fields())
    p.*f.member = base + i++;
  return p;
}

template <class Part>
void round_trips() {
  auto sent = numbered<Part>(1000);
  msg::draft<msg::ReadReportReply> d;
  actors::report_sections{}.add(sent).write(d.root());
  auto sealed = std::move(d).seal();
  BOOST_TEST_REQUIRE(actors::has_part(sealed.root(), Part::name));
  auto got = actors::read_part<Part>(sealed.root());
  for (auto& f : Part::fields()) {
    uint64_t want = sent.*f.member, have = got.*f.member;
    BOOST_TEST(have == want, Part::name << "." << f.info.name);
  }
}

template <class Part>
void well_formed() {
  std::set<std::string_view> names;
  for (auto& f : Part::fields()) {
    auto& i = f.info;
    BOOST_TEST(names.insert(i.name).second,
               Part::name << "." << i.name << " declared twice");
    BOOST_TEST(!i.help.empty(), Part::name << "." << i.name << ": no help");
    auto metric = report::metric_of(Part::name, i);
    BOOST_TEST(metric.rfind("kvtier_", 0) == 0, metric);
    bool total =
      metric.size() > 6 && metric.compare(metric.size() - 6, 6, "_total") == 0;
    BOOST_TEST(total == (i.kind == report::kind::total), metric);
    if (!i.label.empty()) {
      auto eq = i.label.find('=');
      BOOST_TEST(
        (eq != std::string_view::npos && eq > 0 && eq + 1 < i.label.size()),
        metric << ": label " << i.label);
    }
  }
}

constexpr auto every_part = [](auto fn) { report::for_each_part(fn); };

} // namespace

BOOST_AUTO_TEST_CASE(every_declared_counter_survives_the_wire) {
  every_part([]<class Part>() { round_trips<Part>(); });
}

BOOST_AUTO_TEST_CASE(declarations_are_well_formed) {
  every_part([]<class Part>() { well_formed<Part>(); });
}

BOOST_AUTO_TEST_CASE(sections_of_one_part_add_up_and_only_names_are_written) {
  report::sessions from_ram, from_sessions;
  from_ram.protected_entries = 7;
  from_ram.open = 99; // not RAM's: left out by `only`
  from_sessions.open = 3;
  from_sessions.opened = 5;
  from_sessions.closed = 2;
  msg::draft<msg::ReadReportReply> d;
  actors::report_sections{}
    .add(from_ram, {"protected_entries"})
    .add(from_sessions, {"open", "opened", "closed"})
    .write(d.root());
  auto sealed = std::move(d).seal();
  auto secs = sealed.root().getTiers();
  BOOST_TEST_REQUIRE(secs.size() == 2u);
  BOOST_TEST(secs[0].getCounters().size() == 1u);
  BOOST_TEST(secs[1].getCounters().size() == 3u);
  auto got = actors::read_part<report::sessions>(sealed.root());
  BOOST_TEST(got.protected_entries == 7u);
  BOOST_TEST(got.open == 3u);
  BOOST_TEST(got.opened == 5u);
  BOOST_TEST(got.closed == 2u);
  // Another part's reader sees nothing of them.
  auto ram = actors::read_part<report::ram>(sealed.root());
  BOOST_TEST(ram.entries == 0u);
  BOOST_TEST(!actors::has_part(sealed.root(), "ram"));
}

BOOST_AUTO_TEST_CASE(an_added_tiers_section_is_not_a_built_in_part) {
  static constexpr actors::counter_decl decls[] = {
    {"entries", "entries held", true},
    {"hits", "lookups served"},
  };
  uint64_t values[] = {4, 9};
  msg::draft<msg::ReadReportReply> d;
  actors::write_counters(d.root(), "map", decls, values);
  auto sealed = std::move(d).seal();
  auto sec = sealed.root().getTiers()[0];
  BOOST_TEST(std::string{sec.getTier().cStr()} == "map");
  BOOST_TEST(std::string{sec.getCounters()[0].getHelp().cStr()}
             == "entries held");
  BOOST_TEST(sec.getCounters()[0].getGauge());
  BOOST_TEST(!sec.getCounters()[1].getGauge());
  BOOST_TEST(sec.getCounters()[1].getValue() == 9u);
  BOOST_TEST(actors::read_part<report::ram>(sealed.root()).entries == 0u);
}

BOOST_AUTO_TEST_CASE(engines_counters_of_the_same_names_are_copied) {
  tiers::ram_counters c;
  c.entries = 3;
  c.evictions = 11;
  c.leaving_bytes = 64;
  c.capacity = 1 << 20; // named otherwise: the actor sets cap_bytes
  auto ram = report::ram::from(c);
  BOOST_TEST(ram.entries == 3u);
  BOOST_TEST(ram.evictions == 11u);
  BOOST_TEST(ram.leaving_bytes == 64u);
  BOOST_TEST(ram.cap_bytes == 0u);
  tiers::ssd::ssd_stats s;
  s.writes_ok = 5;
  s.new_token_bytes = 77;
  auto ssd = report::ssd::from(s);
  BOOST_TEST(ssd.writes_ok == 5u);
  BOOST_TEST(ssd.new_token_bytes == 77u);
  tiers::admission_counters a;
  a.queue_full = 2;
  a.held_bytes = 4096;
  auto adm = report::admission::from(a);
  BOOST_TEST(adm.queue_full == 2u);
  BOOST_TEST(adm.held_bytes == 4096u);
}

BOOST_AUTO_TEST_CASE(metric_names_default_and_override) {
  report::counter_info hits{"hits", report::kind::total, "", "", "h"};
  BOOST_TEST(report::metric_of("ram", hits) == "kvtier_ram_hits_total");
  report::counter_info entries{"entries", report::kind::gauge, "", "", "e"};
  BOOST_TEST(report::metric_of("ram", entries) == "kvtier_ram_entries");
  report::counter_info own{"bytes", report::kind::total,
                           "kvtier_peer_fetched_bytes_total", "", "b"};
  BOOST_TEST(report::metric_of("peer", own)
             == "kvtier_peer_fetched_bytes_total");
}
