#include "actors/feed_actor.hpp"

#include "actors/codec.hpp"

#include "messages/error.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <kj/exception.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace kvtier::actors {

const char* to_string(msg::FeedKind k) {
  switch (k) {
    case msg::FeedKind::PUT: return "put";
    case msg::FeedKind::EVICT: return "evict";
    case msg::FeedKind::DEMOTE: return "demote";
    case msg::FeedKind::DURABLE: return "durable";
    case msg::FeedKind::SUPERSEDED: return "superseded";
    case msg::FeedKind::REMOVED: return "removed";
  }
  return "unknown";
}

caf::expected<std::vector<feed_event>> read_batch(msg::FeedBatch::Reader b) {
  try {
    auto events = b.getEvents();
    if (events.size() > feed_limits::max_events)
      return make_error(ec::message_limit_exceeded,
                        "feed batch: " + std::to_string(events.size())
                          + " events, at most "
                          + std::to_string(feed_limits::max_events));
    if (b.getNode().size() > feed_limits::max_node_bytes)
      return make_error(ec::message_limit_exceeded, "feed batch: node id");
    std::vector<feed_event> out;
    out.reserve(events.size());
    auto seq = b.getFirstSeq();
    if (seq == 0)
      return make_error(ec::malformed_message, "feed batch: firstSeq 0");
    for (auto e : events) {
      auto kind = static_cast<uint16_t>(e.getKind());
      auto tier = static_cast<uint16_t>(e.getTier());
      if (e.getSeq() != seq)
        return make_error(ec::malformed_message,
                          "feed batch: event seq " + std::to_string(e.getSeq())
                            + " where " + std::to_string(seq) + " was due");
      if (kind > static_cast<uint16_t>(msg::FeedKind::REMOVED) || tier > 1)
        return make_error(ec::malformed_message,
                          "feed batch: unknown kind or tier at seq "
                            + std::to_string(seq));
      if (e.getNs().size() > feed_limits::max_ns_bytes
          || e.getKey().size() > feed_limits::max_key_tokens)
        return make_error(ec::message_limit_exceeded,
                          "feed batch: ns or key too long at seq "
                            + std::to_string(seq));
      feed_event ev;
      ev.seq = seq++;
      ev.kind = e.getKind();
      ev.tier = e.getTier();
      ev.ns = e.getNs().cStr();
      auto key = e.getKey();
      ev.key.reserve(key.size());
      for (auto t : key)
        ev.key.push_back(t);
      ev.bytes = e.getByteLength();
      ev.trimmable = e.getTrimmable();
      out.push_back(std::move(ev));
    }
    return out;
  } catch (const kj::Exception& e) {
    return make_error(ec::malformed_message,
                      std::string{"feed batch: "} + e.getDescription().cStr());
  }
}

uint64_t ring_bytes_of(const feed_event& e) {
  // The allocator's 16 bytes per allocation (the key's, the namespace's
  // past its inline buffer) and the deque's slot.
  return sizeof(feed_event) + 16 + e.key.capacity() * sizeof(uint32_t)
         + (e.ns.capacity() > 15 ? e.ns.capacity() + 1 + 16 : 0);
}

namespace {

bool leaves(msg::FeedKind k) {
  return k == msg::FeedKind::EVICT || k == msg::FeedKind::DEMOTE
         || k == msg::FeedKind::SUPERSEDED || k == msg::FeedKind::REMOVED;
}

/// A table value: the bytes held and whether the entry is trimmable.
uint64_t pack(uint64_t bytes, bool trimmable) {
  return bytes << 1 | (trimmable ? 1 : 0);
}
uint64_t bytes_of(uint64_t v) {
  return v >> 1;
}
bool trimmable_of(uint64_t v) {
  return (v & 1) != 0;
}

void write_event(msg::FeedEvent::Builder b, const feed_event& e) {
  b.setSeq(e.seq);
  b.setKind(e.kind);
  b.setTier(e.tier);
  b.setNs(e.ns);
  auto k = b.initKey(static_cast<unsigned>(e.key.size()));
  for (size_t i = 0; i < e.key.size(); ++i)
    k.set(static_cast<unsigned>(i), e.key[i]);
  b.setByteLength(e.bytes);
  b.setTrimmable(e.trimmable);
}

template <class It>
void write_batch(msg::FeedBatch::Builder b, const feed_state& st, It first,
                 It last) {
  b.setNode(st.cfg.node);
  b.setIncarnation(st.cfg.incarnation);
  b.setFirstSeq(first == last ? st.seq + 1 : first->seq);
  auto list = b.initEvents(static_cast<unsigned>(last - first));
  unsigned i = 0;
  for (auto it = first; it != last; ++it)
    write_event(list[i++], *it);
}

template <class It>
sealed<msg::FeedBatch> batch_of(const feed_state& st, It first, It last) {
  msg::draft<msg::FeedBatch> d;
  write_batch(d.root(), st, first, last);
  return std::move(d).seal();
}

void write_key(capnp::List<uint32_t>::Builder out, const tiers::token_seq& k) {
  for (size_t i = 0; i < k.size(); ++i)
    out.set(static_cast<unsigned>(i), k[i]);
}

/// One entry of the table at the current seq: what each tier holds of it
/// (a null ref: nothing; at least one is set).
struct holding {
  tiers::entry_ref ram;
  tiers::entry_ref ssd;
};

/// The table at the current seq: RAM and SSD merged by key, in no set
/// order. Holds refs only; keys are rebuilt as the parts are written.
std::vector<holding> holdings_of(const feed_state& st) {
  std::vector<holding> out;
  auto& ram = st.tables[0];
  auto& ssd = st.tables[1];
  out.reserve(ram.size() + ssd.size());
  for (auto r : ram.entries())
    out.push_back({r, ssd.find(ram.ns(r), ram.key(r))});
  for (auto s : ssd.entries())
    if (!ram.find(ssd.ns(s), ssd.key(s)))
      out.push_back({tiers::entry_ref{}, s});
  return out;
}

/// The tree and entry naming `h`'s key (its RAM one when both hold it).
std::pair<const tiers::prefix_tree*, tiers::entry_ref>
named_by(const feed_state& st, const holding& h) {
  if (h.ram)
    return {&st.tables[0], h.ram};
  return {&st.tables[1], h.ssd};
}

/// Where each snapshot part starts in `all` (and, last, its end): parts of
/// at most `budget` bytes of keys and fields; an entry alone over it is a
/// part of its own. One part for an empty table.
std::vector<size_t> part_bounds(const feed_state& st,
                                const std::vector<holding>& all,
                                size_t budget) {
  std::vector<size_t> out{0};
  size_t bytes = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    auto [t, ref] = named_by(st, all[i]);
    auto b = 64 + t->ns(ref).size() + 4 * t->length(ref);
    if (bytes > 0 && bytes + b > budget) {
      out.push_back(i);
      bytes = 0;
    }
    bytes += b;
  }
  out.push_back(all.size());
  return out;
}

/// Part `part` of `parts` of the snapshot: `all[first, last)`.
void write_snapshot(msg::FeedSnapshot::Builder b, const feed_state& st,
                    const std::vector<holding>& all, size_t first, size_t last,
                    size_t part, size_t parts) {
  b.setNode(st.cfg.node);
  b.setIncarnation(st.cfg.incarnation);
  b.setSeq(st.seq);
  b.setPart(static_cast<uint32_t>(part));
  b.setParts(static_cast<uint32_t>(parts));
  auto list = b.initEntries(static_cast<unsigned>(last - first));
  for (size_t i = first; i < last; ++i) {
    auto h = list[static_cast<unsigned>(i - first)];
    auto& x = all[i];
    auto [t, ref] = named_by(st, x);
    h.setNs(t->ns(ref));
    write_key(h.initKey(static_cast<unsigned>(t->length(ref))), t->key(ref));
    bool trimmable = false;
    if (x.ram) {
      auto v = st.tables[0].value(x.ram);
      h.setInRam(true);
      h.setRamBytes(bytes_of(v));
      trimmable = trimmable_of(v);
    }
    if (x.ssd) {
      auto v = st.tables[1].value(x.ssd);
      h.setInSsd(true);
      h.setSsdBytes(bytes_of(v));
      trimmable = trimmable || trimmable_of(v);
    }
    h.setTrimmable(trimmable);
  }
}

/// A batch to a subscriber (a dynamically typed actor, maybe remote),
/// sent as this actor so the receiver knows where it came from.
void push(feed_pointer self, const caf::actor& to, sealed<msg::FeedBatch> b) {
  caf::send_as(caf::actor_cast<caf::actor>(self), to, std::move(b));
}

void arm_flush(feed_pointer self) {
  if (std::exchange(self->state.flush_armed, true))
    return;
  self->send(self, feed_flush_atom::value);
}

/// Publishes the ring's and the table's memory (when asked to).
void publish_memory(const feed_state& st) {
  auto& m = st.cfg.memory;
  if (!m)
    return;
  m->ring_events.store(st.ring.size(), std::memory_order_relaxed);
  m->ring_bytes.store(st.ring_bytes, std::memory_order_relaxed);
  m->table_entries.store(st.tables[0].size() + st.tables[1].size(),
                         std::memory_order_relaxed);
  m->table_bytes.store(st.tables[0].approx_bytes()
                         + st.tables[1].approx_bytes(),
                       std::memory_order_relaxed);
}

void number(feed_pointer self, feed_event ev) {
  auto& st = self->state;
  ev.seq = ++st.seq;
  st.ring.push_back(ev);
  st.ring_bytes += ring_bytes_of(st.ring.back());
  while (
    !st.ring.empty()
    && (st.ring.size() > st.cfg.ring || st.ring_bytes > st.cfg.ring_bytes)) {
    st.ring_bytes -= ring_bytes_of(st.ring.front());
    st.ring.pop_front();
  }
  st.pending.push_back(std::move(ev));
  publish_memory(st);
  arm_flush(self);
}

void apply(feed_pointer self, feed_change& c) {
  auto& st = self->state;
  if (c.key.empty() || c.key.size() >= (uint64_t{1} << 32)) {
    ++st.refused; // no prefix entry has such a key
    return;
  }
  auto kind = static_cast<msg::FeedKind>(c.kind);
  auto& table = st.tables[c.tier == 0 ? 0 : 1];
  if (leaves(kind)) {
    auto ref = table.find(c.ns, c.key);
    if (!ref)
      return;                  // nothing changed: not an event
    auto v = table.erase(ref); // what left, as it was held
    c.bytes = bytes_of(v);
    c.trimmable = trimmable_of(v);
  } else {
    table.insert(c.ns, c.key, pack(c.bytes, c.trimmable), c.key.size());
  }
  feed_event ev;
  ev.kind = kind;
  ev.tier = c.tier == 0 ? msg::FeedTier::RAM : msg::FeedTier::SSD;
  ev.ns = std::move(c.ns);
  ev.key = std::move(c.key);
  ev.bytes = c.bytes;
  ev.trimmable = c.trimmable;
  number(self, std::move(ev));
}

/// Sends each subscriber the pending events from its `next` on, in runs of
/// consecutive seqs of at most `batch_events`.
void flush(feed_pointer self) {
  auto& st = self->state;
  st.flush_armed = false;
  if (st.pending.empty())
    return;
  auto& p = st.pending;
  for (auto& sub : st.subscribers) {
    auto it = std::lower_bound(
      p.begin(), p.end(), sub.next,
      [](const feed_event& e, uint64_t s) { return e.seq < s; });
    while (it != p.end()) {
      auto end = it + 1;
      while (end != p.end() && end->seq == (end - 1)->seq + 1
             && static_cast<size_t>(end - it) < feed_limits::batch_events)
        ++end;
      push(self, sub.handle, batch_of(st, it, end));
      it = end;
    }
    sub.next = st.seq + 1;
  }
  p.clear();
}

/// Adds `h` (or moves it on) as a subscriber from `next`.
void subscribe(feed_pointer self, const caf::actor& h, uint64_t next) {
  auto& subs = self->state.subscribers;
  for (auto& s : subs)
    if (s.handle == h) {
      s.next = next;
      return;
    }
  self->monitor(h);
  subs.push_back({h, next});
}

/// Whether the ring holds every event from `from` to the current seq.
bool ring_covers(const feed_state& st, uint64_t from) {
  if (from == 0 || from > st.seq + 1)
    return false;
  auto it =
    std::lower_bound(st.ring.begin(), st.ring.end(), from,
                     [](const feed_event& e, uint64_t s) { return e.seq < s; });
  uint64_t expected = from;
  for (; it != st.ring.end(); ++it, ++expected)
    if (it->seq != expected)
      return false;
  return expected == st.seq + 1;
}

caf::result<sealed<msg::SubscribeFeedReply>>
on_subscribe(feed_pointer self, const sealed<msg::SubscribeFeed>& m) {
  auto& st = self->state;
  auto sender = caf::actor_cast<caf::actor>(self->current_sender());
  if (!sender) {
    ++st.refused;
    return make_error(ec::invalid_argument,
                      "SubscribeFeed needs a sender to push batches to");
  }
  try {
    auto r = m.root();
    auto from = r.getFromSeq();
    msg::draft<msg::SubscribeFeedReply> d;
    if (r.getFromNow()) {
      write_batch(d.root().initFollowing(), st, st.ring.end(), st.ring.end());
    } else if (r.getIncarnation() == st.cfg.incarnation
               && ring_covers(st, from)) {
      auto first = std::lower_bound(
        st.ring.begin(), st.ring.end(), from,
        [](const feed_event& e, uint64_t s) { return e.seq < s; });
      write_batch(d.root().initFollowing(), st, first, st.ring.end());
    } else {
      // Parts after the first go to the subscriber now, the first with
      // the reply: it holds the snapshot once it has them all, in
      // whichever order they arrive.
      auto all = holdings_of(st);
      auto bounds = part_bounds(st, all, st.cfg.snapshot_part_bytes);
      auto parts = bounds.size() - 1;
      for (size_t p = 1; p < parts; ++p) {
        msg::draft<msg::FeedSnapshot> part;
        write_snapshot(part.root(), st, all, bounds[p], bounds[p + 1], p,
                       parts);
        caf::send_as(caf::actor_cast<caf::actor>(self), sender,
                     std::move(part).seal());
      }
      write_snapshot(d.root().initSnapshot(), st, all, bounds[0], bounds[1], 0,
                     parts);
    }
    subscribe(self, sender, st.seq + 1);
    return std::move(d).seal();
  } catch (const kj::Exception& e) {
    ++st.refused;
    return make_error(ec::malformed_message, std::string{"SubscribeFeed: "}
                                               + e.getDescription().cStr());
  }
}

uint64_t random_incarnation() {
  std::random_device rd;
  std::mt19937_64 gen{(uint64_t{rd()} << 32) ^ rd()};
  uint64_t x = 0;
  while (x == 0)
    x = gen();
  return x;
}

} // namespace

feed_actor::behavior_type feed(feed_pointer self, feed_config cfg) {
  auto& st = self->state;
  // Peers learn its handle (it pushes batches to their followers).
  guard_signals(self, [self](const std::string&) { ++self->state.refused; });
  st.cfg = std::move(cfg);
  if (st.cfg.incarnation == 0)
    st.cfg.incarnation = random_incarnation();
  st.cfg.ring = std::max<size_t>(st.cfg.ring, 1);
  publish_memory(st);
  for (auto& s : st.cfg.subscribers)
    if (s)
      subscribe(self, s, 1);
  st.cfg.subscribers.clear();
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    auto n = subs.size();
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const feed_state::subscriber& s) {
                                return s.handle.address() == dm.source;
                              }),
               subs.end());
    self->state.dropped += n - subs.size();
  });
  return {
    [self](feed_change& c) {
      if (from_other_process(self)) {
        ++self->state.refused;
        return;
      }
      apply(self, c);
    },
    [self](feed_flush_atom) { flush(self); },
    [self](const sealed<msg::SubscribeFeed>& m) {
      return on_subscribe(self, m);
    },
    [self](feed_local_atom, const caf::actor& h, bool from_now) -> uint64_t {
      auto& st = self->state;
      if (from_other_process(self) || !h) {
        ++st.refused;
        return st.seq;
      }
      // Not from now: from the first event the ring still holds (the put
      // observer attached at start sees every event).
      uint64_t next = st.seq + 1;
      if (!from_now)
        next = st.ring.empty() ? st.seq + 1 : st.ring.front().seq;
      if (!from_now && next <= st.seq) {
        auto first = std::lower_bound(
          st.ring.begin(), st.ring.end(), next,
          [](const feed_event& e, uint64_t s) { return e.seq < s; });
        push(self, h, batch_of(st, first, st.ring.end()));
      }
      subscribe(self, h, st.seq + 1);
      return st.seq;
    },
    [self](feed_drop_atom, const caf::actor& h) {
      auto& subs = self->state.subscribers;
      for (auto i = subs.begin(); i != subs.end(); ++i)
        if (i->handle == h) {
          self->demonitor(h);
          subs.erase(i);
          ++self->state.dropped;
          return;
        }
    },
    [self](feed_name_atom, const std::string& node) {
      if (from_other_process(self)) {
        ++self->state.refused;
        return;
      }
      self->state.cfg.node = node;
    },
    [self](feed_skip_atom, uint64_t n) -> uint64_t {
      auto& st = self->state;
      if (from_other_process(self)) {
        ++st.refused;
        return st.seq;
      }
      flush(self); // what was numbered before the gap leaves first
      st.seq += n;
      return st.seq;
    },
    [self](feed_stats_atom) {
      auto& st = self->state;
      return std::make_tuple(st.seq, uint64_t{st.subscribers.size()},
                             uint64_t{st.ring.size()});
    },
  };
}

caf::behavior feed_listener(caf::event_based_actor* self,
                            std::function<void(const feed_event&)> f,
                            std::shared_ptr<std::atomic<uint64_t>> errors) {
  return {
    [self, f, errors](const sealed<msg::FeedBatch>& m) {
      auto events = read_batch(m.root());
      if (!events)
        return; // built by this process's feed: cannot happen
      for (auto& e : *events) {
        try {
          f(e);
        } catch (...) {
          if (errors)
            ++*errors; // contained: the change stands
        }
      }
    },
  };
}

} // namespace kvtier::actors
