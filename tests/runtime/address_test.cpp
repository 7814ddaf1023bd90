// The one address rule of runtime/net/address.hpp: what is not protected
// (TLS, an admin token) stays on loopback, checked the same way for the
// configuration, a starting node and the bulk lane.
#define BOOST_TEST_MODULE address
#include <boost/test/unit_test.hpp>

#include "runtime/net/address.hpp"

#include "messages/error.hpp"

#include <string>
#include <vector>

using namespace kvtier;

namespace {

std::string text_of(const caf::error& err) {
  return err ? describe(err) : std::string{};
}

} // namespace

BOOST_AUTO_TEST_CASE(unprotected_connections_stay_on_loopback) {
  BOOST_TEST(net::allowed("127.0.0.1", false));
  BOOST_TEST(net::allowed("localhost", false));
  BOOST_TEST(net::allowed("::1", false));
  BOOST_TEST(!net::allowed("10.0.0.1", false));
  BOOST_TEST(!net::allowed("0.0.0.0", false));
  BOOST_TEST(net::allowed("10.0.0.1", true));
}

BOOST_AUTO_TEST_CASE(a_refusal_names_the_option_and_the_remedy) {
  auto err = net::check_allowed("http.address", "0.0.0.0", "0.0.0.0", false,
                                "set http.admin-token");
  BOOST_REQUIRE(err);
  BOOST_TEST((err == ec::invalid_config));
  BOOST_TEST(text_of(err).find("http.address = \"0.0.0.0\" is not a loopback "
                               "address (127.0.0.0/8, ::1, localhost); set "
                               "http.admin-token")
             != std::string::npos);
  BOOST_TEST(!net::check_allowed("http.address", "0.0.0.0", "0.0.0.0", true,
                                 "set http.admin-token"));
}

BOOST_AUTO_TEST_CASE(a_node_listens_and_joins_on_loopback_without_tls) {
  BOOST_TEST(
    !net::check_node_addresses("127.0.0.1", {"localhost:7400"}, false));
  auto listen = net::check_node_addresses("10.0.0.1", {}, false);
  BOOST_TEST(text_of(listen).find("cluster.listen-address = \"10.0.0.1\"")
             != std::string::npos);
  auto peer = net::check_node_addresses("127.0.0.1", {"10.0.0.2:7400"}, false);
  BOOST_TEST(text_of(peer).find("cluster.peers = \"10.0.0.2:7400\"")
             != std::string::npos);
  auto malformed = net::check_node_addresses("127.0.0.1", {"nohost"}, true);
  BOOST_TEST(text_of(malformed).find("is not HOST:PORT") != std::string::npos);
  BOOST_TEST(!net::check_node_addresses("10.0.0.1", {"10.0.0.2:7400"}, true));
}

BOOST_AUTO_TEST_CASE(the_plaintext_lane_listens_only_beside_a_loopback_node) {
  BOOST_TEST(net::plaintext_address_for("127.0.0.1") == "127.0.0.1");
  BOOST_TEST(net::plaintext_address_for("localhost") == "127.0.0.1");
  BOOST_TEST(net::plaintext_address_for("10.0.0.1").empty());
}
