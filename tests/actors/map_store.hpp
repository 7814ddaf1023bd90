// A store that holds entries in a map: the test tier that shows what adding
// a tier takes (docs/actors.md "Adding a tier"). It implements the composed
// interface `actors::store_actor` and nothing else, and the tests wire it
// with one `runtime::store_plan`: it takes part in lookup (FindPrefix,
// RestoreEntry, PrefetchPrefix, ReleasePrefetch), takes RAM's evictions and
// the checkpoints (SpillEntry, EraseEntry, RemoveCheckpoints, its removals
// told as SsdEvictEvents), flush, close, stats and the report (its counters
// declared once, actors/tier_counters.hpp), so /stats and /metrics show
// them.
//
// Policy: whole entries by key, a byte cap with oldest-first eviction;
// a prompt is served by the longest entry that is a prefix of it, or by a
// trimmable one cut back to the common prefix (never the whole prompt: at
// least one token is left to compute). "Durable" means held in the map.
// Objects are refused (it keeps prefix state and checkpoints only).
#pragma once

#include "actors/codec.hpp"
#include "actors/interfaces.hpp"
#include "actors/tier_counters.hpp"
#include "tiers/entry_message.hpp"

#include <array>
#include <map>
#include <set>

namespace kvtier::testing {

using actors::sealed;

struct map_store_state {
  static inline const char* name = "map-store";
  /// By key; `order` gives the oldest first.
  std::map<std::string, std::pair<tiers::storage_key, tiers::entry>> held;
  std::map<uint64_t, std::string> order;
  uint64_t next = 1, bytes = 0, cap_bytes = 0;
  std::set<uint64_t> leases;
  uint64_t next_lease = 1;
  bool closed = false;
  caf::weak_actor_ptr ram, checkpoints;
  /// Its counters, in the order of `decls`.
  std::array<uint64_t, 7> values{};
  static constexpr std::array<actors::counter_decl, 7> decls{{
    {"entries", "entries the map holds", true},
    {"bytes", "bytes of the entries the map holds", true},
    {"spills", "entries spilled to the map"},
    {"finds", "lookups the map answered with a candidate"},
    {"restores", "entries the map restored"},
    {"evictions", "entries evicted over the map's cap"},
    {"flushes", "flushes the map answered"},
  }};
  enum counter : size_t {
    entries_c,
    bytes_c,
    spills_c,
    finds_c,
    restores_c,
    evictions_c,
    flushes_c
  };
};

using map_store_pointer =
  actors::store_actor::stateful_pointer<map_store_state>;

namespace map_store_ops {

inline std::string id_of(const tiers::storage_key& k) {
  std::string out{static_cast<char>(k.kind)};
  out += std::to_string(k.request) + '/' + k.ns + '/';
  for (auto t : k.tokens)
    out += std::to_string(t) + ',';
  return out;
}

/// Tells the listener of `k`'s kind that the map stopped holding it.
inline void removed(map_store_pointer self, const tiers::storage_key& k,
                    uint64_t bytes, msg::SsdEvictReason why) {
  auto to = k.kind == tiers::key_kind::checkpoint ? self->state.checkpoints
                                                  : self->state.ram;
  auto dest = to.lock();
  if (!dest)
    return;
  msg::draft<msg::SsdEvictEvent> d;
  tiers::write_key(d.root().initKey(), k);
  d.root().setReason(why);
  d.root().setFileBytes(bytes);
  self->send(caf::actor_cast<actors::spill_listener_actor>(dest),
             std::move(d).seal());
}

inline bool erase(map_store_pointer self, const std::string& id,
                  msg::SsdEvictReason why) {
  auto& st = self->state;
  auto i = st.held.find(id);
  if (i == st.held.end())
    return false;
  auto bytes = i->second.second.byte_length();
  auto key = i->second.first;
  st.bytes -= bytes;
  for (auto o = st.order.begin(); o != st.order.end(); ++o)
    if (o->second == id) {
      st.order.erase(o);
      break;
    }
  st.held.erase(i);
  removed(self, key, bytes, why);
  return true;
}

/// The best entry for `prompt` in `ns` longer than `better_than`: its id
/// and the usable tokens.
inline std::optional<std::pair<std::string, uint64_t>>
best(map_store_pointer self, const std::string& ns,
     const tiers::token_seq& prompt, uint64_t better_than) {
  std::optional<std::pair<std::string, uint64_t>> out;
  if (self->state.closed || prompt.empty())
    return out;
  for (auto& [id, kv] : self->state.held) {
    auto& [key, e] = kv;
    if (key.kind != tiers::key_kind::prefix || key.ns != ns)
      continue;
    auto n = std::min<uint64_t>(tiers::common_prefix(e.tokens, prompt),
                                prompt.size() - 1);
    if (n == 0 || n <= better_than || (out && n <= out->second))
      continue;
    if (n == e.size() || e.can_trim_to(n))
      out = std::pair{id, n};
  }
  return out;
}

inline caf::expected<tiers::entry>
served(map_store_pointer self, const std::string& id, uint64_t usable) {
  auto i = self->state.held.find(id);
  if (i == self->state.held.end())
    return make_error(ec::not_found, "the map holds no such entry");
  ++self->state.values[map_store_state::restores_c];
  auto& e = i->second.second;
  return usable == e.size() ? e : e.trimmed(usable);
}

inline sealed<msg::SpillEntryReply> spill(map_store_pointer self,
                                          const sealed<msg::SpillEntry>& m) {
  auto& st = self->state;
  auto in = m.root();
  auto answer = [&](msg::SpillOutcome o, const caf::error& err = {}) {
    if (in.getNotify()) {
      msg::draft<msg::SpillSettled> d;
      d.root().setOrderId(in.getOrderId());
      d.root().setOutcome(o);
      actors::write_error(d.root().initError(), err);
      d.root().setAttempts(1);
      self->send(
        caf::actor_cast<actors::ram_tier_actor>(self->current_sender()),
        std::move(d).seal());
      o = msg::SpillOutcome::QUEUED;
    }
    msg::draft<msg::SpillEntryReply> d;
    d.root().setOrderId(in.getOrderId());
    d.root().setOutcome(o);
    actors::write_error(d.root().initError(), err);
    return std::move(d).seal();
  };
  if (st.closed)
    return answer(msg::SpillOutcome::REFUSED,
                  make_error(ec::closed, "the map store is closed"));
  if (in.getItem().isObject())
    return answer(
      msg::SpillOutcome::REFUSED,
      make_error(ec::unsupported, "the map store keeps no objects"));
  auto e = tiers::read_entry(m, in.getItem().getEntry());
  if (!e)
    return answer(msg::SpillOutcome::REFUSED, e.error());
  auto key = in.getKind().isCheckpoint()
               ? tiers::storage_key::checkpoint(
                 in.getKind().getCheckpoint().getRequest(),
                 in.getKind().getCheckpoint().getAttempt(), e->ns, e->tokens)
               : tiers::storage_key::prefix(e->ns, e->tokens);
  auto id = id_of(key);
  if (st.held.count(id) > 0)
    return answer(msg::SpillOutcome::ALREADY_DURABLE);
  auto bytes = e->byte_length();
  if (bytes > st.cap_bytes)
    return answer(msg::SpillOutcome::REFUSED,
                  make_error(ec::queue_full, "larger than the map's cap"));
  while (st.bytes + bytes > st.cap_bytes && !st.order.empty()) {
    ++st.values[map_store_state::evictions_c];
    erase(self, st.order.begin()->second, msg::SsdEvictReason::EVICTED);
  }
  st.held.emplace(id, std::pair{key, std::move(*e)});
  st.order.emplace(st.next++, id);
  st.bytes += bytes;
  ++st.values[map_store_state::spills_c];
  return answer(msg::SpillOutcome::DURABLE);
}

inline sealed<msg::FlushStateReply> flush(map_store_pointer self) {
  auto& st = self->state;
  ++st.values[map_store_state::flushes_c];
  msg::draft<msg::FlushStateReply> d;
  auto out = d.root().initResult();
  out.setDurable(true); // what it took is held: nothing pending
  uint64_t longest = 0;
  for (auto& [id, kv] : st.held)
    longest = std::max<uint64_t>(longest, kv.second.size());
  out.setEntries(st.held.size());
  out.setLongestDurablePrefix(longest);
  return std::move(d).seal();
}

inline sealed<msg::ReadReportReply> report(map_store_pointer self) {
  auto& st = self->state;
  st.values[map_store_state::entries_c] = st.held.size();
  st.values[map_store_state::bytes_c] = st.bytes;
  msg::draft<msg::ReadReportReply> d;
  actors::write_counters(d.root(), "map", map_store_state::decls, st.values);
  return std::move(d).seal();
}

} // namespace map_store_ops

/// The behaviour: a map store of `cap_bytes`.
inline actors::store_actor::behavior_type map_store(map_store_pointer self,
                                                    uint64_t cap_bytes) {
  namespace ops = map_store_ops;
  self->state.cap_bytes = cap_bytes;
  return {
    [self](const sealed<msg::FindPrefix>& m) {
      auto in = m.root();
      msg::draft<msg::FindPrefixReply> d;
      auto b =
        ops::best(self, in.getNs().cStr(), tiers::read_tokens(in.getPrompt()),
                  in.getBetterThan());
      if (b) {
        ++self->state.values[map_store_state::finds_c];
        d.root().setUsableTokens(b->second);
        tiers::write_key(d.root().initKey(),
                         self->state.held.at(b->first).first);
      }
      return std::move(d).seal();
    },
    [self](const sealed<msg::RestoreEntry>& m) {
      auto key = tiers::read_key(m.root().getKey());
      auto e = ops::served(self, ops::id_of(key), m.root().getUsableTokens());
      msg::draft<msg::RestoreEntryReply> d;
      d.root().setDurable(static_cast<bool>(e));
      if (e)
        tiers::write_entry(d, d.root().initEntry(), *e);
      else
        actors::write_error(d.root().initFailed(), e.error());
      return std::move(d).seal();
    },
    [self](const sealed<msg::PrefetchPrefix>& m) {
      auto in = m.root();
      msg::draft<msg::PrefetchPrefixReply> d;
      auto b =
        ops::best(self, in.getNs().cStr(), tiers::read_tokens(in.getPrompt()),
                  in.getBetterThan());
      if (!b)
        return std::move(d).seal();
      auto e = ops::served(self, b->first, b->second);
      if (!e)
        return std::move(d).seal();
      auto lease = self->state.next_lease++;
      self->state.leases.insert(lease);
      d.root().setLeaseId(lease);
      d.root().setReadsStarted(1);
      d.root().setTokens(b->second);
      tiers::write_entry(d, d.root().initEntry(), *e);
      return std::move(d).seal();
    },
    [self](const sealed<msg::ReleasePrefetch>& m) {
      msg::draft<msg::ReleasePrefetchReply> d;
      d.root().setReleased(self->state.leases.erase(m.root().getLeaseId()) > 0);
      return std::move(d).seal();
    },
    [self](const sealed<msg::FlushState>&) { return ops::flush(self); },
    [self](const sealed<msg::CloseService>&) {
      self->state.closed = true;
      self->state.leases.clear();
      msg::draft<msg::CloseServiceReply> d;
      d.root().initResult().setDurable(true); // nothing released unwritten
      return std::move(d).seal();
    },
    [](const sealed<msg::ReadStats>&) {
      return msg::draft<msg::ReadStatsReply>{}.seal(); // nothing pending
    },
    [self](const sealed<msg::ReadReport>&) { return ops::report(self); },
    [self](const sealed<msg::SpillEntry>& m) { return ops::spill(self, m); },
    [self](const sealed<msg::EraseEntry>& m) {
      msg::draft<msg::EraseEntryReply> d;
      d.root().setErased(
        ops::erase(self, ops::id_of(tiers::read_key(m.root().getKey())),
                   msg::SsdEvictReason::ERASED));
      return std::move(d).seal();
    },
    [self](const sealed<msg::RemoveCheckpoints>& m) {
      std::vector<std::string> gone;
      for (auto& [id, kv] : self->state.held)
        if (kv.first.kind == tiers::key_kind::checkpoint
            && kv.first.request == m.root().getRequest()
            && kv.first.ns == m.root().getNs().cStr())
          gone.push_back(id);
      for (auto& id : gone)
        ops::erase(self, id, msg::SsdEvictReason::ERASED);
      msg::draft<msg::RemoveCheckpointsReply> d;
      d.root().setDurable(true);
      return std::move(d).seal();
    },
    [self](actors::attach_ram_atom, const actors::spill_listener_actor& l) {
      self->state.ram = caf::actor_cast<caf::weak_actor_ptr>(l);
    },
    [self](actors::attach_ckpt_atom, const actors::spill_listener_actor& l) {
      self->state.checkpoints = caf::actor_cast<caf::weak_actor_ptr>(l);
    },
  };
}

} // namespace kvtier::testing
