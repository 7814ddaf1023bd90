// The facade's lookups: acquire (the request's checkpoint when it extends
// the prompt, then RAM against every cold tier) and prefetch (a RAM peek,
// then the cold read of a strictly longer prefix, whose result RAM holds
// for the lease). Both gather one candidate per tier in parallel, each
// under the tier deadline, and apply the strictly-longer rule tier by tier
// (`record_holders`).
#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"
#include "tiers/checkpoints.hpp"
#include "tiers/entry_message.hpp"

#include <caf/sec.hpp>

#include <algorithm>
#include <optional>

namespace kvtier::actors::ops {

namespace {

using acquire_promise =
  caf::typed_response_promise<sealed<msg::AcquireStateReply>>;
using found_reply = std::optional<sealed<msg::FindPrefixReply>>;

/// Lookups jump the tiers' queues (spill orders and replies, I/O
/// completions): an acquire waits for them, background writes do not.
/// Always with `urgent_timeout` (a `caf::duration`): a `std::chrono`
/// timeout would drop the priority.
constexpr auto urgent = caf::message_priority::high;

/// The strictly-longer rule, tier by tier: the indexes (into `found`) of
/// the candidates each strictly longer than `base` and every earlier one,
/// in order; the last is the winner, each one's fallback the one before.
std::vector<size_t> record_holders(const std::vector<found_reply>& found,
                                   uint64_t base) {
  std::vector<size_t> out;
  for (size_t i = 0; i < found.size(); ++i)
    if (found[i] && found[i]->root().getUsableTokens() > base) {
      base = found[i]->root().getUsableTokens();
      out.push_back(i);
    }
  return out;
}

/// One acquire in flight: what RAM and each cold tier answered so far.
struct lookup {
  self_ptr self = nullptr;
  sealed<msg::AcquireState> request;
  acquire_promise rp;
  std::optional<sealed<msg::AcquireStateReply>> ram;
  /// The cold tiers as they were when the lookup started, and their finds.
  std::vector<cold_tier_ref> cold;
  std::vector<found_reply> found;
  /// Candidates left to try, the winner last (record_holders).
  std::vector<size_t> chain;
  size_t left = 0;
  /// The candidates are chosen (every tier answered, or the cold wait was
  /// over): a late answer changes nothing.
  bool decided = false;
  bool answered = false;
  /// The request's checkpoint did not extend its prompt: its tokens, said
  /// in the reply (0: none).
  uint64_t stale = 0;
  /// The response ids of the requests to RAM (first) and each cold tier
  /// still unanswered (an answered one is reset to an async id). They
  /// carry no CAF timeout: at the tier deadline the facade answers each
  /// itself with a timeout (`release_handlers`).
  std::vector<caf::message_id> asked;

  /// Whether the candidates are still to be chosen.
  bool open() const {
    return !decided && !answered;
  }

  /// Whether a request of this lookup still waits for its tier.
  bool asking() const {
    return std::any_of(asked.begin(), asked.end(),
                       [](caf::message_id id) { return id.is_response(); });
  }
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
    count_tokens(s->self, s->request, r->root());
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

/// Puts a restored entry into RAM: durable when it came from the SSD (its
/// file exists), not when it came from elsewhere (a peer).
void install(
  self_ptr self, const tiers::entry& e, msg::Tier from, uint64_t interest,
  std::function<void()> then = [] {}) {
  msg::draft<msg::InstallEntry> d;
  tiers::write_entry(d, d.root().initEntry(), e);
  d.root().setDurable(from == msg::Tier::SSD);
  d.root().setInterest(interest);
  self->request(self->state.tiers.ram, tier_timeout(self), std::move(d).seal())
    .then([then](const sealed<msg::InstallEntryReply>&) { then(); },
          [then](const caf::error&) { then(); });
}

/// Restores the last candidate of the chain, installs it, serves it; a
/// failed or late restore tries the candidate it beat, at last RAM's.
void serve_cold(self_ptr self, const lookup_ptr& s) {
  if (s->chain.empty())
    return serve_ram(s);
  auto i = s->chain.back();
  s->chain.pop_back();
  auto found = s->found[i]->root();
  msg::draft<msg::RestoreEntry> d;
  d.root().setKey(found.getKey());
  d.root().setUsableTokens(found.getUsableTokens());
  d.root().setRequestId(s->request.root().getRequest().getId());
  auto tag = s->cold[i].tag;
  auto* h = tag == msg::Tier::PEER ? &self->state.latency->remote_fetch
                                   : &self->state.latency->restore;
  auto started = std::chrono::steady_clock::now();
  self
    ->request<urgent>(s->cold[i].actor, urgent_timeout(self),
                      std::move(d).seal())
    .then(
      [self, s, tag, h, started](const sealed<msg::RestoreEntryReply>& r) {
        auto e = r.root().isEntry() ? tiers::read_entry(r, r.root().getEntry())
                                    : caf::expected<tiers::entry>{caf::error{}};
        if (!r.root().isEntry() || !e || !fits_model(self, *e)) {
          h->fail();
          return serve_cold(self, s);
        }
        // Installed before the answer, so the next acquire finds it in RAM.
        auto out = answer(tag, e->size(), &*e);
        install(self, *e, tag, 0, [s, out, h, started] {
          h->observe(std::chrono::steady_clock::now() - started);
          deliver(s, out);
        });
      },
      [self, s, h](const caf::error&) {
        h->fail();
        serve_cold(self, s);
      });
}

/// Picks the candidates from the answers so far and serves the winner.
void choose(self_ptr self, const lookup_ptr& s) {
  s->decided = true;
  s->chain = record_holders(s->found, s->ram->root().getUsableTokens());
  serve_cold(self, s);
}

void decide(self_ptr self, const lookup_ptr& s) {
  if (s->answered || s->decided || --s->left > 0)
    return;
  // Every tier answered (or failed, or missed its deadline). The cold
  // tiers' answers are waited for even when RAM's cannot be beaten:
  // answering first left their processing to run into the engine's next
  // call (measured: that call then cost twice); a busy cold tier's for
  // `cold_wait_ms` at most (`wait_for_cold`).
  choose(self, s);
}

/// Whether a lookup still needs its place in a queue: in `cold_waits`
/// while its candidates are to be chosen; in `deadlines` also while a
/// request of it waits for its tier (the deadline frees that handler).
using keep_fn = bool (*)(const lookup&);

bool keeps_cold_wait(const lookup& s) {
  return s.open();
}

bool keeps_deadline(const lookup& s) {
  return s.open() || s.asking();
}

/// The lookup a queued wait is for, while `keep` says it needs it (null
/// once it does not).
lookup_ptr waiting(const std::weak_ptr<void>& w, keep_fn keep) {
  auto s = std::static_pointer_cast<lookup>(w.lock());
  return s && keep(*s) ? s : nullptr;
}

/// Drops the waits at the front of `q` that `keep` no longer needs.
void prune(cache_service_state::lookup_queue& q, keep_fn keep) {
  while (!q.empty() && !waiting(q.front().second, keep))
    q.pop_front();
}

/// Arms the lookup timer for the oldest wait of either queue, unless one
/// is armed for that time or earlier.
void arm_lookup_timer(self_ptr self) {
  auto& st = self->state;
  std::optional<caf::actor_clock::time_point> due;
  const std::pair<cache_service_state::lookup_queue*, keep_fn> queues[] = {
    {&st.cold_waits, keeps_cold_wait}, {&st.deadlines, keeps_deadline}};
  for (auto [q, keep] : queues) {
    prune(*q, keep);
    if (!q->empty() && (!due || q->front().first < *due))
      due = q->front().first;
  }
  if (!due || (st.lookup_timer != 0 && st.lookup_timer_due <= *due))
    return;
  st.lookup_timer = st.next_lookup_timer++;
  st.lookup_timer_due = *due;
  auto wait = *due - self->clock().now();
  self->delayed_send(self, std::max(wait, decltype(wait)::zero()),
                     cold_wait_atom::value, st.lookup_timer);
}

/// Queues a wait of `s` for `span` in `q` (`cache_service_state`).
void wait_in(self_ptr self, cache_service_state::lookup_queue& q, keep_fn keep,
             const lookup_ptr& s, std::chrono::milliseconds span) {
  prune(q, keep);
  q.emplace_back(self->clock().now() + span, s);
  arm_lookup_timer(self);
}

/// Runs `over` for each wait of `q` due by `now` that `keep` needs, oldest
/// first.
template <class F>
void expire(cache_service_state::lookup_queue& q,
            caf::actor_clock::time_point now, keep_fn keep, F over) {
  while (!q.empty()) {
    auto s = waiting(q.front().second, keep);
    if (s && q.front().first > now)
      return; // the oldest still needed is not due yet
    q.pop_front();
    if (s)
      over(s);
  }
}

/// RAM answered with a usable prefix while cold tiers have not: they get
/// `cold_wait_ms` more, then the lookup goes on without them. Usually
/// their answers are already queued behind RAM's, and the wait ends
/// unseen (it is dropped from the queue when reached).
void wait_for_cold(self_ptr self, const lookup_ptr& s) {
  auto& st = self->state;
  if (!s->open() || st.cold_wait_ms == 0
      || s->ram->root().getUsableTokens() == 0)
    return;
  wait_in(self, st.cold_waits, keeps_cold_wait, s,
          std::chrono::milliseconds{st.cold_wait_ms});
}

/// The cold tiers' question for a prompt: candidates longer than
/// `better_than`.
sealed<msg::FindPrefix> find_message(capnp::Text::Reader ns,
                                     capnp::List<uint32_t>::Reader prompt,
                                     uint64_t better_than) {
  msg::draft<msg::FindPrefix> d;
  d.root().setNs(ns);
  d.root().setPrompt(prompt);
  d.root().setBetterThan(better_than);
  return std::move(d).seal();
}

/// Asks every cold tier at once for its longest usable prefix of the
/// prompt longer than `better_than`, each request timing out after
/// `timeout`; `done` gets each tier's answer by its index (nothing for a
/// tier that failed or missed the deadline).
void find_all(self_ptr self, const std::vector<cold_tier_ref>& cold,
              const sealed<msg::FindPrefix>& q, caf::duration timeout,
              std::function<void(size_t, found_reply)> done) {
  for (size_t i = 0; i < cold.size(); ++i)
    self->request<urgent>(cold[i].actor, timeout, q)
      .then([done, i](const sealed<msg::FindPrefixReply>& r) { done(i, r); },
            [done, i](const caf::error&) { done(i, std::nullopt); });
}

/// Answers each request of lookup `s` still waiting for its tier with a
/// timeout, as CAF's request timeout would: its handler runs (finding the
/// lookup decided) and is freed. A tier that stays alive and never answers
/// thus leaves no handler behind; one that answers later finds none (CAF
/// drops that answer).
void release_handlers(self_ptr self, const lookup_ptr& s) {
  for (auto& id : s->asked)
    if (id.is_response())
      self->enqueue(
        nullptr, std::exchange(id, caf::message_id{}),
        caf::make_message(caf::make_error(caf::sec::request_timeout)),
        self->context());
}

/// The tier deadline of lookup `s` is over: a tier that has not answered
/// is no candidate; without RAM's answer the acquire fails (naming RAM).
/// The requests still waiting are then released.
void deadline_over(self_ptr self, const lookup_ptr& s) {
  if (s->open() && !s->ram)
    deliver(s, timed_out(self, caf::make_error(caf::sec::request_timeout),
                         "the RAM tier's lookup"));
  else if (s->open())
    choose(self, s);
  release_handlers(self, s);
}

/// Asks RAM (the engine's request as it came) and every cold tier at once
/// for the longest usable prefix. The lookup waits in the facade's
/// `deadlines` queue (one timer for all lookups, cache_service.hpp), and an
/// answer after its deadline finds the lookup decided and changes nothing.
/// The requests carry no CAF timeout: in CAF 0.17 each one is an entry
/// pushed to the clock thread (waking it), kept after the answer and sent
/// back to the facade as a message when due, two per RAM hit. The facade's
/// deadline stands in for them: it answers each request still waiting with
/// a timeout (`release_handlers`), which frees its handler, so a stalled
/// tier does not make the facade grow per acquire. A tier that dies
/// answers its requests with an error (CAF bounces them).
void search_tiers(self_ptr self, const lookup_ptr& s) {
  auto& t = self->state.tiers;
  // No CAF timeout: the lookup's deadline releases them (above).
  constexpr auto untimed = caf::duration{caf::infinite};
  s->cold = t.cold;
  s->found.resize(s->cold.size());
  s->left = 1 + s->cold.size();
  s->asked.resize(s->left);
  wait_in(self, self->state.deadlines, keeps_deadline, s, tier_timeout(self));
  auto h = self->request<urgent>(t.ram, untimed, s->request);
  s->asked[0] = h.id();
  h.then(
    [self, s](const sealed<msg::AcquireStateReply>& r) {
      s->asked[0] = {};
      s->ram = r;
      decide(self, s);
      wait_for_cold(self, s);
    },
    [s](caf::error& err) {
      s->asked[0] = {};
      deliver(s, std::move(err));
    });
  if (s->cold.empty())
    return;
  auto q = s->request.root().getRequest();
  auto find = find_message(q.getNs(), q.getPrompt(), 0);
  for (size_t i = 0; i < s->cold.size(); ++i) {
    auto c = self->request<urgent>(s->cold[i].actor, untimed, find);
    s->asked[i + 1] = c.id();
    auto got = [self, s, i](found_reply r) {
      s->asked[i + 1] = {};
      s->found[i] = std::move(r);
      decide(self, s);
    };
    c.then([got](const sealed<msg::FindPrefixReply>& r) { got(r); },
           [got](const caf::error&) { got(std::nullopt); });
  }
}

using prefetch_promise =
  caf::typed_response_promise<sealed<msg::PrefetchPrefixReply>>;

/// One prefetch in flight.
struct prefetch_run {
  sealed<msg::PrefetchPrefix> request;
  prefetch_promise rp;
  uint64_t ram_tokens = 0;
  std::vector<cold_tier_ref> cold;
  std::vector<found_reply> found;
  /// Candidates left to read, the winner last.
  std::vector<size_t> chain;
  size_t left = 0;
};

using prefetch_ptr = std::shared_ptr<prefetch_run>;

/// The cold tier's request: the engine's, with `betterThan` set.
sealed<msg::PrefetchPrefix> cold_request(msg::PrefetchPrefix::Reader in,
                                         uint64_t better_than) {
  msg::draft<msg::PrefetchPrefix> d;
  d.root().setNs(in.getNs());
  d.root().setPrompt(in.getPrompt());
  if (in.getSession().isId())
    d.root().getSession().setId(in.getSession().getId());
  d.root().setBetterThan(better_than);
  return std::move(d).seal();
}

/// The engine's answer: lease, counts, tokens, and what RAM held.
sealed<msg::PrefetchPrefixReply>
prefetch_answer(uint64_t lease, msg::PrefetchPrefixReply::Reader in,
                uint64_t ram_tokens) {
  msg::draft<msg::PrefetchPrefixReply> d;
  d.root().setLeaseId(lease);
  d.root().setReadsStarted(in.getReadsStarted());
  d.root().setReadsJoined(in.getReadsJoined());
  d.root().setTokens(in.getTokens());
  d.root().setRamTokens(ram_tokens);
  return std::move(d).seal();
}

/// Asks the tier at the chain's end for the read of the prompt's best
/// prefix longer than what the candidate before it (or RAM) holds,
/// installs what it restored into RAM under a lease of the facade's own,
/// and answers the engine. Lease 0 and no reads when nothing was worth
/// reading; a tier that fails or misses the deadline passes the read to
/// the candidate it beat (the last one's error reaches the engine).
void read_cold(self_ptr self, const prefetch_ptr& p) {
  auto i = p->chain.back();
  p->chain.pop_back();
  auto floor = p->chain.empty()
                 ? p->ram_tokens
                 : p->found[p->chain.back()]->root().getUsableTokens();
  auto tier = p->cold[i];
  self
    ->request<urgent>(tier.actor, urgent_timeout(self),
                      cold_request(p->request.root(), floor))
    .then(
      [self, p, tier](const sealed<msg::PrefetchPrefixReply>& r) {
        auto in = r.root();
        if (in.getLeaseId() == 0) {
          p->rp.deliver(prefetch_answer(0, in, p->ram_tokens));
          return;
        }
        // The engine gets a lease of the facade's own and the counts; the
        // state goes to RAM under that lease.
        auto lease = self->state.next_lease++;
        self->state.leases[lease] = lease_ref{tier.actor, in.getLeaseId()};
        auto out = prefetch_answer(lease, in, p->ram_tokens);
        auto e = tiers::read_entry(r, in.getEntry());
        if (!e || !fits_model(self, *e)) {
          p->rp.deliver(out);
          return;
        }
        install(self, *e, tier.tag, lease, [p, out] { p->rp.deliver(out); });
      },
      [self, p](caf::error& err) {
        if (!p->chain.empty())
          read_cold(self, p);
        else
          p->rp.deliver(std::move(err));
      });
}

/// With one cold tier its prefetch decides itself (one round trip); with
/// more, their finds pick the tier to read from by the strictly-longer
/// rule first.
void choose_cold(self_ptr self, const prefetch_ptr& p) {
  if (p->cold.size() == 1) {
    p->found.resize(1);
    p->chain = {0};
    return read_cold(self, p);
  }
  auto in = p->request.root();
  p->found.resize(p->cold.size());
  p->left = p->cold.size();
  find_all(self, p->cold,
           find_message(in.getNs(), in.getPrompt(), p->ram_tokens),
           urgent_timeout(self), [self, p](size_t i, found_reply r) {
             p->found[i] = std::move(r);
             if (--p->left > 0)
               return;
             p->chain = record_holders(p->found, p->ram_tokens);
             if (!p->chain.empty())
               return read_cold(self, p);
             msg::draft<msg::PrefetchPrefixReply> d;
             d.root().setRamTokens(p->ram_tokens);
             p->rp.deliver(std::move(d).seal());
           });
}

} // namespace

caf::result<sealed<msg::AcquireStateReply>>
acquire(self_ptr self, const sealed<msg::AcquireState>& m) {
  if (self->state.closed)
    return closed_error();
  auto s = std::make_shared<lookup>();
  s->self = self;
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

void lookup_timer_over(self_ptr self, uint64_t id) {
  auto& st = self->state;
  if (id != st.lookup_timer)
    return; // superseded by an earlier one
  st.lookup_timer = 0;
  auto now = self->clock().now();
  expire(st.cold_waits, now, keeps_cold_wait, [&](const lookup_ptr& s) {
    ++st.cold_late; // a shorter prefix may be served: counted
    choose(self, s);
  });
  expire(st.deadlines, now, keeps_deadline,
         [&](const lookup_ptr& s) { deadline_over(self, s); });
  arm_lookup_timer(self);
}

caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(self_ptr self, const sealed<msg::PrefetchPrefix>& m) {
  if (self->state.closed)
    return closed_error();
  if (self->state.tiers.cold.empty())
    return msg::draft<msg::PrefetchPrefixReply>{}.seal();
  return decoding<sealed<msg::PrefetchPrefixReply>>(
    [&]() -> caf::result<sealed<msg::PrefetchPrefixReply>> {
      // The peek is built here, where a malformed request becomes an error
      // reply; its answer is the floor of the cold read.
      msg::draft<msg::PeekPrefix> peek;
      peek.root().setNs(m.root().getNs());
      peek.root().setPrompt(m.root().getPrompt());
      auto p = std::make_shared<prefetch_run>();
      p->request = m;
      p->cold = self->state.tiers.cold;
      p->rp = self->make_response_promise<sealed<msg::PrefetchPrefixReply>>();
      self
        ->request<urgent>(self->state.tiers.ram, urgent_timeout(self),
                          std::move(peek).seal())
        .then(
          [self, p](const sealed<msg::PeekPrefixReply>& r) {
            p->ram_tokens = r.root().getTokens();
            choose_cold(self, p);
          },
          [p](caf::error& err) { p->rp.deliver(std::move(err)); });
      return p->rp;
    });
}

caf::result<sealed<msg::ReleasePrefetchReply>>
release_prefetch(self_ptr self, const sealed<msg::ReleasePrefetch>& m) {
  auto lease = m.root().getLeaseId();
  if (lease == 0) {
    // The lease of a prefetch that started nothing: no interest to end.
    msg::draft<msg::ReleasePrefetchReply> d;
    d.root().setReleased(false);
    return std::move(d).seal();
  }
  auto& leases = self->state.leases;
  if (auto i = leases.find(lease); i != leases.end()) {
    msg::draft<msg::ReleasePrefetch> d;
    d.root().setLeaseId(i->second.tier_lease);
    self->request(i->second.tier, tier_timeout(self), std::move(d).seal())
      .then([](const sealed<msg::ReleasePrefetchReply>&) {},
            [](const caf::error&) {});
    leases.erase(i);
  }
  // RAM holds the installed donor under the facade's lease.
  return self->delegate(self->state.tiers.ram, m);
}

} // namespace kvtier::actors::ops
