// Addresses as kvtier reads them (HOST:PORT) and the plain part of the one
// address rule every listener and connection of the runtime applies: what
// is not protected stays on this machine. Loopback is 127.0.0.0/8 in
// dotted decimal, ::1 and localhost; nothing is resolved. Here, below the
// actors, because the membership engine (tiers/membership.hpp) judges the
// addresses peers announce by it; the configuration checks built on it
// (which name options) are runtime/net/address.hpp's.
//
// Plain functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtier::tiers {

/// The longest HOST:PORT and node id a peer or a configuration may give
/// (bytes).
inline constexpr size_t max_address_bytes = 300;
inline constexpr size_t max_node_id_bytes = 128;

/// HOST:PORT split; nullopt unless HOST is non-empty and PORT 1..65535
/// (a bracketed IPv6 host loses its brackets).
struct host_port {
  std::string host;
  uint16_t port = 0;
};
std::optional<host_port> parse_address(const std::string& text);

/// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

/// The address rule: whether `host` may carry a connection that is
/// `protected_` (TLS, an admin token) or not. Unprotected: loopback only.
bool allowed(const std::string& host, bool protected_);

} // namespace kvtier::tiers
