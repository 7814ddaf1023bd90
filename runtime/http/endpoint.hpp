// The operator's HTTP endpoint (docs/operations.md): GET /metrics
// (Prometheus text, runtime/http/exposition.hpp), GET /stats (JSON), GET
// /health, and the admin routes POST /admin/cache/flush, POST
// /admin/sessions/{id}/close and POST /admin/ram/drop, over a service.
//
// Served with Boost.Beast (HTTP/1.1, keep-alive), not prometheus-cpp's
// exposer: the exposer serves registries only, while the admin routes,
// per-connection deadlines and the body limit need a server of our own;
// prometheus-cpp still builds and serializes every metric.
//
// Threads: one accepting thread, and one thread per connection (at most
// `max_connections`; more are answered 503 and closed at once), so a
// route that waits on storage (a flush) never delays another connection
// (a session close answers at once). Every read and write has the
// `timeout` deadline; a request's head is at most 16 KiB and its body 64
// KiB (else 400 / 413 and the connection closes). Admin routes require
// `Authorization: Bearer <admin_token>` when a token is set (401
// otherwise); `service_options::validate` refuses a non-loopback address
// without one. `stop` (and the destructor) closes the listener and every
// connection, and returns once no thread runs (a route in a service call
// finishes first, bounded by the service's own deadline).
#pragma once

#include "runtime/config.hpp"
#include "runtime/http/source.hpp"

#include <caf/expected.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtier::http {

/// The http.* options (`of`). The defaults are for tests and equal the
/// shipped ones (checked by tests/runtime/options_test.cpp) but the port:
/// 0, any free port, where `http.port` ships 9470.
struct endpoint_options {
  std::string address = "127.0.0.1";
  uint16_t port = 0;
  std::string admin_token;
  size_t max_connections = 16;
  std::chrono::milliseconds timeout{5000};

  /// The http.* options of `o`.
  static endpoint_options of(const runtime::service_options& o);
};

/// One request as the routes see it.
struct request {
  std::string method;
  /// Path and query, e.g. "/admin/ram/drop?bytes=1024".
  std::string target;
  /// The Authorization header (empty when absent).
  std::string authorization;
  std::string body;
};

struct response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

/// `{"error": what}` with `status`: how every route and the server say
/// what was wrong.
response error_response(unsigned status, const std::string& what);

/// The endpoint's own counters (also on /metrics and /stats).
struct endpoint_counters {
  std::atomic<uint64_t> requests{0}, refused_busy{0}, bad_requests{0};
};

/// Answers `r` from `svc` (the routes without the server: any thread).
response handle(source& svc, const endpoint_options& opts, const request& r,
                const endpoint_counters* counters = nullptr);

/// One request's raw bytes in, the response's bytes out, as a connection
/// answers them but without a socket (for tests and fuzzing): the same
/// parser limits (a malformed request is answered 400, an oversized head
/// 431, an oversized body 413), the routes and the response head; the
/// response closes the connection. Bytes that end before the request
/// does are answered as a malformed request; bytes after it are ignored.
std::string answer(source& svc, const endpoint_options& opts,
                   std::string_view bytes,
                   endpoint_counters* counters = nullptr);

class endpoint {
public:
  /// Listens on `opts.address`:`opts.port` and serves `svc` (which must
  /// outlive the endpoint). `ec::io_error` naming the address when it
  /// cannot listen, `ec::invalid_config` for an address that does not
  /// resolve.
  static caf::expected<std::unique_ptr<endpoint>> start(source& svc,
                                                        endpoint_options opts);

  ~endpoint();
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  /// HOST:PORT it listens on (the port it got for port 0).
  std::string address() const;
  uint16_t port() const;

  const endpoint_counters& counters() const;

  /// Stops listening and serving; idempotent.
  void stop();

  struct impl;

private:
  explicit endpoint(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

} // namespace kvtier::http
