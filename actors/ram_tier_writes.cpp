// The RAM tier actor's write side (actors/ram_tier_ops.hpp): every write
// order to the SSD actor, the SpillSettled outcomes that settle them,
// write-behind pacing, and the calls that wait for writes (demotion,
// pressure relief) with their deadlines.
#include "actors/codec.hpp"
#include "actors/ram_tier_objects.hpp"
#include "actors/ram_tier_ops.hpp"
#include "tiers/entry_message.hpp"

#include <caf/sec.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>

namespace kvtier::actors::ram_ops {

namespace {

using std::chrono::milliseconds;
using tiers::ram_key;

milliseconds deadline(ram_tier_pointer self) {
  return milliseconds{self->state.cfg.deadline_ms};
}

sealed<msg::SpillEntry> spill_message(uint64_t id, msg::SpillReason reason,
                                      const tiers::entry& e) {
  msg::draft<msg::SpillEntry> d;
  d.root().setOrderId(id);
  d.root().setReason(reason);
  d.root().setNotify(true);
  d.root().setPriority(e.priority);
  tiers::write_entry(d, d.root().getItem().initEntry(), e);
  return std::move(d).seal();
}

/// Runs `on_timeout` after `ms` unless the wait is ended first.
uint64_t start_wait(ram_tier_pointer self, uint64_t ms,
                    std::function<void()> on_timeout) {
  auto id = self->state.next_wait++;
  self->state.waits.emplace(id, std::move(on_timeout));
  self->delayed_send(self, milliseconds{ms}, wait_deadline_atom::value, id);
  return id;
}

void end_wait(ram_tier_pointer self, uint64_t id) {
  self->state.waits.erase(id);
}

void arm(ram_tier_pointer self);
void send_held(ram_tier_pointer self);

/// The order of item (`key`, `serial`) not settled yet, or null.
ram_tier_state::order* order_of(ram_tier_pointer self, const ram_key& key,
                                uint64_t serial, uint64_t* id = nullptr) {
  auto& st = self->state;
  auto [from, to] = st.order_of.equal_range(serial);
  for (auto i = from; i != to; ++i) {
    auto o = st.orders.find(i->second);
    if (o != st.orders.end() && o->second.key == key) {
      if (id)
        *id = o->first;
      return &o->second;
    }
  }
  return nullptr;
}

/// Applies one outcome to order `id`: the tier first (a leaving entry
/// whose write settled leaves, its bytes checked for life), then whoever
/// waits for the write.
void settle(ram_tier_pointer self, uint64_t id, write_news n) {
  auto& st = self->state;
  auto it = st.orders.find(id);
  if (it == st.orders.end())
    return;
  auto& o = it->second;
  auto result = n.durable ? tiers::write_result::durable
                : n.final ? tiers::write_result::not_stored
                          : tiers::write_result::failed;
  if (auto left = tier(self).write_settled(o.key, o.serial, result)) {
    left->state = {}; // our last views: what the tier let go may die now
    left->object.clear();
    n.left = true;
    n.freed_bytes = tiers::died_bytes(left->released);
  }
  if (n.durable && o.reason == msg::SpillReason::SNAPSHOT)
    ++st.snapshots;
  auto waiters = o.waiters;
  if (n.final) {
    if (o.unsent)
      st.held.erase(id); // settled before it was sent (close)
    else
      st.order_bytes -= o.bytes;
    auto [from, to] = st.order_of.equal_range(o.serial);
    for (auto i = from; i != to; ++i)
      if (i->second == id) {
        st.order_of.erase(i);
        break;
      }
    st.orders.erase(it);
  }
  for (auto& w : waiters)
    w(n);
  if (n.final) {
    send_held(self); // room for held orders
    arm(self);       // write-behind may have waited for room
  }
}

/// Sends order `id` (held or new) with `state`.
void send_order(ram_tier_pointer self, uint64_t id, const tiers::entry& state) {
  auto& st = self->state;
  auto& o = st.orders.at(id);
  st.order_bytes += o.bytes;
  // The reply only acknowledges: every outcome comes as a SpillSettled.
  // A timeout changes nothing (the events still come); a dead SSD actor
  // will not write it: not stored.
  self->request(st.ssd, deadline(self), spill_message(id, o.reason, state))
    .then([](const sealed<msg::SpillEntryReply>&) {},
          [self, id](const caf::error& err) {
            if (err != caf::sec::request_timeout)
              settle(self, id,
                     write_news{msg::SpillOutcome::REFUSED, err, false, true});
          });
}

/// Sends held order `id` now, whatever the room (its entry left the cap).
void send_now(ram_tier_pointer self, uint64_t id) {
  auto& o = self->state.orders.at(id);
  if (!o.unsent)
    return;
  auto state = std::move(*o.unsent);
  o.unsent.reset();
  self->state.held.erase(id);
  send_order(self, id, state);
}

/// Whether the oldest held orders' flushes are answered: a flush waits
/// until every order up to its last one is sent.
void answer_flushes(ram_tier_pointer self) {
  auto& st = self->state;
  auto oldest = st.held.empty() ? UINT64_MAX : *st.held.begin();
  std::vector<ram_tier_state::flush_wait> done;
  std::erase_if(st.flush_waits, [&](auto& w) {
    if (w.through >= oldest)
      return false;
    done.push_back(std::move(w));
    return true;
  });
  for (auto& w : done) {
    end_wait(self, w.wait);
    w.rp.deliver(msg::draft<msg::FlushStateReply>{}.seal());
  }
}

/// Sends held orders, oldest first, while they fit under the write-behind
/// cap (one is always out when any is held).
void send_held(ram_tier_pointer self) {
  auto& st = self->state;
  while (!st.held.empty()) {
    auto id = *st.held.begin();
    auto& o = st.orders.at(id);
    if (st.order_bytes > 0
        && st.order_bytes + o.bytes > st.cfg.write_behind_cap_bytes)
      break; // a settled order sends more
    send_now(self, id);
  }
  answer_flushes(self);
}

/// Orders a write of item (`key`, `serial`) (already marked by
/// `begin_write` or by the tier's eviction) and tracks it until its final
/// outcome. `held`: the item stays resident meanwhile, so the order may
/// wait for room under the write-behind cap; otherwise it goes at once.
/// Returns the order's id.
uint64_t order_write(ram_tier_pointer self, const ram_key& key, uint64_t serial,
                     const tiers::entry& state, msg::SpillReason reason,
                     bool held,
                     std::function<void(const write_news&)> waiter = {}) {
  auto& st = self->state;
  auto id = st.next_order++;
  auto& o = st.orders[id];
  o = {key, serial, state.byte_length(), reason, {}, std::nullopt};
  if (waiter)
    o.waiters.push_back(std::move(waiter));
  st.order_of.emplace(serial, id);
  if (!held) {
    send_order(self, id, state);
    return id;
  }
  o.unsent = state;
  st.held.insert(id);
  send_held(self);
  return id;
}

/// Sends the held write of item (`key`, `serial`) at once, if any: the
/// entry left the cap (evicted, or a relief victim).
void promote(ram_tier_pointer self, const ram_key& key, uint64_t serial) {
  uint64_t id = 0;
  if (auto* o = order_of(self, key, serial, &id); o && o->unsent) {
    send_now(self, id);
    answer_flushes(self);
  }
}

/// Calls `waiter` with the news of the write of item (`key`, `serial`):
/// a new one when none is out, else the one on its way; at once when the
/// item is durable or gone.
void watch_write(ram_tier_pointer self, const ram_key& key, uint64_t serial,
                 msg::SpillReason reason,
                 std::function<void(const write_news&)> waiter) {
  if (auto item = tier(self).begin_write(key, serial)) {
    order_write(self, key, serial, item->state, reason, !item->leaving,
                std::move(waiter));
    return;
  }
  if (auto* o = order_of(self, key, serial)) {
    o->waiters.push_back(std::move(waiter));
    return;
  }
  auto item = tier(self).item(key);
  write_news n;
  n.final = true;
  n.durable = item && item->serial == serial && item->durable;
  n.outcome =
    n.durable ? msg::SpillOutcome::ALREADY_DURABLE : msg::SpillOutcome::REFUSED;
  waiter(n);
}

/// Refills the write-behind bucket: `bytes_per_s`, one second of burst.
void refill(ram_tier_pointer self) {
  auto& st = self->state;
  auto t = now(self);
  auto rate = static_cast<double>(st.cfg.write_behind_bytes_per_s);
  st.budget = std::min(
    rate, st.budget + static_cast<double>(t - st.budget_at_ms) * rate / 1000.0);
  st.budget_at_ms = t;
}

void arm(ram_tier_pointer self) {
  auto& st = self->state;
  if (st.tick_armed || st.due.empty() || st.closed)
    return;
  auto t = now(self);
  uint64_t wait = st.due.front().due_ms > t ? st.due.front().due_ms - t : 0;
  if (st.budget <= 0) {
    auto rate = static_cast<double>(st.cfg.write_behind_bytes_per_s);
    wait = std::max<uint64_t>(
      wait, static_cast<uint64_t>(std::ceil(-st.budget * 1000.0 / rate)));
  }
  st.tick_armed = true;
  self->delayed_send(self, milliseconds{std::max<uint64_t>(wait, 1)},
                     write_behind_atom::value);
}

sealed<msg::DemoteIdleReply> demoted(uint64_t n) {
  msg::draft<msg::DemoteIdleReply> d;
  d.root().setDemoted(n);
  return std::move(d).seal();
}

} // namespace

uint64_t now(ram_tier_pointer self) {
  return millis(self->clock().now());
}

void spill(ram_tier_pointer self, std::vector<tiers::spill_order> orders) {
  if (!self->state.ssd)
    return;
  for (auto& o : orders)
    if (o.key.object && o.needs_spill)
      ram_objects::spill(self, o); // objects leave at once (see the header)
    else if (o.leaving && o.needs_spill)
      order_write(self, o.key, o.serial, o.state, msg::SpillReason::SPILL,
                  false);
    else if (o.leaving)
      promote(self, o.key, o.serial); // its held write goes now
}

void schedule_snapshot(ram_tier_pointer self, const ram_key& key,
                       uint64_t serial) {
  auto& st = self->state;
  if (!st.cfg.write_behind || !st.ssd || st.closed)
    return;
  st.due.push_back({key, serial, now(self) + st.cfg.write_behind_delay_ms});
  arm(self);
}

void write_behind_tick(ram_tier_pointer self) {
  auto& st = self->state;
  st.tick_armed = false;
  refill(self);
  auto t = now(self);
  bool full = false;
  while (!st.due.empty() && st.due.front().due_ms <= t) {
    auto& d = st.due.front();
    auto item = tier(self).item(d.key);
    if (!item || item->serial != d.serial || item->durable || item->writing
        || item->leaving) {
      st.due.pop_front(); // replaced, gone, durable, or written already
      continue;
    }
    auto size = item->state.byte_length();
    if (!st.held.empty()
        || (st.order_bytes > 0
            && st.order_bytes + size > st.cfg.write_behind_cap_bytes)) {
      full = true; // a settled write re-arms the timer
      break;
    }
    if (st.budget <= 0)
      break;
    st.budget -= static_cast<double>(size);
    auto w = tier(self).begin_write(d.key, d.serial);
    order_write(self, d.key, d.serial, w->state, msg::SpillReason::SNAPSHOT,
                false);
    st.due.pop_front();
  }
  if (!full)
    arm(self);
}

void settled(ram_tier_pointer self, msg::SpillSettled::Reader m) {
  write_news n;
  n.outcome = m.getOutcome();
  n.err = read_error(m.getError());
  n.durable = n.outcome == msg::SpillOutcome::DURABLE
              || n.outcome == msg::SpillOutcome::ALREADY_DURABLE;
  n.final = n.outcome != msg::SpillOutcome::FAILED
            && n.outcome != msg::SpillOutcome::QUEUED;
  if (n.outcome == msg::SpillOutcome::QUEUED)
    return;
  settle(self, m.getOrderId(), std::move(n));
}

void wait_fired(ram_tier_pointer self, uint64_t id) {
  auto w = self->state.waits.find(id);
  if (w == self->state.waits.end())
    return;
  auto fn = std::move(w->second);
  self->state.waits.erase(w);
  fn();
}

caf::result<sealed<msg::DemoteIdleReply>> demote(ram_tier_pointer self,
                                                 uint64_t idle_ms) {
  if (!self->state.ssd)
    return demoted(0);
  struct progress {
    size_t left = 0;
    uint64_t demoted = 0;
    bool answered = false;
    uint64_t wait = 0;
    caf::typed_response_promise<sealed<msg::DemoteIdleReply>> rp;
  };
  auto p = std::make_shared<progress>();
  p->rp = self->make_response_promise<sealed<msg::DemoteIdleReply>>();
  auto answer = [self, p] {
    if (std::exchange(p->answered, true))
      return;
    end_wait(self, p->wait);
    p->rp.deliver(demoted(p->demoted));
  };
  for (auto& key : tier(self).idle(now(self), idle_ms)) {
    auto item = tier(self).item(key);
    if (key.object || !item)
      continue;
    if (item->durable) {
      tier(self).remove(key);
      ++p->demoted;
      ++self->state.demotions;
      continue;
    }
    ++p->left;
    auto serial = item->serial;
    auto once = std::make_shared<bool>(false);
    watch_write(self, key, serial, msg::SpillReason::DEMOTE,
                [self, key, serial, p, once, answer](const write_news& n) {
                  if (std::exchange(*once, true) || p->answered)
                    return;
                  auto now_item = tier(self).item(key);
                  if (n.durable && now_item && now_item->serial == serial
                      && !now_item->leaving && tier(self).remove(key)) {
                    ++p->demoted;
                    ++self->state.demotions;
                  }
                  if (--p->left == 0)
                    answer();
                });
  }
  if (p->left == 0)
    answer();
  else
    p->wait = start_wait(self, self->state.cfg.deadline_ms, answer);
  return p->rp;
}

caf::result<sealed<msg::RelievePressureReply>>
relieve(ram_tier_pointer self, uint64_t target, uint64_t deadline_ms) {
  struct relief {
    uint64_t released = 0, freed = 0, pending = 0;
    caf::error err;
    bool answered = false;
    uint64_t wait = 0;
    caf::typed_response_promise<sealed<msg::RelievePressureReply>> rp;
  };
  auto r = std::make_shared<relief>();
  r->rp = self->make_response_promise<sealed<msg::RelievePressureReply>>();
  auto answer = [self, r] {
    if (std::exchange(r->answered, true))
      return;
    end_wait(self, r->wait);
    msg::draft<msg::RelievePressureReply> d;
    d.root().setReleased(r->released);
    d.root().setReleasedBytes(r->freed);
    d.root().setHeldBytes(tier(self).bytes());
    d.root().setPending(r->pending);
    write_error(d.root().initError(), r->err);
    r->rp.deliver(std::move(d).seal());
  };
  // Victims in LRU order until what will leave brings RAM to the target;
  // a leaving victim's bytes go once its write settles. Only as many
  // victims as the write-behind cap has room for when they start (one at
  // least): more would be dropped there unwritten.
  uint64_t expect = 0;
  uint64_t room =
    self->state.cfg.write_behind_cap_bytes
    - std::min(self->state.cfg.write_behind_cap_bytes, self->state.order_bytes);
  std::vector<tiers::spill_order> leaving;
  while (tier(self).bytes() > target + expect) {
    if (!leaving.empty() && room == 0)
      break; // the caller asks again for the rest
    auto before = tier(self).bytes() - tier(self).resident_bytes();
    auto o = tier(self).pop_lru();
    if (!o)
      break;
    if (!o->leaving) { // durable, or no cold tier: gone now
      ++r->released;
      o->state = {};
      o->object.clear();
      r->freed += tiers::died_bytes(o->released);
      continue;
    }
    expect += tier(self).bytes() - tier(self).resident_bytes() - before;
    if (o->needs_spill)
      room -= std::min(room, o->state.byte_length());
    leaving.push_back(std::move(*o));
  }
  for (auto& o : leaving) {
    ++r->pending;
    auto once = std::make_shared<bool>(false);
    auto waiter = [r, once, answer](const write_news& n) {
      if (std::exchange(*once, true) || r->answered)
        return;
      if (n.left) {
        ++r->released;
        r->freed += n.freed_bytes;
      }
      if (!n.durable && !r->err) // failed: it stays, servable; or dropped
        r->err =
          n.err ? n.err : make_error(ec::io_error, "a write was not stored");
      if (--r->pending == 0)
        answer();
    };
    if (o.needs_spill) {
      order_write(self, o.key, o.serial, o.state, msg::SpillReason::SPILL,
                  false, waiter);
    } else {
      watch_write(self, o.key, o.serial, msg::SpillReason::SPILL, waiter);
      promote(self, o.key, o.serial); // it left the cap: a held write goes
    }
    o.state = {};
  }
  if (r->pending == 0) {
    answer();
    return r->rp;
  }
  auto ms = deadline_ms > 0 ? deadline_ms : self->state.cfg.deadline_ms;
  r->wait = start_wait(self, ms, [r, ms, answer] {
    r->err = make_error(ec::timeout,
                        "pressure relief: " + std::to_string(r->pending)
                          + " writes not settled after " + std::to_string(ms)
                          + " ms (the entries stay in RAM, servable)");
    answer();
  });
  return r->rp;
}

sealed<msg::ReclaimAtBoundaryReply> reclaim(ram_tier_pointer self,
                                            uint64_t target) {
  auto r = tier(self).reclaim(target);
  msg::draft<msg::ReclaimAtBoundaryReply> d;
  d.root().setReleased(r.released);
  d.root().setReleasedBytes(r.released_bytes);
  d.root().setDropped(r.dropped);
  d.root().setDroppedBytes(r.dropped_bytes);
  return std::move(d).seal();
}

caf::result<sealed<msg::FlushStateReply>> snapshot(ram_tier_pointer self) {
  auto& st = self->state;
  uint64_t through = 0;
  if (st.ssd)
    for (auto& key : tier(self).undurable())
      if (auto item = tier(self).begin_write(key))
        through = order_write(self, key, item->serial, item->state,
                              msg::SpillReason::SNAPSHOT, true);
  if (st.held.empty() || *st.held.begin() > through)
    return nothing_to_flush(); // every order is out: the store's flush says
  // Answered once the last of them is sent (`answer_flushes`), or at the
  // bound with how many are still held: well before the facade's own
  // deadline for this request (half the storage deadline).
  auto rp = self->make_response_promise<sealed<msg::FlushStateReply>>();
  auto bound = std::max<uint64_t>(st.cfg.deadline_ms * 2 / 5, 1);
  auto wait = start_wait(self, bound, [self, through, bound] {
    auto& st = self->state;
    auto w = std::find_if(st.flush_waits.begin(), st.flush_waits.end(),
                          [&](auto& x) { return x.through == through; });
    if (w == st.flush_waits.end())
      return;
    auto rp = std::move(w->rp);
    st.flush_waits.erase(w);
    auto held = static_cast<uint64_t>(
      std::distance(st.held.begin(), st.held.upper_bound(through)));
    msg::draft<msg::FlushStateReply> d;
    auto out = d.root().initResult();
    out.setPending(held);
    write_error(
      out.initErrors(1)[0],
      make_error(ec::timeout, std::to_string(held)
                                + " snapshots still waited for room under the "
                                  "write-behind cap after "
                                + std::to_string(bound) + " ms"));
    rp.deliver(std::move(d).seal());
  });
  st.flush_waits.push_back({through, rp, wait});
  return rp;
}

sealed<msg::ReadStatsReply> stats(ram_tier_pointer self) {
  uint64_t waiting = self->state.held.size();
  for (auto& d : self->state.due) {
    auto item = tier(self).item(d.key);
    if (item && item->serial == d.serial && !item->durable && !item->writing
        && !item->leaving)
      ++waiting;
  }
  msg::draft<msg::ReadStatsReply> d;
  d.root().setWaitingSnapshots(waiting);
  d.root().setLeavingEntries(tier(self).counters().leaving_entries);
  return std::move(d).seal();
}

void clear_writes(ram_tier_pointer self) {
  auto& st = self->state;
  st.due.clear();
  // Held orders are never sent: refused, their states released.
  for (auto id : std::exchange(st.held, {}))
    settle(self, id,
           write_news{msg::SpillOutcome::REFUSED,
                      make_error(ec::closed, "the RAM tier closed before the "
                                             "write was ordered"),
                      false, true});
}

} // namespace kvtier::actors::ram_ops

namespace kvtier::actors {

void spill_orders(ram_tier_pointer self,
                  std::vector<tiers::spill_order> orders) {
  ram_ops::spill(self, std::move(orders));
}

} // namespace kvtier::actors
