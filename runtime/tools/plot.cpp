// render_svg (runtime/tools/report.hpp): a dependency-free SVG line chart of
// the cumulative token hit ratio over a replay, per tier.
#include "runtime/tools/report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

namespace kvtier::runtime {

namespace {

constexpr double width = 800, height = 420, left = 60, right = 190, top = 40,
                 bottom = 50;

struct chart {
  uint64_t requests;
  double ymax;

  double x(uint64_t req) const {
    return left
           + (width - left - right) * double(req)
               / double(std::max<uint64_t>(requests, 1));
  }
  double y(double ratio) const {
    return height - bottom - (height - top - bottom) * ratio / ymax;
  }
};

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
    std::snprintf(buf, sizeof buf, "%.1f,%.1f ", c.x(s[i].requests),
                  c.y(value(s[i])));
    o << buf;
  }
  if (!s.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f,%.1f", c.x(s.back().requests),
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

void text(std::ostringstream& o, double x, double y, const std::string& t,
          const char* anchor = "start", const char* colour = "#222") {
  char buf[96];
  std::snprintf(buf, sizeof buf,
                "<text x='%.1f' y='%.1f' text-anchor='%s' fill='%s'>", x, y,
                anchor, colour);
  o << buf << t << "</text>\n";
}

/// A dashed horizontal line at `v`; its label goes in the legend.
void reference(std::ostringstream& o, const chart& c,
               const std::optional<double>& v, const char* colour) {
  if (!v)
    return;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='%s' "
                "stroke-dasharray='6,4'/>\n",
                left, width - right, c.y(*v), c.y(*v), colour);
  o << buf;
}

/// Legend rows stacked at the top right, one line apart, so labels never
/// overlap however close the lines end.
void legend(std::ostringstream& o, const replay_report& r) {
  std::vector<std::pair<std::string, const char*>> rows{
    {"total", "#1f77b4"}, {"from RAM", "#2ca02c"}, {"from SSD", "#ff7f0e"}};
  if (r.peer_tokens > 0)
    rows.emplace_back("from peers", "#d62728");
  char buf[64];
  if (r.simulated_lru_hit_ratio) {
    std::snprintf(buf, sizeof buf, "LRU ref %.3f", *r.simulated_lru_hit_ratio);
    rows.emplace_back(buf, "#9467bd");
  }
  if (r.infinite_hit_ratio) {
    std::snprintf(buf, sizeof buf, "infinite %.3f", *r.infinite_hit_ratio);
    rows.emplace_back(buf, "#7f7f7f");
  }
  for (size_t i = 0; i < rows.size(); ++i)
    text(o, width - right + 6, top + 10 + 16.0 * static_cast<double>(i),
         rows[i].first, "start", rows[i].second);
}

} // namespace

std::string render_svg(const replay_report& r) {
  double top_value = 0;
  for (auto& s : r.series)
    top_value = std::max(top_value, total(s));
  top_value = std::max({top_value, r.infinite_hit_ratio.value_or(0),
                        r.simulated_lru_hit_ratio.value_or(0), 0.1});
  chart c{r.series.empty() ? 1 : r.series.back().requests,
          std::min(1.0, top_value * 1.1)};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width
    << "' height='" << height << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";
  text(o, left, 22, "Token hit ratio over the replay of " + r.trace);
  for (int i = 0; i <= 5; ++i) {
    double v = c.ymax * i / 5;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' "
                  "stroke='#ddd'/>\n",
                  left, width - right, c.y(v), c.y(v));
    o << buf;
    std::snprintf(buf, sizeof buf, "%.2f", v);
    text(o, left - 6, c.y(v) + 4, buf, "end");
  }
  text(o, (left + width - right) / 2, height - 15,
       "requests (" + std::to_string(c.requests) + ")", "middle");
  o << polyline(c, r.series, total, "#1f77b4")
    << polyline(c, r.series, ram, "#2ca02c")
    << polyline(c, r.series, ssd, "#ff7f0e");
  if (r.peer_tokens > 0)
    o << polyline(c, r.series, peer, "#d62728");
  reference(o, c, r.simulated_lru_hit_ratio, "#9467bd");
  reference(o, c, r.infinite_hit_ratio, "#7f7f7f");
  legend(o, r);
  o << "</svg>\n";
  return o.str();
}

} // namespace kvtier::runtime
