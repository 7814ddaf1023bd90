#include "messages/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

namespace kvtier::log {

namespace {

constexpr std::array<const char*, 6> names{"trace", "debug", "info",
                                           "warn",  "error", "off"};

spdlog::level::level_enum spdlog_level(level l) {
  switch (l) {
    case level::trace: return spdlog::level::trace;
    case level::debug: return spdlog::level::debug;
    case level::info: return spdlog::level::info;
    case level::warn: return spdlog::level::warn;
    case level::error: return spdlog::level::err;
    case level::off: break;
  }
  return spdlog::level::off;
}

/// kvtier's own logger (not in spdlog's registry) and its sink, replaced
/// whole by `redirect`; the mutex orders lines and replacements, so the
/// sinks themselves need no lock (`_st`).
struct state {
  std::mutex mutex;
  std::unique_ptr<spdlog::logger> logger;
  std::atomic<int> threshold{static_cast<int>(level::info)};

  void install(spdlog::sink_ptr sink) {
    // ISO-8601 UTC to the millisecond; the level is part of the text.
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
      "%Y-%m-%dT%H:%M:%S.%eZ %v", spdlog::pattern_time_type::utc));
    logger = std::make_unique<spdlog::logger>("kvtier", std::move(sink));
    logger->set_level(spdlog::level::trace); // `threshold` filters
    logger->flush_on(spdlog::level::trace);  // an operator reads it live
  }

  state() {
    install(std::make_shared<spdlog::sinks::stderr_sink_st>());
  }
};

state& the_state() {
  static state s;
  return s;
}

} // namespace

std::optional<level> parse_level(std::string_view text) {
  for (size_t i = 0; i < names.size(); ++i)
    if (text == names[i])
      return static_cast<level>(i);
  return std::nullopt;
}

const char* to_string(level l) {
  return names[static_cast<size_t>(l)];
}

const char* level_names() {
  return "trace, debug, info, warn, error, off";
}

void set_level(level l) {
  the_state().threshold = static_cast<int>(l);
}

level current_level() {
  return static_cast<level>(the_state().threshold.load());
}

bool enabled(level l) {
  return l != level::off && static_cast<int>(l) >= the_state().threshold;
}

void write(level l, std::string_view text) {
  if (!enabled(l))
    return;
  auto& s = the_state();
  std::string line = "[";
  line += to_string(l);
  line += "] ";
  line += text;
  std::lock_guard<std::mutex> guard{s.mutex};
  s.logger->log(spdlog_level(l), spdlog::string_view_t{line});
}

void redirect(std::ostream* out) {
  auto& s = the_state();
  std::lock_guard<std::mutex> guard{s.mutex};
  if (out)
    s.install(std::make_shared<spdlog::sinks::ostream_sink_st>(*out, true));
  else
    s.install(std::make_shared<spdlog::sinks::stderr_sink_st>());
}

} // namespace kvtier::log
