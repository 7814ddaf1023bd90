// render_svg (runtime/tools/report.hpp): a dependency-free SVG line chart of
// the cumulative token hit ratio over a replay, total and per tier, with
// the reference ratios as dashed lines. What a reader needs is on it: the
// caps and whether the SSD started empty (subtitle), a legend with a
// sample of each line and its final value, and axes with even ticks
// (steps of 1, 2 or 5 times a power of ten) labelled on both.
#include "runtime/tools/report.hpp"
#include "runtime/tools/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

namespace kvtier::runtime {

namespace {

constexpr double width = 900, height = 480, left = 76, right = 230, top = 70,
                 bottom = 62;

struct chart {
  double xmax; // requests at the right edge
  double ymax; // ratio at the top edge

  double x(double req) const {
    return left + (width - left - right) * req / std::max(xmax, 1.0);
  }
  double y(double ratio) const {
    return height - bottom - (height - top - bottom) * ratio / ymax;
  }
};

const char* const total_colour = "#1f77b4";
const char* const ram_colour = "#2ca02c";
const char* const ssd_colour = "#ff7f0e";
const char* const peer_colour = "#d62728";
const char* const lru_colour = "#9467bd";
const char* const infinite_colour = "#7f7f7f";

std::string polyline(const chart& c, const std::vector<replay_sample>& s,
                     double (*value)(const replay_sample&),
                     const char* colour) {
  std::ostringstream o;
  o << "<polyline fill='none' stroke='" << colour
    << "' stroke-width='2' points='";
  // At most ~800 points: one per horizontal pixel is all a chart can show.
  size_t step = std::max<size_t>(1, s.size() / 800);
  for (size_t i = 0; i < s.size(); i += step) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", c.x(double(s[i].requests)),
                  c.y(value(s[i])));
    o << buf;
  }
  if (!s.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f", c.x(double(s.back().requests)),
                  c.y(value(s.back())));
    o << buf;
  }
  o << "'/>\n";
  return o.str();
}

double total(const replay_sample& s) {
  return s.input_tokens ? double(s.ram_tokens + s.ssd_tokens + s.peer_tokens)
                            / double(s.input_tokens)
                        : 0;
}
double ram(const replay_sample& s) {
  return s.input_tokens ? double(s.ram_tokens) / double(s.input_tokens) : 0;
}
double ssd(const replay_sample& s) {
  return s.input_tokens ? double(s.ssd_tokens) / double(s.input_tokens) : 0;
}
double peer(const replay_sample& s) {
  return s.input_tokens ? double(s.peer_tokens) / double(s.input_tokens) : 0;
}

using svg::dashed;
using svg::fixed;
using svg::line;
using svg::text;
using svg::with_commas;

/// A dashed horizontal line at `v` across the plot.
void reference(std::ostringstream& o, const chart& c,
               const std::optional<double>& v, const char* colour) {
  if (v)
    line(o, left, c.y(*v), width - right, c.y(*v), colour, dashed);
}

} // namespace

double nice_step(double span, int ticks) {
  if (!(span > 0) || ticks < 1)
    return 1;
  // The 1-2-5 step nearest (by ratio) to an even split into `ticks`.
  double raw = span / ticks;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  double best = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (std::abs(std::log(m * p / raw)) < std::abs(std::log(best / raw)))
      best = m * p;
  return best;
}

std::string size_text(uint64_t bytes) {
  constexpr uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
  auto in = [&](uint64_t unit, const char* name) {
    double v = double(bytes) / double(unit);
    // Whole numbers without decimals ("256 MiB"), else one ("2.5 GiB").
    return (v == std::floor(v) ? fixed(v, 0) : fixed(v, 1)) + " " + name;
  };
  if (bytes >= GiB)
    return in(GiB, "GiB");
  if (bytes >= MiB)
    return in(MiB, "MiB");
  if (bytes >= KiB)
    return in(KiB, "KiB");
  return std::to_string(bytes) + " B";
}

std::string chart_subtitle(const replay_report& r) {
  std::string s =
    r.model + " · RAM cap " + size_text(r.ram_cap_bytes) + " · SSD cap "
    + (r.ssd_cap_bytes ? size_text(r.ssd_cap_bytes) : std::string{"none"});
  if (r.ssd_cap_bytes == 0)
    return s;
  if (r.ssd_files_at_start == 0)
    return s + " · cold start (SSD empty)";
  return s + " · warm start: SSD held " + with_commas(r.ssd_files_at_start)
         + " files (" + size_text(r.ssd_bytes_at_start) + ")";
}

std::string render_svg(const replay_report& r) {
  double top_value = 0;
  for (auto& s : r.series)
    top_value = std::max(top_value, total(s));
  top_value = std::max({top_value, r.infinite_hit_ratio.value_or(0),
                        r.simulated_lru_hit_ratio.value_or(0), 0.05});
  double ystep = nice_step(std::min(1.0, top_value * 1.05), 8);
  double ymax = std::min(1.0, std::ceil(top_value * 1.05 / ystep) * ystep);
  uint64_t requests = r.series.empty() ? 0 : r.series.back().requests;
  double xstep = nice_step(double(std::max<uint64_t>(requests, 1)), 6);
  chart c{std::max(double(requests), 1.0), ymax};
  int ydecimals = svg::decimals_of(ystep);

  std::ostringstream o;
  svg::begin(o, width, height);
  text(o, left, 24, "Token hit ratio over the replay of " + r.trace, "start",
       "#222", " font-size='15' font-weight='bold'");
  text(o, left, 44, chart_subtitle(r), "start", "#444");

  // The grid and the y ticks: 0, ystep, ... ymax.
  for (int i = 0; i * ystep <= ymax * (1 + 1e-9); ++i) {
    double v = i * ystep;
    line(o, left, c.y(v), width - right, c.y(v), "#e4e4e4");
    line(o, left - 5, c.y(v), left, c.y(v), "#444");
    text(o, left - 8, c.y(v) + 4, fixed(v, ydecimals), "end");
  }
  // The x ticks: 0, xstep, ... up to the requests replayed.
  for (int i = 0; i * xstep <= double(requests) * (1 + 1e-9); ++i) {
    double v = i * xstep;
    line(o, c.x(v), height - bottom, c.x(v), height - bottom + 5, "#444");
    text(o, c.x(v), height - bottom + 19,
         with_commas(static_cast<uint64_t>(std::llround(v))), "middle");
  }
  // The axes.
  line(o, left, top, left, height - bottom, "#444");
  line(o, left, height - bottom, width - right, height - bottom, "#444");
  text(o, (left + width - right) / 2, height - 16,
       "requests replayed (of " + with_commas(r.requests) + ")", "middle");
  char rotate[96];
  std::snprintf(rotate, sizeof rotate, " transform='rotate(-90 %.1f %.1f)'",
                22.0, (top + height - bottom) / 2);
  text(o, 22, (top + height - bottom) / 2,
       "cumulative share of prompt tokens reused", "middle", "#222", rotate);

  reference(o, c, r.infinite_hit_ratio, infinite_colour);
  reference(o, c, r.simulated_lru_hit_ratio, lru_colour);
  o << polyline(c, r.series, total, total_colour)
    << polyline(c, r.series, ram, ram_colour)
    << polyline(c, r.series, ssd, ssd_colour);
  if (r.peer_tokens > 0)
    o << polyline(c, r.series, peer, peer_colour);

  // The legend: a sample of each line and its final value.
  struct row {
    std::string label;
    const char* colour;
    bool dashed;
  };
  auto of = [&](uint64_t part) {
    return r.input_tokens ? fixed(double(part) / double(r.input_tokens), 4)
                          : std::string{"0"};
  };
  std::vector<row> rows{
    {"total " + fixed(r.token_hit_ratio(), 4), total_colour, false},
    {"from RAM " + of(r.ram_tokens), ram_colour, false},
    {"from SSD " + of(r.ssd_tokens), ssd_colour, false}};
  if (r.peer_tokens > 0)
    rows.push_back({"from peers " + of(r.peer_tokens), peer_colour, false});
  if (r.simulated_lru_hit_ratio)
    rows.push_back({"LRU reference " + fixed(*r.simulated_lru_hit_ratio, 4),
                    lru_colour, true});
  if (r.infinite_hit_ratio)
    rows.push_back({"infinite cache " + fixed(*r.infinite_hit_ratio, 4),
                    infinite_colour, true});
  double lx = width - right + 16;
  text(o, lx, top + 4, "final ratio", "start", "#444");
  for (size_t i = 0; i < rows.size(); ++i) {
    double ly = top + 24 + 20.0 * static_cast<double>(i);
    line(o, lx, ly - 4, lx + 26, ly - 4, rows[i].colour,
         rows[i].dashed ? dashed : " stroke-width='2'");
    text(o, lx + 34, ly, rows[i].label);
  }
  o << "</svg>\n";
  return o.str();
}

} // namespace kvtier::runtime
