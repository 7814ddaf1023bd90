#include "actors/admission_actor.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"

namespace kvtier::actors {

namespace {

tiers::admission& engine(admission_pointer self) {
  return *self->state.engine;
}

uint64_t available(admission_pointer self) {
  auto& e = engine(self);
  auto held = e.counters().held_bytes;
  auto budget = e.limits().kv_budget_bytes;
  return held < budget ? budget - held : 0;
}

/// Fills the fields AdmitRequestReply and FitsRequestReply share.
template <class Builder>
void decide(Builder out, const caf::expected<bool>& r, uint64_t projected,
            uint64_t before) {
  out.setProjectedBytes(projected);
  out.setAvailableBytes(before);
  if (!r)
    write_error(out.initNever(), r.error());
}

sealed<msg::AdmitRequestReply> admitted_reply(uint64_t projected,
                                              uint64_t before) {
  msg::draft<msg::AdmitRequestReply> d;
  d.root().setAdmitted(true);
  d.root().setProjectedBytes(projected);
  d.root().setAvailableBytes(before);
  return std::move(d).seal();
}

caf::result<sealed<msg::AdmitRequestReply>> admit(admission_pointer self,
                                                  msg::AdmitRequest::Reader m) {
  auto req = admission_of(m.getRequest());
  auto projected = engine(self).projected_bytes(req);
  auto before = available(self);
  auto r = m.getQueue() ? engine(self).enqueue(req) : engine(self).admit(req);
  msg::draft<msg::AdmitRequestReply> d;
  if (r)
    d.root().setAdmitted(*r);
  decide(d.root(), r, projected, before);
  if (!m.getQueue() || !r || *r)
    return std::move(d).seal();
  auto rp = self->make_response_promise<sealed<msg::AdmitRequestReply>>();
  self->state.waiting[req.id] = {rp, projected};
  return rp;
}

sealed<msg::FitsRequestReply> fits(admission_pointer self,
                                   msg::FitsRequest::Reader m) {
  auto req = admission_of(m.getRequest());
  auto r = engine(self).fits(req);
  msg::draft<msg::FitsRequestReply> d;
  if (r)
    d.root().setFits(*r);
  decide(d.root(), r, engine(self).projected_bytes(req), available(self));
  return std::move(d).seal();
}

/// Returns the budget, then answers the queued admits this let in.
sealed<msg::ReleaseRequestReply> release(admission_pointer self,
                                         msg::ReleaseRequest::Reader m) {
  auto id = m.getRequest().getId();
  auto held = engine(self).counters().held_bytes;
  auto& waiting = self->state.waiting;
  if (auto w = waiting.find(id); w != waiting.end()) {
    // Released while still queued: the await ends as cancelled.
    w->second.first.deliver(make_error(ec::cancelled, "released while queued"));
    waiting.erase(w);
  }
  auto admitted = engine(self).release(id);
  // Held before, minus held now, plus what the admitted waiters took.
  auto released = held - engine(self).counters().held_bytes;
  msg::draft<msg::ReleaseRequestReply> d;
  for (auto next : admitted) {
    auto w = waiting.find(next);
    if (w == waiting.end())
      continue;
    released += w->second.second;
    w->second.first.deliver(admitted_reply(w->second.second, available(self)));
    waiting.erase(w);
  }
  d.root().setReleasedBytes(released);
  return std::move(d).seal();
}

/// Ends admission: every queued admit is answered `closed`, and later
/// admits and fits fail `closed` (releases still return bytes).
sealed<msg::CloseServiceReply> close(admission_pointer self) {
  auto& waiting = self->state.waiting;
  for (auto id : engine(self).close()) {
    auto w = waiting.find(id);
    if (w == waiting.end())
      continue;
    w->second.first.deliver(make_error(
      ec::closed, "request " + std::to_string(id)
                    + ": the cache service closed while it was queued"));
    waiting.erase(w);
  }
  return msg::draft<msg::CloseServiceReply>{}.seal();
}

sealed<msg::ReadReportReply> report(admission_pointer self) {
  auto part = tiers::report::admission::from(engine(self).counters());
  part.budget_bytes = engine(self).limits().kv_budget_bytes;
  part.max_queued = engine(self).limits().max_queued;
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(part).write(d.root());
  return std::move(d).seal();
}

} // namespace

admission_actor::behavior_type admission(admission_pointer self,
                                         tiers::model_geometry geometry,
                                         tiers::admission_limits limits) {
  guard_signals(self, "admission");
  self->state.engine =
    std::make_unique<tiers::admission>(std::move(geometry), limits);
  return {
    [self](const sealed<msg::AdmitRequest>& m) {
      return decoding<sealed<msg::AdmitRequestReply>>(
        [&] { return admit(self, m.root()); });
    },
    [self](const sealed<msg::FitsRequest>& m) {
      return decoding<sealed<msg::FitsRequestReply>>(
        [&] { return fits(self, m.root()); });
    },
    [self](const sealed<msg::ReleaseRequest>& m) {
      return decoding<sealed<msg::ReleaseRequestReply>>(
        [&] { return release(self, m.root()); });
    },
    [self](const sealed<msg::CloseService>&) { return close(self); },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
    // Budgets are not state: nothing to make durable, nothing pending.
    [](const sealed<msg::FlushState>&) { return nothing_to_flush(); },
    [](const sealed<msg::ReadStats>&) {
      return msg::draft<msg::ReadStatsReply>{}.seal();
    },
  };
}

} // namespace kvtier::actors
