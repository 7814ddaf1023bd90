// The client helpers: how the `kvtier` tools, the program's `members`
// command and the tests talk to a node from outside it (docs/cluster.md):
// an actor system that only talks to nodes, a connection to a node's
// published actor, its membership view and a routing question. They sit
// with the tools, above the embedded API, and ask a node through its
// messages (messages/membership.capnp, service.capnp) like any peer.
//
// Threads: each call blocks the calling thread until the answer or its
// deadline (see below which threads may call).
#pragma once

#include "runtime/cluster/node.hpp"
#include "runtime/net/tls.hpp"
#include "runtime/service_types.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <string>

namespace kvtier::cluster {

using net::tls_files;

/// The configuration of an actor system that only talks to nodes (`kvtier
/// members`, tests): the middleman, kvtier's message types and errors, one
/// scheduler thread; with `tls` set (a certificate given) CAF's OpenSSL
/// module too, and connections go through it.
struct client_config : caf::actor_system_config {
  explicit client_config(const net::tls_files& tls = {});
};

// The client helpers below block the calling thread until the answer or
// their deadline. They may run on any system with the middleman, a
// service's own included (`service::system()`: the service can be destroyed
// from any thread afterwards, messages/caller_actor.hpp), but never on a
// thread of that system's own (an actor's handler, a feed callback): there
// the answer could wait for the very thread that waits for it.

/// Connects to the node actor at `address` (HOST:PORT) through the OpenSSL
/// module when `sys` has one, else the middleman, within `timeout`
/// (`ec::timeout` naming the address when nothing there completes CAF's
/// handshake).
caf::expected<caf::actor> connect_node(caf::actor_system& sys,
                                       const std::string& address,
                                       millis timeout);

/// Asks the node at `address` (HOST:PORT) for its membership view, from
/// `sys` (which needs the middleman), within `timeout` (tests, `kvtier
/// members`); over TLS when `sys` has the OpenSSL module.
caf::expected<members_view> query_members(caf::actor_system& sys,
                                          const std::string& address,
                                          millis timeout);

/// Asks the node actor `node` (connect_node) which node should serve
/// `prompt` in `ns` (docs/cluster.md "Routing"), within `timeout`: the
/// remote client's `service::route`.
caf::expected<runtime::route_decision>
query_route(caf::actor_system& sys, const caf::actor& node,
            const tiers::token_seq& prompt, const std::string& ns,
            millis timeout, uint32_t max_new_tokens = 0);

} // namespace kvtier::cluster
