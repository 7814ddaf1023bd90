#include "runtime/tools/client.hpp"

#include "runtime/net/address.hpp"
#include "runtime/service/service_codec.hpp"

#include "actors/codec.hpp"
#include "messages/caller_actor.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_cast.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include <set>

namespace kvtier::cluster {

template <class Root>
using sealed = msg::sealed<Root>;

client_config::client_config(const net::tls_files& tls) {
  msg::register_message_types(*this);
  register_error_category(*this);
  set("scheduler.max-threads", 1);
  load<caf::io::middleman>();
  if (!tls.certificate.empty())
    net::configure_tls(*this, tls);
}

caf::expected<caf::actor> connect_node(caf::actor_system& sys,
                                       const std::string& address,
                                       millis timeout) {
  auto hp = net::parse_address(address);
  if (!hp)
    return make_error(ec::invalid_argument,
                      "\"" + address + "\" is not HOST:PORT");
  kvtier::caller_actor self{sys};
  auto mm = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                                      : sys.middleman().actor_handle();
  caf::expected<caf::actor> out = make_error(ec::timeout, "no answer");
  self
    ->request(mm, caf::duration{timeout}, caf::connect_atom_v, hp->host,
              hp->port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr serv,
          const std::set<std::string>&) {
        if (serv)
          out = caf::actor_cast<caf::actor>(serv);
        else
          out = make_error(ec::not_found, "no actor published at " + address);
      },
      [&](caf::error& err) {
        out = err == caf::sec::request_timeout ? make_error(
                ec::timeout, "no CAF handshake from " + address + " within "
                               + std::to_string(timeout.count())
                               + " ms (is a kvtier node listening there?)")
                                               : std::move(err);
      });
  return out;
}

caf::expected<members_view> query_members(caf::actor_system& sys,
                                          const std::string& address,
                                          millis timeout) {
  auto remote = connect_node(sys, address, timeout);
  if (!remote)
    return std::move(remote.error());
  return ask_members(sys, caf::actor_cast<actors::node_actor>(*remote),
                     timeout);
}

caf::expected<runtime::route_decision>
query_route(caf::actor_system& sys, const caf::actor& node,
            const tiers::token_seq& prompt, const std::string& ns,
            millis timeout, uint32_t max_new_tokens) {
  if (!node)
    return make_error(ec::invalid_argument, "query_route: no node actor");
  kvtier::caller_actor self{sys};
  caf::expected<runtime::route_decision> out =
    make_error(ec::timeout, "the node did not answer the route request "
                            "within "
                              + std::to_string(timeout.count()) + " ms");
  self
    ->request(node, caf::duration{timeout},
              runtime::codec::route(prompt, ns, max_new_tokens))
    .receive(
      [&](const sealed<msg::RouteRequestReply>& r) {
        out = runtime::codec::routed(r);
      },
      [&](caf::error& err) {
        if (err != caf::sec::request_timeout)
          out = std::move(err);
      });
  return out;
}

} // namespace kvtier::cluster
