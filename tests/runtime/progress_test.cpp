// The replay's progress line (runtime/tools/progress.hpp): done/total, the
// rate and the time left; on a terminal one line rewritten in place, and
// elsewhere a plain line only when 10 % more is done or 10 s have passed,
// never a '\r'.
#define BOOST_TEST_MODULE runtime_progress
#include <boost/test/unit_test.hpp>

#include "runtime/tools/progress.hpp"

#include <algorithm>

using namespace kvtier::runtime;

BOOST_AUTO_TEST_CASE(eta_is_the_time_left_at_the_rate_so_far) {
  BOOST_TEST(eta_text(0, 100, 5) == "--");    // nothing done yet
  BOOST_TEST(eta_text(10, 100, 0) == "--");   // no time passed
  BOOST_TEST(eta_text(50, 100, 10) == "10s"); // half in 10 s: 10 s more
  BOOST_TEST(eta_text(10, 100, 10) == "1m30s");
  BOOST_TEST(eta_text(1, 1000, 10) == "2h46m");
  BOOST_TEST(eta_text(100, 100, 10) == "0s");
}

BOOST_AUTO_TEST_CASE(the_line_names_done_total_rate_and_eta) {
  BOOST_TEST(progress_text("[replay]", 1200, 12031, 10, "hit ratio 0.3712")
             == "[replay] 1,200/12,031 requests (10 %), 120 req/s, ETA "
                "1m30s, hit ratio 0.3712");
  BOOST_TEST(progress_text("[replay --nodes] routed:", 0, 10, 0, "")
             == "[replay --nodes] routed: 0/10 requests (0 %), 0 req/s, ETA "
                "--");
}

BOOST_AUTO_TEST_CASE(on_a_terminal_each_update_rewrites_one_line) {
  progress_meter m{true};
  auto a = m.update("[replay]", 10, 100, 1);
  auto b = m.update("[replay]", 11, 100, 2);
  BOOST_TEST(a.front() == '\r');
  BOOST_TEST(b.front() == '\r');
  BOOST_TEST(a.find('\n') == std::string::npos);
  BOOST_TEST(a.find("10/100 requests") != std::string::npos, a);
  BOOST_TEST(a.find("\x1b[K") != std::string::npos); // erases what was longer
  BOOST_TEST(m.finish() == "\n");
  BOOST_TEST(m.finish() == ""); // once
}

BOOST_AUTO_TEST_CASE(elsewhere_a_plain_line_every_tenth_or_ten_seconds) {
  progress_meter m{false};
  std::string all;
  int lines = 0;
  // 1,000 requests, one update a second at 5 requests a second: 200 s.
  for (int s = 1; s <= 200; ++s) {
    auto out = m.update("[replay]", uint64_t(5 * s), 1000, double(s));
    if (!out.empty()) {
      ++lines;
      BOOST_TEST(out.back() == '\n');
      BOOST_TEST(std::count(out.begin(), out.end(), '\n') == 1);
    }
    all += out;
  }
  all += m.finish();
  BOOST_TEST(all.find('\r') == std::string::npos);
  // The first update, then every 10 s (10 % would take 20 s here).
  BOOST_TEST(lines == 20, all);
  BOOST_TEST(all.find("5/1,000 requests") != std::string::npos, all);
  BOOST_TEST(all.find("55/1,000 requests") != std::string::npos, all);
  BOOST_TEST(m.finish() == "");
  // A fast run: every 10 % instead (100 updates in 1.2 s -> 10 lines).
  progress_meter fast{false};
  lines = 0;
  for (int i = 1; i <= 100; ++i)
    lines +=
      !fast.update("[replay]", uint64_t(10 * i), 1000, 0.012 * i).empty();
  BOOST_TEST(lines == 10);
}
