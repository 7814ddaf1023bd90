// The facade's publish: a publish naming a session is pinned in RAM as the
// session's newest entry by the put itself, and the sessions actor learns
// of it before the engine gets its answer; any other publish is delegated
// to RAM as it came. Either way its layers are first checked against the
// running model (`check_shape`): state of another shape never enters.
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors::ops {

namespace {

/// `m` with `protect` set: the same words and side views, so the entry's
/// payloads keep their indices (no decode, no copy of tensor bytes).
sealed<msg::PublishState> protected_copy(const sealed<msg::PublishState>& m) {
  msg::draft<msg::PublishState> d;
  for (auto& v : m.sides())
    d.add_side(v);
  d.root().setRequest(m.root().getRequest());
  d.root().setEntry(m.root().getEntry());
  d.root().setProtect(true);
  return std::move(d).seal();
}

sealed<msg::SessionPutEvent> put_event(msg::Entry::Reader e, uint64_t pin) {
  msg::draft<msg::SessionPutEvent> d;
  d.root().setSession(e.getSession().getId());
  auto key = d.root().initKey();
  key.setNs(e.getNs());
  key.setTokens(e.getTokens());
  d.root().setPin(pin);
  return std::move(d).seal();
}

} // namespace

caf::error check_shape(self_ptr self, msg::Entry::Reader e) {
  try {
    return tiers::check_layers(self->state.geometry, e);
  } catch (const kj::Exception& ex) {
    return make_error(ec::malformed_message,
                      std::string{"undecodable message: "}
                        + ex.getDescription().cStr());
  }
}

caf::result<sealed<msg::PublishStateReply>>
publish(self_ptr self, const sealed<msg::PublishState>& m) {
  if (auto err = check_shape(self, m.root().getEntry()))
    return err;
  if (auto p = m.root().getRequest().getPriority(); p > tiers::max_priority)
    return make_error(ec::invalid_argument, "publish with priority "
                                              + std::to_string(p)
                                              + ": a priority is 0 to 100");
  auto& t = self->state.tiers;
  if (!m.root().getEntry().getSession().isId() || !t.sessions)
    return self->delegate(t.ram, m);
  auto rp = self->make_response_promise<sealed<msg::PublishStateReply>>();
  self->request(t.ram, tier_timeout(self), protected_copy(m))
    .then(
      [self, rp, m](const sealed<msg::PublishStateReply>& r) mutable {
        // Sent before the answer: a later close_session from this facade
        // reaches the sessions actor after it.
        if (r.root().getKept() && r.root().getPin() != 0)
          self->send(self->state.tiers.sessions,
                     put_event(m.root().getEntry(), r.root().getPin()));
        rp.deliver(r);
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

} // namespace kvtier::actors::ops
