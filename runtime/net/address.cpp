#include "runtime/net/address.hpp"

#include "messages/error.hpp"

#include <charconv>

namespace kvtier::net {

std::optional<host_port> parse_address(const std::string& text) {
  if (text.size() > max_address_bytes)
    return std::nullopt;
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return std::nullopt;
  auto host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty())
    return std::nullopt;
  unsigned port = 0;
  auto digits = std::string_view{text}.substr(colon + 1);
  auto [end, err] =
    std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (err != std::errc{} || end != digits.data() + digits.size() || port == 0
      || port > 65535)
    return std::nullopt;
  return host_port{std::move(host), static_cast<uint16_t>(port)};
}

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1")
    return true;
  // 127.0.0.0/8 in dotted decimal: four numbers 0..255, the first 127.
  int parts = 0;
  size_t i = 0;
  unsigned first = 0;
  while (i <= host.size()) {
    auto dot = host.find('.', i);
    if (dot == std::string::npos)
      dot = host.size();
    unsigned v = 0;
    auto [end, err] = std::from_chars(host.data() + i, host.data() + dot, v);
    if (err != std::errc{} || end != host.data() + dot || dot == i || v > 255)
      return false;
    if (parts == 0)
      first = v;
    ++parts;
    i = dot + 1;
  }
  return parts == 4 && first == 127;
}

bool allowed(const std::string& host, bool protected_) {
  return protected_ || is_loopback(host);
}

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
