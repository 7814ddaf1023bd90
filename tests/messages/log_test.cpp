// The log facade (messages/log.hpp): level names parse and print both
// ways, anything else is refused; a line carries an ISO-8601 UTC timestamp
// to the millisecond and its level; lines under the level are dropped.
#define BOOST_TEST_MODULE messages_log
#include <boost/test/unit_test.hpp>

#include "messages/log.hpp"

#include <chrono>
#include <ctime>
#include <regex>
#include <sstream>

using namespace kvtier;

namespace {

/// Captures the log for one test and restores stderr and the level after.
struct captured {
  std::ostringstream out;
  log::level before = log::current_level();

  captured() {
    log::redirect(&out);
  }
  ~captured() {
    log::redirect(nullptr);
    log::set_level(before);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(level_names_parse_and_others_are_refused) {
  for (auto l : {log::level::trace, log::level::debug, log::level::info,
                 log::level::warn, log::level::error, log::level::off})
    BOOST_TEST((log::parse_level(log::to_string(l)) == l));
  BOOST_TEST(std::string{log::to_string(log::level::warn)} == "warn");
  for (auto bad : {"", "INFO", "warning", "loud", "info "})
    BOOST_TEST(!log::parse_level(bad).has_value(), bad);
  BOOST_TEST(std::string{log::level_names()}
             == "trace, debug, info, warn, error, off");
}

BOOST_AUTO_TEST_CASE(a_line_has_a_utc_millisecond_timestamp_and_its_level) {
  captured c;
  log::set_level(log::level::info);
  auto before = std::time(nullptr);
  log::warn("kvtier ssd: removing corrupt file x.kv: misnamed");
  auto line = c.out.str();
  std::smatch m;
  std::regex shape{R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d{3}Z \[warn\] )"
                   R"(kvtier ssd: removing corrupt file x\.kv: misnamed\n$)"};
  BOOST_TEST_REQUIRE(std::regex_match(line, m, shape), line);
  // UTC, and now (within a few seconds).
  std::tm tm{};
  BOOST_REQUIRE(strptime(m[1].str().c_str(), "%Y-%m-%dT%H:%M:%S", &tm));
  auto at = timegm(&tm);
  BOOST_TEST(at >= before - 1);
  BOOST_TEST(at <= std::time(nullptr) + 1);
}

BOOST_AUTO_TEST_CASE(lines_below_the_level_are_dropped) {
  captured c;
  log::set_level(log::level::warn);
  BOOST_TEST(!log::enabled(log::level::info));
  BOOST_TEST(log::enabled(log::level::error));
  log::debug("d");
  log::info("i");
  log::warn("w");
  log::error("e");
  auto text = c.out.str();
  BOOST_TEST(text.find("[debug]") == std::string::npos, text);
  BOOST_TEST(text.find("[info]") == std::string::npos, text);
  BOOST_TEST(text.find("[warn] w\n") != std::string::npos, text);
  BOOST_TEST(text.find("[error] e\n") != std::string::npos, text);
  log::set_level(log::level::off);
  log::error("gone");
  BOOST_TEST(c.out.str() == text);
  BOOST_TEST(!log::enabled(log::level::off));
  log::set_level(log::level::trace);
  log::trace("t");
  BOOST_TEST(c.out.str().find("[trace] t\n") != std::string::npos);
}
