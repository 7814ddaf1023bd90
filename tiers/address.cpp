#include "tiers/address.hpp"

#include <charconv>
#include <string_view>

namespace kvtier::tiers {

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

} // namespace kvtier::tiers
