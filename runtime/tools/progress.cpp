#include "runtime/tools/progress.hpp"

#include <cmath>
#include <cstdio>

namespace kvtier::runtime {

namespace {

std::string with_commas(uint64_t v) {
  auto s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

} // namespace

std::string eta_text(uint64_t done, uint64_t total, double elapsed_s) {
  if (done == 0 || !(elapsed_s > 0))
    return "--";
  if (done >= total)
    return "0s";
  auto left = std::llround(elapsed_s * double(total - done) / double(done));
  char buf[32];
  if (left < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(left));
  else if (left < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds",
                  static_cast<long long>(left / 60),
                  static_cast<long long>(left % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm",
                  static_cast<long long>(left / 3600),
                  static_cast<long long>(left / 60 % 60));
  return buf;
}

std::string progress_text(const std::string& label, uint64_t done,
                          uint64_t total, double elapsed_s,
                          const std::string& extra) {
  char buf[96];
  std::snprintf(buf, sizeof buf, " requests (%.0f %%), %.0f req/s, ETA ",
                total ? 100.0 * double(done) / double(total) : 0.0,
                elapsed_s > 0 ? double(done) / elapsed_s : 0.0);
  auto out = label + " " + with_commas(done) + "/" + with_commas(total) + buf
             + eta_text(done, total, elapsed_s);
  if (!extra.empty())
    out += ", " + extra;
  return out;
}

std::string progress_meter::update(const std::string& label, uint64_t done,
                                   uint64_t total, double elapsed_s,
                                   const std::string& extra) {
  auto text = progress_text(label, done, total, elapsed_s, extra);
  if (terminal_) {
    line_open_ = true;
    // Rewrite the line in place and erase what a longer one left.
    return "\r" + text + "\x1b[K";
  }
  bool due = !printed_ || elapsed_s - last_s_ >= 10.0
             || (total > 0 && (done - last_done_) * 10 >= total);
  if (!due)
    return {};
  printed_ = true;
  last_s_ = elapsed_s;
  last_done_ = done;
  return text + "\n";
}

std::string progress_meter::finish() {
  if (!line_open_)
    return {};
  line_open_ = false;
  return "\n";
}

void progress_meter::restart() {
  printed_ = false;
  last_s_ = 0;
  last_done_ = 0;
}

} // namespace kvtier::runtime
