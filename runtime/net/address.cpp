#include "runtime/net/address.hpp"

#include "messages/error.hpp"

namespace kvtier::net {

caf::error check_allowed(std::string_view option, const std::string& host,
                         const std::string& shown, bool protected_,
                         std::string_view remedy) {
  if (allowed(host, protected_))
    return {};
  return make_error(ec::invalid_config,
                    std::string{option} + " = \"" + shown
                      + "\" is not a loopback address (127.0.0.0/8, ::1, "
                        "localhost); "
                      + std::string{remedy});
}

caf::error check_node_addresses(const std::string& listen_address,
                                const std::vector<std::string>& peers,
                                bool tls) {
  if (auto e = check_allowed("cluster.listen-address", listen_address,
                             listen_address, tls,
                             "set cluster.tls = true (with "
                             "cluster.tls-certificate, cluster.tls-key and "
                             "cluster.tls-ca) to listen on any other address"))
    return e;
  for (auto& p : peers) {
    auto hp = parse_address(p);
    if (!hp)
      return make_error(ec::invalid_config,
                        "cluster.peers: \"" + p
                          + "\" is not HOST:PORT (e.g. \"127.0.0.1:7400\")");
    if (auto e = check_allowed("cluster.peers", hp->host, p, tls,
                               "set cluster.tls = true to join nodes on other "
                               "addresses"))
      return e;
  }
  return {};
}

std::string plaintext_address_for(const std::string& listen_address) {
  if (listen_address == "localhost")
    return "127.0.0.1"; // the lane takes numeric addresses only
  return is_loopback(listen_address) ? listen_address : std::string{};
}

} // namespace kvtier::net
