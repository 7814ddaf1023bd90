#include "actors/ram_tier_actor.hpp"

#include "actors/codec.hpp"
#include "actors/ram_tier_objects.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors {

namespace {

using tiers::ram_key;

uint64_t now(ram_tier_pointer self) {
  return millis(self->clock().now());
}

tiers::ram_tier& tier(ram_tier_pointer self) {
  return *self->state.tier;
}

sealed<msg::SpillEntry> spill_message(ram_tier_pointer self,
                                      msg::SpillReason reason,
                                      const tiers::entry& e) {
  msg::draft<msg::SpillEntry> d;
  d.root().setOrderId(self->state.next_order++);
  d.root().setReason(reason);
  tiers::write_entry(d, d.root().getItem().initEntry(), e);
  return std::move(d).seal();
}

bool is_durable(const sealed<msg::SpillEntryReply>& r) {
  auto o = r.root().getOutcome();
  return o == msg::SpillOutcome::DURABLE
         || o == msg::SpillOutcome::ALREADY_DURABLE;
}

} // namespace

/// Sends entries and objects that left RAM needing a write to the SSD
/// actor; the rest (durable copies, or no cold tier) are dropped here.
void spill_orders(ram_tier_pointer self,
                  std::vector<tiers::spill_order> orders) {
  if (!self->state.ssd)
    return;
  for (auto& o : orders) {
    if (!o.needs_spill)
      continue;
    if (o.key.object) {
      ram_objects::spill(self, o);
      continue;
    }
    self
      ->request(self->state.ssd, caf::infinite,
                spill_message(self, msg::SpillReason::SPILL, o.state))
      .then([](const sealed<msg::SpillEntryReply>&) {},
            [](const caf::error&) {});
  }
}

namespace {

void spill(ram_tier_pointer self, std::vector<tiers::spill_order> orders) {
  spill_orders(self, std::move(orders));
}

/// Writes the item `key` (as of `serial`) to SSD; marks it durable when
/// the write succeeded and the item was not replaced meanwhile; then calls
/// `done(durable)`.
void write_then(ram_tier_pointer self, const ram_key& key,
                const tiers::ram_item& item, msg::SpillReason reason,
                std::function<void(bool)> done) {
  auto serial = item.serial;
  auto finish = [self, key, serial, done](bool ok) {
    auto now_item = tier(self).item(key);
    bool same = now_item && now_item->serial == serial;
    if (ok && same)
      tier(self).mark_durable(key);
    done(ok && same);
  };
  self
    ->request(self->state.ssd, caf::infinite,
              spill_message(self, reason, item.state))
    .then([finish](
            const sealed<msg::SpillEntryReply>& r) { finish(is_durable(r)); },
          [finish](const caf::error&) { finish(false); });
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
  self->request(self->state.ssd, caf::infinite, std::move(d).seal())
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
    d.root().setUsableTokens(hit->state.size());
    tiers::write_entry(d, d.root().initEntry(), hit->state);
  } else {
    d.root().setSource(msg::Tier::NONE);
  }
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
  auto r = tier(self).put(std::move(*e), now(self), false, p);
  if (!r)
    return std::move(r.error());
  msg::draft<msg::PublishStateReply> d;
  d.root().setKept(r->kept);
  d.root().setOutcome(outcome_of(*r));
  d.root().setSuperseded(static_cast<uint32_t>(r->superseded));
  d.root().setPin(r->pin);
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
  auto r = tier(self).put(std::move(*e), now(self), claimed && !confirm);
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

sealed<msg::DemoteIdleReply> demoted(uint64_t n) {
  msg::draft<msg::DemoteIdleReply> d;
  d.root().setDemoted(n);
  return std::move(d).seal();
}

/// Idle demotion: durable items leave at once; the others are written
/// first and leave once their write is durable (and they are unchanged).
caf::result<sealed<msg::DemoteIdleReply>> demote(ram_tier_pointer self,
                                                 uint64_t idle_ms) {
  if (!self->state.ssd)
    return demoted(0);
  struct progress {
    size_t left = 0;
    uint64_t demoted = 0;
  };
  auto p = std::make_shared<progress>();
  auto rp = self->make_response_promise<sealed<msg::DemoteIdleReply>>();
  for (auto& key : tier(self).idle(now(self), idle_ms)) {
    auto item = tier(self).item(key);
    if (key.object || !item)
      continue;
    if (item->durable) {
      tier(self).remove(key);
      ++p->demoted;
      continue;
    }
    ++p->left;
    write_then(self, key, *item, msg::SpillReason::DEMOTE,
               [self, key, p, rp](bool ok) mutable {
                 if (ok && tier(self).remove(key))
                   ++p->demoted;
                 if (--p->left == 0)
                   rp.deliver(demoted(p->demoted));
               });
  }
  if (p->left == 0)
    rp.deliver(demoted(p->demoted));
  return rp;
}

/// Pressure relief: pops LRU items down to `target` bytes and replies once
/// the SSD actor has finished writing them (their buffers are free then).
caf::result<sealed<msg::RelievePressureReply>> relieve(ram_tier_pointer self,
                                                       uint64_t target) {
  auto before = tier(self).bytes();
  uint64_t released = 0;
  bool writes = false;
  std::vector<tiers::spill_order> orders;
  while (tier(self).bytes() > target) {
    auto o = tier(self).pop_lru();
    if (!o)
      break;
    ++released;
    writes = writes || o->needs_spill;
    orders.push_back(std::move(*o));
  }
  msg::draft<msg::RelievePressureReply> d;
  d.root().setReleased(released);
  d.root().setReleasedBytes(before - tier(self).bytes());
  d.root().setHeldBytes(tier(self).bytes());
  auto reply = std::move(d).seal();
  spill(self, std::move(orders));
  if (!writes || !self->state.ssd)
    return reply;
  auto rp = self->make_response_promise<sealed<msg::RelievePressureReply>>();
  self
    ->request(self->state.ssd, caf::infinite,
              msg::draft<msg::FlushState>{}.seal())
    .then([rp, reply](
            const sealed<msg::FlushStateReply>&) mutable { rp.deliver(reply); },
          [rp, reply](const caf::error&) mutable { rp.deliver(reply); });
  return rp;
}

sealed<msg::ReclaimAtBoundaryReply> reclaim(ram_tier_pointer self,
                                            uint64_t target) {
  auto [items, bytes] = tier(self).reclaim(target);
  msg::draft<msg::ReclaimAtBoundaryReply> d;
  d.root().setReleased(items);
  d.root().setReleasedBytes(bytes);
  return std::move(d).seal();
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
/// replies once the orders are queued: the facade's flush to the SSD actor
/// follows them.
sealed<msg::FlushStateReply> snapshot(ram_tier_pointer self) {
  if (self->state.ssd)
    for (auto& key : tier(self).undurable())
      if (auto item = tier(self).item(key))
        write_then(self, key, *item, msg::SpillReason::SNAPSHOT, [](bool) {});
  ram_objects::snapshot(self);
  return msg::draft<msg::FlushStateReply>{}.seal();
}

sealed<msg::ReadReportReply> report(ram_tier_pointer self) {
  auto c = tier(self).counters();
  msg::draft<msg::ReadReportReply> d;
  auto ram = d.root().initRam();
  ram.setEntries(c.entries);
  ram.setBytes(c.bytes);
  ram.setCapBytes(c.capacity);
  ram.setHits(c.hits);
  ram.setMisses(c.misses);
  ram.setSessionHits(c.session_hits);
  ram.setSessionMisses(c.session_misses);
  ram.setPrefixScans(c.prefix_scans);
  ram.setEvictions(c.evictions);
  ram.setSupersessions(c.supersessions);
  ram.setReplacements(c.replacements);
  ram.setOversize(c.oversize);
  ram.setObserverErrors(c.observer_errors);
  ram.setBackingLost(c.backing_lost);
  // Open and closed sessions are the sessions actor's part.
  d.root().initSessions().setProtectedEntries(c.protected_entries);
  auto objects = d.root().initObjects();
  objects.setEntries(c.objects);
  objects.setHits(c.object_hits);
  objects.setMisses(c.object_misses);
  return std::move(d).seal();
}

template <class Root>
sealed<Root> empty_reply() {
  return msg::draft<Root>{}.seal();
}

} // namespace

ram_tier_actor::behavior_type
ram_tier(ram_tier_pointer self, uint64_t cap_bytes, ssd_tier_actor ssd,
         std::shared_ptr<put_observer_slot> observer, bool objects) {
  auto& st = self->state;
  st.objects = objects;
  st.tier = std::make_unique<tiers::ram_tier>(cap_bytes);
  st.ssd = std::move(ssd);
  st.observer = std::move(observer);
  if (st.observer)
    st.tier->set_put_observer(
      [slot = st.observer](const tiers::token_seq& t, const std::string& ns) {
        (*slot)(t, ns);
      });
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
      return relieve(self, m.root().getTargetBytes());
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
    [self](const sealed<msg::FlushState>&) { return snapshot(self); },
    [self](const sealed<msg::CloseService>&) {
      self->state.closed = true;
      tier(self).clear();
      ram_objects::close(self);
      return empty_reply<msg::CloseServiceReply>();
    },
    [self](const sealed<msg::ReadReport>&) { return report(self); },
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
  };
}

} // namespace kvtier::actors
