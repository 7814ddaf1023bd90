// Internal to the embedded API's sources (runtime/service*.cpp): what a
// `service` holds, and the two ways a call reaches the facade (blocking on
// a scoped actor, or completing a future from a short-lived actor).
#pragma once

#include "runtime/service.hpp"
#include "runtime/service_codec.hpp"
#include "runtime/spawn.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

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
  bool closed = false;

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
    caf::scoped_actor self{*sys};
    self->request(handles.facade, caf::infinite, std::move(m))
      .receive([&](const reply& r) { out = conv(r); },
               [&](caf::error& err) { out = std::move(err); });
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
    sys->spawn([facade = handles.facade, m = std::move(m), conv,
                p](caf::event_based_actor* self) {
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
    });
    return f;
  }
};

} // namespace kvtier::runtime
