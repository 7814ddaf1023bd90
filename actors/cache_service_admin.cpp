// The facade's bookkeeping calls: release, keeps, the token tally and the
// saved-prefix listing (flush, close, stats and the report, one loop over
// the tiers each, are in cache_service_lifecycle.cpp).
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors::ops {

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
    case msg::Tier::STORE: t.store += served; break;
    default: served = 0; break;
  }
  t.computed += prompt - served;
}

caf::result<sealed<msg::ListSavedPrefixesReply>> saved(self_ptr self) {
  if (!self->state.tiers.ssd)
    return msg::draft<msg::ListSavedPrefixesReply>{}.seal();
  auto rp = self->make_response_promise<sealed<msg::ListSavedPrefixesReply>>();
  self
    ->request(self->state.tiers.ssd, tier_timeout(self),
              msg::draft<msg::ListSavedPrefixes>{}.seal())
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
