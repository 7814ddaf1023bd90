#include "messages/error.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include <algorithm>
#include <ostream>

namespace kvtier {

const char* to_string(ec code) {
  switch (code) {
    case ec::none: return "none";
    case ec::malformed_message: return "malformed_message";
    case ec::message_limit_exceeded: return "message_limit_exceeded";
    case ec::invalid_argument: return "invalid_argument";
    case ec::not_trimmable: return "not_trimmable";
    case ec::invalid_config: return "invalid_config";
    case ec::position_limit_exceeded: return "position_limit_exceeded";
    case ec::over_budget: return "over_budget";
    case ec::io_error: return "io_error";
    case ec::no_space: return "no_space";
    case ec::corrupt_data: return "corrupt_data";
    case ec::not_found: return "not_found";
    case ec::incompatible_format: return "incompatible_format";
    case ec::closed: return "closed";
    case ec::cancelled: return "cancelled";
    case ec::timeout: return "timeout";
    case ec::queue_full: return "queue_full";
    case ec::locked: return "locked";
    case ec::unsupported: return "unsupported";
    case ec::peer_unreachable: return "peer_unreachable";
    case ec::not_permitted: return "not_permitted";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, ec code) {
  return os << to_string(code);
}

namespace {

std::string context_text(const caf::message& ctx) {
  if (ctx.empty())
    return {};
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return to_string(ctx);
}

/// A CAF system error in words: "cannot connect to node (ip_connect
/// failed, 127.0.0.1, 1)" rather than CAF's
/// `system_error(cannot_connect_to_node,
/// ("ip_connect failed", "127.0.0.1", 1))`.
std::string system_text(const caf::error& err) {
  auto out = to_string(static_cast<caf::sec>(err.code()));
  std::replace(out.begin(), out.end(), '_', ' ');
  auto& ctx = err.context();
  if (ctx.empty())
    return out;
  out += " (";
  for (size_t i = 0; i < ctx.size(); ++i) {
    if (i > 0)
      out += ", ";
    if (ctx.match_element<std::string>(i))
      out += ctx.get_as<std::string>(i);
    else
      out += ctx.content().stringify(i);
  }
  out += ")";
  return out;
}

} // namespace

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  if (err.category() == caf::atom("system"))
    return system_text(err);
  if (err.category() != caf::atom("kvtier"))
    return to_string(err);
  std::string out = "kvtier: ";
  out += to_string(static_cast<ec>(err.code()));
  auto ctx = context_text(err.context());
  if (!ctx.empty()) {
    out += ": ";
    out += ctx;
  }
  return out;
}

std::string reason(const caf::error& err) {
  auto text = describe(err);
  constexpr std::string_view prefix = "kvtier: ";
  if (text.rfind(prefix, 0) == 0)
    text.erase(0, prefix.size());
  return text;
}

std::string context_of(const caf::error& err) {
  auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return describe(err);
}

caf::error make_error(ec code, std::string context) {
  return caf::make_error(code, std::move(context));
}

void register_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(caf::atom("kvtier"), [](uint8_t code, caf::atom_value,
                                                 const caf::message& ctx) {
    std::string out = "kvtier: ";
    out += to_string(static_cast<ec>(code));
    auto text = context_text(ctx);
    if (!text.empty()) {
      out += ": ";
      out += text;
    }
    return out;
  });
}

} // namespace kvtier
