#include "actors/checkpoints_actor.hpp"

#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors {

namespace {

using tiers::checkpoint_id;
using tiers::checkpoint_store;

checkpoint_id id_of(msg::RequestIdentity::Reader r) {
  return {r.getId(), r.getNs().cStr()};
}

void erase_files(checkpoints_pointer self,
                 const std::vector<tiers::checkpoint_file>& files) {
  if (!self->state.ssd)
    return;
  for (auto& f : files) {
    msg::draft<msg::EraseEntry> d;
    tiers::write_key(d.root().initKey(), f.ns, f.tokens);
    self->request(self->state.ssd, caf::infinite, std::move(d).seal())
      .then([](const sealed<msg::EraseEntryReply>&) {},
            [](const caf::error&) {});
  }
}

caf::result<sealed<msg::SaveCheckpointReply>>
save(checkpoints_pointer self, const sealed<msg::SaveCheckpoint>& m) {
  msg::draft<msg::SaveCheckpointReply> d;
  if (self->state.closed)
    return make_error(ec::closed, "the cache service is closed");
  if (self->state.every == 0)
    return std::move(d).seal(); // the service keeps none: disposed
  auto e = tiers::read_entry(m, m.root().getEntry());
  if (!e)
    return std::move(e.error());
  auto id = id_of(m.root().getRequest());
  id.ns = e->ns;
  auto tokens = e->size();
  d.root().setKept(self->state.store.save(id, std::move(*e)));
  d.root().setTokens(tokens);
  return std::move(d).seal();
}

sealed<msg::FindCheckpointReply> found_reply(tiers::entry e, bool from_ssd) {
  msg::draft<msg::FindCheckpointReply> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  d.root().setFromSsd(from_ssd);
  return std::move(d).seal();
}

/// Restores a checkpoint only its file holds; a failed read is a miss.
caf::result<sealed<msg::FindCheckpointReply>>
restore(checkpoints_pointer self, const tiers::checkpoint_file& f,
        std::string ns) {
  msg::draft<msg::RestoreEntry> d;
  tiers::write_key(d.root().initKey(), f.ns, f.tokens);
  d.root().setUsableTokens(f.tokens.size());
  auto rp = self->make_response_promise<sealed<msg::FindCheckpointReply>>();
  auto none = [] { return msg::draft<msg::FindCheckpointReply>{}.seal(); };
  self->request(self->state.ssd, caf::infinite, std::move(d).seal())
    .then(
      [rp, ns, none](const sealed<msg::RestoreEntryReply>& r) mutable {
        auto e = r.root().isEntry() ? tiers::read_entry(r, r.root().getEntry())
                                    : caf::expected<tiers::entry>{caf::error{}};
        if (!r.root().isEntry() || !e) {
          rp.deliver(none());
          return;
        }
        e->ns = ns;
        rp.deliver(found_reply(std::move(*e), true));
      },
      [rp, none](const caf::error&) mutable { rp.deliver(none()); });
  return rp;
}

caf::result<sealed<msg::FindCheckpointReply>>
find(checkpoints_pointer self, msg::FindCheckpoint::Reader m) {
  auto id = id_of(m.getRequest());
  auto f = self->state.store.find(id);
  if (f && f->state)
    return found_reply(*f->state, false);
  if (f && f->file && self->state.ssd)
    return restore(self, *f->file, id.ns);
  return msg::draft<msg::FindCheckpointReply>{}.seal();
}

sealed<msg::ReleaseRequestReply> release(checkpoints_pointer self,
                                         msg::ReleaseRequest::Reader m) {
  auto request = m.getRequest().getId();
  msg::draft<msg::ReleaseRequestReply> d;
  auto n = self->state.store.count(request);
  if (m.getCompleted()) {
    erase_files(self, self->state.store.remove(request));
    d.root().setCheckpointsRemoved(n);
  } else {
    d.root().setCheckpointsKept(n);
  }
  return std::move(d).seal();
}

/// Writes every checkpoint not yet durable; replies once the orders are
/// queued (the facade's flush to the SSD actor follows them).
sealed<msg::FlushStateReply> flush(checkpoints_pointer self) {
  if (!self->state.ssd)
    return msg::draft<msg::FlushStateReply>{}.seal();
  auto& store = self->state.store;
  for (auto& [id, e] : store.undurable()) {
    msg::draft<msg::SpillEntry> d;
    d.root().setReason(msg::SpillReason::CHECKPOINT);
    auto stored = e;
    stored.ns = checkpoint_store::storage_ns(id);
    tiers::write_entry(d, d.root().getItem().initEntry(), stored);
    store.ordered(id, e.tokens);
    self->request(self->state.ssd, caf::infinite, std::move(d).seal())
      .then(
        [self, id = id,
         tokens = e.tokens](const sealed<msg::SpillEntryReply>& r) {
          auto o = r.root().getOutcome();
          // A failed write stays queued on SSD for a flush's retry (no
          // later answer comes): it stays ordered, so a release cancels it.
          if (o == msg::SpillOutcome::FAILED)
            return;
          bool durable = o == msg::SpillOutcome::DURABLE
                         || o == msg::SpillOutcome::ALREADY_DURABLE;
          erase_files(self, self->state.store.settled(id, tokens, durable));
        },
        [self, id = id, tokens = e.tokens](const caf::error&) {
          self->state.store.settled(id, tokens, false);
        });
  }
  return msg::draft<msg::FlushStateReply>{}.seal();
}

/// The SSD tier stopped holding a checkpoint file: the checkpoint whose
/// file it was is no longer durable (the next flush writes it again).
void file_removed(checkpoints_pointer self, msg::SsdEvictEvent::Reader m) {
  auto id = checkpoint_store::parse_storage_ns(m.getKey().getNs().cStr());
  if (id)
    self->state.store.file_removed(*id,
                                   tiers::read_tokens(m.getKey().getTokens()));
}

} // namespace

checkpoints_actor::behavior_type
checkpoints(checkpoints_pointer self, uint64_t every, ssd_tier_actor ssd,
            std::vector<tiers::checkpoint_file> saved) {
  self->state.every = every;
  self->state.ssd = std::move(ssd);
  for (auto& f : saved)
    if (auto id = checkpoint_store::parse_storage_ns(f.ns))
      erase_files(self, self->state.store.mark_durable(*id, f.tokens));
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
