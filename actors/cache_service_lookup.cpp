// The facade's lookups: acquire (the request's checkpoint when it extends
// the prompt, then RAM against SSD) and prefetch (a RAM peek, then cold
// reads of a strictly longer prefix, whose result RAM holds for the lease).
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "tiers/checkpoints.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors::ops {

namespace {

using acquire_promise =
  caf::typed_response_promise<sealed<msg::AcquireStateReply>>;

/// One acquire in flight: what RAM and SSD answered so far.
struct lookup {
  sealed<msg::AcquireState> request;
  acquire_promise rp;
  std::optional<sealed<msg::AcquireStateReply>> ram;
  std::optional<sealed<msg::FindPrefixReply>> ssd;
  int left = 0;
  bool answered = false;
  /// The request's checkpoint did not extend its prompt: its tokens, said
  /// in the reply (0: none).
  uint64_t stale = 0;
};

using lookup_ptr = std::shared_ptr<lookup>;

sealed<msg::AcquireStateReply> answer(msg::Tier source, uint64_t usable,
                                      const tiers::entry* e) {
  msg::draft<msg::AcquireStateReply> d;
  d.root().setSource(source);
  d.root().setUsableTokens(usable);
  if (e)
    tiers::write_entry(d, d.root().initEntry(), *e);
  return std::move(d).seal();
}

/// `r` with the stale checkpoint's tokens set (views of the same buffers;
/// only when the request had a stale checkpoint, so the usual reply is
/// forwarded as it came).
caf::expected<sealed<msg::AcquireStateReply>>
with_stale(const sealed<msg::AcquireStateReply>& r, uint64_t stale) {
  auto in = r.root();
  msg::draft<msg::AcquireStateReply> d;
  d.root().setSource(in.getSource());
  d.root().setUsableTokens(in.getUsableTokens());
  d.root().setStaleCheckpointTokens(stale);
  if (in.getSource() != msg::Tier::NONE) {
    auto e = tiers::read_entry(r, in.getEntry());
    if (!e)
      return std::move(e.error());
    tiers::write_entry(d, d.root().initEntry(), *e);
  }
  return std::move(d).seal();
}

void deliver(const lookup_ptr& s,
             caf::expected<sealed<msg::AcquireStateReply>> r) {
  if (std::exchange(s->answered, true))
    return;
  if (r && s->stale > 0)
    r = with_stale(*r, s->stale);
  if (r)
    s->rp.deliver(std::move(*r));
  else
    s->rp.deliver(std::move(r.error()));
}

/// The RAM candidate, or fresh state when RAM had none: the RAM tier
/// answered in the engine's reply form, so its sealed reply is forwarded
/// as it came (no decode, no copy).
void serve_ram(const lookup_ptr& s) {
  deliver(s, *s->ram);
}

/// The last door before the engine: a decoded state the tiers handed up
/// (a restore, a checkpoint) is served only with the running model's shape;
/// anything else is a miss (the tiers check and count it first).
bool fits_model(self_ptr self, const tiers::entry& e) {
  return !self->state.geometry.check(e);
}

/// Puts a restored entry into RAM (durable: its file exists).
void install(
  self_ptr self, const tiers::entry& e, uint64_t interest,
  std::function<void()> then = [] {}) {
  msg::draft<msg::InstallEntry> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  d.root().setDurable(true);
  d.root().setInterest(interest);
  self->request(self->state.tiers.ram, tier_timeout(self), std::move(d).seal())
    .then([then](const sealed<msg::InstallEntryReply>&) { then(); },
          [then](const caf::error&) { then(); });
}

/// The SSD's candidate is strictly longer: restore it, install it, serve
/// it; a failed restore serves the RAM candidate instead.
void serve_ssd(self_ptr self, const lookup_ptr& s) {
  auto found = s->ssd->root();
  msg::draft<msg::RestoreEntry> d;
  d.root().setKey(found.getKey());
  d.root().setUsableTokens(found.getUsableTokens());
  d.root().setRequestId(s->request.root().getRequest().getId());
  self->request(self->state.tiers.ssd, tier_timeout(self), std::move(d).seal())
    .then(
      [self, s](const sealed<msg::RestoreEntryReply>& r) {
        auto e = r.root().isEntry() ? tiers::read_entry(r, r.root().getEntry())
                                    : caf::expected<tiers::entry>{caf::error{}};
        if (!r.root().isEntry() || !e || !fits_model(self, *e))
          return serve_ram(s);
        // Installed before the answer, so the next acquire finds it in RAM.
        auto out = answer(msg::Tier::SSD, e->size(), &*e);
        install(self, *e, 0, [s, out] { deliver(s, out); });
      },
      [s](const caf::error&) { serve_ram(s); });
}

void decide(self_ptr self, const lookup_ptr& s) {
  if (s->answered)
    return;
  --s->left;
  if (s->left > 0)
    return;
  // Both answered (or the SSD failed). The SSD's answer is waited for even
  // when RAM's cannot be beaten: answering first left its processing to
  // run into the engine's next call (measured: that call then cost twice).
  auto ram_len = s->ram->root().getUsableTokens();
  auto ssd_len = s->ssd ? s->ssd->root().getUsableTokens() : 0;
  if (ssd_len > ram_len)
    serve_ssd(self, s);
  else
    serve_ram(s);
}

/// Asks RAM and SSD at once for the longest usable prefix, handing both
/// the engine's request as it came (no message is rebuilt).
void search_tiers(self_ptr self, const lookup_ptr& s) {
  auto& t = self->state.tiers;
  s->left = t.ssd ? 2 : 1;
  // Lookups jump the tiers' queues (spill replies, I/O completions): an
  // acquire waits for them, background writes do not.
  constexpr auto urgent = caf::message_priority::high;
  self->request<urgent>(t.ram, tier_timeout(self), s->request)
    .then(
      [self, s](const sealed<msg::AcquireStateReply>& r) {
        s->ram = r;
        decide(self, s);
      },
      [s](caf::error& err) { deliver(s, std::move(err)); });
  if (!t.ssd)
    return;
  self->request<urgent>(t.ssd, tier_timeout(self), s->request)
    .then(
      [self, s](const sealed<msg::FindPrefixReply>& r) {
        s->ssd = r;
        decide(self, s);
      },
      [self, s](const caf::error&) { decide(self, s); });
}

using prefetch_promise =
  caf::typed_response_promise<sealed<msg::PrefetchPrefixReply>>;
using cold_draft = std::shared_ptr<msg::draft<msg::PrefetchPrefix>>;

/// The RAM peek for a prefetch, and the SSD's request (the engine's, with
/// `betterThan` still to be set from the peek's answer).
std::pair<sealed<msg::PeekPrefix>, cold_draft>
prefetch_messages(msg::PrefetchPrefix::Reader in) {
  msg::draft<msg::PeekPrefix> peek;
  peek.root().setNs(in.getNs());
  peek.root().setPrompt(in.getPrompt());
  auto cold = std::make_shared<msg::draft<msg::PrefetchPrefix>>();
  cold->root().setNs(in.getNs());
  cold->root().setPrompt(in.getPrompt());
  if (in.getSession().isId())
    cold->root().getSession().setId(in.getSession().getId());
  return {std::move(peek).seal(), std::move(cold)};
}

/// Asks the SSD for the read of the prompt's best saved prefix longer than
/// the `ram_tokens` RAM holds (the cold tier wins only when strictly
/// longer), installs what it restored into RAM under the lease, and
/// answers the engine: lease, counts, tokens, and what RAM held. Lease 0
/// and no reads when nothing on SSD was worth reading.
void read_cold(self_ptr self, const cold_draft& cold, uint64_t ram_tokens,
               prefetch_promise rp) {
  cold->root().setBetterThan(ram_tokens);
  self
    ->request(self->state.tiers.ssd, tier_timeout(self),
              std::move(*cold).seal())
    .then(
      [self, rp,
       ram_tokens](const sealed<msg::PrefetchPrefixReply>& r) mutable {
        // The engine gets the lease and counts; the state goes to RAM.
        msg::draft<msg::PrefetchPrefixReply> d;
        auto in = r.root();
        d.root().setLeaseId(in.getLeaseId());
        d.root().setReadsStarted(in.getReadsStarted());
        d.root().setReadsJoined(in.getReadsJoined());
        d.root().setTokens(in.getTokens());
        d.root().setRamTokens(ram_tokens);
        auto out = std::move(d).seal();
        auto e = in.getLeaseId() != 0
                   ? tiers::read_entry(r, in.getEntry())
                   : caf::expected<tiers::entry>{caf::error{}};
        if (in.getLeaseId() == 0 || !e || !fits_model(self, *e)) {
          rp.deliver(out);
          return;
        }
        install(self, *e, in.getLeaseId(),
                [rp, out]() mutable { rp.deliver(out); });
      },
      [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

} // namespace

caf::result<sealed<msg::AcquireStateReply>>
acquire(self_ptr self, const sealed<msg::AcquireState>& m) {
  if (self->state.closed)
    return closed_error();
  auto s = std::make_shared<lookup>();
  s->request = m;
  s->rp = self->make_response_promise<sealed<msg::AcquireStateReply>>();
  if (!self->state.checkpoints_possible) {
    search_tiers(self, s);
    return s->rp;
  }
  msg::draft<msg::FindCheckpoint> d;
  d.root().setRequest(m.root().getRequest());
  self
    ->request(self->state.tiers.checkpoints, tier_timeout(self),
              std::move(d).seal())
    .then(
      [self, s](const sealed<msg::FindCheckpointReply>& r) {
        auto e = r.root().isEntry() ? tiers::read_entry(r, r.root().getEntry())
                                    : caf::expected<tiers::entry>{caf::error{}};
        if (!r.root().isEntry() || !e || !fits_model(self, *e)) {
          // None, stale, or not this model's shape: served as a fresh
          // prompt through the prefix search; the reply says when a
          // checkpoint was passed over for another prompt.
          s->stale = r.root().getStaleTokens();
          return search_tiers(self, s);
        }
        // The checkpoints actor served it by the resume rule; checked once
        // more where it leaves: never another prompt's or namespace's.
        auto q = s->request.root().getRequest();
        tiers::tokens_of prompt{q.getPrompt()};
        if (e->ns != q.getNs().cStr()
            || !tiers::checkpoint_store::resumes(e->tokens, prompt.span())) {
          s->stale = e->size();
          return search_tiers(self, s);
        }
        deliver(s, answer(msg::Tier::CHECKPOINT, e->size(), &*e));
      },
      [self, s](const caf::error&) { search_tiers(self, s); });
  return s->rp;
}

caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(self_ptr self, const sealed<msg::PrefetchPrefix>& m) {
  if (self->state.closed)
    return closed_error();
  if (!self->state.tiers.ssd)
    return msg::draft<msg::PrefetchPrefixReply>{}.seal();
  return decoding<sealed<msg::PrefetchPrefixReply>>(
    [&]() -> caf::result<sealed<msg::PrefetchPrefixReply>> {
      // Both messages are built here, where a malformed request becomes an
      // error reply; the peek's answer only fills in `betterThan`.
      auto msgs = prefetch_messages(m.root());
      auto rp = self->make_response_promise<sealed<msg::PrefetchPrefixReply>>();
      self
        ->request(self->state.tiers.ram, tier_timeout(self),
                  std::move(msgs.first))
        .then(
          [self, cold = msgs.second,
           rp](const sealed<msg::PeekPrefixReply>& r) mutable {
            read_cold(self, cold, r.root().getTokens(), rp);
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    });
}

caf::result<sealed<msg::ReleasePrefetchReply>>
release_prefetch(self_ptr self, const sealed<msg::ReleasePrefetch>& m) {
  if (m.root().getLeaseId() == 0) {
    // The lease of a prefetch that started nothing: no interest to end.
    msg::draft<msg::ReleasePrefetchReply> d;
    d.root().setReleased(false);
    return std::move(d).seal();
  }
  if (auto& ssd = self->state.tiers.ssd)
    self->request(ssd, tier_timeout(self), m)
      .then([](const sealed<msg::ReleasePrefetchReply>&) {},
            [](const caf::error&) {});
  return self->delegate(self->state.tiers.ram, m);
}

} // namespace kvtier::actors::ops
