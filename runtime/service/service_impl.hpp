// Internal to the embedded API's sources (runtime/service*.cpp): what a
// `service` holds, and the two ways a call reaches the facade (blocking on
// a scoped actor, or calling back from the caller actor; the futures are
// built on the callbacks).
//
// The composition root: a service owns its actors, its cluster node
// (runtime/cluster/) and its HTTP endpoint (runtime/http/), and wires them
// together here; the floors below know nothing of the service (the
// endpoint serves an http::source, runtime/service/http_source.hpp). The
// program, the Python module and an engine hold a `service`, nothing
// else.
#pragma once

#include "messages/log.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/http/endpoint.hpp"
#include "runtime/service.hpp"
#include "runtime/service/http_source.hpp"
#include "runtime/service/ports.hpp"
#include "runtime/service/service_codec.hpp"
#include "runtime/service/spawn.hpp"

#include "messages/caller_actor.hpp"
#include <caf/actor_clock.hpp>
#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/sec.hpp>

#include <functional>
#include <future>
#include <memory>

#include <mutex>
#include <utility>
#include <vector>

namespace kvtier::runtime {

/// One future-returning call: sends its request from the caller actor.
using async_call = std::function<void(caf::event_based_actor*)>;

/// A call's completion, kept by its handlers: runs `done` once. A call that
/// goes unanswered (the service went while it waited) settles with
/// `ec::closed` rather than never.
template <class T>
struct call_sink {
  service::callback<T> done;
  bool settled = false;

  void set(caf::expected<T> x) {
    if (!std::exchange(settled, true))
      done(std::move(x));
  }

  ~call_sink() {
    if (!settled)
      set(make_error(ec::closed, "the service went before answering"));
  }
};

/// The future form of a call: `start` begins its callback form with a
/// callback that completes the returned future.
template <class T, class Start>
std::future<caf::expected<T>> as_future(Start start) {
  auto p = std::make_shared<std::promise<caf::expected<T>>>();
  auto f = p->get_future();
  start(service::callback<T>{
    [p](caf::expected<T> x) { p->set_value(std::move(x)); }});
  return f;
}

using async_call_ptr = std::shared_ptr<async_call>;

} // namespace kvtier::runtime

// Local only: never serialized (it never leaves the process).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::runtime::async_call_ptr)

namespace kvtier::runtime {

struct service::impl {
  std::unique_ptr<kvtier_config> own_cfg;
  std::unique_ptr<caf::actor_system> own_sys;
  caf::actor_system* sys = nullptr;
  service_options opts;
  std::shared_ptr<actors::put_observer_slot> observer =
    std::make_shared<actors::put_observer_slot>();
  service_handles handles;
  caf::error start_error;
  /// The cluster node when `cluster.enabled` (docs/cluster.md).
  std::unique_ptr<cluster::node> node;
  /// What the endpoint serves: this service's calls.
  std::unique_ptr<http::source> http_source;
  /// The operator's endpoint when `http.enabled` (docs/operations.md).
  std::unique_ptr<http::endpoint> http;

  /// Idle scoped actors for blocking calls: making one per call cost about
  /// 8 us of a 10 us echo here (bench_service prints both), so blocking
  /// calls borrow one. Each is used by one thread at a time.
  std::mutex pool_mtx;
  std::vector<std::unique_ptr<kvtier::caller_actor>> pool;
  /// The listeners of `subscribe_events` (stopped with the service; under
  /// pool_mtx).
  std::vector<caf::actor> listeners;

  std::unique_ptr<kvtier::caller_actor> borrow() {
    {
      std::lock_guard<std::mutex> guard{pool_mtx};
      if (!pool.empty()) {
        auto out = std::move(pool.back());
        pool.pop_back();
        return out;
      }
    }
    return std::make_unique<kvtier::caller_actor>(*sys);
  }

  void give_back(std::unique_ptr<kvtier::caller_actor> self) {
    std::lock_guard<std::mutex> guard{pool_mtx};
    pool.push_back(std::move(self));
  }

  void start(service_parts parts) {
    // A spawn argument: CAF 0.17 binds a null tuple for argument-less
    // spawns (UBSan).
    async_caller = sys->spawn(
      [](caf::event_based_actor* self, int) -> caf::behavior {
        return {[self](const async_call_ptr& c) { (*c)(self); }};
      },
      0);
    // Before anything is created (the SSD directory): a port in use is a
    // start error that leaves nothing behind.
    if (auto err = check_ports(opts)) {
      start_error = std::move(err);
      return;
    }
    auto h = spawn_service(*sys, opts, parts.fs, observer, parts.stores);
    if (!h) {
      start_error = std::move(h.error());
      return;
    }
    handles = std::move(*h);
    if (opts.cluster_enabled)
      start_cluster();
  }

  /// Starts the HTTP endpoint over `self` when `http.enabled` (after the
  /// actors and the cluster, so its first answer is a real one).
  void start_http(service& self) {
    if (start_error || !opts.http_enabled)
      return;
    http_source = http_source_of(self);
    auto e =
      http::endpoint::start(*http_source, http::endpoint_options::of(opts));
    if (!e) {
      start_error = std::move(e.error());
      return;
    }
    http = std::move(*e);
    log::info("kvtier http: serving /metrics, /stats, /health and the admin "
              "routes on http://"
              + http->address()
              + (opts.http_admin_token.empty() ? "" : " (admin token set)"));
  }

  /// Publishes the node actor and meets the configured peers.
  void start_cluster() {
    auto m = running_model(opts);
    if (!m) {
      start_error = std::move(m.error());
      return;
    }
    auto n = cluster::node::start(*sys, opts, m->fingerprint(), {},
                                  handles.cluster.listeners);
    if (!n) {
      start_error = std::move(n.error());
      return;
    }
    node = std::move(*n);
    node->attach({handles.cluster.feed, handles.cluster.serve,
                  caf::actor_cast<caf::actor>(handles.facade),
                  caf::actor_cast<caf::actor>(handles.tiers.admission)});
    // Route answers name this node as its peers know it.
    // From an actor of this process: the facade and the feed take these
    // from local senders only (an anonymous message is not trusted).
    kvtier::caller_actor local{*sys};
    local->send(handles.facade, actors::node_name_atom::value, node->node_id(),
                node->address());
    // Batches and snapshots name the node as its peers know it.
    local->send(handles.feed, actors::feed_name_atom::value, node->node_id());
  }

  /// How long a call waits for the facade: the storage deadline (by which
  /// the facade answers whatever storage does) plus a second's margin.
  caf::duration api_timeout() const {
    return caf::duration{
      std::chrono::milliseconds{opts.storage_deadline_ms + 1000}};
  }

  /// A timeout of the facade itself as the caller sees it.
  static caf::error timed_out(caf::error err, const caf::duration& timeout) {
    if (err != caf::sec::request_timeout)
      return err;
    return make_error(ec::timeout, "the service did not answer within "
                                     + to_string(timeout));
  }

  /// Tells a conversion that counts its call's failures (`timed`) that the
  /// call failed before a reply reached it.
  template <class Conv>
  static void note_failure(const Conv& conv) noexcept {
    if constexpr (requires { conv.failed(); })
      conv.failed();
  }

  /// Sends `m` to the facade and waits; `conv` turns the reply into T.
  template <class T, class Req, class Conv>
  caf::expected<T> call(codec::sealed<Req> m, Conv conv) {
    return call_for<T>(api_timeout(), std::move(m), conv);
  }

  /// `call` waiting at most `timeout` (`caf::infinite` where waiting is
  /// the contract: admit_queued).
  template <class T, class Req, class Conv>
  caf::expected<T> call_for(caf::duration timeout, codec::sealed<Req> m,
                            Conv conv) {
    using reply = codec::sealed<typename codec::reply_of<Req>::type>;
    if (start_error)
      return start_error;
    caf::expected<T> out{caf::error{}};
    auto self = borrow();
    bool late = false;
    // The deadline is the receive's own (a timed wait on this thread), not
    // a request timeout: CAF 0.17 arms those on its clock thread (a
    // cross-thread wake-up per call) and leaves them armed after the
    // answer, to arrive later as a message a pooled actor would keep.
    auto id =
      (*self)->request(handles.facade, caf::infinite, std::move(m)).id();
    caf::blocking_actor::accept_one_cond rc;
    auto on_reply = [&](const reply& r) { out = conv(r); };
    auto on_error = [&](caf::error& err) {
      out = timed_out(std::move(err), timeout);
      note_failure(conv);
    };
    if (timeout.valid())
      (*self)->varargs_receive(
        rc, id, on_reply, on_error, caf::after(timeout) >> [&] {
          late = true;
          out = timed_out(caf::sec::request_timeout, timeout);
          note_failure(conv);
        });
    else
      (*self)->varargs_receive(rc, id, on_reply, on_error);
    if (late)
      return out; // its late answer would wait in the mailbox for ever
    give_back(std::move(self));
    return out;
  }

  /// Disarms the timeout of an answered request (see `call_for`).
  static void cancel_timeout(caf::local_actor* self, caf::message_id id) {
    self->home_system().clock().cancel_request_timeout(self, id);
  }

  /// The same, calling `done` on an actor thread (the callback form the
  /// futures are built on). Every such call goes through one caller actor,
  /// so calls one engine thread makes reach the facade in the order it made
  /// them (CAF keeps the order of messages from one sender to one
  /// receiver): an `admit_queued` made after another queues behind it.
  template <class T, class Req, class Conv>
  void call_then(codec::sealed<Req> m, Conv conv, callback<T> done) {
    call_then_for<T>(api_timeout(), std::move(m), conv, std::move(done));
  }

  template <class T, class Req, class Conv>
  void call_then_for(caf::duration timeout, codec::sealed<Req> m, Conv conv,
                     callback<T> done) {
    using reply = codec::sealed<typename codec::reply_of<Req>::type>;
    auto p = std::make_shared<call_sink<T>>();
    p->done = std::move(done);
    if (start_error) {
      p->set(start_error);
      return;
    }
    auto call = std::make_shared<async_call>(
      [facade = handles.facade, m = std::move(m), conv, p,
       timeout](caf::event_based_actor* self) {
        auto h = self->request(facade, timeout, m);
        auto id = h.id();
        h.then(
          [self, id, conv, p](const reply& r) {
            cancel_timeout(self, id);
            p->set(conv(r));
          },
          [self, id, conv, p, timeout](caf::error& err) {
            cancel_timeout(self, id);
            note_failure(conv);
            p->set(timed_out(std::move(err), timeout));
          });
      });
    caf::anon_send(async_caller, std::move(call));
  }

  /// The actor that makes the future calls (spawned by `start`).
  caf::actor async_caller;
};

} // namespace kvtier::runtime
