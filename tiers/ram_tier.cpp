#include "tiers/ram_tier.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace kvtier::tiers {

namespace {

/// The tier stores a prefix entry's state as a *body*: its layers,
/// attachments, session and namespace, with no tokens; its key lives once,
/// in the index (`prefix_index::key` rebuilds it from the tree's edges).
/// These put a key back on a body: whole (`keyed_state`, what spills,
/// snapshots and `item` hand out), or cut to the key's length
/// (`keyed_cut`, what a hit or an export lends: the key is the prompt's
/// first p tokens, which the donor's key shares).

entry keyed_state(const entry& body, token_seq key) {
  entry out;
  out.ns = body.ns;
  out.tokens = std::move(key);
  out.layers = body.layers;
  out.attachments = body.attachments;
  out.session = body.session;
  return out;
}

entry keyed_state(entry&& body, token_seq key) {
  body.tokens = std::move(key);
  return std::move(body);
}

entry keyed_cut(const entry& body, uint64_t length,
                std::span<const token> key) {
  auto n = key.size();
  KVTIER_ASSERT(n <= length);
  entry out;
  out.ns = body.ns;
  out.session = body.session;
  out.tokens.assign(key.begin(), key.end());
  if (n == length) {
    out.layers = body.layers;
    out.attachments = body.attachments; // exact-boundary: only at full length
    return out;
  }
  out.layers.reserve(body.layers.size());
  for (auto& l : body.layers) {
    auto cut = l.trimmed(n);
    KVTIER_ASSERT(static_cast<bool>(cut)); // the index offers trimmable lengths
    out.layers.push_back(std::move(*cut));
  }
  return out;
}

} // namespace

ram_tier::ram_tier(uint64_t capacity_bytes, bool cold_tier)
  : capacity_(capacity_bytes)
  , cold_(cold_tier) {}

ram_key ram_tier::key_of(const record& r) const {
  if (r.is_object)
    return {true, r.object_key, {}};
  return {false, r.state->ns, index_.key(r.ref)};
}

uint64_t ram_tier::length_of(const record& r) const {
  return r.is_object ? 0 : index_.length(r.ref);
}

entry ram_tier::keyed(const record& r) const {
  if (r.is_object)
    return *r.state;
  return keyed_state(*r.state, index_.key(r.ref));
}

ram_tier::record_it ram_tier::emplace(record rec,
                                      const std::vector<buffer_ref>& bufs,
                                      uint64_t now, bool resident) {
  rec.last_used = now;
  rec.serial = ++serials_;
  rec.leaving = !resident;
  ledger_.hold(bufs);
  auto& list = resident ? lru_ : leaving_;
  if (resident)
    resident_.hold(bufs);
  list.push_back(std::move(rec));
  return std::prev(list.end());
}

std::vector<buffer_ref> ram_tier::buffers_of(const record& r) {
  std::vector<buffer_ref> out;
  if (r.is_object) {
    entry holder; // collect_buffers walks entries
    holder.attachments = r.object;
    collect_buffers(holder, out);
  } else {
    collect_buffers(*r.state, out);
  }
  return out;
}

std::vector<uint64_t> ram_tier::ids_of(const std::vector<buffer_ref>& bufs) {
  std::vector<uint64_t> out;
  out.reserve(bufs.size());
  for (auto& b : bufs)
    out.push_back(b->id());
  return out;
}

uint64_t ram_tier::drop(record_it r, std::vector<released_buffer>* released,
                        std::vector<buffer_ref> refs) {
  if (r->is_object) {
    auto o = objects_.find(r->object_key);
    if (o != objects_.end() && o->second == r)
      objects_.erase(o);
  } else if (r->ref) {
    announce(*r, true);
    index_.erase(r->ref);
  }
  if (!r->pins.empty())
    --protected_;
  // The ledger's ids come from the state itself (immutable while held), so
  // the record keeps no list of them.
  if (refs.empty())
    refs = buffers_of(*r);
  auto ids = ids_of(refs);
  std::vector<uint64_t> gone;
  auto freed = ledger_.release(ids, released ? &gone : nullptr);
  if (!r->leaving)
    resident_.release(ids);
  if (released && !gone.empty()) {
    std::unordered_map<uint64_t, const buffer_ref*> by_id;
    for (auto& b : refs)
      by_id.emplace(b->id(), &b);
    for (auto id : gone)
      if (auto b = by_id.find(id); b != by_id.end())
        released->push_back({*b->second, (*b->second)->size()});
  }
  (r->leaving ? leaving_ : lru_).erase(r);
  return freed;
}

spill_order ram_tier::take(record_it r) {
  spill_order out;
  out.key = key_of(*r);
  out.needs_spill = !r->durable;
  out.serial = r->serial;
  auto refs = buffers_of(*r); // for the weak refs of what the tier lets go
  if (!r->is_object && r->ref)
    announce(*r, true); // before its state moves out
  // Moved out when no lent hit shares it still, else copied (views); keyed
  // from the index (the body holds no tokens).
  if (!r->is_object)
    out.state =
      r->state.use_count() == 1
        ? keyed_state(std::move(const_cast<entry&>(*r->state)), out.key.tokens)
        : keyed_state(*r->state, out.key.tokens);
  out.object = std::move(r->object);
  drop(r, &out.released, std::move(refs));
  return out;
}

bool ram_tier::leaves(record_it r) const {
  return cold_ && !r->is_object && !r->durable;
}

spill_order ram_tier::leave(record_it r) {
  spill_order out;
  out.key = key_of(*r);
  out.state = keyed_state(*r->state, out.key.tokens);
  out.serial = r->serial;
  out.leaving = true;
  out.needs_spill = !std::exchange(r->writing, true);
  if (!r->pins.empty()) { // protection leaves with residency
    r->pins.clear();
    --protected_;
  }
  resident_.release(ids_of(buffers_of(*r)));
  r->leaving = true;
  leaving_.splice(leaving_.end(), lru_, r);
  return out;
}

void ram_tier::rejoin(record_it r, uint64_t now) {
  resident_.hold(buffers_of(*r));
  r->leaving = false;
  r->gone_as = ram_change_kind::evicted; // resident again: evicted later
  lru_.splice(lru_.end(), leaving_, r);
  r->last_used = now;
  index_.touch(r->ref);
  ++counters_.rejoined;
}

uint64_t ram_tier::would_free(record_it r) const {
  // A buffer goes with `r` when no other item holds it and no one outside
  // the tier does: its only references are r's own views (and `refs`).
  std::unordered_map<uint64_t, long> views;
  auto count = [&](const std::vector<view>& segs) {
    for (auto& s : segs)
      if (s.buf)
        ++views[s.buf->id()];
  };
  for (auto& l : r->state->layers)
    count(l.segments);
  for (auto& a : r->state->attachments)
    count(a.segments);
  for (auto& a : r->object)
    count(a.segments);
  if (!r->is_object && r->state.use_count() > 1)
    return 0; // a lent hit shares the whole entry: all of it stays
  uint64_t n = 0;
  for (auto& b : buffers_of(*r))
    if (ledger_.holders(b->id()) == 1 && b.use_count() == views[b->id()] + 1)
      n += b->size();
  return n;
}

void ram_tier::touch(record_it r, uint64_t now) {
  lru_.splice(lru_.end(), lru_, r);
  r->last_used = now;
  if (!r->is_object)
    index_.touch(r->ref);
}

bool ram_tier::protects(record_it r) const {
  return !r->pins.empty();
}

void ram_tier::pin(record_it r, uint64_t id) {
  if (r->pins.empty())
    ++protected_;
  r->pins.push_back(id);
}

bool ram_tier::any(record_it) const {
  return true;
}

bool ram_tier::unleased(record_it r) const {
  return r->leases.empty();
}

bool ram_tier::evictable(record_it r) const {
  return r->leases.empty() && !protects(r);
}

ram_tier::record_it ram_tier::lru_where(bool (ram_tier::*ok)(record_it) const,
                                        record_it skip) {
  for (auto r = lru_.begin(); r != lru_.end(); ++r)
    if (r != skip && (this->*ok)(r))
      return r;
  return lru_.end();
}

ram_tier::record_it ram_tier::victim(record_it skip) {
  // Plain items first, then protected ones, then those an interest holds:
  // the cap wins in the end. `skip` (a put's newcomer) is never chosen.
  auto r = lru_where(&ram_tier::evictable, skip);
  if (r == lru_.end())
    r = lru_where(&ram_tier::unleased, skip);
  if (r == lru_.end())
    r = lru_where(&ram_tier::any, skip);
  return r;
}

std::vector<spill_order> ram_tier::evict_over_cap(record_it keep) {
  // `keep` alone fits the cap (puts refuse larger items), so evicting
  // everything else always gets under it.
  std::vector<spill_order> out;
  while (resident_.bytes() > capacity_) {
    auto v = victim(keep);
    KVTIER_ASSERT(v != lru_.end());
    out.push_back(leaves(v) ? leave(v) : take(v));
    ++counters_.evictions;
  }
  return out;
}

size_t ram_tier::supersede(record_it r) {
  auto floor = index_.floor(r->ref);
  if (floor >= length_of(*r))
    return 0; // untrimmable: shorter ancestors must survive
  size_t n = 0;
  for (auto a : index_.ancestors(r->ref)) {
    if (index_.length(a) < floor)
      break; // ancestors come nearest first: the rest are shorter still
    auto old = index_.handle(a);
    old->gone_as = ram_change_kind::superseded;
    ++n;
    if (cold_ && old->writing) {
      // Its write still holds its bytes: it stays findable (leaving)
      // until that write settles, then leaves without a second one.
      if (!old->leaving)
        leave(old);
      continue;
    }
    drop(old);
  }
  return n;
}

void ram_tier::announce(record& r, bool gone, const token_seq* tokens) {
  if (!changes_ || (gone && std::exchange(r.announced_gone, true)))
    return;
  uint64_t bytes = 0;
  for (auto& l : r.state->layers)
    bytes += l.byte_length();
  token_seq rebuilt;
  if (!tokens) // the key from the index (the body holds none)
    rebuilt = index_.key(r.ref);
  changes_(ram_change{gone ? r.gone_as : ram_change_kind::stored, r.state->ns,
                      tokens ? *tokens : rebuilt, bytes,
                      index_.floor(r.ref) < index_.length(r.ref)});
}

void ram_tier::notify(const token_seq& tokens, const std::string& ns) {
  if (!observer_)
    return;
  try {
    observer_(tokens, ns);
  } catch (...) {
    ++counters_.observer_errors; // contained: the put stands
  }
}

put_result ram_tier::hand_back(spill_order&& s) {
  ++counters_.oversize;
  put_result out;
  out.evicted.push_back(std::move(s));
  return out;
}

put_result ram_tier::hold_oversize(entry&& e,
                                   const std::vector<buffer_ref>& bufs,
                                   uint64_t now) {
  // Too large to keep, but its bytes live on in the write it goes to:
  // held as leaving meanwhile, so it stays servable (no supersession: it
  // may never be stored). It replaces an item of its key, as any put.
  ++counters_.oversize;
  auto floor = trim_floor(e);
  auto key = std::move(e.tokens); // held once, in the index
  e.tokens = {};
  auto r = emplace(
    record{.writing = true, .state = std::make_shared<entry>(std::move(e))},
    bufs, now, false);
  auto ins = index_.insert(r->state->ns, key, r, floor);
  r->ref = ins.ref;
  if (ins.replaced) {
    auto old = *ins.replaced;
    old->ref = entry_ref{};
    r->leases = std::move(old->leases);
    drop(old);
    ++counters_.replacements;
  }
  announce(*r, false, &key); // held (servable) until its write settles
  spill_order s;
  s.key = {false, r->state->ns, key};
  s.state = keyed_state(*r->state, std::move(key));
  s.serial = r->serial;
  s.leaving = true;
  put_result out;
  out.evicted.push_back(std::move(s));
  return out;
}

caf::expected<put_result> ram_tier::put(entry&& e, uint64_t now, bool durable,
                                        protection p) {
  if (e.tokens.empty())
    return make_error(ec::invalid_argument, "put of an entry with no tokens");
  if (auto err = e.validate())
    return err;
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  bool oversize = distinct_bytes(bufs) > capacity_;
  if (oversize && (!cold_ || durable))
    return hand_back({.key = {false, e.ns, e.tokens},
                      .state = std::move(e),
                      .object = {},
                      .needs_spill = true,
                      .leaving = false,
                      .serial = 0,
                      .released = {}});
  if (oversize)
    return hold_oversize(std::move(e), bufs, now);
  put_result out;
  auto floor = trim_floor(e);
  // The key is held once, in the index: the stored body has no tokens.
  auto key = std::move(e.tokens);
  e.tokens = {};
  auto r = emplace(
    record{.durable = durable, .state = std::make_shared<entry>(std::move(e))},
    bufs, now);
  auto ins = index_.insert(r->state->ns, key, r, floor);
  r->ref = ins.ref;
  r->file_tokens = durable ? key.size() : 0;
  if (ins.replaced) {
    auto old = *ins.replaced;
    old->ref = entry_ref{};                 // the index already points at r
    r->leases = std::move(old->leases);     // interests follow the key
    r->pins = std::exchange(old->pins, {}); // and so do protections
    drop(old); // its pins are r's now: protected_ is unchanged
    ++counters_.replacements;
    out.replaced = true;
  }
  if (p == protection::pin) {
    out.pin = ++pins_;
    pin(r, out.pin);
  }
  out.serial = r->serial;
  out.superseded = supersede(r);
  counters_.supersessions += out.superseded;
  out.evicted = evict_over_cap(r);
  out.kept = true;
  announce(*r, false, &key);
  notify(key, r->state->ns);
  return out;
}

std::optional<ram_hit>
ram_tier::lookup(std::span<const token> prompt, std::string_view ns,
                 const std::optional<std::string>& session, uint64_t now,
                 uint64_t better_than) {
  ++counters_.prefix_scans;
  auto m = index_.longest_usable(ns, prompt);
  if (!m || m->length <= better_than) {
    ++counters_.misses;
    if (session)
      ++counters_.session_misses;
    return std::nullopt;
  }
  auto r = index_.handle(m->ref); // it trims to m->length (its floor says)
  ++counters_.hits;
  if (session)
    ++(r->state->session == session ? counters_.session_hits
                                    : counters_.session_misses);
  // Lent as the donor itself (one shared reference, whatever its layer
  // count) and the usable length; views are cut when asked for.
  ram_hit out{r->state, m->length, index_.length(m->ref), r->serial, {}};
  if (!r->leaving) {
    touch(r, now);
  } else if (distinct_bytes(buffers_of(*r)) <= capacity_) {
    rejoin(r, now); // in use again: resident, its write carries on
    out.evicted = evict_over_cap(r);
  } else {
    r->last_used = now; // too large to be resident: it stays leaving
    index_.touch(r->ref);
  }
  return out;
}

std::optional<entry> ram_tier::export_prefix(std::span<const token> prompt,
                                             std::string_view ns, uint64_t now,
                                             uint64_t better_than) {
  ++counters_.prefix_scans;
  auto m = index_.longest_usable(ns, prompt);
  if (!m || m->length <= better_than)
    return std::nullopt;
  auto r = index_.handle(m->ref);
  // The index offers only lengths the donor trims to (its floor says).
  auto served =
    keyed_cut(*r->state, index_.length(m->ref), prompt.first(m->length));
  if (!r->leaving)
    touch(r, now);
  return served;
}

uint64_t ram_tier::peek_prefix_len(std::span<const token> prompt,
                                   std::string_view ns) const {
  ++counters_.prefix_scans;
  auto m = index_.longest_usable(ns, prompt);
  return m ? m->length : 0;
}

bool ram_tier::contains(std::string_view ns,
                        std::span<const token> tokens) const {
  return static_cast<bool>(index_.find(ns, tokens));
}

ram_tier::record_it ram_tier::find(const ram_key& key) const {
  auto none = const_cast<std::list<record>&>(lru_).end();
  if (key.object) {
    auto o = objects_.find(key.name);
    return o == objects_.end() ? none : o->second;
  }
  auto ref = index_.find(key.name, key.tokens);
  return ref ? index_.handle(ref) : none;
}

bool ram_tier::mark_durable(const ram_key& key, bool durable,
                            uint64_t file_tokens) {
  auto r = find(key);
  if (r == lru_.end())
    return false;
  r->durable = durable;
  r->file_tokens = !durable ? 0 : file_tokens > 0 ? file_tokens : length_of(*r);
  return true;
}

size_t ram_tier::mark_not_durable(std::string_view ns,
                                  std::span<const token> tokens) {
  size_t n = 0;
  for (auto ref : index_.prefixes(ns, tokens)) {
    auto r = index_.handle(ref);
    if (r->durable && r->file_tokens == tokens.size()) {
      r->durable = false;
      r->file_tokens = 0;
      ++n;
    }
  }
  counters_.backing_lost += n;
  return n;
}

std::vector<ram_key> ram_tier::idle(uint64_t now, uint64_t idle_ms) const {
  std::vector<ram_key> out;
  for (auto& r : lru_)
    if (r.leases.empty() && r.last_used <= now && now - r.last_used >= idle_ms)
      out.push_back(key_of(r));
  return out;
}

std::optional<ram_item> ram_tier::item(const ram_key& key) const {
  auto r = find(key);
  if (r == lru_.end())
    return std::nullopt;
  return ram_item{r->serial, r->durable, keyed(*r), r->leaving, r->writing};
}

std::vector<ram_key> ram_tier::undurable() const {
  std::vector<ram_key> out;
  for (auto& r : lru_)
    if (!r.is_object && !r.durable && !r.writing)
      out.push_back(key_of(r));
  return out;
}

std::optional<ram_item> ram_tier::begin_write(const ram_key& key,
                                              uint64_t serial) {
  auto r = find(key);
  if (r == lru_.end() || r->is_object || r->durable || r->writing
      || (serial != 0 && r->serial != serial))
    return std::nullopt;
  r->writing = true;
  return ram_item{r->serial, r->durable, keyed(*r), r->leaving, r->writing};
}

std::optional<spill_order> ram_tier::write_settled(const ram_key& key,
                                                   uint64_t serial,
                                                   write_result result,
                                                   uint64_t file_tokens) {
  auto r = find(key);
  if (r == lru_.end() || r->serial != serial || result == write_result::failed)
    return std::nullopt;
  r->writing = false;
  bool durable = result == write_result::durable;
  if (r->leaving) {
    if (!durable)
      ++counters_.leaving_dropped;
    return take(r); // durable elsewhere, or dropped by the SSD's policy
  }
  if (durable) {
    r->durable = true;
    r->file_tokens = file_tokens > 0 ? file_tokens : length_of(*r);
  }
  return std::nullopt;
}

std::optional<spill_order> ram_tier::remove(const ram_key& key) {
  auto r = find(key);
  if (r == lru_.end())
    return std::nullopt;
  r->gone_as = ram_change_kind::demoted;
  return take(r);
}

std::optional<spill_order> ram_tier::pop_lru() {
  if (lru_.empty())
    return std::nullopt;
  ++counters_.evictions;
  auto v = victim(lru_.end());
  return leaves(v) ? leave(v) : take(v);
}

reclaim_counts& ram_tier::reclaim_pass(reclaim_counts& out, uint64_t want,
                                       reclaim_order order, bool durable_pass) {
  auto counted = [&] {
    return order == reclaim_order::freeing
             ? out.freed_bytes
             : out.released_bytes + out.dropped_bytes;
  };
  for (auto r = lru_.begin(); r != lru_.end() && counted() < want;) {
    auto next = std::next(r);
    // A write out holds the bytes anyway (and will make the item durable).
    // Durable objects go with the durable pass; optional state is entries.
    bool candidate = (durable_pass || !r->is_object)
                     && r->durable == durable_pass && evictable(r)
                     && !r->writing;
    if (candidate && (order == reclaim_order::lru || would_free(r) > 0)) {
      std::vector<released_buffer> rel;
      auto ledger = drop(r, &rel);
      auto died = died_bytes(rel);
      auto n = order == reclaim_order::freeing ? died : ledger;
      out.freed_bytes += died;
      if (durable_pass) {
        ++out.released;
        out.released_bytes += n;
      } else {
        ++out.dropped;
        out.dropped_bytes += n;
        ++counters_.boundary_dropped;
      }
    }
    r = next;
  }
  return out;
}

reclaim_counts ram_tier::reclaim(uint64_t want_bytes, reclaim_order order) {
  reclaim_counts out;
  reclaim_pass(out, want_bytes, order, true); // copies durable on SSD
  if (want_bytes != all_durable)
    reclaim_pass(out, want_bytes, order, false); // optional state, dropped
  return out;
}

bool ram_tier::add_interest(const ram_key& key, uint64_t lease) {
  auto r = find(key);
  if (r == lru_.end())
    return false;
  r->leases.push_back(lease);
  leases_[lease].push_back(key);
  return true;
}

void ram_tier::drop_interest(uint64_t lease) {
  auto l = leases_.find(lease);
  if (l == leases_.end())
    return;
  for (auto& key : l->second) {
    auto r = find(key); // maybe gone, or another item under the same key
    if (r == lru_.end())
      continue;
    auto it = std::find(r->leases.begin(), r->leases.end(), lease);
    if (it != r->leases.end())
      r->leases.erase(it);
  }
  leases_.erase(l);
}

std::optional<uint64_t> ram_tier::protect(std::string_view ns,
                                          std::span<const token> tokens) {
  auto ref = index_.find(ns, tokens);
  if (!ref)
    return std::nullopt;
  auto id = ++pins_;
  pin(index_.handle(ref), id);
  return id;
}

bool ram_tier::unprotect(std::string_view ns, std::span<const token> tokens,
                         uint64_t pin) {
  auto ref = index_.find(ns, tokens);
  if (!ref)
    return false;
  auto r = index_.handle(ref);
  auto it = std::find(r->pins.begin(), r->pins.end(), pin);
  if (it == r->pins.end())
    return false;
  r->pins.erase(it);
  if (r->pins.empty())
    --protected_;
  return true;
}

bool ram_tier::is_protected(std::string_view ns,
                            std::span<const token> tokens) const {
  auto ref = index_.find(ns, tokens);
  return ref && protects(index_.handle(ref));
}

void ram_tier::clear() {
  for (auto* list : {&lru_, &leaving_})
    for (auto& r : *list)
      if (!r.is_object && r.ref)
        announce(r, true);
  index_.clear();
  objects_.clear();
  protected_ = 0;
  leases_.clear();
  lru_.clear();
  leaving_.clear();
  ledger_.clear();
  resident_.clear();
}

ram_counters ram_tier::counters() const {
  auto c = counters_;
  c.entries = index_.size();
  c.objects = objects_.size();
  c.bytes = ledger_.bytes();
  c.capacity = capacity_;
  c.protected_entries = protected_;
  c.leaving_entries = leaving_.size();
  c.leaving_bytes = ledger_.bytes() - resident_.bytes();
  return c;
}

entry ram_hit::state(std::span<const token> prompt) const {
  KVTIER_ASSERT(prompt.size() >= length);
  return keyed_cut(*donor, donor_length, prompt.first(length));
}

uint64_t died_bytes(const std::vector<released_buffer>& released) noexcept {
  uint64_t n = 0;
  for (auto& b : released)
    if (b.buf.expired())
      n += b.size;
  return n;
}

} // namespace kvtier::tiers
