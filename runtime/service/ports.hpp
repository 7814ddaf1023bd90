// Whether the ports a service will listen on are free, checked before the
// service creates anything (its SSD directory, its actors): a port in use
// is a start error naming the key and the port, and leaves nothing behind
// on disk (docs/operations.md, docs/cluster.md).
//
// A check binds a socket the way the listener will (SO_REUSEADDR) and
// closes it at once. A port another process takes between the check and
// the real bind still fails the start with the same words; what the start
// created by then stays (an empty model directory at most).
//
// Plain function; any thread.
#pragma once

#include "runtime/config.hpp"

namespace kvtier::runtime {

/// `ec::io_error` naming the key (`cluster.port`, `http.port`) and
/// HOST:PORT when a fixed port `o` will listen on cannot be bound now;
/// `ec::invalid_config` when cluster.port and http.port name the same one.
/// Port 0 (any free port) and disabled listeners are not checked.
caf::error check_ports(const service_options& o);

} // namespace kvtier::runtime
