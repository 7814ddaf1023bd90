#include "actors/feed_follower_actor.hpp"

#include "actors/codec.hpp"

#include "messages/error.hpp"
#include "messages/log.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <kj/exception.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace kvtier::actors {

directory_item item_of(const feed_event& e) {
  directory_item it;
  it.ns = e.ns;
  it.key = e.key;
  it.tier = e.tier == msg::FeedTier::RAM ? 0 : 1;
  it.bytes = e.bytes;
  it.trimmable = e.trimmable;
  it.present = e.kind == msg::FeedKind::PUT || e.kind == msg::FeedKind::DURABLE;
  return it;
}

caf::expected<std::vector<directory_item>>
read_snapshot(msg::FeedSnapshot::Reader s) {
  using actors::feed_limits;
  try {
    auto entries = s.getEntries();
    if (entries.size() > feed_limits::max_entries)
      return make_error(ec::message_limit_exceeded,
                        "feed snapshot: " + std::to_string(entries.size())
                          + " entries, at most "
                          + std::to_string(feed_limits::max_entries));
    std::vector<directory_item> out;
    out.reserve(entries.size());
    for (auto h : entries) {
      if (h.getNs().size() > feed_limits::max_ns_bytes
          || h.getKey().size() > feed_limits::max_key_tokens)
        return make_error(ec::message_limit_exceeded,
                          "feed snapshot: ns or key too long");
      if (!h.getInRam() && !h.getInSsd())
        return make_error(ec::malformed_message,
                          "feed snapshot: an entry held in no tier");
      directory_item it;
      it.ns = h.getNs().cStr();
      auto key = h.getKey();
      it.key.reserve(key.size());
      for (auto t : key)
        it.key.push_back(t);
      it.trimmable = h.getTrimmable();
      if (h.getInRam()) {
        it.tier = 0;
        it.bytes = h.getRamBytes();
        out.push_back(it);
      }
      if (h.getInSsd()) {
        it.tier = 1;
        it.bytes = h.getSsdBytes();
        out.push_back(std::move(it));
      }
    }
    return out;
  } catch (const kj::Exception& e) {
    return make_error(ec::malformed_message, std::string{"feed snapshot: "}
                                               + e.getDescription().cStr());
  }
}

feed_sequence::start
feed_sequence::subscribe_from(const std::string& node) const {
  auto i = nodes_.find(node);
  if (i == nodes_.end() || i->second.resync || !i->second.synced)
    return {};
  return {i->second.last + 1, i->second.incarnation};
}

void feed_sequence::subscribing(const std::string& node) {
  auto& r = nodes_[node];
  r.awaiting = true;
}

void feed_sequence::subscribe_failed(const std::string& node) {
  ++counts_.failed;
  if (auto i = nodes_.find(node); i != nodes_.end())
    i->second.awaiting = false;
}

follow_step feed_sequence::resync(record& r, uint8_t why) {
  ++(why == directory_batch::after_gap ? counts_.gaps : counts_.restarts);
  r.resync = why;
  return {follow_verdict::resync, {}};
}

follow_step feed_sequence::apply(const std::string& node, record& r,
                                 const std::vector<feed_event>& events,
                                 uint64_t first_seq) {
  if (first_seq > r.last + 1)
    return resync(r, directory_batch::after_gap);
  follow_step out;
  uint64_t n = events.size();
  if (n == 0 || first_seq + n - 1 <= r.last) {
    ++counts_.ignored;
    return out;
  }
  out.verdict = follow_verdict::apply;
  out.batch.node = node;
  for (auto& e : events)
    if (e.seq > r.last) {
      out.batch.items.push_back(item_of(e));
      ++counts_.events;
    }
  r.last = first_seq + n - 1;
  return out;
}

follow_step feed_sequence::on_batch(const std::string& node,
                                    uint64_t incarnation, uint64_t first_seq,
                                    const std::vector<feed_event>& events) {
  auto i = nodes_.find(node);
  if (i == nodes_.end() || i->second.awaiting || i->second.resync
      || !i->second.synced) {
    ++counts_.ignored;
    return {};
  }
  auto& r = i->second;
  if (incarnation != r.incarnation)
    return resync(r, directory_batch::after_restart);
  return apply(node, r, events, first_seq);
}

follow_step feed_sequence::on_following(const std::string& node,
                                        uint64_t incarnation,
                                        uint64_t first_seq,
                                        const std::vector<feed_event>& events) {
  auto i = nodes_.find(node);
  if (i == nodes_.end() || !i->second.awaiting) {
    ++counts_.ignored;
    return {};
  }
  auto& r = i->second;
  r.awaiting = false;
  // A feed answers `following` only to its own incarnation: another one
  // cannot be believed as a continuation.
  if (!r.synced || incarnation != r.incarnation)
    return resync(r, directory_batch::after_restart);
  return apply(node, r, events, first_seq);
}

follow_step feed_sequence::on_snapshot(const std::string& node,
                                       uint64_t incarnation, uint64_t seq,
                                       std::vector<directory_item> items) {
  auto i = nodes_.find(node);
  if (i == nodes_.end() || !i->second.awaiting) {
    ++counts_.ignored;
    return {};
  }
  auto& r = i->second;
  uint8_t why = r.resync != 0 ? r.resync : directory_batch::first_sync;
  r = record{incarnation, seq, false, 0, true};
  ++counts_.snapshots;
  follow_step out;
  out.verdict = follow_verdict::apply;
  out.batch.node = node;
  out.batch.replace = true;
  out.batch.why = why;
  out.batch.items = std::move(items);
  return out;
}

void feed_sequence::forget(const std::string& node) {
  nodes_.erase(node);
}

bool feed_sequence::follows(const std::string& node) const {
  return nodes_.count(node) > 0;
}

uint64_t feed_sequence::last(const std::string& node) const {
  auto i = nodes_.find(node);
  return i == nodes_.end() ? 0 : i->second.last;
}

namespace {

/// The parts of one node's snapshot gathered so far.
struct snapshot_parts {
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  std::vector<bool> have;
  size_t got = 0;
  size_t entries = 0;
  std::vector<actors::directory_item> items;
};

struct follower_state {
  feed_sequence seq;
  directory_sink_actor target;
  std::map<std::string, caf::actor> handles;
  caf::duration deadline;
  /// Snapshots whose parts are still arriving, by node.
  std::map<std::string, snapshot_parts> assembling;

  static inline const char* name = "kvtier.feed-follower";
};

using follower_actor = feed_follower_actor::stateful_base<follower_state>;

void refuse(follower_actor* self, const std::string& what) {
  ++self->state.seq.counts().refused;
  log::warn("kvtier feed follower: refused " + what);
}

void subscribe(follower_actor* self, const std::string& node);

void handle(follower_actor* self, const std::string& node, follow_step step) {
  auto& st = self->state;
  if (step.verdict == follow_verdict::resync)
    subscribe(self, node);
  else if (step.verdict == follow_verdict::apply && st.target)
    self->send(st.target, std::move(step.batch));
}

/// A part of `node`'s snapshot (the reply's, or one its feed pushed):
/// gathered until every part of that (incarnation, seq) is there, then
/// applied as one snapshot. A part of another snapshot starts over.
void on_part(follower_actor* self, const std::string& node,
             msg::FeedSnapshot::Reader s) {
  using actors::feed_limits;
  auto& st = self->state;
  auto fail = [&](const std::string& why) {
    st.assembling.erase(node);
    st.seq.subscribe_failed(node);
    refuse(self, "a snapshot of " + node + ": " + why);
  };
  size_t parts = std::max<uint32_t>(s.getParts(), 1);
  size_t part = s.getPart();
  if (parts > feed_limits::max_snapshot_parts || part >= parts)
    return fail("part " + std::to_string(part) + " of " + std::to_string(parts)
                + " (at most " + std::to_string(feed_limits::max_snapshot_parts)
                + ")");
  auto& a = st.assembling[node];
  if (a.have.size() != parts || a.incarnation != s.getIncarnation()
      || a.seq != s.getSeq())
    a = snapshot_parts{
      s.getIncarnation(), s.getSeq(), std::vector<bool>(parts), 0, 0, {}};
  if (a.have[part])
    return; // sent again (a subscription retried): the same bytes
  auto items = read_snapshot(s);
  if (!items)
    return fail(self->system().render(items.error()));
  a.entries += s.getEntries().size();
  if (a.entries > feed_limits::max_entries)
    return fail("over " + std::to_string(feed_limits::max_entries)
                + " entries");
  a.items.insert(a.items.end(), std::make_move_iterator(items->begin()),
                 std::make_move_iterator(items->end()));
  a.have[part] = true;
  if (++a.got < parts)
    return;
  auto done = std::move(a);
  st.assembling.erase(node);
  handle(self, node,
         st.seq.on_snapshot(node, done.incarnation, done.seq,
                            std::move(done.items)));
}

/// The reply of a subscription to `node` through `h`.
void on_reply(follower_actor* self, const std::string& node,
              const caf::actor& h,
              const msg::sealed<msg::SubscribeFeedReply>& m) {
  auto& st = self->state;
  auto i = st.handles.find(node);
  if (i == st.handles.end() || i->second != h)
    return; // down meanwhile, or up again behind another handle
  try {
    auto r = m.root();
    if (r.isFollowing()) {
      auto b = r.getFollowing();
      auto events = actors::read_batch(b);
      if (!events || b.getNode() != node) {
        st.seq.subscribe_failed(node);
        return refuse(self, "a following reply of " + node);
      }
      return handle(self, node,
                    st.seq.on_following(node, b.getIncarnation(),
                                        b.getFirstSeq(), *events));
    }
    auto s = r.getSnapshot();
    if (s.getNode() != node) {
      st.seq.subscribe_failed(node);
      return refuse(self, "a snapshot of " + node + " naming another node");
    }
    on_part(self, node, s);
  } catch (const kj::Exception& e) {
    st.seq.subscribe_failed(node);
    refuse(self, "a reply of " + node + ": " + e.getDescription().cStr());
  }
}

void subscribe(follower_actor* self, const std::string& node) {
  auto& st = self->state;
  auto i = st.handles.find(node);
  if (i == st.handles.end())
    return;
  auto h = i->second;
  auto from = st.seq.subscribe_from(node);
  st.seq.subscribing(node);
  msg::draft<msg::SubscribeFeed> d;
  d.root().setFromSeq(from.from_seq);
  d.root().setIncarnation(from.incarnation);
  self->request(h, st.deadline, std::move(d).seal())
    .then(
      [=](const msg::sealed<msg::SubscribeFeedReply>& m) {
        on_reply(self, node, h, m);
      },
      [=](caf::error&) {
        auto& s = self->state;
        if (auto j = s.handles.find(node);
            j != s.handles.end() && j->second == h)
          s.seq.subscribe_failed(node); // tried again at the next up
      });
}

feed_follower_actor::behavior_type follower(follower_actor* self,
                                            directory_sink_actor target,
                                            caf::duration deadline) {
  self->state.target = std::move(target);
  self->state.deadline = deadline;
  // Peers learn its handle (it subscribes to their feeds).
  actors::guard_signals(
    self, [self](const std::string& what) { refuse(self, what); });
  return {
    [self](actors::peer_up_atom, const std::string& node, const caf::actor& h) {
      self->state.handles[node] = h;
      subscribe(self, node);
    },
    [self](actors::peer_down_atom, const std::string& node) {
      self->state.handles.erase(node);
      self->state.assembling.erase(node);
      self->state.seq.forget(node);
    },
    // Every cluster listener hears the peers' loads; routing is the peer
    // tier's business, not the follower's.
    [](actors::peer_load_atom, const std::string&, const std::string&,
       const msg::sealed<msg::NodeLoad>&) {},
    [](actors::peer_load_atom, const std::string&, const std::string&) {},
    [self](const msg::sealed<msg::FeedBatch>& m) {
      auto& st = self->state;
      try {
        auto b = m.root();
        std::string node = b.getNode().cStr();
        auto i = st.handles.find(node);
        auto& sender = self->current_sender();
        if (i == st.handles.end() || !sender
            || sender->node() != i->second.node())
          return refuse(self, "a batch naming node '" + node
                                + "' from another sender");
        auto events = actors::read_batch(b);
        if (!events)
          return refuse(self, "a batch of " + node + ": "
                                + self->system().render(events.error()));
        handle(
          self, node,
          st.seq.on_batch(node, b.getIncarnation(), b.getFirstSeq(), *events));
      } catch (const kj::Exception& e) {
        refuse(self, std::string{"a batch: "} + e.getDescription().cStr());
      }
    },
    [self](const msg::sealed<msg::FeedSnapshot>& m) {
      // A snapshot part the feed pushed beside its reply.
      auto& st = self->state;
      try {
        auto s = m.root();
        std::string node = s.getNode().cStr();
        auto i = st.handles.find(node);
        auto& sender = self->current_sender();
        if (i == st.handles.end() || !sender
            || sender->node() != i->second.node())
          return refuse(self, "a snapshot part naming node '" + node
                                + "' from another sender");
        on_part(self, node, s);
      } catch (const kj::Exception& e) {
        refuse(self,
               std::string{"a snapshot part: "} + e.getDescription().cStr());
      }
    },
    [self](follower_stats_atom) { return self->state.seq.counts(); },
  };
}

} // namespace

feed_follower_actor spawn_feed_follower(caf::actor_system& sys,
                                        directory_sink_actor target,
                                        std::chrono::milliseconds deadline) {
  return sys.spawn(follower, std::move(target), caf::duration{deadline});
}

} // namespace kvtier::actors
