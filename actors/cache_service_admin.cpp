// The facade's durability, lifecycle and bookkeeping calls: flush, close,
// release, keeps, idle demotion, report and the saved-prefix listing.
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors::ops {

namespace {

using flush_done = std::function<void(sealed<msg::FlushStateReply>)>;

template <class Root>
sealed<Root> empty() {
  return msg::draft<Root>{}.seal();
}

/// Without a cold tier nothing can become durable: the evidence is
/// durable only when RAM holds nothing.
void flush_without_ssd(self_ptr self, flush_done done) {
  self
    ->request(self->state.tiers.ram, tier_timeout(self),
              empty<msg::ReadReport>())
    .then(
      [done](const sealed<msg::ReadReportReply>& r) {
        msg::draft<msg::FlushStateReply> d;
        auto held = r.root().getRam().getEntries();
        d.root().initResult().setDurable(held == 0);
        if (held != 0)
          write_error(
            d.root().getResult().initErrors(1)[0],
            make_error(ec::not_found, "no cold tier: " + std::to_string(held)
                                        + " entries cannot be made durable"));
        done(std::move(d).seal());
      },
      [done](const caf::error&) { done(empty<msg::FlushStateReply>()); });
}

/// The SSD's flush evidence with what the RAM tier could not order in
/// time: its snapshots still held (pending) and their error, or the error
/// of a RAM tier that did not answer. Not durable then.
sealed<msg::FlushStateReply> with_ram(const sealed<msg::FlushStateReply>& ssd,
                                      const std::optional<caf::error>& failed,
                                      const sealed<msg::FlushStateReply>& ram) {
  auto held = ram.root().getResult();
  if (!failed && held.getPending() == 0 && held.getErrors().size() == 0)
    return ssd;
  msg::draft<msg::FlushStateReply> d;
  d.root().setResult(ssd.root().getResult());
  auto out = d.root().getResult();
  out.setDurable(false);
  out.setPending(out.getPending() + held.getPending());
  auto before = ssd.root().getResult().getErrors();
  auto more = held.getErrors();
  auto errs = out.initErrors(before.size() + more.size() + (failed ? 1 : 0));
  uint32_t i = 0;
  for (auto e : before)
    errs.setWithCaveats(i++, e);
  for (auto e : more)
    errs.setWithCaveats(i++, e);
  if (failed)
    write_error(errs[i], *failed);
  return std::move(d).seal();
}

/// Queues RAM and checkpoint snapshots, then asks the SSD to flush (the
/// SSD mailbox holds the snapshot orders before the flush request). RAM
/// answers once it sent its snapshot orders (it holds those the
/// write-behind cap has no room for yet), or says how many it still held.
void run_flush(self_ptr self, flush_done done) {
  auto& t = self->state.tiers;
  if (!t.ssd)
    return flush_without_ssd(self, std::move(done));
  struct parts {
    int left = 2;
    sealed<msg::FlushStateReply> ram = empty<msg::FlushStateReply>();
    std::optional<caf::error> ram_failed;
  };
  auto p = std::make_shared<parts>();
  auto then_ssd = [self, p, done] {
    if (--p->left > 0)
      return;
    self
      ->request(self->state.tiers.ssd, tier_timeout(self),
                empty<msg::FlushState>())
      .then(
        [p, done](const sealed<msg::FlushStateReply>& r) {
          done(with_ram(r, p->ram_failed, p->ram));
        },
        [self, p, done](const caf::error& err) {
          msg::draft<msg::FlushStateReply> d;
          write_error(d.root().initResult().initErrors(1)[0],
                      timed_out(self, err, "the SSD tier's flush"));
          done(with_ram(std::move(d).seal(), p->ram_failed, p->ram));
        });
  };
  self->request(t.ram, tier_timeout(self), empty<msg::FlushState>())
    .then(
      [p, then_ssd](const sealed<msg::FlushStateReply>& r) {
        p->ram = r;
        then_ssd();
      },
      [self, p, then_ssd](const caf::error& err) {
        p->ram_failed = timed_out(self, err, "the RAM tier's snapshots");
        then_ssd();
      });
  self->request(t.checkpoints, tier_timeout(self), empty<msg::FlushState>())
    .then([then_ssd](const sealed<msg::FlushStateReply>&) { then_ssd(); },
          [then_ssd](const caf::error&) { then_ssd(); });
}

/// The close result: the flush's evidence, plus the writes the SSD tier
/// released unwritten at close (`ssd`, empty without a cold tier); durable
/// only when the flush was and the SSD's close released nothing unwritten
/// (its reply says durable).
sealed<msg::CloseServiceReply>
close_result(msg::DurabilityResult::Reader flushed,
             std::optional<sealed<msg::CloseServiceReply>> ssd) {
  msg::draft<msg::CloseServiceReply> d;
  d.root().setResult(flushed);
  if (!ssd)
    return std::move(d).seal();
  auto closed = ssd->root().getResult();
  auto out = d.root().getResult();
  out.setAbandoned(closed.getAbandoned());
  out.setDurable(flushed.getDurable() && closed.getDurable());
  auto before = flushed.getErrors();
  auto more = closed.getErrors();
  if (more.size() == 0)
    return std::move(d).seal();
  auto errs = out.initErrors(before.size() + more.size());
  uint32_t i = 0;
  for (auto e : before)
    errs.setWithCaveats(i++, e);
  for (auto e : more)
    errs.setWithCaveats(i++, e);
  return std::move(d).seal();
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
  auto errs = out.initErrors(static_cast<unsigned>(c.errors.size()));
  for (unsigned i = 0; i < c.errors.size(); ++i)
    write_error(errs[i], c.errors[i]);
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

/// Last step: the SSD tier releases the writes still queued or failed and
/// the prefetch results it holds, and refuses later writes; it answers
/// once no write runs (so none is left holding a buffer), with how many
/// writes it released unwritten.
void close_ssd(self_ptr self, const sealed<msg::FlushStateReply>& f) {
  auto& ssd = self->state.tiers.ssd;
  if (!ssd)
    return closed(self, close_result(f.root().getResult(), std::nullopt));
  self->request(ssd, tier_timeout(self), empty<msg::CloseService>())
    .then(
      [self, f](const sealed<msg::CloseServiceReply>& r) {
        closed(self, close_result(f.root().getResult(), r));
      },
      [self, f](const caf::error& err) {
        msg::draft<msg::CloseServiceReply> d;
        d.root().initResult();
        write_error(d.root().getResult().initErrors(1)[0],
                    timed_out(self, err, "the SSD tier's close"));
        closed(self, close_result(f.root().getResult(), std::move(d).seal()));
      });
}

/// After the flush: clears RAM, the session table and the checkpoints
/// (nothing is stored there any more), then closes the SSD tier: every
/// spill order those actors sent is in its mailbox before that.
void clear_tiers(self_ptr self, const sealed<msg::FlushStateReply>& f) {
  auto& t = self->state.tiers;
  auto left = std::make_shared<int>(t.sessions ? 3 : 2);
  auto done = [self, left, f] {
    if (--*left == 0)
      close_ssd(self, f);
  };
  self->request(t.ram, tier_timeout(self), empty<msg::CloseService>())
    .then([done](const sealed<msg::CloseServiceReply>&) { done(); },
          [done](const caf::error&) { done(); });
  if (t.sessions)
    self->request(t.sessions, tier_timeout(self), empty<msg::CloseService>())
      .then([done](const sealed<msg::CloseServiceReply>&) { done(); },
            [done](const caf::error&) { done(); });
  self->request(t.checkpoints, tier_timeout(self), empty<msg::CloseService>())
    .then([done](const sealed<msg::CloseServiceReply>&) { done(); },
          [done](const caf::error&) { done(); });
}

/// Closes admission at once (queued admits fail `closed`, so does every
/// later admit) while the flush runs; both done, the tiers are cleared.
void start_close(self_ptr self) {
  auto left = std::make_shared<int>(2);
  auto flushed =
    std::make_shared<std::optional<sealed<msg::FlushStateReply>>>();
  auto next = [self, left, flushed] {
    if (--*left == 0)
      clear_tiers(self, **flushed);
  };
  self
    ->request(self->state.tiers.admission, tier_timeout(self),
              empty<msg::CloseService>())
    .then([next](const sealed<msg::CloseServiceReply>&) { next(); },
          [next](const caf::error&) { next(); });
  run_flush(self, [flushed, next](sealed<msg::FlushStateReply> f) {
    *flushed = std::move(f);
    next();
  });
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

caf::result<sealed<msg::ReleaseRequestReply>>
release(self_ptr self, const sealed<msg::ReleaseRequest>& m) {
  auto rp = self->make_response_promise<sealed<msg::ReleaseRequestReply>>();
  auto budget =
    std::make_shared<std::optional<sealed<msg::ReleaseRequestReply>>>();
  auto& t = self->state.tiers;
  self->request(t.admission, tier_timeout(self), m)
    .then(
      [self, rp, m, budget](const sealed<msg::ReleaseRequestReply>& a) mutable {
        self->request(self->state.tiers.checkpoints, tier_timeout(self), m)
          .then(
            [rp, a](const sealed<msg::ReleaseRequestReply>& c) mutable {
              msg::draft<msg::ReleaseRequestReply> d;
              d.root().setReleasedBytes(a.root().getReleasedBytes());
              d.root().setCheckpointsRemoved(c.root().getCheckpointsRemoved());
              d.root().setCheckpointsKept(c.root().getCheckpointsKept());
              d.root().setRemovalPending(c.root().getRemovalPending());
              d.root().setRemovalError(c.root().getRemovalError());
              rp.deliver(std::move(d).seal());
            },
            [self, rp, a, m](const caf::error& err) mutable {
              // Late or failed: the admission part stands; the checkpoint
              // part is reported as not settled, never as nothing.
              msg::draft<msg::ReleaseRequestReply> d;
              d.root().setReleasedBytes(a.root().getReleasedBytes());
              bool completed = m.root().getCompleted();
              d.root().setRemovalPending(completed);
              write_error(d.root().initRemovalError(),
                          timed_out(self, err,
                                    completed
                                      ? "the checkpoints actor (the removal "
                                        "is not durable yet; it goes on)"
                                      : "the checkpoints actor"));
              rp.deliver(std::move(d).seal());
            });
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

caf::result<sealed<msg::WouldKeepReply>>
keeps(self_ptr self, const sealed<msg::WouldKeep>& m) {
  auto req = admission_of(m.root().getRequest());
  msg::draft<msg::KeepsBytes> d;
  d.root().setBytes(self->state.geometry.projected_bytes(req.prompt_tokens,
                                                         req.max_new_tokens));
  auto rp = self->make_response_promise<sealed<msg::WouldKeepReply>>();
  self->request(self->state.tiers.ram, tier_timeout(self), std::move(d).seal())
    .then(
      [rp](const sealed<msg::KeepsBytesReply>& r) mutable {
        msg::draft<msg::WouldKeepReply> out;
        out.root().setKeeps(r.root().getKeeps());
        rp.deliver(std::move(out).seal());
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

void count_tokens(self_ptr self, const sealed<msg::AcquireState>& request,
                  msg::AcquireStateReply::Reader r) {
  uint64_t prompt = 0;
  try {
    prompt = request.root().getRequest().getPrompt().size();
  } catch (const kj::Exception&) {
    return; // answered, so decoded before: not reached
  }
  auto served = std::min<uint64_t>(r.getUsableTokens(), prompt);
  auto& t = self->state.tokens;
  switch (r.getSource()) {
    case msg::Tier::RAM: t.ram += served; break;
    case msg::Tier::SSD: t.ssd += served; break;
    case msg::Tier::PEER: t.peer += served; break;
    case msg::Tier::CHECKPOINT: t.checkpoint += served; break;
    default: served = 0; break;
  }
  t.computed += prompt - served;
}

caf::result<sealed<msg::ReadReportReply>> report(self_ptr self) {
  struct parts {
    std::vector<sealed<msg::ReadReportReply>> got;
    std::vector<std::string> silent;
    size_t left = 0;
  };
  auto p = std::make_shared<parts>();
  auto rp = self->make_response_promise<sealed<msg::ReadReportReply>>();
  auto merge = [self, p, rp]() mutable {
    if (--p->left > 0)
      return;
    msg::draft<msg::ReadReportReply> d;
    auto out = d.root();
    size_t ios = 1;
    for (auto& g : p->got)
      ios += g.root().getIo().size();
    auto io = out.initIo(ios);
    io[0].setTier(msg::Tier::RAM); // the RAM tier never does storage I/O
    size_t next = 1;
    auto sessions = out.initSessions();
    for (auto& g : p->got) {
      auto r = g.root();
      if (r.hasRam()) {
        out.setRam(r.getRam());
        out.setDemotions(r.getDemotions()); // the RAM actor counts them
        out.setObjects(r.getObjects());
        sessions.setProtectedEntries(r.getSessions().getProtectedEntries());
      } else if (r.hasSessions()) { // the sessions actor's part
        sessions.setOpen(r.getSessions().getOpen());
        sessions.setOpened(r.getSessions().getOpened());
        sessions.setClosed(r.getSessions().getClosed());
      }
      if (r.hasSsd())
        out.setSsd(r.getSsd());
      if (r.hasAdmission())
        out.setAdmission(r.getAdmission());
      if (r.hasCheckpoints())
        out.setCheckpoints(r.getCheckpoints());
      if (r.hasPeer())
        out.setPeer(r.getPeer());
      for (auto x : r.getIo())
        io.setWithCaveats(next++, x);
    }
    out.setDeadTiers(self->state.dead_tiers);
    out.setColdLate(self->state.cold_late);
    out.setColdTiers(self->state.tiers.cold.size());
    out.setClosed(self->state.closing || self->state.closed.has_value());
    auto silent = out.initSilentTiers(p->silent.size());
    for (size_t i = 0; i < p->silent.size(); ++i)
      silent.set(i, p->silent[i]);
    auto& t = self->state.tokens;
    auto tokens = out.initTokens();
    tokens.setRam(t.ram);
    tokens.setSsd(t.ssd);
    tokens.setPeer(t.peer);
    tokens.setCheckpoint(t.checkpoint);
    tokens.setComputed(t.computed);
    rp.deliver(std::move(d).seal());
  };
  // A tier that fails or misses the deadline is named, its part left zero.
  auto ask = [&](auto& to, const char* name) {
    ++p->left;
    self->request(to, tier_timeout(self), empty<msg::ReadReport>())
      .then(
        [p, merge](const sealed<msg::ReadReportReply>& r) mutable {
          p->got.push_back(r);
          merge();
        },
        [p, merge, name](const caf::error&) mutable {
          p->silent.emplace_back(name);
          merge();
        });
  };
  auto& t = self->state.tiers;
  ask(t.ram, "ram");
  ask(t.admission, "admission");
  ask(t.checkpoints, "checkpoints");
  if (t.sessions)
    ask(t.sessions, "sessions");
  if (t.ssd)
    ask(t.ssd, "ssd");
  // (Not from `cold`: a tier that went down is gone from there, and must
  // be named silent.)
  if (t.peer)
    ask(t.peer, "peer");
  return rp;
}

caf::result<sealed<msg::ListSavedPrefixesReply>> saved(self_ptr self) {
  if (!self->state.tiers.ssd)
    return empty<msg::ListSavedPrefixesReply>();
  auto rp = self->make_response_promise<sealed<msg::ListSavedPrefixesReply>>();
  self
    ->request(self->state.tiers.ssd, tier_timeout(self),
              empty<msg::ListSavedPrefixes>())
    .then(
      // The SSD tier lists prefix files only (checkpoint files are their
      // own kind of key and never in its prefix index).
      [rp](const sealed<msg::ListSavedPrefixesReply>& r) mutable {
        rp.deliver(r);
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

} // namespace kvtier::actors::ops
