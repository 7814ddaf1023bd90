// The SSD tier actor's flush: every flush joins the one run in progress;
// a run's rounds write everything queued and wait for the next attempts
// of failed writes that have attempts left; its one answer carries the
// durability evidence and each distinct failure (docs/ssd-format.md).
#include "actors/ssd_tier_ops.hpp"

#include "actors/codec.hpp"

#include <iterator>
#include <utility>

namespace kvtier::actors::ssd_ops {

namespace {

/// The end of a flush run: one answer for every flush that joined it,
/// with each distinct failure seen while it retried.
void flush_answer(ssd_tier_pointer self, tiers::ssd::durability_evidence ev) {
  auto run = std::move(*self->state.flushing);
  self->state.flushing.reset();
  ev.dropped = run.dropped;
  ev.given_up = run.given_up;
  ev.failed += run.given_up; // writes that failed and were not stored
  ev.durable = ev.pending == 0 && ev.failed == 0 && ev.dropped == 0
               && ev.removals_pending == 0;
  // Writes of state its owner keeps that the budget refused since the
  // last answer: named as such, never silent (each was answered refused
  // when it came).
  auto refused = std::exchange(self->state.over_budget, {});
  if (refused.writes > 0) {
    ev.durable = false;
    ev.failed += refused.writes;
  }
  msg::draft<msg::FlushStateReply> d;
  auto out = d.root().initResult();
  write_evidence(out, ev);
  std::vector<caf::error> errs;
  if (!ev.durable) // failures a retry then repaired are not reported
    for (auto& [text, slot] : run.errors) {
      auto n = slot.second.size();
      errs.push_back(make_error(slot.first.category() == caf::atom("kvtier")
                                  ? static_cast<ec>(slot.first.code())
                                  : ec::io_error,
                                std::to_string(n)
                                  + (n == 1 ? " write: " : " writes: ")
                                  + context_of(slot.first)));
    }
  if (refused.writes > 0)
    errs.push_back(make_error(ec::over_budget,
                              std::to_string(refused.writes)
                                + (refused.writes == 1 ? " write" : " writes")
                                + " refused by the write budget; the last: "
                                + context_of(refused.last)));
  if (!ev.durable && (ev.dropped > 0 || ev.pending > 0 || errs.empty()))
    errs.push_back(make_error(
      ec::io_error, std::to_string(ev.failed) + " failed, "
                      + std::to_string(ev.dropped) + " dropped, "
                      + std::to_string(ev.pending) + " pending writes"));
  if (ev.removals_pending > 0)
    errs.push_back(
      make_error(ec::io_error, std::to_string(ev.removals_pending)
                                 + " completed checkpoint removals pending: "
                                 + ev.removal_error));
  write_errors(out, errs);
  auto reply = std::move(d).seal();
  for (auto& rp : run.waiters)
    rp.deliver(reply);
}

/// Whether the flush waits for failed writes' next attempts: every failed
/// write with attempts left (each has its retry timer armed), or without
/// an attempt limit each one it has not yet waited for once.
bool await_retries(ssd_tier_pointer self) {
  auto& run = *self->state.flushing;
  if (tier(self).closed())
    return false; // failed writes are released, not retried
  bool limited = self->state.parts->write_attempts > 0;
  for (auto id : tier(self).failed_writes())
    if (limited || run.waited.count(id) == 0)
      run.awaiting.insert(id);
  return !run.awaiting.empty();
}

} // namespace

void note_failure(ssd_tier_state::flush_run& run, uint64_t id,
                  const caf::error& err) {
  auto& slot = run.errors[describe(err)];
  slot.first = err;
  slot.second.insert(id);
}

/// One round: the tier writes everything queued and answers once nothing
/// runs; failed writes are not tried early. While some failed writes will
/// be tried again, the flush waits for those attempts (`written`), then
/// runs the next round.
void flush_round(ssd_tier_pointer self) {
  self->state.flushing->in_round = true;
  tier(self).flush(
    [self](const tiers::ssd::durability_evidence& ev) {
      auto& run = *self->state.flushing;
      run.in_round = false;
      run.dropped += ev.dropped;
      run.given_up += ev.given_up;
      if (ev.failed > 0 && await_retries(self))
        return;
      flush_answer(self, ev);
    },
    tiers::ssd::flush_retries::owner);
}

caf::result<sealed<msg::FlushStateReply>> flush(ssd_tier_pointer self) {
  auto rp = self->make_response_promise<sealed<msg::FlushStateReply>>();
  if (auto& run = self->state.flushing) {
    // Join it (also while it waits for retries: their clocks decide).
    run->waiters.push_back(rp);
    return rp;
  }
  self->state.flushing.emplace();
  self->state.flushing->waiters.push_back(rp);
  // A write that failed before this flush began is one of its failures
  // too, until a retry repairs it.
  auto& unreported = self->state.unreported;
  for (auto i = unreported.begin(); i != unreported.end();) {
    note_failure(*self->state.flushing, i->first, i->second.first);
    i = i->second.second ? unreported.erase(i) : std::next(i);
  }
  flush_round(self);
  return rp;
}

} // namespace kvtier::actors::ssd_ops
