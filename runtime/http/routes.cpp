// The routes of the operator's endpoint (runtime/http/endpoint.hpp,
// docs/operations.md): a request in, a response out, no sockets.
#include "runtime/http/endpoint.hpp"
#include "runtime/http/exposition.hpp"
#include "runtime/http/health.hpp"
#include "runtime/http/source.hpp"

#include "messages/error.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <optional>
#include <string_view>

namespace kvtier::http {

namespace {

using nlohmann::json;

response json_response(unsigned status, const json& body) {
  response out;
  out.status = status;
  // A request's path or a session id echoed back may hold bytes that are
  // not UTF-8: replaced (U+FFFD), never thrown (which ended the process).
  out.body = body.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  return out;
}

/// 503 for a service that is closed or did not answer, 400 for what the
/// service refused as invalid, 500 otherwise.
unsigned status_of(const caf::error& err) {
  if (err.category() == caf::atom("kvtier"))
    switch (static_cast<kvtier::ec>(err.code())) {
      case ec::invalid_argument: return 400;
      case ec::closed:
      case ec::timeout:
      case ec::queue_full: return 503;
      default: break;
    }
  return 500;
}

response method_not_allowed(const char* allow) {
  auto out = error_response(405, std::string{"use "} + allow);
  out.headers.emplace_back("Allow", allow);
  return out;
}

/// Compares without stopping at the first difference (a token's prefix
/// cannot be found by timing).
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

/// Why an admin request may not run (nullopt: it may).
std::optional<response> refused_admin(const endpoint_options& o,
                                      const request& r) {
  if (o.admin_token.empty())
    return std::nullopt;
  if (same_secret(r.authorization, "Bearer " + o.admin_token))
    return std::nullopt;
  auto out = error_response(
    401, r.authorization.empty()
           ? "admin routes need the header Authorization: Bearer "
             "<http.admin-token>"
           : "the admin token is wrong");
  out.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kvtier\"");
  return out;
}

/// %XX-decoded `s`; nullopt when an escape is malformed.
std::optional<std::string> percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size())
      return std::nullopt;
    unsigned v = 0;
    auto [p, e] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (e != std::errc{} || p != s.data() + i + 3)
      return std::nullopt;
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

/// The value of `key` in a query string ("a=1&b=2"), nullopt when absent.
std::optional<std::string_view> query_value(std::string_view query,
                                            std::string_view key) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == key)
      return eq == std::string_view::npos ? std::string_view{}
                                          : pair.substr(eq + 1);
    if (amp == std::string_view::npos)
      break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

scrape read_scrape(source& svc, const endpoint_counters* c, caf::error& err) {
  scrape s;
  auto rep = svc.report();
  if (!rep) {
    err = rep.error();
    return s;
  }
  s.report = std::move(*rep);
  auto pending = svc.stats();
  if (!pending) {
    err = pending.error();
    return s;
  }
  s.persistence = *pending;
  s.latency = svc.latency();
  if (c) {
    s.http_requests = c->requests.load();
    s.http_refused_busy = c->refused_busy.load();
    s.http_bad_requests = c->bad_requests.load();
  }
  return s;
}

response metrics(source& svc, const endpoint_counters* c) {
  caf::error err;
  auto s = read_scrape(svc, c, err);
  if (err) {
    response out;
    out.status = 503;
    out.content_type = "text/plain; charset=utf-8";
    out.body = "kvtier: the service did not report: " + describe(err) + "\n";
    return out;
  }
  response out;
  out.content_type = "text/plain; version=0.0.4; charset=utf-8";
  out.body = metrics_text(s);
  return out;
}

response stats(source& svc, const endpoint_counters* c) {
  caf::error err;
  auto s = read_scrape(svc, c, err);
  if (err)
    return error_response(status_of(err), describe(err));
  return json_response(200, stats_json(s));
}

response health(source& svc) {
  auto node = svc.node();
  return health_of(svc.report(), node);
}

response flush(source& svc) {
  auto d = svc.flush();
  if (!d)
    return error_response(status_of(d.error()), describe(d.error()));
  return json_response(d->durable ? 200 : 503, to_json(*d));
}

response close_session(source& svc, std::string_view raw_id) {
  auto id = percent_decoded(raw_id);
  if (!id)
    return error_response(400, "the session id has a malformed %-escape");
  if (id->empty())
    return error_response(400, "the session id is empty");
  auto n = svc.close_session(*id);
  if (!n)
    return error_response(status_of(n.error()), describe(n.error()));
  return json_response(200, {{"session", *id}, {"unpinned", *n}});
}

response drop_ram(source& svc, std::string_view query) {
  uint64_t want = UINT64_MAX;
  if (auto v = query_value(query, "bytes")) {
    auto [p, e] = std::from_chars(v->data(), v->data() + v->size(), want);
    if (v->empty() || e != std::errc{} || p != v->data() + v->size())
      return error_response(400, "bytes: expected a whole number of bytes, "
                                 "not '"
                                   + std::string{*v} + "'");
  }
  auto r = svc.boundary(want);
  if (!r)
    return error_response(status_of(r.error()), describe(r.error()));
  return json_response(200, to_json(*r));
}

} // namespace

response error_response(unsigned status, const std::string& what) {
  return json_response(status, {{"error", what}});
}

endpoint_options endpoint_options::of(const runtime::service_options& o) {
  endpoint_options out;
  out.address = o.http_address;
  out.port = static_cast<uint16_t>(o.http_port);
  out.admin_token = o.http_admin_token;
  out.max_connections = o.http_max_connections;
  out.timeout = std::chrono::milliseconds{o.http_timeout_ms};
  return out;
}

response handle(source& svc, const endpoint_options& opts, const request& r,
                const endpoint_counters* counters) {
  std::string_view target{r.target};
  auto q = target.find('?');
  auto path = target.substr(0, q);
  auto query =
    q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  bool get = r.method == "GET" || r.method == "HEAD";
  bool post = r.method == "POST";
  if (path == "/metrics")
    return get ? metrics(svc, counters) : method_not_allowed("GET");
  if (path == "/stats")
    return get ? stats(svc, counters) : method_not_allowed("GET");
  if (path == "/health")
    return get ? health(svc) : method_not_allowed("GET");
  constexpr std::string_view sessions = "/admin/sessions/";
  constexpr std::string_view close_suffix = "/close";
  bool is_flush = path == "/admin/cache/flush";
  bool is_drop = path == "/admin/ram/drop";
  bool is_close =
    path.size() > sessions.size() + close_suffix.size()
    && path.substr(0, sessions.size()) == sessions
    && path.substr(path.size() - close_suffix.size()) == close_suffix;
  if (!is_flush && !is_drop && !is_close)
    return error_response(404, "no route " + std::string{path}
                                 + " (GET /metrics, /stats, /health; POST "
                                   "/admin/cache/flush, "
                                   "/admin/sessions/{id}/close, "
                                   "/admin/ram/drop)");
  if (!post)
    return method_not_allowed("POST");
  if (auto refused = refused_admin(opts, r))
    return *refused;
  if (is_flush)
    return flush(svc);
  if (is_drop)
    return drop_ram(svc, query);
  auto id = path.substr(sessions.size(),
                        path.size() - sessions.size() - close_suffix.size());
  if (id.find('/') != std::string_view::npos)
    return error_response(404, "no route " + std::string{path});
  return close_session(svc, id);
}

} // namespace kvtier::http
