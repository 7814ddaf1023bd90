#include "actors/checkpoints_actor.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors {

namespace {

using tiers::checkpoint_id;
using tiers::checkpoint_store;

checkpoint_id id_of(msg::RequestIdentity::Reader r) {
  return {r.getId(), r.getNs().cStr()};
}

/// Files a newer durable checkpoint made redundant (not a completed
/// generation: no removal record needed).
void erase_files(checkpoints_pointer self,
                 const std::vector<tiers::storage_key>& files) {
  if (!self->state.ssd)
    return;
  for (auto& f : files) {
    msg::draft<msg::EraseEntry> d;
    tiers::write_key(d.root().initKey(), f);
    self->request(self->state.ssd, self->state.deadline, std::move(d).seal())
      .then([](const sealed<msg::EraseEntryReply>&) {},
            [](const caf::error&) {});
  }
}

caf::result<sealed<msg::SaveCheckpointReply>>
save(checkpoints_pointer self, const sealed<msg::SaveCheckpoint>& m) {
  msg::draft<msg::SaveCheckpointReply> d;
  auto& st = self->state;
  if (st.closed)
    return make_error(ec::closed, "the cache service is closed");
  if (st.every == 0) {
    ++st.disposed;
    return std::move(d).seal(); // the service keeps none: disposed
  }
  auto e = tiers::read_entry(m, m.root().getEntry());
  if (!e)
    return std::move(e.error());
  auto r = m.root().getRequest();
  checkpoint_id id{r.getId(), e->ns};
  auto tokens = e->size();
  bool kept = st.store.save(id, r.getAttempt(), std::move(*e));
  ++(kept ? st.saved : st.disposed);
  d.root().setKept(kept);
  d.root().setTokens(tokens);
  return std::move(d).seal();
}

sealed<msg::FindCheckpointReply> found_reply(tiers::entry e, bool from_ssd) {
  msg::draft<msg::FindCheckpointReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  d.root().setFromSsd(from_ssd);
  return std::move(d).seal();
}

sealed<msg::FindCheckpointReply> none(uint64_t stale = 0) {
  msg::draft<msg::FindCheckpointReply> d;
  d.root().setStaleTokens(stale);
  return std::move(d).seal();
}

/// Restores a checkpoint only its file holds; a failed read, or one that
/// no longer matches what the store holds, is a miss.
caf::result<sealed<msg::FindCheckpointReply>>
restore(checkpoints_pointer self, const tiers::storage_key& f,
        const checkpoint_id& id, uint32_t attempt) {
  msg::draft<msg::RestoreEntry> d;
  tiers::write_key(d.root().initKey(), f);
  d.root().setUsableTokens(f.tokens.size());
  auto rp = self->make_response_promise<sealed<msg::FindCheckpointReply>>();
  self->request(self->state.ssd, self->state.deadline, std::move(d).seal())
    .then(
      [self, rp, f, id,
       attempt](const sealed<msg::RestoreEntryReply>& r) mutable {
        auto e = r.root().isEntry() ? tiers::read_entry(r, r.root().getEntry())
                                    : caf::expected<tiers::entry>{caf::error{}};
        auto now = self->state.store.find(id);
        if (!r.root().isEntry() || !e || e->tokens != f.tokens || !now
            || now->tokens != f.tokens) {
          rp.deliver(none());
          return;
        }
        e->ns = id.ns;
        self->state.store.adopt(id, attempt, *e);
        ++self->state.resumed;
        rp.deliver(found_reply(std::move(*e), true));
      },
      [rp](const caf::error&) mutable { rp.deliver(none()); });
  return rp;
}

/// The request's checkpoint, only when it extends the request's prompt;
/// a checkpoint that does not is stale for this request: not served
/// (the reply says how long it is), kept.
caf::result<sealed<msg::FindCheckpointReply>>
find(checkpoints_pointer self, msg::FindCheckpoint::Reader m) {
  auto r = m.getRequest();
  auto id = id_of(r);
  auto& st = self->state;
  auto f = st.store.find(id);
  if (!f)
    return none();
  tiers::tokens_of prompt{r.getPrompt()};
  if (!checkpoint_store::resumes(f->tokens, prompt.span())) {
    ++st.stale;
    return none(f->tokens.size());
  }
  if (f->state) {
    st.store.adopt(id, r.getAttempt());
    ++st.resumed;
    return found_reply(*f->state, false);
  }
  if (f->file && st.ssd)
    return restore(self, *f->file, id, r.getAttempt());
  return none();
}

/// How long a completed release waits for the SSD tier's removal before it
/// answers "pending": two fifths of the storage deadline, inside the half
/// the facade waits for this actor (actors/cache_service.hpp,
/// `tier_timeout`), so the facade always hears the answer.
std::chrono::milliseconds release_window(std::chrono::milliseconds deadline) {
  return std::max(deadline * 2 / 5, std::chrono::milliseconds{1});
}

/// Settles a completed release once every identity's removal answered.
struct release_wait {
  caf::typed_response_promise<sealed<msg::ReleaseRequestReply>> rp;
  uint32_t removed = 0;
  size_t left = 0;
  caf::error err;

  void one(caf::error e) {
    if (e && !err)
      err = std::move(e);
    if (--left > 0)
      return;
    msg::draft<msg::ReleaseRequestReply> d;
    d.root().setCheckpointsRemoved(removed);
    d.root().setRemovalPending(static_cast<bool>(err));
    write_error(d.root().initRemovalError(), err);
    rp.deliver(std::move(d).seal());
  }
};

/// Completed: the attempt's checkpoints go (memory at once; files and
/// writes durably, answered once the SSD tier's removal records are
/// durable). Interrupted: kept. Checkpoints other attempts own are not
/// touched.
caf::result<sealed<msg::ReleaseRequestReply>>
release(checkpoints_pointer self, msg::ReleaseRequest::Reader m) {
  auto r = m.getRequest();
  auto& st = self->state;
  auto n = st.store.count(r.getId(), r.getAttempt());
  msg::draft<msg::ReleaseRequestReply> d;
  if (!m.getCompleted()) {
    d.root().setCheckpointsKept(n);
    return std::move(d).seal();
  }
  auto gone = st.store.remove(r.getId(), r.getAttempt());
  st.removed += gone.size();
  d.root().setCheckpointsRemoved(n);
  // Only what ever reached the SSD tier needs a removal there.
  std::vector<checkpoint_id> ids;
  for (auto& g : gone)
    if (g.on_ssd)
      ids.push_back(std::move(g.id));
  if (ids.empty() || !st.ssd)
    return std::move(d).seal();
  auto w = std::make_shared<release_wait>();
  w->rp = self->make_response_promise<sealed<msg::ReleaseRequestReply>>();
  w->removed = n;
  w->left = ids.size();
  auto within = release_window(st.deadline);
  for (auto& id : ids) {
    msg::draft<msg::RemoveCheckpoints> rm;
    rm.root().setRequest(id.request);
    rm.root().setNs(id.ns);
    self->request(st.ssd, within, std::move(rm).seal())
      .then(
        [w](const sealed<msg::RemoveCheckpointsReply>& x) {
          w->one(x.root().getDurable() ? caf::error{}
                                       : read_error(x.root().getError()));
        },
        [w, within, rq = id.request](caf::error& err) {
          // Late: the SSD tier goes on with the removal (its record makes
          // it durable, or a flush retries it); the answer says so.
          if (err == caf::sec::request_timeout)
            err = make_error(ec::timeout,
                             "removing the checkpoints of request "
                               + std::to_string(rq) + " was not durable within "
                               + std::to_string(within.count())
                               + " ms; the SSD tier goes on with it and "
                                 "flush() reports it while it is pending");
          w->one(std::move(err));
        });
  }
  return w->rp;
}

/// Writes every checkpoint not yet durable under its owner; replies once
/// the orders are queued (durable: the facade's flush of the store that
/// follows gives the evidence of these writes).
sealed<msg::FlushStateReply> flush(checkpoints_pointer self) {
  if (!self->state.ssd)
    return flush_without_store(self->state.store.size(), "checkpoints");
  auto& store = self->state.store;
  for (auto& p : store.undurable()) {
    msg::draft<msg::SpillEntry> d;
    auto order = store.ordered(p.id);
    d.root().setOrderId(order);
    d.root().setReason(msg::SpillReason::CHECKPOINT);
    tiers::write_entry(d, d.root().getItem().initEntry(), p.state);
    tiers::write_owner(
      d.root().getKind().initCheckpoint(),
      tiers::storage_key::checkpoint(p.id.request, p.attempt, p.id.ns, {}));
    self->request(self->state.ssd, self->state.deadline, std::move(d).seal())
      .then(
        [self, order](const sealed<msg::SpillEntryReply>& r) {
          auto o = r.root().getOutcome();
          // A failed write stays queued on SSD for a flush's retry (no
          // later answer comes): it stays ordered.
          if (o == msg::SpillOutcome::FAILED)
            return;
          bool durable = o == msg::SpillOutcome::DURABLE
                         || o == msg::SpillOutcome::ALREADY_DURABLE;
          erase_files(self, self->state.store.settled(order, durable));
        },
        [self, order](const caf::error&) {
          self->state.store.settled(order, false);
        });
  }
  return nothing_to_flush();
}

/// The SSD tier stopped holding a checkpoint file: the checkpoint whose
/// file it was is no longer durable (the next flush writes it again).
void file_removed(checkpoints_pointer self, msg::SsdEvictEvent::Reader m) {
  auto k = tiers::read_key(m.getKey());
  if (k.kind == tiers::key_kind::checkpoint)
    self->state.store.file_removed({k.request, k.ns}, k.tokens);
}

sealed<msg::ReadReportReply> report(checkpoints_pointer self) {
  auto& st = self->state;
  auto part = tiers::report::checkpoints::from(st); // saved, disposed, ...
  part.held = st.store.size();
  part.every_tokens = st.every;
  part.ram_only = st.every > 0 && !st.ssd;
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(part).write(d.root());
  return std::move(d).seal();
}

} // namespace

checkpoints_actor::behavior_type
checkpoints(checkpoints_pointer self, uint64_t every, store_actor ssd,
            std::vector<tiers::checkpoint_file> saved, uint64_t deadline_ms) {
  guard_signals(self, "checkpoints");
  self->state.every = every;
  self->state.deadline = std::chrono::milliseconds{deadline_ms};
  self->state.ssd = std::move(ssd);
  for (auto& f : saved)
    if (f.key.kind == tiers::key_kind::checkpoint)
      erase_files(self, self->state.store.found_file(f));
  return {
    [self](const sealed<msg::SaveCheckpoint>& m) {
      return decoding<sealed<msg::SaveCheckpointReply>>(
        [&] { return save(self, m); });
    },
    [self](const sealed<msg::FindCheckpoint>& m) {
      return decoding<sealed<msg::FindCheckpointReply>>(
        [&] { return find(self, m.root()); });
    },
    [self](const sealed<msg::ReleaseRequest>& m) {
      return decoding<sealed<msg::ReleaseRequestReply>>(
        [&] { return release(self, m.root()); });
    },
    [self](const sealed<msg::FlushState>&) { return flush(self); },
    [self](const sealed<msg::CloseService>&) {
      self->state.closed = true;
      self->state.store.clear_memory();
      return msg::draft<msg::CloseServiceReply>{}.seal();
    },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
    // Its writes are the store's pending checkpoint writes.
    [](const sealed<msg::ReadStats>&) {
      return msg::draft<msg::ReadStatsReply>{}.seal();
    },
    [self](const found_checkpoints& m) {
      for (auto& f : m.files)
        erase_files(self, self->state.store.found_file(
                            {tiers::storage_key::checkpoint(
                               f.request, f.attempt, f.ns, f.tokens),
                             f.write_id}));
    },
    [self](const sealed<msg::SsdEvictEvent>& m) {
      try {
        file_removed(self, m.root());
      } catch (const kj::Exception&) {
        // An undecodable event names no checkpoint: nothing to clear.
      }
    },
  };
}

} // namespace kvtier::actors
