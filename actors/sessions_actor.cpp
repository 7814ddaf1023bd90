#include "actors/sessions_actor.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors {

namespace {

sealed<msg::UnprotectEntry> unprotect_order(const tiers::pinned_entry& p) {
  msg::draft<msg::UnprotectEntry> d;
  tiers::write_key(d.root().initKey(), p.ns, p.tokens);
  d.root().setPin(p.pin);
  return std::move(d).seal();
}

sealed<msg::CloseSessionReply> closed_reply(uint32_t unprotected) {
  msg::draft<msg::CloseSessionReply> d;
  d.root().setUnprotected(unprotected);
  return std::move(d).seal();
}

/// Records the session's newest entry; the previous one loses its pin in
/// RAM (fire and forget: a late order only protects it a little longer).
void note_put(sessions_pointer self, msg::SessionPutEvent::Reader m) {
  auto key = m.getKey();
  tiers::pinned_entry newest{key.getNs().cStr(),
                             tiers::read_tokens(key.getTokens()), m.getPin()};
  auto prev =
    self->state.table.note_put(m.getSession().cStr(), std::move(newest));
  if (!prev || !self->state.ram)
    return;
  self->request(self->state.ram, self->state.deadline, unprotect_order(*prev))
    .then([](const sealed<msg::UnprotectEntryReply>&) {},
          [](const caf::error&) {});
}

/// Forgets the session; answers once RAM took its newest entry's pin back.
caf::result<sealed<msg::CloseSessionReply>>
close_session(sessions_pointer self, const std::string& session) {
  auto last = self->state.table.close(session);
  if (!last || !self->state.ram)
    return closed_reply(0);
  auto rp = self->make_response_promise<sealed<msg::CloseSessionReply>>();
  self->request(self->state.ram, self->state.deadline, unprotect_order(*last))
    .then(
      [rp](const sealed<msg::UnprotectEntryReply>& r) mutable {
        rp.deliver(closed_reply(r.root().getUnprotected() ? 1 : 0));
      },
      [rp](const caf::error&) mutable { rp.deliver(closed_reply(0)); });
  return rp;
}

sealed<msg::ReadReportReply> report(sessions_pointer self) {
  // protected_entries is the RAM actor's (it holds the pins).
  auto part = tiers::report::sessions::from(self->state.table.counters());
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(part, {"open", "opened", "closed"}).write(d.root());
  return std::move(d).seal();
}

} // namespace

sessions_actor::behavior_type
sessions(sessions_pointer self, ram_tier_actor ram, uint64_t deadline_ms) {
  guard_signals(self, "sessions");
  self->state.ram = std::move(ram);
  self->state.deadline = std::chrono::milliseconds{deadline_ms};
  return {
    [self](const sealed<msg::SessionPutEvent>& m) {
      try {
        note_put(self, m.root());
      } catch (const kj::Exception&) {
        // An undecodable event has no one to answer: it changes nothing.
      }
    },
    [self](const sealed<msg::CloseSession>& m) {
      return decoding<sealed<msg::CloseSessionReply>>(
        [&] { return close_session(self, m.root().getSession().cStr()); });
    },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
    [self](const sealed<msg::CloseService>&) {
      self->state.table.clear();
      return msg::draft<msg::CloseServiceReply>{}.seal();
    },
    // A session table is not state to persist: durable, nothing pending.
    [](const sealed<msg::FlushState>&) { return nothing_to_flush(); },
    [](const sealed<msg::ReadStats>&) {
      return msg::draft<msg::ReadStatsReply>{}.seal();
    },
  };
}

} // namespace kvtier::actors
