#include "actors/ssd_tier_actor.hpp"
#include "actors/ssd_tier_ops.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "messages/log.hpp"
#include "tiers/entry_message.hpp"

#include <caf/send.hpp>

#include <iterator>
#include <utility>

namespace kvtier::actors {

using namespace ssd_ops;

tiers::ssd::completion_sink completion_relay::sink() {
  return [self = shared_from_this()](tiers::ssd::io_completion c) {
    self->push(std::move(c));
  };
}

void completion_relay::push(tiers::ssd::io_completion c) {
  caf::strong_actor_ptr to;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!attached_) {
      early_.push_back(std::move(c));
      return;
    }
    to = target_.lock();
  }
  if (to)
    caf::anon_send(caf::actor_cast<ssd_tier_actor>(to),
                   io_done{c.tag, std::move(c.err), c.bytes});
}

void completion_relay::attach(caf::weak_actor_ptr target) {
  std::vector<tiers::ssd::io_completion> early;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    target_ = std::move(target);
    attached_ = true;
    early.swap(early_);
  }
  for (auto& c : early)
    push(std::move(c));
}

void route_reports(tiers::ssd::ssd_config& cfg, ssd_parts& parts) {
  cfg.on_write = [p = &parts](const tiers::ssd::write_event& e) {
    if (p->on_write)
      p->on_write(e);
  };
  cfg.on_remove = [p = &parts](const tiers::ssd::remove_event& e) {
    if (p->on_remove)
      p->on_remove(e);
  };
}

namespace {

using tiers::ssd::write_reason;

write_reason reason_of(msg::SpillReason r) {
  switch (r) {
    case msg::SpillReason::DEMOTE: return write_reason::demotion;
    case msg::SpillReason::SPILL: return write_reason::spill;
    case msg::SpillReason::CHECKPOINT: return write_reason::checkpoint;
    default: return write_reason::snapshot;
  }
}

sealed<msg::SpillEntryReply> spill_reply(uint64_t order,
                                         msg::SpillOutcome outcome,
                                         const caf::error& err = {}) {
  msg::draft<msg::SpillEntryReply> d;
  d.root().setOrderId(order);
  d.root().setOutcome(outcome);
  write_error(d.root().initError(), err);
  return std::move(d).seal();
}

msg::SpillOutcome outcome_of(tiers::ssd::write_outcome o) {
  using tiers::ssd::write_outcome;
  switch (o) {
    case write_outcome::durable: return msg::SpillOutcome::DURABLE;
    case write_outcome::failed: return msg::SpillOutcome::FAILED;
    case write_outcome::dropped: return msg::SpillOutcome::DROPPED;
    case write_outcome::superseded: return msg::SpillOutcome::SUPERSEDED;
    case write_outcome::cancelled: return msg::SpillOutcome::CANCELLED;
    case write_outcome::abandoned: return msg::SpillOutcome::REFUSED;
    case write_outcome::given_up: return msg::SpillOutcome::GIVEN_UP;
  }
  return msg::SpillOutcome::FAILED;
}

std::chrono::milliseconds backoff(ssd_tier_pointer self, uint32_t attempts) {
  auto shift = std::min<uint32_t>(attempts > 0 ? attempts - 1 : 0, 6);
  return std::chrono::milliseconds{self->state.parts->retry_backoff_ms
                                   << shift};
}

/// One outcome of a notify order, to the actor that ordered it. Normal
/// priority, like SsdEvictEvent: one FIFO, so a durable outcome always
/// comes before the event of that file's removal.
void send_settled(ssd_tier_pointer self, const caf::weak_actor_ptr& to,
                  uint64_t order, msg::SpillOutcome outcome,
                  const caf::error& err, uint32_t attempts) {
  auto dest = to.lock();
  if (!dest)
    return;
  msg::draft<msg::SpillSettled> d;
  d.root().setOrderId(order);
  d.root().setOutcome(outcome);
  write_error(d.root().initError(), err);
  d.root().setAttempts(attempts);
  self->send(caf::actor_cast<ram_tier_actor>(dest), std::move(d).seal());
}

/// Tells the feed of a change of prefix file (ns, tokens): durable, with
/// the file's header, when the tier holds one, else removed.
void tell_feed(ssd_tier_pointer self, const std::string& ns,
               const tiers::token_seq& tokens, bool durable) {
  auto& feed = self->state.feed;
  if (!feed || tokens.empty())
    return;
  feed_change c;
  c.tier = static_cast<uint8_t>(msg::FeedTier::SSD);
  c.kind = static_cast<uint8_t>(msg::FeedKind::REMOVED);
  if (durable) {
    auto f = tier(self).find(tiers::storage_key::prefix(ns, tokens));
    if (!f || !f->header)
      return; // gone again already: its removal follows
    c.kind = static_cast<uint8_t>(msg::FeedKind::DURABLE);
    for (auto& l : f->header->layers)
      c.bytes += l.payload.length;
    c.trimmable = tiers::ssd::header_floor(*f->header) < tokens.size();
  }
  c.ns = ns;
  c.key.assign(tokens.begin(), tokens.end());
  self->send(feed, std::move(c));
}

/// Tells the checkpoints actor of the checkpoint files in `found` the
/// tier still holds (one indexed in a batch may be gone by its end: the
/// cap at the scan's end, a removal); before it is attached, keeps them.
void tell_found(ssd_tier_pointer self,
                std::vector<tiers::checkpoint_file> found) {
  auto& st = self->state;
  auto to = st.checkpoints.lock();
  if (!to) {
    std::move(found.begin(), found.end(), std::back_inserter(st.found_early));
    return;
  }
  found_checkpoints m;
  for (auto& f : found)
    if (tier(self).holds(f))
      m.files.push_back({f.key.request, f.key.attempt, std::move(f.key.ns),
                         std::move(f.key.tokens), f.write_id});
  // Before any removal event of these files (one FIFO).
  if (!m.files.empty())
    self->send(caf::actor_cast<checkpoints_actor>(to), std::move(m));
}

/// One batch of the start-up scan; the next is sent while it runs.
void index_next_batch(ssd_tier_pointer self) {
  auto& t = tier(self);
  std::vector<std::pair<std::string, tiers::token_seq>> told;
  std::vector<tiers::checkpoint_file> found;
  auto indexed = [&](const tiers::ssd::entry_header& h) {
    if (self->state.feed && h.kind == tiers::key_kind::prefix)
      told.emplace_back(h.ns, h.tokens);
    if (h.kind == tiers::key_kind::checkpoint)
      found.push_back({h.key(), h.write_id});
  };
  bool done = t.index_step(self->state.parts->index_batch, indexed);
  for (auto& [ns, tokens] : told)
    tell_feed(self, ns, tokens, true);
  if (!found.empty())
    tell_found(self, std::move(found));
  if (!done) {
    self->send(self, index_step_atom::value);
    return;
  }
  log::info("kvtier ssd: indexed " + t.root() + " in "
            + std::to_string(t.stats().index_ms)
            + " ms: " + tiers::ssd::scan_summary(t.scan_result()));
}

void attach_feed(ssd_tier_pointer self, feed_actor f) {
  self->state.feed = std::move(f);
  for (auto& p : tier(self).saved_prefixes())
    tell_feed(self, p.ns, p.tokens, true);
}

/// The tier's report on one queued write: the order's answer (at the
/// first report) or its event (every report); a failed write is tried
/// again after its backoff; a flush running collects the failure.
void written(ssd_tier_pointer self, const tiers::ssd::write_event& e) {
  using tiers::ssd::write_outcome;
  auto& st = self->state;
  if (e.outcome == write_outcome::durable
      && e.reason != tiers::ssd::write_reason::checkpoint)
    tell_feed(self, e.ns, e.tokens, true);
  bool failure =
    e.outcome == write_outcome::failed || e.outcome == write_outcome::given_up;
  if (failure && st.flushing)
    note_failure(*st.flushing, e.id, e.err);
  if (e.outcome == write_outcome::failed
      || (e.outcome == write_outcome::given_up && !st.flushing))
    st.unreported[e.id] = {e.err, e.outcome == write_outcome::given_up};
  else
    st.unreported.erase(e.id);
  auto w = st.waiting.find(e.id);
  if (w != st.waiting.end()) {
    auto outcome = outcome_of(e.outcome);
    if (w->second.notify)
      send_settled(self, w->second.notify, w->second.order, outcome, e.err,
                   e.attempts);
    else if (w->second.rp) {
      w->second.rp->deliver(spill_reply(w->second.order, outcome, e.err));
      w->second.rp.reset();
    }
    if (e.outcome != write_outcome::failed)
      st.waiting.erase(w);
  }
  if (e.outcome == write_outcome::failed && !tier(self).closed())
    self->delayed_send(self, backoff(self, e.attempts), retry_write_atom::value,
                       e.id);
  if (st.flushing && st.flushing->awaiting.erase(e.id) > 0) {
    // A write the flush waited for was tried again (or settled otherwise):
    // once each was, the next round runs (from the mailbox: this runs
    // inside the tier).
    st.flushing->waited.insert(e.id);
    if (st.flushing->awaiting.empty())
      self->send(self, flush_round_atom::value);
  }
}

msg::SsdEvictReason reason_of(tiers::ssd::removal_reason r) {
  using tiers::ssd::removal_reason;
  switch (r) {
    case removal_reason::evicted: return msg::SsdEvictReason::EVICTED;
    case removal_reason::corrupt: return msg::SsdEvictReason::CORRUPT;
    case removal_reason::gone: return msg::SsdEvictReason::GONE;
    case removal_reason::erased: return msg::SsdEvictReason::ERASED;
    case removal_reason::superseded: return msg::SsdEvictReason::SUPERSEDED;
  }
  return msg::SsdEvictReason::GONE;
}

/// The tier stopped holding a file: one SsdEvictEvent to the RAM actor,
/// or, for a checkpoint file (by its header's key kind; RAM never holds
/// one), to the checkpoints actor. Nobody attached (yet): nobody holds a
/// copy it believes durable.
void removed(ssd_tier_pointer self, const tiers::ssd::remove_event& e) {
  bool checkpoint = e.kind == tiers::key_kind::checkpoint;
  if (e.kind == tiers::key_kind::prefix)
    tell_feed(self, e.ns, e.tokens, false);
  auto to = (checkpoint ? self->state.checkpoints : self->state.ram).lock();
  if (!to)
    return;
  msg::draft<msg::SsdEvictEvent> d;
  tiers::write_key(d.root().initKey(), e.key());
  d.root().setReason(reason_of(e.reason));
  d.root().setFileBytes(e.bytes);
  // Normal priority, like the replies to the receiver's spill orders: one
  // FIFO, so this follows every reply that called the file durable.
  if (checkpoint)
    self->send(caf::actor_cast<checkpoints_actor>(to), std::move(d).seal());
  else
    self->send(caf::actor_cast<ram_tier_actor>(to), std::move(d).seal());
}

/// The storage key a spill order writes: a checkpoint key only for reason
/// checkpoint, and reason checkpoint only for a checkpoint key.
caf::expected<tiers::storage_key> spill_key(msg::SpillEntry::Reader m,
                                            const tiers::entry& e) {
  bool checkpoint = m.getKind().isCheckpoint();
  if (checkpoint != (m.getReason() == msg::SpillReason::CHECKPOINT))
    return make_error(ec::invalid_argument,
                      "a checkpoint write needs a checkpoint key and the "
                      "reason checkpoint");
  if (!checkpoint)
    return tiers::storage_key::prefix(e.ns, e.tokens);
  auto c = m.getKind().getCheckpoint();
  return tiers::storage_key::checkpoint(c.getRequest(), c.getAttempt(), e.ns,
                                        e.tokens);
}

/// The storage key of an object write: the object's exact key, for any
/// reason but checkpoint.
caf::expected<tiers::storage_key> object_key(msg::SpillEntry::Reader m) {
  if (m.getReason() == msg::SpillReason::CHECKPOINT
      || m.getKind().isCheckpoint())
    return make_error(ec::invalid_argument,
                      "an object write with a checkpoint reason or key");
  return tiers::storage_key::object(m.getItem().getObject().getKey().cStr());
}

/// What a spill order writes: a prefix entry or checkpoint, or an object
/// (its tensors as attachments under its key, no tokens).
caf::expected<tiers::entry> spill_entry(const sealed<msg::SpillEntry>& m) {
  if (m.root().getItem().isEntry())
    return tiers::read_entry(m, m.root().getItem().getEntry());
  auto obj = m.root().getItem().getObject();
  auto tensors = tiers::read_attachments(m, obj.getAttachments());
  if (!tensors)
    return std::move(tensors.error());
  tiers::entry e;
  e.ns = obj.getKey().cStr();
  e.attachments = std::move(*tensors);
  return e;
}

caf::result<sealed<msg::SpillEntryReply>>
spill(ssd_tier_pointer self, const sealed<msg::SpillEntry>& m) {
  auto order = m.root().getOrderId();
  auto notify = m.root().getNotify()
                  ? caf::actor_cast<caf::weak_actor_ptr>(self->current_sender())
                  : caf::weak_actor_ptr{};
  // An outcome known now: the answer itself, or (notify) the first and
  // last event, the answer only acknowledging.
  auto now = [&](msg::SpillOutcome o, const caf::error& err = {}) {
    if (!notify)
      return spill_reply(order, o, err);
    send_settled(self, notify, order, o, err, 0);
    return spill_reply(order, msg::SpillOutcome::QUEUED);
  };
  auto e = spill_entry(m);
  if (!e)
    return std::move(e.error());
  e->priority = std::min(m.root().getPriority(), tiers::max_priority);
  auto key = m.root().getItem().isObject() ? object_key(m.root())
                                           : spill_key(m.root(), *e);
  if (!key)
    return now(msg::SpillOutcome::REFUSED, key.error());
  if (tier(self).contains(*key))
    return now(msg::SpillOutcome::ALREADY_DURABLE);
  auto id =
    tier(self).enqueue(std::move(*e), reason_of(m.root().getReason()), *key);
  if (!id) {
    // Not failures: a close, a spill the admission rule skips, a write
    // over the daily budget. One the owner keeps in RAM (a flush's
    // snapshot, a demotion, a checkpoint) and the budget refused is
    // named by the next flush's answer.
    auto& err = id.error();
    if (err == ec::over_budget
        && m.root().getReason() != msg::SpillReason::SPILL) {
      ++self->state.over_budget.writes;
      self->state.over_budget.last = err;
    } else if (err != ec::closed && err != ec::cancelled
               && err != ec::over_budget)
      ++self->state.failures;
    return now(msg::SpillOutcome::REFUSED, err);
  }
  if (notify) {
    self->state.waiting.emplace(
      *id, ssd_tier_state::waiter{m.root().getReason(), order, {}, notify});
    return spill_reply(order, msg::SpillOutcome::QUEUED);
  }
  auto rp = self->make_response_promise<sealed<msg::SpillEntryReply>>();
  self->state.waiting.emplace(
    *id, ssd_tier_state::waiter{m.root().getReason(), order, rp, {}});
  return rp;
}

/// The longest usable saved prefix of `prompt` in `ns` longer than
/// `better_than`, from the index only; the prompt is read in place.
sealed<msg::FindPrefixReply> find(ssd_tier_pointer self, capnp::Text::Reader ns,
                                  capnp::List<uint32_t>::Reader prompt_list,
                                  uint64_t better_than = 0) {
  tiers::tokens_of prompt{prompt_list};
  msg::draft<msg::FindPrefixReply> d;
  auto hit = tier(self).find(prompt.span(), ns.cStr());
  if (hit && hit->length > better_than) {
    d.root().setUsableTokens(hit->length);
    tiers::write_key(d.root().initKey(), tier(self).key_of(*hit));
  }
  return std::move(d).seal();
}

/// A prompt whose best usable prefix on SSD is `usable` tokens of `key`.
tiers::token_seq prompt_for(tiers::token_seq key, uint64_t usable) {
  if (usable < key.size())
    key.resize(usable + 1);
  else
    key.push_back(0);
  return key;
}

sealed<msg::RestoreEntryReply> restore_reply(caf::expected<tiers::entry> e,
                                             bool coalesced,
                                             bool durable = false) {
  msg::draft<msg::RestoreEntryReply> d;
  d.root().setCoalesced(coalesced);
  d.root().setDurable(e && durable);
  if (e)
    tiers::write_entry(d, d.root().initEntry(), *e);
  else
    write_error(d.root().initFailed(), e.error());
  return std::move(d).seal();
}

caf::result<sealed<msg::RestoreEntryReply>>
restore(ssd_tier_pointer self, msg::RestoreEntry::Reader m) {
  auto key = tiers::read_key(m.getKey());
  auto& ns = key.ns;
  auto usable = m.getUsableTokens();
  // An object whose write is pending is served from the write-behind
  // queue (its bytes are there; no file is durable yet).
  if (key.kind == tiers::key_kind::object)
    if (auto pending = tier(self).queued(key))
      return restore_reply(std::move(*pending), false, false);
  // A checkpoint or an object is read by its exact key, whole; a prefix
  // through the prefix index (which holds neither).
  auto match = key.kind != tiers::key_kind::prefix
                 ? tier(self).find(key)
                 : tier(self).find(prompt_for(key.tokens, usable), ns);
  if (!match || match->length != usable)
    return restore_reply(
      make_error(ec::not_found,
                 "no file serves " + ns + " at " + std::to_string(usable)),
      false);
  auto rp = self->make_response_promise<sealed<msg::RestoreEntryReply>>();
  // A held result completes inside `restore` (joined); otherwise the
  // result tells whether this restore joined a read in flight.
  struct how {
    bool in_call = true;
    bool joined = false;
  };
  auto h = std::make_shared<how>();
  auto file_key = tier(self).key_of(*match);
  auto read = tier(self).restore(
    *match, [self, rp, h, file_key](caf::expected<tiers::entry> e) mutable {
      // Durable as of this reply: a later removal of the file is reported
      // after it, over the same FIFO.
      bool durable = tier(self).contains(file_key);
      rp.deliver(restore_reply(std::move(e), h->in_call || h->joined, durable));
    });
  h->in_call = false;
  h->joined = read.joined;
  return rp;
}

caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(ssd_tier_pointer self, msg::PrefetchPrefix::Reader m) {
  tiers::tokens_of prompt{m.getPrompt()};
  auto match = tier(self).find(prompt.span(), m.getNs().cStr());
  // Nothing longer than what RAM holds: no read, no lease (an empty reply).
  auto lease =
    match ? tier(self).prefetch(*match, m.getBetterThan()) : std::nullopt;
  if (!lease)
    return msg::draft<msg::PrefetchPrefixReply>{}.seal();
  bool started = lease->read.started;
  auto rp = self->make_response_promise<sealed<msg::PrefetchPrefixReply>>();
  auto id = lease->id;
  auto tokens = match->length;
  // A read that does not answer in time ends its lease (prefetch_timeout):
  // nobody would ever release it.
  self->state.prefetching.emplace(id, rp);
  self->delayed_send(self,
                     std::chrono::milliseconds{std::max<uint64_t>(
                       self->state.parts->deadline_ms / 4, 1)},
                     prefetch_deadline_atom::value, id);
  tier(self).restore(
    *match, [self, id, started, tokens](caf::expected<tiers::entry> e) mutable {
      auto p = self->state.prefetching.find(id);
      if (p == self->state.prefetching.end())
        return; // answered at its deadline; the lease ended then
      auto rp = std::move(p->second);
      self->state.prefetching.erase(p);
      msg::draft<msg::PrefetchPrefixReply> d;
      if (!e) {
        tier(self).release(id);
        rp.deliver(std::move(d).seal());
        return;
      }
      d.root().setLeaseId(id);
      d.root().setReadsStarted(started ? 1 : 0);
      d.root().setReadsJoined(started ? 0 : 1);
      d.root().setTokens(tokens);
      tiers::write_entry(d, d.root().initEntry(), *e);
      rp.deliver(std::move(d).seal());
    });
  return rp;
}

/// A prefetch whose read did not answer in time: its lease ends (a read
/// kept for it alone is cancelled) and it answers that nothing was read.
void prefetch_timeout(ssd_tier_pointer self, uint64_t lease) {
  auto p = self->state.prefetching.find(lease);
  if (p == self->state.prefetching.end())
    return;
  auto rp = std::move(p->second);
  self->state.prefetching.erase(p);
  tier(self).release(lease);
  rp.deliver(msg::draft<msg::PrefetchPrefixReply>{}.seal());
}

caf::result<sealed<msg::RemoveCheckpointsReply>>
remove_checkpoints(ssd_tier_pointer self, msg::RemoveCheckpoints::Reader m) {
  auto rp = self->make_response_promise<sealed<msg::RemoveCheckpointsReply>>();
  tier(self).remove_checkpoints(m.getRequest(), m.getNs().cStr(),
                                [rp](const caf::error& err) mutable {
                                  msg::draft<msg::RemoveCheckpointsReply> d;
                                  d.root().setDurable(!err);
                                  write_error(d.root().initError(), err);
                                  rp.deliver(std::move(d).seal());
                                });
  return rp;
}

/// The service's close, after its flush: the tier releases what it holds
/// (tiers/ssd/ssd_tier.hpp, `close`); answered once no write runs, with
/// the writes released unwritten (durable only when there were none).
caf::result<sealed<msg::CloseServiceReply>> close(ssd_tier_pointer self) {
  auto rp = self->make_response_promise<sealed<msg::CloseServiceReply>>();
  tier(self).close([rp](uint64_t abandoned) mutable {
    msg::draft<msg::CloseServiceReply> d;
    auto out = d.root().initResult();
    out.setDurable(abandoned == 0);
    out.setAbandoned(abandoned);
    if (abandoned > 0)
      write_error(
        out.initErrors(1)[0],
        make_error(ec::io_error, std::to_string(abandoned)
                                   + " writes released unwritten at close"));
    rp.deliver(std::move(d).seal());
  });
  return rp;
}

sealed<msg::ReadStatsReply> stats(ssd_tier_pointer self) {
  // From the write-behind queue itself: every write not settled (queued,
  // running, or failed and waiting for its retry), whoever ordered it.
  auto b = tier(self).backlog();
  msg::draft<msg::ReadStatsReply> d;
  d.root().setPendingSnapshots(b.snapshots);
  d.root().setPendingSpills(b.spills);
  d.root().setPendingCheckpointWrites(b.checkpoints);
  d.root().setPendingBytes(b.bytes);
  d.root().setRetryingWrites(b.retrying);
  return std::move(d).seal();
}

/// The SSD part: the engine's counters of the same names, its cap and
/// the buffers its running writes and reads hold.
tiers::report::ssd ssd_part(ssd_tier_pointer self) {
  auto stats = tier(self).stats();
  auto part = tiers::report::ssd::from(stats);
  part.cap_bytes = tier(self).byte_cap();
  part.io_buffer_bytes = tier(self).io_buffer_bytes();
  // Seconds, Prometheus' base unit; the log line at the end has the ms.
  part.index_seconds = (stats.index_ms + 999) / 1000;
  return part;
}

sealed<msg::ReadReportReply> report(ssd_tier_pointer self) {
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(ssd_part(self)).write(d.root());
  auto& c = self->state.parts->engine->counts();
  auto s = tier(self).stats();
  auto io = d.root().initIo(1)[0];
  io.setTier(msg::Tier::SSD);
  io.setReads(c.reads);
  io.setWrites(c.writes);
  io.setBytesRead(s.bytes_read);
  io.setBytesWritten(s.bytes_written);
  io.setFailures(s.writes_failed + s.restores_failed + self->state.failures);
  io.setSubmitted(c.submitted());
  io.setSyncs(c.syncs);
  io.setCalls(c.calls);
  return std::move(d).seal();
}

sealed<msg::ListSavedPrefixesReply> saved(ssd_tier_pointer self) {
  auto all = tier(self).saved_prefixes();
  msg::draft<msg::ListSavedPrefixesReply> d;
  auto out = d.root().initPrefixes(all.size());
  for (size_t i = 0; i < all.size(); ++i)
    tiers::write_key(out[i], all[i].ns, all[i].tokens);
  return std::move(d).seal();
}

/// A new byte cap: answered once the files it evicted are gone from disk.
caf::result<sealed<msg::SetSsdLimitReply>>
set_limit(ssd_tier_pointer self, const sealed<msg::SetSsdLimit>& m) {
  auto rp = self->make_response_promise<sealed<msg::SetSsdLimitReply>>();
  tier(self).set_byte_cap(
    m.root().getCapBytes(), [self, rp](uint64_t evicted) mutable {
      msg::draft<msg::SetSsdLimitReply> d;
      d.root().setEvicted(evicted);
      d.root().setCapBytes(tier(self).byte_cap());
      d.root().setFileBytes(tier(self).stats().file_bytes);
      rp.deliver(std::move(d).seal());
    });
  return rp;
}

template <class Root>
sealed<Root> bool_reply(bool value, void (Root::Builder::*set)(bool)) {
  msg::draft<Root> d;
  (d.root().*set)(value);
  return std::move(d).seal();
}

} // namespace

ssd_tier_actor::behavior_type ssd_tier(ssd_tier_pointer self,
                                       std::shared_ptr<ssd_parts> parts) {
  guard_signals(self, "ssd tier");
  self->state.parts = std::move(parts);
  self->state.parts->on_write = [self](const tiers::ssd::write_event& e) {
    written(self, e);
  };
  self->state.parts->on_remove = [self](const tiers::ssd::remove_event& e) {
    removed(self, e);
  };
  self->state.parts->relay->attach(caf::actor_cast<caf::weak_actor_ptr>(self));
  if (tier(self).indexing())
    self->send(self, index_step_atom::value);
  return {
    [self](const sealed<msg::FindPrefix>& m) {
      return decoding<sealed<msg::FindPrefixReply>>([&] {
        auto r = m.root();
        return find(self, r.getNs(), r.getPrompt(), r.getBetterThan());
      });
    },
    [self](const sealed<msg::RestoreEntry>& m) {
      return decoding<sealed<msg::RestoreEntryReply>>(
        [&] { return restore(self, m.root()); });
    },
    [self](const sealed<msg::SpillEntry>& m) {
      return decoding<sealed<msg::SpillEntryReply>>(
        [&] { return spill(self, m); });
    },
    [self](const sealed<msg::PrefetchPrefix>& m) {
      return decoding<sealed<msg::PrefetchPrefixReply>>(
        [&] { return prefetch(self, m.root()); });
    },
    [self](const sealed<msg::ReleasePrefetch>& m) {
      tier(self).release(m.root().getLeaseId());
      return bool_reply<msg::ReleasePrefetchReply>(
        true, &msg::ReleasePrefetchReply::Builder::setReleased);
    },
    [self](const sealed<msg::EraseEntry>& m) {
      return decoding<sealed<msg::EraseEntryReply>>([&] {
        return bool_reply<msg::EraseEntryReply>(
          tier(self).erase(tiers::read_key(m.root().getKey())),
          &msg::EraseEntryReply::Builder::setErased);
      });
    },
    [self](const sealed<msg::RemoveCheckpoints>& m) {
      return decoding<sealed<msg::RemoveCheckpointsReply>>(
        [&] { return remove_checkpoints(self, m.root()); });
    },
    [self](const sealed<msg::FlushState>&) { return flush(self); },
    [self](const sealed<msg::CloseService>&) { return close(self); },
    [self](const sealed<msg::ReadStats>&) { return stats(self); },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
    [self](const sealed<msg::ListSavedPrefixes>&) { return saved(self); },
    [self](const sealed<msg::SetSsdLimit>& m) { return set_limit(self, m); },
    [self](io_done& c) {
      tier(self).handle({c.tag, std::move(c.err), c.bytes});
    },
    [self](retry_write_atom, uint64_t id) { tier(self).retry(id); },
    [self](flush_round_atom) {
      auto& run = self->state.flushing;
      if (run && !run->in_round && run->awaiting.empty())
        flush_round(self);
    },
    [self](index_step_atom) { index_next_batch(self); },
    [self](prefetch_deadline_atom, uint64_t lease) {
      prefetch_timeout(self, lease);
    },
    [self](attach_ram_atom, const spill_listener_actor& ram) {
      self->state.ram = caf::actor_cast<caf::weak_actor_ptr>(ram);
    },
    [self](attach_ckpt_atom, const spill_listener_actor& checkpoints) {
      self->state.checkpoints =
        caf::actor_cast<caf::weak_actor_ptr>(checkpoints);
      tell_found(self, std::exchange(self->state.found_early, {}));
    },
    [self](attach_feed_atom, feed_actor f) { attach_feed(self, std::move(f)); },
  };
}

} // namespace kvtier::actors
