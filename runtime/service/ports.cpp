#include "runtime/service/ports.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace kvtier::runtime {

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

/// Binds `host`:`port` and lets go; the error names `key`.
caf::error probe(const char* key, const std::string& host, uint64_t port) {
  auto where = host + ":" + std::to_string(port);
  asio::io_context io;
  boost::system::error_code ec;
  tcp::resolver resolver{io};
  auto found = resolver.resolve(host, std::to_string(port),
                                tcp::resolver::numeric_service, ec);
  if (ec || found.empty())
    return {}; // the listener says what is wrong with the address
  tcp::acceptor a{io};
  a.open(found.begin()->endpoint().protocol(), ec);
  if (!ec)
    a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(found.begin()->endpoint(), ec);
  if (!ec)
    return {};
  return make_error(ec::io_error,
                    std::string{key} + " = " + std::to_string(port)
                      + ": cannot listen on " + where + ": " + ec.message()
                      + " (nothing was started; choose another port, or 0 "
                        "for any free one)");
}

} // namespace

caf::error check_ports(const service_options& o) {
  bool cluster = o.cluster_enabled && o.cluster_port != 0;
  bool http = o.http_enabled && o.http_port != 0;
  if (cluster && http && o.cluster_port == o.http_port
      && o.cluster_listen_address == o.http_address)
    return make_error(ec::invalid_config,
                      "http.port = " + std::to_string(o.http_port)
                        + " is cluster.port too: give each its own port");
  if (cluster)
    if (auto err =
          probe("cluster.port", o.cluster_listen_address, o.cluster_port))
      return err;
  if (http)
    if (auto err = probe("http.port", o.http_address, o.http_port))
      return err;
  return {};
}

} // namespace kvtier::runtime
