// kvtier's operational log (docs/logging.md): one line per
// event an operator acts on (a node started, a peer came or went, the cold
// tier went down, an SSD file failed or was recovered, a flush's outcome),
// each with an ISO-8601 UTC timestamp to the millisecond and a level:
//
//   2026-12-02T01:02:03.456Z [warning] kvtier ssd: removing corrupt file ...
//
// Policy: the log goes to stderr, never stdout (stdout is the commands'
// results: tables, JSON paths, the node's listening line). Lines under the
// process-wide level (`[log] level`, default info) are not written, nor
// formatted when the caller asks `enabled` first. The facade is the only
// code that includes spdlog (a maintained library, Debian's libspdlog-dev);
// its logger is kvtier's own, not registered in spdlog's registry, so an
// engine that uses spdlog itself keeps its own loggers and levels. Lives in
// messages/ with the other project-wide basics, so tiers/ code logs too.
//
// Thread-safe: any thread may log, set the level or redirect the output.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

namespace kvtier::log {

enum class level { trace, debug, info, warn, error, off };

/// "trace", "debug", "info", "warn", "error", "off" -> the level; nullopt
/// for anything else.
std::optional<level> parse_level(std::string_view text);

/// The level's name as `parse_level` reads it.
const char* to_string(level l);

/// The names `parse_level` accepts, for messages: "trace, debug, info,
/// warn, error, off".
const char* level_names();

/// The process-wide level: lines below it are dropped.
void set_level(level l);
level current_level();

/// True when a line at `l` would be written (test before building costly
/// text).
bool enabled(level l);

/// Writes one line at `l` (no newline in `text`).
void write(level l, std::string_view text);

inline void trace(std::string_view text) {
  write(level::trace, text);
}
inline void debug(std::string_view text) {
  write(level::debug, text);
}
inline void info(std::string_view text) {
  write(level::info, text);
}
inline void warn(std::string_view text) {
  write(level::warn, text);
}
inline void error(std::string_view text) {
  write(level::error, text);
}

/// Sends every line to `out` instead of stderr (tests read the lines);
/// nullptr returns to stderr. `out` must outlive the redirection.
void redirect(std::ostream* out);

} // namespace kvtier::log
