// The facade's lifecycle calls, each one loop over `service_actors::lifecycle`
// (every tier and role, `lifecycle_actor`): flush (the gate and holders
// first, then the stores), close (the gate at once beside the flush, then
// the holders, then the stores), stats (summed) and the report (merged,
// with the members that did not answer named). No tier is named here: a new
// tier takes part by being in the list.
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"

namespace kvtier::actors::ops {

namespace {

template <class Root>
sealed<Root> empty() {
  return msg::draft<Root>{}.seal();
}

/// One member's answer: its reply, or the error of its request.
template <class Reply>
struct answer {
  const lifecycle_ref* from = nullptr;
  std::optional<sealed<Reply>> reply;
  caf::error err;
};

template <class Reply>
using answers_done = std::function<void(std::vector<answer<Reply>>)>;

/// The members of `stage` (all when none is given), by value: the list may
/// change (a member going down) while requests run.
std::vector<const lifecycle_ref*>
members(self_ptr self, std::optional<tier_stage> stage = std::nullopt) {
  std::vector<const lifecycle_ref*> out;
  for (auto& m : self->state.tiers.lifecycle)
    if (!stage || m.stage == *stage)
      out.push_back(&m);
  return out;
}

/// Asks every member in `to` `m` under the tier deadline; `done` gets
/// every answer once the last came (at once for none).
template <class Reply, class Request>
void ask_all(self_ptr self, const std::vector<const lifecycle_ref*>& to,
             const Request& m, answers_done<Reply> done) {
  struct parts {
    std::vector<answer<Reply>> got;
    size_t left = 0;
    answers_done<Reply> done;
  };
  auto p = std::make_shared<parts>();
  p->left = to.size();
  p->done = std::move(done);
  if (to.empty())
    return p->done({});
  for (auto* member : to) {
    self->request(member->actor, tier_timeout(self), m)
      .then(
        [p, member](const sealed<Reply>& r) {
          p->got.push_back({member, r, {}});
          if (--p->left == 0)
            p->done(std::move(p->got));
        },
        [p, member](caf::error& err) {
          p->got.push_back({member, std::nullopt, std::move(err)});
          if (--p->left == 0)
            p->done(std::move(p->got));
        });
  }
}

/// Adds one member's durability evidence to `out`: durable only when every
/// member's is, counts summed (the longest prefix the longest), errors
/// kept in order.
void add_evidence(msg::DurabilityResult::Reader r, bool& durable,
                  msg::DurabilityResult::Builder out,
                  std::vector<caf::error>& errors) {
  durable = durable && r.getDurable();
  out.setPending(out.getPending() + r.getPending());
  out.setDropped(out.getDropped() + r.getDropped());
  out.setFailed(out.getFailed() + r.getFailed());
  out.setEntries(out.getEntries() + r.getEntries());
  out.setLongestDurablePrefix(
    std::max(out.getLongestDurablePrefix(), r.getLongestDurablePrefix()));
  out.setAbandoned(out.getAbandoned() + r.getAbandoned());
  out.setRemovalsPending(out.getRemovalsPending() + r.getRemovalsPending());
  for (auto e : r.getErrors())
    errors.push_back(read_error(e));
}

/// The evidence of every answer in `groups`: a member that did not answer
/// makes the result not durable, its error named (`what`: "flush").
template <class Reply>
void merge_evidence(self_ptr self,
                    const std::vector<std::vector<answer<Reply>>>& groups,
                    const char* what, msg::DurabilityResult::Builder out) {
  bool durable = true;
  std::vector<caf::error> errors;
  for (auto& group : groups)
    for (auto& a : group) {
      if (a.reply) {
        add_evidence(a.reply->root().getResult(), durable, out, errors);
        continue;
      }
      durable = false;
      errors.push_back(timed_out(
        self, a.err, "the " + a.from->name + " tier's " + std::string{what}));
    }
  out.setDurable(durable);
  write_errors(out, errors);
}

using flush_answers = std::vector<answer<msg::FlushStateReply>>;
using flush_done = std::function<void(sealed<msg::FlushStateReply>)>;

/// Flushes the gate and holders (RAM and checkpoints queue their snapshot
/// orders at their store), then the stores (their mailboxes hold those
/// orders before the flush request): durable only when every member says
/// so.
void run_flush(self_ptr self, flush_done done) {
  auto first = members(self);
  first.erase(
    std::remove_if(first.begin(), first.end(),
                   [](auto* m) { return m->stage == tier_stage::store; }),
    first.end());
  ask_all<msg::FlushStateReply>(
    self, first, empty<msg::FlushState>(), [self, done](flush_answers held) {
      ask_all<msg::FlushStateReply>(
        self, members(self, tier_stage::store), empty<msg::FlushState>(),
        [self, held, done](flush_answers stored) {
          msg::draft<msg::FlushStateReply> d;
          merge_evidence<msg::FlushStateReply>(self, {held, stored}, "flush",
                                               d.root().initResult());
          done(std::move(d).seal());
        });
    });
}

close_record record_of(msg::DurabilityResult::Reader r) {
  close_record out;
  out.durable = r.getDurable();
  out.pending = r.getPending();
  out.dropped = r.getDropped();
  out.failed = r.getFailed();
  out.entries = r.getEntries();
  out.longest_durable_prefix = r.getLongestDurablePrefix();
  out.abandoned = r.getAbandoned();
  for (auto e : r.getErrors())
    out.errors.push_back(read_error(e));
  return out;
}

sealed<msg::CloseServiceReply> close_reply(const close_record& c,
                                           bool already) {
  msg::draft<msg::CloseServiceReply> d;
  auto out = d.root().initResult();
  out.setDurable(c.durable);
  out.setPending(c.pending);
  out.setDropped(c.dropped);
  out.setFailed(c.failed);
  out.setEntries(c.entries);
  out.setLongestDurablePrefix(c.longest_durable_prefix);
  out.setAbandoned(c.abandoned);
  write_errors(out, c.errors);
  d.root().setAlreadyClosed(already);
  return std::move(d).seal();
}

/// Answers every close waiting with the result, and keeps it for later.
void closed(self_ptr self, const sealed<msg::CloseServiceReply>& r) {
  self->state.closed = record_of(r.root().getResult());
  self->state.idle_running = false;
  for (auto& rp : std::exchange(self->state.close_waiters, {}))
    rp.deliver(r);
}

using close_answers = std::vector<answer<msg::CloseServiceReply>>;

/// The close result: the flush's evidence, plus what the stores' closes
/// said (writes released unwritten: not durable then). A member whose
/// close failed or was late makes it not durable, named.
sealed<msg::CloseServiceReply>
close_result(self_ptr self, const sealed<msg::FlushStateReply>& f,
             const close_answers& stores) {
  msg::draft<msg::CloseServiceReply> d;
  auto out = d.root().initResult();
  bool durable = true;
  std::vector<caf::error> errors;
  add_evidence(f.root().getResult(), durable, out, errors);
  for (auto& a : stores) {
    if (!a.reply) {
      durable = false;
      errors.push_back(
        timed_out(self, a.err, "the " + a.from->name + " tier's close"));
      continue;
    }
    auto c = a.reply->root().getResult();
    out.setAbandoned(out.getAbandoned() + c.getAbandoned());
    durable = durable && c.getDurable();
    for (auto e : c.getErrors())
      errors.push_back(read_error(e));
  }
  out.setDurable(durable);
  write_errors(out, errors);
  return std::move(d).seal();
}

/// After the flush: clears the holders (RAM, sessions, checkpoints, the
/// peer tier: nothing is stored there any more), then closes the stores
/// (every spill order the holders sent is in their mailboxes before
/// that), which release the writes still queued or failed and answer once
/// no write runs.
void clear_tiers(self_ptr self, const sealed<msg::FlushStateReply>& f) {
  ask_all<msg::CloseServiceReply>(
    self, members(self, tier_stage::holder), empty<msg::CloseService>(),
    [self, f](close_answers) {
      ask_all<msg::CloseServiceReply>(
        self, members(self, tier_stage::store), empty<msg::CloseService>(),
        [self, f](close_answers stores) {
          closed(self, close_result(self, f, stores));
        });
    });
}

/// Closes the gate at once (queued admits fail `closed`, so does every
/// later admit) while the flush runs; both done, the tiers are cleared.
void start_close(self_ptr self) {
  auto left = std::make_shared<int>(2);
  auto flushed =
    std::make_shared<std::optional<sealed<msg::FlushStateReply>>>();
  auto next = [self, left, flushed] {
    if (--*left == 0)
      clear_tiers(self, **flushed);
  };
  ask_all<msg::CloseServiceReply>(self, members(self, tier_stage::gate),
                                  empty<msg::CloseService>(),
                                  [next](close_answers) { next(); });
  run_flush(self, [flushed, next](sealed<msg::FlushStateReply> f) {
    *flushed = std::move(f);
    next();
  });
}

/// The facade's own figures: tiers seen, closing, late cold tiers, and
/// the RAM actor's demotions (the one figure of a member outside its
/// sections).
void own_part(self_ptr self, msg::ReadReportReply::Builder out,
              uint64_t demotions) {
  auto& st = self->state;
  out.setDemotions(demotions);
  out.setDeadTiers(st.dead_tiers);
  out.setColdLate(st.cold_late);
  out.setColdTiers(st.tiers.cold.size());
  out.setClosed(st.closing || st.closed.has_value());
}

using report_answers = std::vector<answer<msg::ReadReportReply>>;

/// Every member's sections and I/O counters (each writes only what it
/// counts; a part two members share, "sessions", is summed by its
/// readers), the facade's "tokens" part and its own figures.
sealed<msg::ReadReportReply> merge_report(self_ptr self,
                                          const report_answers& got) {
  msg::draft<msg::ReadReportReply> own;
  report_sections{}.add(self->state.tokens).write(own.root());
  auto own_tokens = own.root().asReader().getTiers();
  msg::draft<msg::ReadReportReply> d;
  auto out = d.root();
  size_t ios = 1, sections = own_tokens.size();
  uint64_t demotions = 0;
  std::vector<std::string> silent;
  for (auto& a : got) {
    if (!a.reply) {
      silent.push_back(a.from->name);
      continue;
    }
    ios += a.reply->root().getIo().size();
    sections += a.reply->root().getTiers().size();
    demotions += a.reply->root().getDemotions();
  }
  auto io = out.initIo(ios);
  io[0].setTier(msg::Tier::RAM); // the RAM tier never does storage I/O
  auto tiers = out.initTiers(sections);
  size_t next_io = 1, next_tier = 0;
  for (auto x : own_tokens)
    tiers.setWithCaveats(next_tier++, x);
  for (auto& a : got) {
    if (!a.reply)
      continue;
    auto r = a.reply->root();
    for (auto x : r.getIo())
      io.setWithCaveats(next_io++, x);
    for (auto x : r.getTiers())
      tiers.setWithCaveats(next_tier++, x);
  }
  own_part(self, out, demotions);
  auto names = out.initSilentTiers(silent.size());
  for (size_t i = 0; i < silent.size(); ++i)
    names.set(i, silent[i]);
  return std::move(d).seal();
}

/// Sums one member's pending persistence into `out` (each fills its own
/// fields).
void add_stats(msg::ReadStatsReply::Reader r,
               msg::ReadStatsReply::Builder out) {
  out.setPendingSnapshots(out.getPendingSnapshots() + r.getPendingSnapshots());
  out.setPendingSpills(out.getPendingSpills() + r.getPendingSpills());
  out.setPendingCheckpointWrites(out.getPendingCheckpointWrites()
                                 + r.getPendingCheckpointWrites());
  out.setPendingBytes(out.getPendingBytes() + r.getPendingBytes());
  out.setRetryingWrites(out.getRetryingWrites() + r.getRetryingWrites());
  out.setWaitingSnapshots(out.getWaitingSnapshots() + r.getWaitingSnapshots());
  out.setLeavingEntries(out.getLeavingEntries() + r.getLeavingEntries());
}

} // namespace

caf::error closed_error() {
  return make_error(ec::closed, "the cache service is closed");
}

caf::result<sealed<msg::FlushStateReply>> flush(self_ptr self) {
  if (self->state.closed)
    return closed_error();
  auto rp = self->make_response_promise<sealed<msg::FlushStateReply>>();
  run_flush(self, [rp](sealed<msg::FlushStateReply> r) mutable {
    rp.deliver(std::move(r));
  });
  return rp;
}

caf::result<sealed<msg::CloseServiceReply>> close(self_ptr self) {
  auto& st = self->state;
  if (st.closed)
    return close_reply(*st.closed, true);
  auto rp = self->make_response_promise<sealed<msg::CloseServiceReply>>();
  st.close_waiters.push_back(rp);
  if (!std::exchange(st.closing, true))
    start_close(self);
  return rp;
}

caf::result<sealed<msg::ReadStatsReply>>
stats(self_ptr self, const sealed<msg::ReadStats>& m) {
  auto rp = self->make_response_promise<sealed<msg::ReadStatsReply>>();
  ask_all<msg::ReadStatsReply>(
    self, members(self), m,
    [self, rp](std::vector<answer<msg::ReadStatsReply>> got) mutable {
      msg::draft<msg::ReadStatsReply> d;
      size_t answered = 0;
      for (auto& a : got)
        if (a.reply) {
          add_stats(a.reply->root(), d.root());
          ++answered;
        }
      if (answered == 0 && !got.empty()) {
        rp.deliver(timed_out(self, got.front().err, "every tier's stats"));
        return;
      }
      rp.deliver(std::move(d).seal());
    });
  return rp;
}

caf::result<sealed<msg::ReadReportReply>> report(self_ptr self) {
  auto rp = self->make_response_promise<sealed<msg::ReadReportReply>>();
  // (From `lifecycle`, not `cold`: a cold tier that went down is gone from
  // `cold`, and must be named silent.)
  ask_all<msg::ReadReportReply>(self, members(self), empty<msg::ReadReport>(),
                                [self, rp](report_answers got) mutable {
                                  rp.deliver(merge_report(self, got));
                                });
  return rp;
}

} // namespace kvtier::actors::ops
