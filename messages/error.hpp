// The project's one error enum, shared by every folder (messages/ is first in
// the dependency order, so everything may include it). Codes are append-only:
// they cross nodes inside replies. Retryable I/O (`io_error`, `no_space`) is
// kept apart from corruption (`corrupt_data`): a caller may retry the first,
// never the second. Registered with CAF through CAF_ERROR_CODE_ENUM; an actor
// system renders them after `register_error_category(cfg)`.
//
// What is *not* an error: a lookup that finds nothing (that is an empty
// answer), a publish the cache chooses not to keep (that is `kept == false`),
// an admit that must wait (that is `false`).
#pragma once

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>

namespace caf {
class actor_system_config;
}

namespace kvtier {

/// Every failure kvtier reports, as the code of a `caf::error`.
enum class ec : uint8_t {
  /// Reserved: CAF treats code 0 as "no error".
  none = 0,
  /// Bytes that should hold a message do not: truncated, malformed, random,
  /// or of another schema.
  malformed_message,
  /// A decoded message exceeded the reader limits (traversal or nesting).
  message_limit_exceeded,
  /// An argument is outside what the call accepts (names the argument).
  invalid_argument,
  /// A layer or entry cannot be trimmed to the requested token count.
  not_trimmable,
  /// A configuration key is missing, unknown, or outside its accepted range.
  invalid_config,
  /// A request can never be admitted: it reaches past the position limit.
  position_limit_exceeded,
  /// A request can never be admitted: its projected bytes alone exceed the
  /// whole KV budget.
  over_budget,
  /// A storage operation failed in a way that may succeed on retry (EIO,
  /// interrupted or short writes).
  io_error,
  /// Storage has no room (ENOSPC, or the tier's byte cap cannot make room).
  no_space,
  /// Stored bytes failed verification: bad magic, checksum, truncation.
  corrupt_data,
  /// The entry, file or key asked for does not exist (any more).
  not_found,
  /// Stored data belongs to another format version or model fingerprint.
  incompatible_format,
  /// The call came after close().
  closed,
  /// The operation was cancelled before it completed.
  cancelled,
  /// A storage operation or a peer did not answer within its deadline; the
  /// call answered with what it had (retryable, like `io_error`).
  timeout,
  /// A bounded queue (e.g. admission's waiters) is full: try again later.
  queue_full,
  /// A resource (an SSD directory) is held by another process, named in the
  /// context.
  locked,
  /// The service was configured without the part the call needs (objects
  /// with `ram-tier.objects=false`), named in the context.
  unsupported,
  /// A peer node (or any further tier actor) is gone or not connected: the
  /// request went on without it, named in the context.
  peer_unreachable,
  /// A remote sender asked for an operation only local callers may make
  /// (admin operations unless `cluster.remote-admin`, test hooks).
  not_permitted,
};

/// The enumerator's name, e.g. "corrupt_data".
const char* to_string(ec code);

/// Prints the enumerator's name (for test diagnostics and logs).
std::ostream& operator<<(std::ostream& os, ec code);

/// Renders any error as "kvtier: <code>: <context>" without needing an
/// actor system; a CAF system error in words ("cannot connect to node
/// (ip_connect failed, 127.0.0.1, 1)"), other categories as CAF renders
/// them.
std::string describe(const caf::error& err);

/// `describe(err)` without its leading "kvtier: ", for a message or a log
/// line that names kvtier already ("kvtier node n1: close: timeout: ...",
/// never "kvtier node n1: close: kvtier: timeout: ...").
std::string reason(const caf::error& err);

/// The context a kvtier error carries (its text alone, no "kvtier: " and
/// no code name), for nesting in another error or a log line that says
/// what failed already; `describe(err)` when it carries no single text.
std::string context_of(const caf::error& err);

/// Builds a kvtier error with a human-readable context string.
caf::error make_error(ec code, std::string context);

/// Registers the kvtier error category so `system.render(err)` names codes.
void register_error_category(caf::actor_system_config& cfg);

} // namespace kvtier

CAF_ERROR_CODE_ENUM(kvtier::ec, "kvtier")
