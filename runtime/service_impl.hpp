// Internal to the embedded API's sources (runtime/service*.cpp): what a
// `service` holds, and the two ways a call reaches the facade (blocking on
// a scoped actor, or completing a future from a short-lived actor).
#pragma once

#include "runtime/service.hpp"
#include "runtime/service_codec.hpp"
#include "runtime/spawn.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <mutex>
#include <vector>

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
  /// Idle scoped actors for blocking calls: making one per call cost about
  /// 8 us of a 10 us echo here (bench_service prints both), so blocking
  /// calls borrow one. Each is used by one thread at a time.
  std::mutex pool_mtx;
  std::vector<std::unique_ptr<caf::scoped_actor>> pool;

  std::unique_ptr<caf::scoped_actor> borrow() {
    {
      std::lock_guard<std::mutex> guard{pool_mtx};
      if (!pool.empty()) {
        auto out = std::move(pool.back());
        pool.pop_back();
        return out;
      }
    }
    return std::make_unique<caf::scoped_actor>(*sys);
  }

  void give_back(std::unique_ptr<caf::scoped_actor> self) {
    std::lock_guard<std::mutex> guard{pool_mtx};
    pool.push_back(std::move(self));
  }

  void start(service_parts parts) {
    auto h = spawn_service(*sys, opts, parts.fs, observer);
    if (!h)
      start_error = std::move(h.error());
    else
      handles = std::move(*h);
  }

  /// Sends `m` to the facade and waits; `conv` turns the reply into T.
  template <class T, class Req, class Conv>
  caf::expected<T> call(codec::sealed<Req> m, Conv conv) {
    using reply = codec::sealed<typename codec::reply_of<Req>::type>;
    if (start_error)
      return start_error;
    caf::expected<T> out{caf::error{}};
    auto self = borrow();
    (*self)
      ->request(handles.facade, caf::infinite, std::move(m))
      .receive([&](const reply& r) { out = conv(r); },
               [&](caf::error& err) { out = std::move(err); });
    give_back(std::move(self));
    return out;
  }

  /// The same, completing a future on an actor thread.
  template <class T, class Req, class Conv>
  std::future<caf::expected<T>> call_async(codec::sealed<Req> m, Conv conv) {
    using reply = codec::sealed<typename codec::reply_of<Req>::type>;
    auto p = std::make_shared<std::promise<caf::expected<T>>>();
    auto f = p->get_future();
    if (start_error) {
      p->set_value(start_error);
      return f;
    }
    // The promise travels as a spawn argument: CAF 0.17 binds a reference
    // to a null argument tuple when a spawned function takes none (UBSan).
    sys->spawn(
      [facade = handles.facade, m = std::move(m),
       conv](caf::event_based_actor* self,
             std::shared_ptr<std::promise<caf::expected<T>>> p) {
        self->request(facade, caf::infinite, m)
          .then(
            [self, conv, p](const reply& r) {
              p->set_value(conv(r));
              self->quit();
            },
            [self, p](caf::error& err) {
              p->set_value(std::move(err));
              self->quit();
            });
      },
      p);
    return f;
  }
};

} // namespace kvtier::runtime
