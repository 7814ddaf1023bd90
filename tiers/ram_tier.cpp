#include "tiers/ram_tier.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace kvtier::tiers {

ram_tier::ram_tier(uint64_t capacity_bytes, bool cold_tier)
  : capacity_(capacity_bytes)
  , cold_(cold_tier) {}

ram_key ram_tier::key_of(const record& r) const {
  if (r.is_object)
    return {true, r.more->object_key, {}};
  return {false, index_.ns(r.ref), index_.key(r.ref)};
}

uint64_t ram_tier::length_of(const record& r) const {
  return r.is_object ? 0 : index_.length(r.ref);
}

entry ram_tier::keyed(const record& r) const {
  if (r.is_object)
    return {};
  // The body holds no tokens: its key is the index's path to `ref`.
  return r.state.keyed(index_.ns(r.ref), index_.key(r.ref));
}

ram_tier::record_id ram_tier::emplace(record&& init,
                                      const std::vector<buffer_ref>& bufs,
                                      uint64_t now, bool resident) {
  auto id = records_.make();
  auto& r = rec(id);
  r = std::move(init);
  r.last_used = now;
  r.serial = ++serials_;
  r.leaving = !resident;
  ledger_.hold(bufs);
  if (resident)
    resident_.hold(bufs);
  records_.link_back(resident ? lru_ : leaving_, id);
  return id;
}

std::vector<buffer_ref> ram_tier::buffers_of(const record& r) {
  std::vector<buffer_ref> out;
  if (r.is_object) {
    entry holder; // collect_buffers walks entries
    holder.attachments = r.more->object;
    collect_buffers(holder, out);
  } else {
    r.state.collect_buffers(out);
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

uint64_t ram_tier::drop(record_id id, std::vector<released_buffer>* released,
                        std::vector<buffer_ref> refs) {
  auto& r = rec(id);
  if (r.is_object) {
    auto o = objects_.find(r.more->object_key);
    if (o != objects_.end() && o->second == id)
      objects_.erase(o);
  } else if (r.ref) {
    announce(r, true);
    index_.erase(r.ref);
  }
  if (!r.pins().empty())
    --protected_;
  // The ledger's ids come from the state itself (immutable while held), so
  // the record keeps no list of them.
  if (refs.empty())
    refs = buffers_of(r);
  auto ids = ids_of(refs);
  std::vector<uint64_t> gone;
  auto freed = ledger_.release(ids, released ? &gone : nullptr);
  if (!r.leaving)
    resident_.release(ids);
  if (released && !gone.empty()) {
    std::unordered_map<uint64_t, const buffer_ref*> by_id;
    for (auto& b : refs)
      by_id.emplace(b->id(), &b);
    for (auto id : gone)
      if (auto b = by_id.find(id); b != by_id.end())
        released->push_back({*b->second, (*b->second)->size()});
  }
  records_.unlink(r.leaving ? leaving_ : lru_, id);
  records_.free(id);
  return freed;
}

spill_order ram_tier::take(record_id id) {
  auto& r = rec(id);
  spill_order out;
  out.key = key_of(r);
  out.needs_spill = !r.durable;
  out.serial = r.serial;
  auto refs = buffers_of(r); // for the weak refs of what the tier lets go
  if (!r.is_object && r.ref)
    announce(r, true); // before its state moves out
  // Moved out when no lent hit shares it still, else copied (views); keyed
  // from the index (the body holds no tokens).
  if (!r.is_object)
    out.state =
      std::move(r.state).release(out.key.name, token_seq(out.key.tokens));
  else
    out.object = std::move(r.more->object);
  drop(id, &out.released, std::move(refs));
  return out;
}

bool ram_tier::leaves(record_id id) const {
  auto& r = rec(id);
  return cold_ && !r.is_object && !r.durable;
}

spill_order ram_tier::leave(record_id id) {
  auto& r = rec(id);
  spill_order out;
  out.key = key_of(r);
  out.state = r.state.keyed(out.key.name, token_seq(out.key.tokens));
  out.serial = r.serial;
  out.leaving = true;
  out.needs_spill = !r.writing;
  r.writing = true;
  if (!r.pins().empty()) { // protection leaves with residency
    r.more->pins.clear();
    r.shrink();
    --protected_;
  }
  resident_.release(ids_of(buffers_of(r)));
  r.leaving = true;
  records_.unlink(lru_, id);
  records_.link_back(leaving_, id);
  return out;
}

void ram_tier::rejoin(record_id id, uint64_t now) {
  auto& r = rec(id);
  resident_.hold(buffers_of(r));
  r.leaving = false;
  r.gone_as = ram_change_kind::evicted; // resident again: evicted later
  records_.unlink(leaving_, id);
  records_.link_back(lru_, id);
  r.last_used = now;
  index_.touch(r.ref);
  ++counters_.rejoined;
}

uint64_t ram_tier::would_free(record_id id) const {
  // A buffer goes with `r` when no other item holds it and no one outside
  // the tier does: its only references are r's own views (and `refs`).
  auto& r = rec(id);
  std::unordered_map<uint64_t, long> views;
  auto count = [&](const std::vector<view>& segs) {
    for (auto& s : segs)
      if (s.buf)
        ++views[s.buf->id()];
  };
  if (r.is_object) {
    for (auto& a : r.more->object)
      count(a.segments);
  } else {
    if (r.state.use_count() > 1)
      return 0; // a lent hit shares the whole entry: all of it stays
    r.state.for_each_view([&](const view& s) {
      if (s.buf)
        ++views[s.buf->id()];
    });
  }
  uint64_t n = 0;
  for (auto& b : buffers_of(r))
    if (ledger_.holders(b->id()) == 1 && b.use_count() == views[b->id()] + 1)
      n += b->size();
  return n;
}

void ram_tier::touch(record_id id, uint64_t now) {
  auto& r = rec(id);
  records_.unlink(lru_, id);
  records_.link_back(lru_, id);
  r.last_used = now;
  if (!r.is_object)
    index_.touch(r.ref);
}

bool ram_tier::protects(record_id r) const {
  return !rec(r).pins().empty();
}

void ram_tier::pin(record_id r, uint64_t id) {
  if (rec(r).pins().empty())
    ++protected_;
  rec(r).extras().pins.push_back(id);
}

bool ram_tier::any(record_id) const {
  return true;
}

bool ram_tier::unleased(record_id r) const {
  return rec(r).leases().empty();
}

bool ram_tier::evictable(record_id r) const {
  return rec(r).leases().empty() && !protects(r);
}

ram_tier::record_id ram_tier::lru_where(bool (ram_tier::*ok)(record_id) const,
                                        record_id skip) {
  for (auto r = lru_.head; r != record::none; r = rec(r).next)
    if (r != skip && (this->*ok)(r))
      return r;
  return record::none;
}

ram_tier::record_id ram_tier::victim(record_id skip) {
  // Plain items first, then protected ones, then those an interest holds:
  // the cap wins in the end. `skip` (a put's newcomer) is never chosen.
  auto r = lru_where(&ram_tier::evictable, skip);
  if (r == record::none)
    r = lru_where(&ram_tier::unleased, skip);
  if (r == record::none)
    r = lru_where(&ram_tier::any, skip);
  return r;
}

std::vector<spill_order> ram_tier::evict_over_cap(record_id keep) {
  // `keep` alone fits the cap (puts refuse larger items), so evicting
  // everything else always gets under it.
  std::vector<spill_order> out;
  while (resident_.bytes() > capacity_) {
    auto v = victim(keep);
    KVTIER_ASSERT(v != record::none);
    out.push_back(leaves(v) ? leave(v) : take(v));
    ++counters_.evictions;
  }
  return out;
}

size_t ram_tier::supersede(record_id id) {
  auto ref = rec(id).ref;
  auto floor = index_.floor(ref);
  if (floor >= length_of(rec(id)))
    return 0; // untrimmable: shorter ancestors must survive
  size_t n = 0;
  for (auto a : index_.ancestors(ref)) {
    if (index_.length(a) < floor)
      break; // ancestors come nearest first: the rest are shorter still
    auto old = index_.handle(a);
    rec(old).gone_as = ram_change_kind::superseded;
    ++n;
    if (cold_ && rec(old).writing) {
      // Its write still holds its bytes: it stays findable (leaving)
      // until that write settles, then leaves without a second one.
      if (!rec(old).leaving)
        leave(old);
      continue;
    }
    drop(old);
  }
  return n;
}

void ram_tier::announce(record& r, bool gone, const token_seq* tokens) {
  if (!changes_ || (gone && r.announced_gone))
    return;
  if (gone)
    r.announced_gone = true;
  token_seq rebuilt;
  if (!tokens) // the key from the index (the body holds none)
    rebuilt = index_.key(r.ref);
  changes_(ram_change{gone ? r.gone_as : ram_change_kind::stored,
                      index_.ns(r.ref), tokens ? *tokens : rebuilt,
                      r.state.layer_bytes(),
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
  auto ns = std::move(e.ns);
  record init;
  init.writing = true;
  init.state = stored_state::of(std::move(e)); // no tokens: the index has them
  auto key = std::move(e.tokens);
  auto id = emplace(std::move(init), bufs, now, false);
  auto& r = rec(id);
  auto ins = index_.insert(ns, key, id, floor);
  r.ref = ins.ref;
  if (ins.replaced) {
    auto old = *ins.replaced;
    rec(old).ref = entry_ref{};
    adopt_leases(r, rec(old));
    drop(old);
    ++counters_.replacements;
  }
  announce(r, false, &key); // held (servable) until its write settles
  spill_order s;
  s.key = {false, ns, key};
  s.state = r.state.keyed(std::move(ns), std::move(key));
  s.serial = r.serial;
  s.leaving = true;
  put_result out;
  out.evicted.push_back(std::move(s));
  return out;
}

caf::expected<put_result> ram_tier::put(entry&& e, uint64_t now, bool durable,
                                        protection p) {
  if (e.tokens.empty())
    return make_error(ec::invalid_argument, "put of an entry with no tokens");
  if (e.tokens.size() >= ram_record::none)
    return make_error(ec::invalid_argument, "put of an entry of "
                                              + std::to_string(e.tokens.size())
                                              + " tokens: at most 2^32 - 1");
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
  auto ns = std::move(e.ns);
  record init;
  init.durable = durable;
  init.state = stored_state::of(std::move(e));
  auto key = std::move(e.tokens);
  auto id = emplace(std::move(init), bufs, now);
  auto& r = rec(id);
  auto ins = index_.insert(ns, key, id, floor);
  r.ref = ins.ref;
  r.file_tokens = durable ? static_cast<uint32_t>(key.size()) : 0;
  if (ins.replaced) {
    auto& old = rec(*ins.replaced);
    old.ref = entry_ref{};     // the index already points at r
    adopt_leases(r, old);      // interests follow the key
    if (!old.pins().empty()) { // and so do protections
      r.extras().pins = std::move(old.more->pins);
      old.more->pins.clear();
    }
    drop(*ins.replaced); // its pins are r's now: protected_ is unchanged
    ++counters_.replacements;
    out.replaced = true;
  }
  if (p == protection::pin) {
    out.pin = ++pins_;
    pin(id, out.pin);
  }
  out.serial = r.serial;
  out.superseded = supersede(id);
  counters_.supersessions += out.superseded;
  out.evicted = evict_over_cap(id);
  out.kept = true;
  announce(r, false, &key);
  notify(key, ns);
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
  auto id = index_.handle(m->ref); // it trims to m->length (its floor says)
  auto& r = rec(id);
  ++counters_.hits;
  if (session)
    ++(r.state.session() == session ? counters_.session_hits
                                    : counters_.session_misses);
  // Lent as the donor itself (one shared reference, whatever its layer
  // count) and the usable length; views are cut when asked for.
  ram_hit out{
    r.state, index_.ns(m->ref), m->length, index_.length(m->ref), r.serial, {}};
  if (!r.leaving) {
    touch(id, now);
  } else if (distinct_bytes(buffers_of(r)) <= capacity_) {
    rejoin(id, now); // in use again: resident, its write carries on
    out.evicted = evict_over_cap(id);
  } else {
    r.last_used = now; // too large to be resident: it stays leaving
    index_.touch(r.ref);
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
  auto id = index_.handle(m->ref);
  // The index offers only lengths the donor trims to (its floor says).
  auto served = rec(id).state.keyed(std::string{ns}, prompt.first(m->length));
  if (!rec(id).leaving)
    touch(id, now);
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

ram_tier::record_id ram_tier::find(const ram_key& key) const {
  if (key.object) {
    auto o = objects_.find(key.name);
    return o == objects_.end() ? record::none : o->second;
  }
  auto ref = index_.find(key.name, key.tokens);
  return ref ? index_.handle(ref) : record::none;
}

namespace {

/// A file's length as a record keeps it: keys are shorter than 2^32
/// tokens (the prefix tree's limit, checked at `put`), and so are files.
uint32_t narrow_tokens(uint64_t n) {
  KVTIER_ASSERT(n < ram_record::none);
  return static_cast<uint32_t>(n);
}

} // namespace

void ram_tier::adopt_leases(record& to, record& from) {
  if (from.leases().empty())
    return;
  to.extras().leases = std::move(from.more->leases);
  from.more->leases.clear();
}

bool ram_tier::mark_durable(const ram_key& key, bool durable,
                            uint64_t file_tokens) {
  auto id = find(key);
  if (id == record::none)
    return false;
  auto& r = rec(id);
  r.durable = durable;
  r.file_tokens = !durable          ? 0
                  : file_tokens > 0 ? narrow_tokens(file_tokens)
                                    : narrow_tokens(length_of(r));
  return true;
}

size_t ram_tier::mark_not_durable(std::string_view ns,
                                  std::span<const token> tokens) {
  size_t n = 0;
  for (auto ref : index_.prefixes(ns, tokens)) {
    auto& r = rec(index_.handle(ref));
    if (r.durable && r.file_tokens == tokens.size()) {
      r.durable = false;
      r.file_tokens = 0;
      ++n;
    }
  }
  counters_.backing_lost += n;
  return n;
}

std::vector<ram_key> ram_tier::idle(uint64_t now, uint64_t idle_ms) const {
  std::vector<ram_key> out;
  for (auto id = lru_.head; id != record::none; id = rec(id).next)
    if (auto& r = rec(id); r.leases().empty() && r.last_used <= now
                           && now - r.last_used >= idle_ms)
      out.push_back(key_of(r));
  return out;
}

std::optional<ram_item> ram_tier::item(const ram_key& key) const {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  auto& r = rec(id);
  return ram_item{r.serial, r.durable, keyed(r), r.leaving, r.writing};
}

std::vector<ram_key> ram_tier::undurable() const {
  std::vector<ram_key> out;
  for (auto id = lru_.head; id != record::none; id = rec(id).next)
    if (auto& r = rec(id); !r.is_object && !r.durable && !r.writing)
      out.push_back(key_of(r));
  return out;
}

std::optional<ram_item> ram_tier::begin_write(const ram_key& key,
                                              uint64_t serial) {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  auto& r = rec(id);
  if (r.is_object || r.durable || r.writing
      || (serial != 0 && r.serial != serial))
    return std::nullopt;
  r.writing = true;
  return ram_item{r.serial, r.durable, keyed(r), r.leaving, r.writing};
}

std::optional<spill_order> ram_tier::write_settled(const ram_key& key,
                                                   uint64_t serial,
                                                   write_result result,
                                                   uint64_t file_tokens) {
  auto id = find(key);
  if (id == record::none || rec(id).serial != serial
      || result == write_result::failed)
    return std::nullopt;
  auto& r = rec(id);
  r.writing = false;
  bool durable = result == write_result::durable;
  if (r.leaving) {
    if (!durable)
      ++counters_.leaving_dropped;
    return take(id); // durable elsewhere, or dropped by the SSD's policy
  }
  if (durable) {
    r.durable = true;
    r.file_tokens = file_tokens > 0 ? narrow_tokens(file_tokens)
                                    : narrow_tokens(length_of(r));
  }
  return std::nullopt;
}

std::optional<spill_order> ram_tier::remove(const ram_key& key) {
  auto id = find(key);
  if (id == record::none)
    return std::nullopt;
  rec(id).gone_as = ram_change_kind::demoted;
  return take(id);
}

std::optional<spill_order> ram_tier::pop_lru() {
  if (lru_.empty())
    return std::nullopt;
  ++counters_.evictions;
  auto v = victim(record::none);
  return leaves(v) ? leave(v) : take(v);
}

reclaim_counts& ram_tier::reclaim_pass(reclaim_counts& out, uint64_t want,
                                       reclaim_order order, bool durable_pass) {
  auto counted = [&] {
    return order == reclaim_order::freeing
             ? out.freed_bytes
             : out.released_bytes + out.dropped_bytes;
  };
  for (auto r = lru_.head; r != record::none && counted() < want;) {
    auto next = rec(r).next;
    // A write out holds the bytes anyway (and will make the item durable).
    // Durable objects go with the durable pass; optional state is entries.
    auto& x = rec(r);
    bool candidate = (durable_pass || !x.is_object) && x.durable == durable_pass
                     && evictable(r) && !x.writing;
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
  if (r == record::none)
    return false;
  rec(r).extras().leases.push_back(lease);
  leases_[lease].push_back(key);
  return true;
}

void ram_tier::drop_interest(uint64_t lease) {
  auto l = leases_.find(lease);
  if (l == leases_.end())
    return;
  for (auto& key : l->second) {
    auto id = find(key); // maybe gone, or another item under the same key
    if (id == record::none || rec(id).leases().empty())
      continue;
    auto& r = rec(id);
    auto& held = r.more->leases;
    if (auto it = std::find(held.begin(), held.end(), lease); it != held.end())
      held.erase(it);
    r.shrink();
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
  auto& r = rec(index_.handle(ref));
  if (r.pins().empty())
    return false;
  auto& pins = r.more->pins;
  auto it = std::find(pins.begin(), pins.end(), pin);
  if (it == pins.end())
    return false;
  pins.erase(it);
  if (pins.empty())
    --protected_;
  r.shrink();
  return true;
}

bool ram_tier::is_protected(std::string_view ns,
                            std::span<const token> tokens) const {
  auto ref = index_.find(ns, tokens);
  return ref && protects(index_.handle(ref));
}

void ram_tier::clear() {
  for (auto* list : {&lru_, &leaving_})
    for (auto id = list->head; id != record::none; id = rec(id).next)
      if (auto& r = rec(id); !r.is_object && r.ref)
        announce(r, true);
  index_.clear();
  objects_.clear();
  protected_ = 0;
  leases_.clear();
  records_.clear();
  lru_ = {};
  leaving_ = {};
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
  c.leaving_entries = leaving_.size;
  c.leaving_bytes = ledger_.bytes() - resident_.bytes();
  return c;
}

entry ram_hit::state(std::span<const token> prompt) const {
  KVTIER_ASSERT(prompt.size() >= length);
  return donor.keyed(ns, prompt.first(length));
}

uint64_t died_bytes(const std::vector<released_buffer>& released) noexcept {
  uint64_t n = 0;
  for (auto& b : released)
    if (b.buf.expired())
      n += b.size;
  return n;
}

} // namespace kvtier::tiers
