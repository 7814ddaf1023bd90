// Addresses as kvtier's networking reads them (HOST:PORT), and the one
// address rule every listener and connection of the runtime applies:
// what is not protected stays on this machine. A node without
// `cluster.tls` listens on, joins and learns loopback addresses only; the
// bulk lane (plain TCP) listens on loopback only; the HTTP endpoint
// without `http.admin-token` serves loopback only. Loopback is
// 127.0.0.0/8 in dotted decimal, ::1 and localhost; nothing is resolved.
// The parsing and the rule itself live in tiers/address.hpp (the
// membership engine judges peers' addresses by them, below the actors) and
// are named here too; this header adds the checks that name options.
//
// Plain functions; any thread.
#pragma once

#include "tiers/address.hpp"

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::net {

/// The plain part of the rule (tiers/address.hpp), here under its
/// networking names.
using tiers::allowed;
using tiers::host_port;
using tiers::is_loopback;
using tiers::max_address_bytes;
using tiers::max_node_id_bytes;
using tiers::parse_address;

/// The rule as a configuration check: none when `allowed`, else
/// `ec::invalid_config` naming the option and what it holds, e.g.
/// `cluster.peers = "10.0.0.2:7400" is not a loopback address (127.0.0.0/8,
/// ::1, localhost); <remedy>`. `host` is what is checked, `shown` what the
/// option holds (HOST:PORT for a peer).
caf::error check_allowed(std::string_view option, const std::string& host,
                         const std::string& shown, bool protected_,
                         std::string_view remedy);

/// The rule on a node's own addresses: `cluster.listen-address` and every
/// peer (cluster.peers, --join) HOST:PORT, loopback unless `tls`. The
/// error names the option and the address; checked by the configuration
/// and again by the node that starts with them.
caf::error check_node_addresses(const std::string& listen_address,
                                const std::vector<std::string>& peers,
                                bool tls);

/// Where a plaintext listener beside a node listening on `listen_address`
/// listens (the bulk lane): there when it is a loopback address
/// ("localhost" as 127.0.0.1: the lane takes numeric addresses only);
/// otherwise nowhere (""): off loopback only TLS may carry a peer's bytes.
std::string plaintext_address_for(const std::string& listen_address);

} // namespace kvtier::net
