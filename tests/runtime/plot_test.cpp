// The replay chart (runtime/tools/plot.cpp), read as the SVG text it is: a
// legend with a line sample and the final value of every line, even ticks
// labelled on both axes, the caps and the start (cold or warm) stated.
#define BOOST_TEST_MODULE runtime_plot
#include <boost/test/unit_test.hpp>

#include "runtime/tools/report.hpp"

#include <regex>
#include <set>

using namespace kvtier::runtime;

namespace {

/// A replay of 12,031 requests whose hit ratio climbs to 0.37 (RAM 0.25,
/// SSD 0.12).
replay_report sample_report() {
  replay_report r;
  r.trace = "conversation_trace.jsonl";
  r.model = "llama-3.1-8b";
  r.ram_cap_bytes = 256ull << 20;
  r.ssd_cap_bytes = 4ull << 30;
  r.requests = 12031;
  for (uint64_t i = 1; i <= r.requests; i += 10) {
    replay_sample s;
    s.requests = i;
    s.input_tokens = 1000 * i;
    s.ram_tokens = 250 * i * i / r.requests;
    s.ssd_tokens = 120 * i * i / r.requests;
    r.series.push_back(s);
  }
  auto& last = r.series.back();
  r.input_tokens = last.input_tokens;
  r.ram_tokens = last.ram_tokens;
  r.ssd_tokens = last.ssd_tokens;
  r.simulated_lru_hit_ratio = 0.3732;
  r.infinite_hit_ratio = 0.3736;
  return r;
}

/// The text of every <text> element.
std::set<std::string> texts(const std::string& svg) {
  std::set<std::string> out;
  std::regex t{"<text[^>]*>([^<]*)</text>"};
  for (auto i = std::sregex_iterator(svg.begin(), svg.end(), t);
       i != std::sregex_iterator(); ++i)
    out.insert((*i)[1].str());
  return out;
}

bool has(const std::set<std::string>& s, const std::string& t) {
  return s.count(t) > 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(ticks_step_by_one_two_or_five) {
  BOOST_TEST(nice_step(0.40, 5) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nice_step(0.20, 5) == 0.05, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(nice_step(12031, 6) == 2000);
  BOOST_TEST(nice_step(300, 6) == 50);
  BOOST_TEST(nice_step(1, 6) == 0.2, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(size_text(256ull << 20) == "256 MiB");
  BOOST_TEST(size_text(2560ull << 20) == "2.5 GiB");
  BOOST_TEST(size_text(512) == "512 B");
}

BOOST_AUTO_TEST_CASE(the_chart_has_a_legend_ticks_and_the_caps) {
  auto r = sample_report();
  auto svg = render_svg(r);
  auto t = texts(svg);
  // The caps and a cold start, in the subtitle.
  BOOST_TEST(has(t, "llama-3.1-8b · RAM cap 256 MiB · SSD cap 4 GiB · cold "
                    "start (SSD empty)"),
             svg);
  // Legend rows with the final figures.
  for (auto row : {"total 0.3700", "from RAM 0.2500", "from SSD 0.1200",
                   "LRU reference 0.3732", "infinite cache 0.3736"})
    BOOST_TEST(has(t, row), row);
  BOOST_TEST(!has(t, "from peers 0.0000")); // no cluster: no peer line
  // Counts are grouped in thousands.
  BOOST_TEST(has(t, "requests replayed (of 12,031)"), svg);
  // One line sample per legend row: 3 solid, 2 dashed, beside the text.
  std::regex sample{"<line x1='([0-9.]+)' y1='([0-9.]+)' x2='([0-9.]+)' "
                    "y2='\\2' stroke='(#[0-9a-f]{6})'"};
  int samples = 0;
  for (auto i = std::sregex_iterator(svg.begin(), svg.end(), sample);
       i != std::sregex_iterator(); ++i)
    if (std::stod((*i)[3].str()) - std::stod((*i)[1].str()) == 26)
      ++samples;
  BOOST_TEST(samples == 5);
  // Y ticks every 0.05 up to 0.40 (the top: 0.3736 * 1.05 rounded up), x
  // ticks every 2,000 requests.
  for (auto y :
       {"0.00", "0.05", "0.10", "0.15", "0.20", "0.25", "0.30", "0.35", "0.40"})
    BOOST_TEST(has(t, y), y);
  BOOST_TEST(!has(t, "0.45"));
  for (auto x : {"0", "2,000", "4,000", "6,000", "8,000", "10,000", "12,000"})
    BOOST_TEST(has(t, x), x);
  BOOST_TEST(has(t, "requests replayed (of 12,031)"));
  BOOST_TEST(has(t, "cumulative share of prompt tokens reused"));
}

BOOST_AUTO_TEST_CASE(a_warm_start_is_labelled) {
  auto r = sample_report();
  r.ssd_files_at_start = 1234;
  r.ssd_bytes_at_start = 3ull << 30;
  auto t = texts(render_svg(r));
  BOOST_TEST(has(t, "llama-3.1-8b · RAM cap 256 MiB · SSD cap 4 GiB · warm "
                    "start: SSD held 1,234 files (3 GiB)"));
  r.ssd_cap_bytes = 0; // no cold tier: nothing to say about its start
  BOOST_TEST(chart_subtitle(r)
             == "llama-3.1-8b · RAM cap 256 MiB · SSD cap "
                "none");
}
