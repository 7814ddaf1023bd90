// The operator's endpoint's server (runtime/http/endpoint.hpp): Boost.Beast
// over Boost.Asio, an io_context per connection thread so every read and
// write carries its own deadline while the route itself may block.
#include "runtime/http/endpoint.hpp"

#include "messages/error.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <list>
#include <mutex>
#include <sstream>
#include <thread>

namespace kvtier::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

/// Starts one asynchronous operation through `start(handler)` and runs
/// `ioc` until it (and its deadline timer) completed: a blocking call
/// with the stream's deadline. Only the connection's thread runs `ioc`.
template <class Start>
beast::error_code run_one(asio::io_context& ioc, Start start) {
  beast::error_code out = asio::error::operation_aborted;
  start([&out](beast::error_code ec, std::size_t) { out = ec; });
  ioc.restart();
  ioc.run();
  return out;
}

constexpr size_t head_limit = 16 * 1024;
constexpr size_t body_limit = 64 * 1024;

/// The answer for a request the parser refused.
response refused_request(const beast::error_code& ec) {
  if (ec == bhttp::error::body_limit)
    return error_response(413, "the body is over "
                                 + std::to_string(body_limit / 1024) + " KiB");
  if (ec == bhttp::error::header_limit)
    return error_response(431, "the head is over "
                                 + std::to_string(head_limit / 1024) + " KiB");
  return error_response(400, "malformed request");
}

using request_parser = bhttp::request_parser<bhttp::string_body>;

/// A parser under the endpoint's limits.
void limit(request_parser& parser) {
  parser.header_limit(head_limit);
  parser.body_limit(body_limit);
}

/// The response to what `parser` read (`ec`: why it failed), counted in
/// `counters`; `closing`: the connection closes after it.
bhttp::response<bhttp::string_body>
respond(source& svc, const endpoint_options& opts, endpoint_counters* counters,
        const beast::error_code& ec, request_parser& parser, bool closing) {
  response res;
  bool keep_alive = false;
  bool head_only = false;
  unsigned version = 11;
  if (ec) {
    if (counters)
      ++counters->bad_requests;
    res = refused_request(ec);
  } else {
    auto& req = parser.get();
    request r{std::string{req.method_string()}, std::string{req.target()},
              std::string{req[bhttp::field::authorization]}, req.body()};
    res = handle(svc, opts, r, counters);
    keep_alive = req.keep_alive();
    version = req.version();
    head_only = req.method() == bhttp::verb::head;
  }
  if (counters)
    ++counters->requests;
  bhttp::response<bhttp::string_body> out{
    static_cast<bhttp::status>(res.status), version};
  out.set(bhttp::field::server, "kvtier/" KVTIER_VERSION);
  out.set(bhttp::field::content_type, res.content_type);
  for (auto& [k, v] : res.headers)
    out.set(k, v);
  out.keep_alive(keep_alive && !closing);
  if (head_only) {
    // HEAD: the GET's head, its Content-Length included, and no body.
    out.content_length(res.body.size());
  } else {
    out.body() = std::move(res.body);
    out.prepare_payload();
  }
  return out;
}

} // namespace

/// One client connection: its io_context, stream and thread.
struct connection {
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  std::thread thread;
  std::atomic<bool> finished{false};
};

struct endpoint::impl {
  source& svc;
  endpoint_options opts;
  endpoint_counters counters;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer retry{ioc};
  std::thread thread;
  std::mutex mtx;
  std::list<std::shared_ptr<connection>> conns; // under mtx
  std::atomic<bool> stopping{false};
  bool stopped = false; // under mtx
  std::string host;
  uint16_t port = 0;

  impl(source& s, endpoint_options o)
    : svc(s)
    , opts(std::move(o)) {}

  /// Joins the connection threads that finished (under mtx).
  void reap() {
    for (auto i = conns.begin(); i != conns.end();) {
      if ((*i)->finished.load()) {
        (*i)->thread.join();
        i = conns.erase(i);
      } else {
        ++i;
      }
    }
  }

  void accept_next() {
    auto c = std::make_shared<connection>();
    acceptor.async_accept(c->stream.socket(), [this, c](beast::error_code ec) {
      if (ec == asio::error::operation_aborted || stopping.load())
        return;
      if (ec) {
        // Out of descriptors or the like: try again a moment later.
        retry.expires_after(std::chrono::milliseconds{100});
        retry.async_wait([this](beast::error_code e) {
          if (!e && !stopping.load())
            accept_next();
        });
        return;
      }
      admit(c);
      accept_next();
    });
  }

  void admit(const std::shared_ptr<connection>& c) {
    std::lock_guard<std::mutex> guard{mtx};
    reap();
    if (stopping.load()) {
      beast::error_code ignored;
      c->stream.socket().close(ignored);
      return;
    }
    if (conns.size() >= opts.max_connections) {
      ++counters.refused_busy;
      static const std::string busy = [] {
        std::string body =
          "{\"error\": \"too many connections (http.max-connections)\"}\n";
        return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
               "application/json\r\nConnection: close\r\nContent-Length: "
               + std::to_string(body.size()) + "\r\n\r\n" + body;
      }();
      beast::error_code ignored;
      auto& s = c->stream.socket();
      s.non_blocking(true, ignored);
      s.write_some(asio::buffer(busy), ignored);
      s.shutdown(tcp::socket::shutdown_send, ignored);
      // What the client sent already is read and dropped: closing with
      // unread bytes would reset the connection, and the client might
      // lose the answer.
      char scratch[4096];
      while (s.read_some(asio::buffer(scratch), ignored) > 0 && !ignored) {
      }
      s.close(ignored);
      return;
    }
    conns.push_back(c);
    c->thread = std::thread([this, raw = c.get()] { serve(*raw); });
  }

  void serve(connection& c) {
    beast::flat_buffer buf;
    while (!stopping.load()) {
      request_parser parser;
      limit(parser);
      c.stream.expires_after(opts.timeout);
      auto ec = run_one(c.ioc, [&](auto done) {
        bhttp::async_read(c.stream, buf, parser, std::move(done));
      });
      if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout
          || ec == asio::error::operation_aborted
          || ec == asio::error::connection_reset || ec == asio::error::eof
          || stopping.load())
        break;
      auto out = respond(svc, opts, &counters, ec, parser, false);
      if (stopping.load()) // stopped while the routes ran
        out.keep_alive(false);
      c.stream.expires_after(opts.timeout);
      ec = run_one(c.ioc, [&](auto done) {
        bhttp::async_write(c.stream, out, std::move(done));
      });
      if (ec || !out.keep_alive())
        break;
    }
    beast::error_code ignored;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c.stream.socket().close(ignored);
    c.finished.store(true);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (stopped)
        return;
      stopped = true;
      stopping.store(true);
      // Each connection's thread cancels its own read or write (the next
      // time it runs its io_context, at once when it waits in one).
      for (auto& c : conns)
        asio::post(c->ioc, [raw = c.get()] { raw->stream.cancel(); });
    }
    asio::post(ioc, [this] {
      beast::error_code ignored;
      acceptor.close(ignored);
      retry.cancel();
    });
    if (thread.joinable())
      thread.join();
    std::list<std::shared_ptr<connection>> left;
    {
      std::lock_guard<std::mutex> guard{mtx};
      left.swap(conns);
    }
    for (auto& c : left)
      if (c->thread.joinable())
        c->thread.join();
  }
};

endpoint::endpoint(std::unique_ptr<impl> i)
  : impl_(std::move(i)) {}

endpoint::~endpoint() {
  stop();
}

void endpoint::stop() {
  impl_->stop();
}

std::string endpoint::address() const {
  auto h = impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]"
                                                      : impl_->host;
  return h + ":" + std::to_string(impl_->port);
}

uint16_t endpoint::port() const {
  return impl_->port;
}

const endpoint_counters& endpoint::counters() const {
  return impl_->counters;
}

caf::expected<std::unique_ptr<endpoint>>
endpoint::start(source& svc, endpoint_options opts) {
  auto i = std::make_unique<impl>(svc, std::move(opts));
  auto& o = i->opts;
  auto where = o.address + ":" + std::to_string(o.port);
  beast::error_code ec;
  tcp::resolver resolver{i->ioc};
  auto found = resolver.resolve(o.address, std::to_string(o.port),
                                tcp::resolver::numeric_service, ec);
  if (ec || found.empty())
    return make_error(ec::invalid_config, "http.address: cannot resolve '"
                                            + o.address + "': " + ec.message());
  auto at = found.begin()->endpoint();
  auto& a = i->acceptor;
  a.open(at.protocol(), ec);
  if (!ec)
    a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(at, ec);
  if (!ec)
    a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(ec::io_error, "http.port = " + std::to_string(o.port)
                                      + ": cannot listen on " + where + ": "
                                      + ec.message());
  auto bound = a.local_endpoint(ec);
  i->host = bound.address().to_string();
  i->port = bound.port();
  i->accept_next();
  auto* raw = i.get();
  i->thread = std::thread([raw] { raw->ioc.run(); });
  return std::unique_ptr<endpoint>{new endpoint(std::move(i))};
}

std::string answer(source& svc, const endpoint_options& opts,
                   std::string_view bytes, endpoint_counters* counters) {
  request_parser parser;
  limit(parser);
  beast::error_code ec;
  size_t used = 0;
  // The parser takes the head and the body in separate calls.
  while (!ec && !parser.is_done() && used < bytes.size()) {
    auto n =
      parser.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == bhttp::error::need_more)
      ec = {};
    if (n == 0)
      break;
  }
  // Bytes that end before the request does: as a client that closed.
  if (!ec && !parser.is_done())
    parser.put_eof(ec);
  if (!ec && !parser.is_done())
    ec = bhttp::error::partial_message;
  auto out = respond(svc, opts, counters, ec, parser, true);
  std::ostringstream text;
  text << out;
  return text.str();
}

} // namespace kvtier::http
