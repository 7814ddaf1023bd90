// render_svg (runtime/tools/regret.hpp): the eviction regret chart, token
// hit ratio against capacity on a log scale, one curve each for LRU, the
// policy and the foresight ceiling, a marker at every capacity measured,
// and a red ring where a rule fails there.
#include "runtime/tools/regret.hpp"
#include "runtime/tools/report.hpp"
#include "runtime/tools/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvtier::runtime {

namespace {

constexpr double width = 900, height = 480, left = 76, right = 230, top = 70,
                 bottom = 62;

struct axes {
  double lo, hi; // log10 of the capacities at the edges
  double ymax;

  double x(double tokens) const {
    double span = std::max(hi - lo, 1e-9);
    return left + (width - left - right) * (std::log10(tokens) - lo) / span;
  }
  double y(double ratio) const {
    return height - bottom - (height - top - bottom) * ratio / ymax;
  }
};

const char* const lru_colour = "#9467bd";
const char* const policy_colour = "#1f77b4";
const char* const ceiling_colour = "#7f7f7f";

void curve(std::ostringstream& o, const axes& a, const regret_report& r,
           double regret_point::*value, const char* colour, bool dashed) {
  o << "<polyline fill='none' stroke='" << colour << "'"
    << (dashed ? svg::dashed : " stroke-width='2'") << " points='";
  for (auto& p : r.points) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", a.x(double(p.capacity_tokens)),
                  a.y(p.*value));
    o << buf;
  }
  o << "'/>\n";
  for (auto& p : r.points) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n",
                  a.x(double(p.capacity_tokens)), a.y(p.*value), colour);
    o << buf;
  }
}

/// 2,000,000 as "2M", 500,000 as "500k".
std::string tokens_text(double v) {
  if (v >= 1e6)
    return svg::fixed(v / 1e6, v >= 1e7 || std::fmod(v, 1e6) == 0 ? 0 : 1)
           + "M";
  if (v >= 1e3)
    return svg::fixed(v / 1e3, 0) + "k";
  return svg::fixed(v, 0);
}

} // namespace

std::string render_svg(const regret_report& r) {
  double top_value = 0.05;
  for (auto& p : r.points)
    top_value = std::max({top_value, p.lru, p.policy, p.ceiling});
  double ystep = nice_step(std::min(1.0, top_value * 1.05), 8);
  double ymax = std::min(1.0, std::ceil(top_value * 1.05 / ystep) * ystep);
  double first =
    r.points.empty() ? 1 : double(r.points.front().capacity_tokens);
  double last = r.points.empty() ? 10 : double(r.points.back().capacity_tokens);
  axes a{std::floor(std::log10(first)), std::ceil(std::log10(last)), ymax};
  if (a.hi <= a.lo)
    a.hi = a.lo + 1;
  int ydecimals = svg::decimals_of(ystep);

  std::ostringstream o;
  svg::begin(o, width, height);
  svg::text(o, left, 24, "Token hit ratio against capacity: " + r.trace,
            "start", "#222", " font-size='15' font-weight='bold'");
  svg::text(o, left, 44,
            svg::with_commas(r.requests) + " requests · working set "
              + svg::with_commas(r.working_set_tokens) + " tokens ("
              + svg::with_commas(r.distinct_blocks) + " blocks of "
              + std::to_string(r.block_size) + ")",
            "start", "#444");
  for (int i = 0; i * ystep <= ymax * (1 + 1e-9); ++i) {
    double v = i * ystep;
    svg::line(o, left, a.y(v), width - right, a.y(v), "#e4e4e4");
    svg::line(o, left - 5, a.y(v), left, a.y(v), "#444");
    svg::text(o, left - 8, a.y(v) + 4, svg::fixed(v, ydecimals), "end");
  }
  // Decades and the 2 and 5 between them.
  for (double d = a.lo; d < a.hi + 1e-9; ++d)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = m * std::pow(10.0, d);
      if (std::log10(v) > a.hi + 1e-9)
        break;
      svg::line(o, a.x(v), height - bottom, a.x(v), height - bottom + 5,
                "#444");
      if (m == 1.0)
        svg::line(o, a.x(v), top, a.x(v), height - bottom, "#e4e4e4");
      svg::text(o, a.x(v), height - bottom + 19, tokens_text(v), "middle");
    }
  svg::line(o, left, top, left, height - bottom, "#444");
  svg::line(o, left, height - bottom, width - right, height - bottom, "#444");
  svg::text(o, (left + width - right) / 2, height - 16,
            "cache capacity, tokens (log scale)", "middle");
  char rotate[96];
  std::snprintf(rotate, sizeof rotate, " transform='rotate(-90 %.1f %.1f)'",
                22.0, (top + height - bottom) / 2);
  svg::text(o, 22, (top + height - bottom) / 2, "token hit ratio", "middle",
            "#222", rotate);

  curve(o, a, r, &regret_point::ceiling, ceiling_colour, true);
  curve(o, a, r, &regret_point::lru, lru_colour, false);
  curve(o, a, r, &regret_point::policy, policy_colour, false);
  for (auto& p : r.points)
    if (!p.never_below() || !p.gain_met()) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "<circle cx='%.1f' cy='%.1f' r='7' fill='none' "
                    "stroke='#d62728' stroke-width='2'/>\n",
                    a.x(double(p.capacity_tokens)), a.y(p.policy));
      o << buf;
    }

  double lx = width - right + 16;
  struct row {
    std::string label;
    const char* colour;
    bool dashed;
  };
  row rows[] = {{"Belady (foresight)", ceiling_colour, true},
                {r.policy, policy_colour, false},
                {"LRU", lru_colour, false}};
  for (size_t i = 0; i < 3; ++i) {
    double ly = top + 4 + 20.0 * static_cast<double>(i);
    svg::line(o, lx, ly - 4, lx + 26, ly - 4, rows[i].colour,
              rows[i].dashed ? svg::dashed : " stroke-width='2'");
    svg::text(o, lx + 34, ly, rows[i].label);
  }
  double ly = top + 4 + 20.0 * 3;
  o << "<circle cx='" << lx + 13 << "' cy='" << ly - 4
    << "' r='7' fill='none' stroke='#d62728' stroke-width='2'/>\n";
  svg::text(o, lx + 34, ly, "a rule fails here");
  svg::text(o, lx, ly + 28,
            r.holds() ? "rules hold everywhere" : "rules: see the table",
            "start", "#444");
  o << "</svg>\n";
  return o.str();
}

} // namespace kvtier::runtime
