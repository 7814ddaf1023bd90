#include "actors/ram_tier_actor.hpp"
#include "actors/tier_counters.hpp"

#include "actors/codec.hpp"
#include "actors/ram_tier_objects.hpp"
#include "actors/ram_tier_ops.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors {

namespace {

using namespace ram_ops;
using tiers::ram_key;

std::chrono::milliseconds deadline(ram_tier_pointer self) {
  return std::chrono::milliseconds{self->state.cfg.deadline_ms};
}

/// Asks the SSD actor whether a file serves all of `key` (index only) and,
/// if one does and the item is still the one of `serial`, marks it durable
/// by that file; then calls `done`. Normal priority on purpose: the reply
/// shares the FIFO of the SSD actor's SsdEvictEvents, so a later removal of
/// that file always arrives after this mark.
void confirm_durable(ram_tier_pointer self, const ram_key& key, uint64_t serial,
                     std::function<void()> done) {
  auto n = key.tokens.size();
  auto prompt = key.tokens;
  prompt.push_back(0); // one token to forward: a usable prefix of n is all
  msg::draft<msg::FindPrefix> d;
  d.root().setNs(key.name);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  d.root().setBetterThan(n - 1);
  self->request(self->state.ssd, deadline(self), std::move(d).seal())
    .then(
      [self, key, serial, n, done](const sealed<msg::FindPrefixReply>& r) {
        auto now_item = tier(self).item(key);
        if (r.root().getUsableTokens() == n && now_item
            && now_item->serial == serial)
          tier(self).mark_durable(key, true,
                                  r.root().getKey().getTokens().size());
        done();
      },
      [done](const caf::error&) { done(); });
}

msg::PutOutcome outcome_of(const tiers::put_result& r) {
  if (!r.kept)
    return msg::PutOutcome::DROPPED_OVER_CAP;
  return r.replaced ? msg::PutOutcome::REPLACED : msg::PutOutcome::KEPT;
}

/// An acquire's RAM lookup, answered in the engine's own reply form so the
/// facade can forward it unchanged when RAM wins. The prompt is read in
/// place (no copy of its tokens).
sealed<msg::AcquireStateReply> lend(ram_tier_pointer self,
                                    msg::RequestIdentity::Reader m) {
  std::optional<std::string> session;
  if (m.getSession().isId())
    session = m.getSession().getId().cStr();
  tiers::tokens_of prompt{m.getPrompt()};
  auto hit =
    tier(self).lookup(prompt.span(), m.getNs().cStr(), session, now(self), 0);
  msg::draft<msg::AcquireStateReply> d;
  if (hit) {
    d.root().setSource(msg::Tier::RAM);
    d.root().setUsableTokens(hit->length);
    // Cut as it is written: no trimmed copy of the donor's views first;
    // keyed by the prompt (the tier keeps the donor's key in its index).
    tiers::write_entry(d, d.root().initEntry(), hit->donor, hit->ns,
                       prompt.span().first(hit->length));
    spill(self, std::move(hit->evicted)); // a leaving donor came back
  } else {
    d.root().setSource(msg::Tier::NONE);
  }
  return std::move(d).seal();
}

/// A peer's fetch from RAM: the donor trimmed as a RestoreEntryReply
/// (views of its buffers; the serving side flattens them).
sealed<msg::RestoreEntryReply> export_entry(ram_tier_pointer self,
                                            msg::FetchEntry::Reader m) {
  tiers::tokens_of prompt{m.getPrompt()};
  auto e = tier(self).export_prefix(prompt.span(), m.getNs().cStr(), now(self),
                                    m.getBetterThan());
  msg::draft<msg::RestoreEntryReply> d;
  if (e)
    tiers::write_entry(d, d.root().initEntry(), *e);
  else
    write_error(d.root().initFailed(),
                make_error(ec::not_found, "no usable prefix in RAM"));
  return std::move(d).seal();
}

caf::result<sealed<msg::PublishStateReply>>
publish(ram_tier_pointer self, const sealed<msg::PublishState>& m) {
  auto e = tiers::read_entry(m, m.root().getEntry());
  if (!e)
    return std::move(e.error());
  if (self->state.closed) {
    msg::draft<msg::PublishStateReply> d;
    d.root().setOutcome(msg::PutOutcome::DROPPED_CLOSED);
    return std::move(d).seal();
  }
  auto p =
    m.root().getProtect() ? tiers::protection::pin : tiers::protection::none;
  ram_key key{false, e->ns, e->tokens};
  auto req = m.root().getRequest();
  tiers::retention ret{req.getPriority(), req.getPinMs()};
  auto r = tier(self).put(std::move(*e), now(self), false, p, ret);
  if (!r)
    return std::move(r.error());
  if (r->kept)
    schedule_snapshot(self, key, r->serial);
  msg::draft<msg::PublishStateReply> d;
  d.root().setKept(r->kept);
  d.root().setOutcome(outcome_of(*r));
  d.root().setSuperseded(static_cast<uint32_t>(r->superseded));
  d.root().setPin(r->pin);
  d.root().setPinned(r->pinned);
  d.root().setPinRefused(r->pin_refused);
  spill(self, std::move(r->evicted));
  return std::move(d).seal();
}

caf::result<sealed<msg::InstallEntryReply>>
install(ram_tier_pointer self, const sealed<msg::InstallEntry>& m) {
  auto e = tiers::read_entry(m, m.root().getEntry());
  if (!e)
    return std::move(e.error());
  if (self->state.closed) {
    msg::draft<msg::InstallEntryReply> d;
    d.root().setOutcome(msg::PutOutcome::DROPPED_CLOSED);
    return std::move(d).seal();
  }
  ram_key key{false, e->ns, e->tokens};
  // A durable claim is confirmed with the SSD actor before it counts (the
  // file may have gone since the restore); without an SSD actor nothing
  // can remove the file, and the claim stands.
  bool claimed = m.root().getDurable();
  bool confirm = claimed && self->state.ssd;
  // Kept by the priority it came with: its file's (a restore) or its
  // donor's (a peer's fetch).
  tiers::retention keep{e->priority};
  auto r = tier(self).put(std::move(*e), now(self), claimed && !confirm,
                          tiers::protection::none, keep);
  if (!r)
    return std::move(r.error());
  if (r->kept && m.root().getInterest() != 0)
    tier(self).add_interest(key, m.root().getInterest());
  msg::draft<msg::InstallEntryReply> d;
  d.root().setKept(r->kept);
  d.root().setOutcome(outcome_of(*r));
  auto reply = std::move(d).seal();
  spill(self, std::move(r->evicted));
  if (!confirm || !r->kept)
    return reply;
  // Answered once the mark is settled, so the caller's next call sees it.
  auto rp = self->make_response_promise<sealed<msg::InstallEntryReply>>();
  confirm_durable(self, key, r->serial,
                  [rp, reply]() mutable { rp.deliver(reply); });
  return rp;
}

sealed<msg::UnprotectEntryReply> unprotect(ram_tier_pointer self,
                                           msg::UnprotectEntry::Reader m) {
  auto tokens = tiers::read_tokens(m.getKey().getTokens());
  msg::draft<msg::UnprotectEntryReply> d;
  d.root().setUnprotected(
    tier(self).unprotect(m.getKey().getNs().cStr(), tokens, m.getPin()));
  return std::move(d).seal();
}

/// Snapshots every entry and object not yet durable (each stays in RAM);
/// replies once the orders are sent (durable unless some are still held
/// back): the facade's flush of the store follows them.
caf::result<sealed<msg::FlushStateReply>>
flush_snapshots(ram_tier_pointer self) {
  if (!self->state.ssd)
    return flush_without_store(tier(self).counters().entries, "entries");
  ram_objects::snapshot(self);
  return snapshot(self); // prefix entries (ram_ops)
}

sealed<msg::ReadReportReply> report(ram_tier_pointer self) {
  auto c = tier(self).counters();
  auto ram = tiers::report::ram::from(c); // the counters of the same names
  ram.cap_bytes = c.capacity;
  ram.observer_errors +=
    self->state.observer ? self->state.observer->errors() : 0;
  ram.snapshots = self->state.snapshots;
  ram.resident_bytes = tier(self).resident_bytes();
  tiers::report::objects objects;
  objects.entries = c.objects;
  objects.bytes = c.object_bytes;
  objects.hits = c.object_hits;
  objects.misses = c.object_misses;
  tiers::report::sessions sessions; // the rest is the sessions actor's
  sessions.protected_entries = c.protected_entries;
  msg::draft<msg::ReadReportReply> d;
  d.root().setDemotions(self->state.demotions);
  report_sections{}
    .add(ram)
    .add(objects)
    .add(sessions, {"protected_entries"})
    .write(d.root());
  return std::move(d).seal();
}

msg::FeedKind feed_kind(tiers::ram_change_kind k) {
  using tiers::ram_change_kind;
  switch (k) {
    case ram_change_kind::stored: return msg::FeedKind::PUT;
    case ram_change_kind::evicted: return msg::FeedKind::EVICT;
    case ram_change_kind::demoted: return msg::FeedKind::DEMOTE;
    case ram_change_kind::superseded: return msg::FeedKind::SUPERSEDED;
  }
  return msg::FeedKind::EVICT;
}

/// From now on every change of what RAM holds is one send to `f`.
void attach_feed(ram_tier_pointer self, feed_actor f) {
  self->state.feed = std::move(f);
  tier(self).set_change_observer([self](const tiers::ram_change& c) {
    feed_change fc;
    fc.kind = static_cast<uint8_t>(feed_kind(c.kind));
    fc.tier = static_cast<uint8_t>(msg::FeedTier::RAM);
    fc.ns = c.ns;
    fc.key.assign(c.tokens.begin(), c.tokens.end());
    fc.bytes = c.bytes;
    fc.trimmable = c.trimmable;
    self->send(self->state.feed, std::move(fc));
  });
}

template <class Root>
sealed<Root> empty_reply() {
  return msg::draft<Root>{}.seal();
}

} // namespace

ram_tier_actor::behavior_type
ram_tier(ram_tier_pointer self, ram_tier_config cfg, store_actor ssd,
         std::shared_ptr<put_observer_slot> observer) {
  auto& st = self->state;
  guard_signals(self, "ram tier");
  st.cfg = cfg;
  st.objects = cfg.objects;
  // With a cold tier below, evicted entries are leaving until written.
  st.tier = std::make_unique<tiers::ram_tier>(
    cfg.cap_bytes, static_cast<bool>(ssd), cfg.policy, cfg.pin_budget_bytes,
    cfg.bookkeeping_budget_bytes);
  st.ssd = std::move(ssd);
  st.budget = static_cast<double>(cfg.write_behind_bytes_per_s);
  st.budget_at_ms = now(self);
  st.observer = std::move(observer);
  return {
    [self](const sealed<msg::AcquireState>& m) {
      return decoding<sealed<msg::AcquireStateReply>>(
        [&] { return lend(self, m.root().getRequest()); });
    },
    [self](const sealed<msg::PeekPrefix>& m) {
      return decoding<sealed<msg::PeekPrefixReply>>([&] {
        msg::draft<msg::PeekPrefixReply> d;
        tiers::tokens_of prompt{m.root().getPrompt()};
        d.root().setTokens(
          tier(self).peek_prefix_len(prompt.span(), m.root().getNs().cStr()));
        return std::move(d).seal();
      });
    },
    [self](export_atom, const sealed<msg::FetchEntry>& m) {
      return decoding<sealed<msg::RestoreEntryReply>>(
        [&] { return export_entry(self, m.root()); });
    },
    [self](const sealed<msg::PublishState>& m) {
      return decoding<sealed<msg::PublishStateReply>>(
        [&] { return publish(self, m); });
    },
    [self](const sealed<msg::InstallEntry>& m) {
      return decoding<sealed<msg::InstallEntryReply>>(
        [&] { return install(self, m); });
    },
    [self](const sealed<msg::KeepsBytes>& m) {
      msg::draft<msg::KeepsBytesReply> d;
      d.root().setKeeps(tier(self).keeps(m.root().getBytes()));
      return std::move(d).seal();
    },
    [self](const sealed<msg::DemoteIdle>& m) {
      return demote(self, m.root().getIdleMs());
    },
    [self](const sealed<msg::RelievePressure>& m) {
      return relieve(self, m.root().getTargetBytes(), m.root().getDeadlineMs());
    },
    [self](const sealed<msg::ReclaimAtBoundary>& m) {
      return reclaim(self, m.root().getTargetBytes());
    },
    [self](const sealed<msg::UnprotectEntry>& m) {
      return decoding<sealed<msg::UnprotectEntryReply>>(
        [&] { return unprotect(self, m.root()); });
    },
    [self](const sealed<msg::ReleasePrefetch>& m) {
      tier(self).drop_interest(m.root().getLeaseId());
      msg::draft<msg::ReleasePrefetchReply> d;
      d.root().setReleased(true);
      return std::move(d).seal();
    },
    [self](const sealed<msg::PutObject>& m) {
      return decoding<sealed<msg::PutObjectReply>>(
        [&] { return ram_objects::put(self, m); });
    },
    [self](const sealed<msg::GetObject>& m) {
      return decoding<sealed<msg::GetObjectReply>>(
        [&] { return ram_objects::get(self, m.root().getKey().cStr()); });
    },
    [self](const sealed<msg::FlushState>&) { return flush_snapshots(self); },
    [self](const sealed<msg::CloseService>&) {
      self->state.closed = true;
      clear_writes(self);
      tier(self).clear();
      ram_objects::close(self);
      return empty_reply<msg::CloseServiceReply>();
    },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
    [self](const sealed<msg::ReadStats>&) { return stats(self); },
    [self](const sealed<msg::SsdEvictEvent>& m) {
      try {
        auto k = m.root().getKey();
        if (k.getKind().isObject())
          ram_objects::file_gone(self, k.getNs().cStr());
        else
          tier(self).mark_not_durable(k.getNs().cStr(),
                                      tiers::read_tokens(k.getTokens()));
      } catch (const kj::Exception&) {
        // Built by the SSD actor in this process from a valid key: it
        // cannot fail to decode (no handler lets an exception through).
      }
    },
    [self](const sealed<msg::SpillSettled>& m) {
      try {
        settled(self, m.root());
      } catch (const kj::Exception&) {
        // Built by the SSD actor in this process: it decodes.
      }
    },
    [self](write_behind_atom) { write_behind_tick(self); },
    [self](wait_deadline_atom, uint64_t id) { wait_fired(self, id); },
    [self](attach_feed_atom, feed_actor f) { attach_feed(self, std::move(f)); },
  };
}

} // namespace kvtier::actors
