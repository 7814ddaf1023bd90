// Small helpers the tools' SVG charts share (runtime/tools/plot.cpp draws
// the replay's, regret_plot.cpp the eviction regret's): escaped text,
// labels, lines and number formats. Header-only, stateless, safe anywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

namespace kvtier::runtime::svg {

/// Opens a chart of `width` x `height` on a white background (the caller
/// closes it with "</svg>").
inline void begin(std::ostringstream& o, double width, double height) {
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width
    << "' height='" << height << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";
}

/// The decimals that show a tick step of `step` (0.05: 2).
inline int decimals_of(double step) {
  return std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
}

/// `t` with <, > and & escaped for SVG text.
inline std::string escaped(const std::string& t) {
  std::string out;
  for (char ch : t) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else
      out += ch;
  }
  return out;
}

/// A label at (x, y); `extra` adds attributes (" font-size='15'").
inline void text(std::ostringstream& o, double x, double y,
                 const std::string& t, const char* anchor = "start",
                 const char* colour = "#222", const char* extra = "") {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "<text x='%.1f' y='%.1f' text-anchor='%s' fill='%s'%s>", x, y,
                anchor, colour, extra);
  o << buf << escaped(t) << "</text>\n";
}

inline void line(std::ostringstream& o, double x1, double y1, double x2,
                 double y2, const char* colour, const char* extra = "") {
  char buf[240];
  std::snprintf(
    buf, sizeof buf,
    "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s'%s/>\n", x1, y1,
    x2, y2, colour, extra);
  o << buf;
}

/// The attributes of a dashed line.
inline constexpr const char* dashed =
  " stroke-width='1.5' stroke-dasharray='6,4'";

/// 1234567 as "1,234,567".
inline std::string with_commas(uint64_t v) {
  auto digits = std::to_string(v);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      s += ',';
    s += digits[i];
  }
  return s;
}

/// `v` with `decimals` digits after the point.
inline std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

} // namespace kvtier::runtime::svg
