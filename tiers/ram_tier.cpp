#include "tiers/ram_tier.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace kvtier::tiers {

ram_tier::ram_tier(uint64_t capacity_bytes, bool cold_tier, ram_policy policy,
                   uint64_t pin_budget_bytes, uint64_t bookkeeping_budget_bytes)
  : capacity_(capacity_bytes)
  , book_budget_(bookkeeping_budget_bytes)
  , cold_(cold_tier)
  , pin_budget_(pin_budget_bytes)
  , rank_(policy) {}

namespace {

/// Stamps the RAM tier asks of its index per millisecond of its clock: the
/// index stamps an entry at least `now << stamp_shift`, so the time of its
/// last use is its stamp shifted back (exact unless more than 2^20 uses
/// fall in one millisecond, which would make it look used a little later).
constexpr unsigned stamp_shift = 20;
/// Clocks past this (2^43 ms, 278 years) read as this.
constexpr uint64_t latest_stamped_ms = (uint64_t{1} << 43) - 1;

uint64_t stamp_at(uint64_t now) noexcept {
  return std::min(now, latest_stamped_ms) << stamp_shift;
}

const std::vector<uint64_t> no_ids;

} // namespace

const std::vector<uint64_t>& ram_tier::leases(record_id r) const noexcept {
  auto* x = records_.find_extras(r);
  return x ? x->leases : no_ids;
}

const std::vector<uint64_t>& ram_tier::pins(record_id r) const noexcept {
  auto* x = records_.find_extras(r);
  return x ? x->pins : no_ids;
}

uint64_t ram_tier::serial_of(record_id r) const {
  if (fl(r).is_object)
    return records_.find_extras(r)->serial;
  return index_.handle(rec(r).ref).serial;
}

uint64_t ram_tier::last_used(record_id r) const {
  if (fl(r).is_object)
    return records_.find_extras(r)->last_used;
  return index_.stamp(rec(r).ref) >> stamp_shift;
}

uint64_t ram_tier::file_tokens(record_id r) const {
  auto* x = records_.find_extras(r);
  return x && x->file_tokens > 0 ? x->file_tokens : length_of(r);
}

void ram_tier::set_file_tokens(record_id r, uint64_t n) {
  // Keys are shorter than 2^32 tokens (the prefix tree's limit, checked at
  // `put`), and so are files.
  KVTIER_ASSERT(n < ram_record::none);
  if (n != 0 && n != length_of(r)) {
    records_.extras(r).file_tokens = static_cast<uint32_t>(n);
  } else if (auto* x = records_.find_extras(r)) {
    x->file_tokens = 0;
    records_.shrink(r);
  }
}

uint32_t ram_tier::next_serial() noexcept {
  if (++serials_ == 0) // 0 means "any" to `begin_write`
    ++serials_;
  return serials_;
}

ram_key ram_tier::key_of(record_id r) const {
  if (fl(r).is_object)
    return {true, records_.find_extras(r)->object_key, {}};
  return {false, index_.ns(rec(r).ref), index_.key(rec(r).ref)};
}

uint64_t ram_tier::length_of(record_id r) const {
  return fl(r).is_object ? 0 : index_.length(rec(r).ref);
}

entry ram_tier::keyed(record_id r) const {
  if (fl(r).is_object)
    return {};
  // The body holds no tokens: its key is the index's path to `ref`.
  auto ref = rec(r).ref;
  auto e = rec(r).state.keyed(index_.ns(ref), index_.key(ref));
  e.priority = priority_of(r); // what its file is ranked by on SSD
  return e;
}

ram_tier::record_id ram_tier::emplace(record&& init, ram_flags flags,
                                      const std::vector<buffer_ref>& bufs,
                                      bool resident, uint8_t priority) {
  auto id = records_.make();
  rec(id) = std::move(init);
  flags.leaving = !resident;
  fl(id) = flags;
  ledger_.hold(bufs);
  if (resident) {
    resident_.hold(bufs);
    priority = std::min(priority, max_priority);
    if (priority != default_priority)
      records_.extras(id).priority = priority;
    lru_.insert(links(), id, priority);
  } else {
    records_.link_back(leaving_, id);
  }
  meta_ += meta_of(id);
  if (!resident)
    charge_leaving(id, bufs.size());
  return id;
}

namespace {

/// Bookkeeping estimates (`ram_tier::bookkeeping_bytes`): a buffer's slot
/// in a ledger's hash table (node, bucket, allocator).
constexpr uint64_t ledger_slot_bytes = 32 + 8 + 16;
/// What a leaving item's own key may cost in the index: a node of its own.
constexpr uint64_t key_node_bytes = 160;

} // namespace

uint64_t ram_tier::meta_of(record_id r) const noexcept {
  // Under lru the order is the record's own links; gdsf's ranking keeps a
  // slot and a heap place per item besides.
  auto ranking = gdsf() ? entry_ranking::item_bytes(ram_policy::gdsf) : 0;
  return sizeof(record) + sizeof(ram_flags) + ranking
         + rec(r).state.footprint();
}

uint8_t ram_tier::priority_of(record_id r) const noexcept {
  auto x = fl(r).has_extras ? records_.find_extras(r) : nullptr;
  return x ? x->priority : default_priority;
}

ram_tier::record_id ram_tier::next_resident(record_id r) const noexcept {
  return lru_.next(links(), r, priority_of(r));
}

void ram_tier::charge_leaving(record_id r, size_t buffers) {
  auto c = meta_of(r) + key_node_bytes + rec(r).state.length() * sizeof(token)
           + buffers * ledger_slot_bytes;
  leaving_charges_[r] = c;
  leaving_meta_ += c;
}

void ram_tier::unleave(record_id r) {
  if (auto it = leaving_charges_.find(r); it != leaving_charges_.end()) {
    leaving_meta_ -= it->second;
    leaving_charges_.erase(it);
  }
}

uint64_t ram_tier::bookkeeping_bytes() const noexcept {
  return index_.approx_bytes() + meta_
         + (ledger_.buffers() + resident_.buffers()) * ledger_slot_bytes;
}

bool ram_tier::over_bookkeeping() const noexcept {
  if (book_budget_ == UINT64_MAX)
    return false;
  auto b = bookkeeping_bytes();
  return b > leaving_meta_ && b - leaving_meta_ > book_budget_;
}

bool ram_tier::index_entry(record_id id, std::string_view ns,
                           std::span<const token> key, uint64_t floor,
                           uint64_t now) {
  auto ins =
    index_.insert(ns, key, ram_handle{id, next_serial()}, floor, stamp_at(now));
  rec(id).ref = ins.ref;
  if (!ins.replaced)
    return false;
  auto old = ins.replaced->record;
  rec(old).ref = entry_ref{}; // the index already points at id
  adopt_leases(id, old);      // interests follow the key
  if (!pins(old).empty()) {   // and so do protections
    records_.extras(id).pins = std::move(records_.extras(old).pins);
    records_.extras(old).pins.clear();
  }
  drop(old); // its pins are id's now: protected_ is unchanged
  ++counters_.replacements;
  return true;
}

std::vector<buffer_ref> ram_tier::buffers_of(record_id r) const {
  std::vector<buffer_ref> out;
  if (fl(r).is_object) {
    entry holder; // collect_buffers walks entries
    holder.attachments = records_.find_extras(r)->object;
    collect_buffers(holder, out);
  } else {
    rec(r).state.collect_buffers(out);
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
  auto f = fl(id);
  if (f.is_object) {
    auto o = objects_.find(records_.find_extras(id)->object_key);
    if (o != objects_.end() && o->second == id)
      objects_.erase(o);
  } else if (r.ref) {
    announce(id, true);
    index_.erase(r.ref);
  }
  if (!pins(id).empty())
    --protected_;
  rank_.erase(id);
  unpin(id);
  // The ledger's ids come from the state itself (immutable while held), so
  // the record keeps no list of them.
  if (refs.empty())
    refs = buffers_of(id);
  auto ids = ids_of(refs);
  std::vector<uint64_t> gone;
  auto freed = ledger_.release(ids, released ? &gone : nullptr);
  if (!f.leaving)
    resident_.release(ids);
  if (released && !gone.empty()) {
    std::unordered_map<uint64_t, const buffer_ref*> by_id;
    for (auto& b : refs)
      by_id.emplace(b->id(), &b);
    for (auto id : gone)
      if (auto b = by_id.find(id); b != by_id.end())
        released->push_back({*b->second, (*b->second)->size()});
  }
  meta_ -= meta_of(id);
  if (f.leaving)
    unleave(id);
  if (f.leaving)
    records_.unlink(leaving_, id);
  else
    lru_.erase(links(), id, priority_of(id));
  records_.free(id);
  return freed;
}

spill_order ram_tier::take(record_id id) {
  auto& r = rec(id);
  auto object = fl(id).is_object;
  spill_order out;
  out.key = key_of(id);
  out.needs_spill = !fl(id).durable;
  out.serial = serial_of(id);
  auto refs = buffers_of(id); // for the weak refs of what the tier lets go
  if (!object && r.ref)
    announce(id, true); // before its state moves out
  // Moved out when no lent hit shares it still, else copied (views); keyed
  // from the index (the body holds no tokens). Its body leaves here, so
  // what the bookkeeping charged for it leaves now (`drop` sees none).
  if (!object) {
    meta_ -= r.state.footprint();
    out.state =
      std::move(r.state).release(out.key.name, token_seq(out.key.tokens));
    out.state.priority = priority_of(id);
  } else {
    out.object = std::move(records_.extras(id).object);
  }
  drop(id, &out.released, std::move(refs));
  return out;
}

bool ram_tier::leaves(record_id id) const {
  return cold_ && !fl(id).is_object && !fl(id).durable;
}

spill_order ram_tier::leave(record_id id) {
  auto& r = rec(id);
  auto& f = fl(id);
  spill_order out;
  out.key = key_of(id);
  out.state = r.state.keyed(out.key.name, token_seq(out.key.tokens));
  out.state.priority = priority_of(id);
  out.serial = serial_of(id);
  out.leaving = true;
  out.needs_spill = !f.writing;
  f.writing = true;
  rank_.erase(id);
  unpin(id);
  if (!pins(id).empty()) { // protection leaves with residency
    records_.extras(id).pins.clear();
    records_.shrink(id);
    --protected_;
  }
  auto bufs = buffers_of(id);
  resident_.release(ids_of(bufs));
  f.leaving = true;
  charge_leaving(id, bufs.size());
  lru_.erase(links(), id, priority_of(id));
  records_.link_back(leaving_, id);
  return out;
}

void ram_tier::rejoin(record_id id, uint64_t now) {
  resident_.hold(buffers_of(id));
  auto& f = fl(id);
  f.leaving = false;
  unleave(id);
  // Resident again: evicted later.
  f.gone_as = static_cast<uint8_t>(ram_change_kind::evicted);
  records_.unlink(leaving_, id);
  auto priority = priority_of(id);
  lru_.insert(links(), id, priority);
  index_.touch(rec(id).ref, stamp_at(now));
  auto ref = rec(id).ref;
  rank(id, priority, index_.key(ref), index_.ns(ref), 0);
  ++counters_.rejoined;
}

uint64_t ram_tier::would_free(record_id id) const {
  // A buffer goes with `r` when no other item holds it and no one outside
  // the tier does: its only references are r's own views (and `refs`).
  auto& r = rec(id);
  std::unordered_map<uint64_t, long> views;
  auto count = [&](const view& s) {
    if (s.buf)
      ++views[s.buf->id()];
  };
  if (fl(id).is_object) {
    for (auto& a : records_.find_extras(id)->object)
      for (auto& s : a.segments)
        count(s);
  } else {
    if (r.state.use_count() > 1)
      return 0; // a lent hit shares the whole entry: all of it stays
    r.state.for_each_view(count);
  }
  uint64_t n = 0;
  for (auto& b : buffers_of(id))
    if (ledger_.holders(b->id()) == 1 && b.use_count() == views[b->id()] + 1)
      n += b->size();
  return n;
}

void ram_tier::touch(record_id id, uint64_t now) {
  lru_.to_back(links(), id, priority_of(id));
  rank_.touch(id);
  if (fl(id).is_object)
    records_.extras(id).last_used = now;
  else
    index_.touch(rec(id).ref, stamp_at(now));
}

void ram_tier::announce(record_id id, bool gone, const token_seq* tokens) {
  auto& f = fl(id);
  if (!changes_ || (gone && f.announced_gone))
    return;
  if (gone)
    f.announced_gone = true;
  auto& r = rec(id);
  token_seq rebuilt;
  if (!tokens) // the key from the index (the body holds none)
    rebuilt = index_.key(r.ref);
  changes_(ram_change{
    gone ? static_cast<ram_change_kind>(f.gone_as) : ram_change_kind::stored,
    index_.ns(r.ref), tokens ? *tokens : rebuilt, r.state.layer_bytes(),
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
  auto priority = e.priority; // the put's, for its file's rank on SSD
  auto ns = std::move(e.ns);
  record init;
  init.state = stored_state::of(std::move(e), layouts_); // no tokens
  auto key = std::move(e.tokens);
  ram_flags flags;
  flags.writing = true;
  auto id = emplace(std::move(init), flags, bufs, false);
  index_entry(id, ns, key, floor, now);
  announce(id, false, &key); // held (servable) until its write settles
  spill_order s;
  s.serial = serial_of(id);
  s.key = {false, ns, key};
  s.state = rec(id).state.keyed(std::move(ns), std::move(key));
  s.state.priority = priority;
  s.leaving = true;
  put_result out;
  out.evicted.push_back(std::move(s));
  return out;
}

caf::expected<put_result> ram_tier::put(entry&& e, uint64_t now, bool durable,
                                        protection p, retention ret) {
  if (e.tokens.empty())
    return make_error(ec::invalid_argument, "put of an entry with no tokens");
  if (e.tokens.size() >= ram_record::none)
    return make_error(ec::invalid_argument, "put of an entry of "
                                              + std::to_string(e.tokens.size())
                                              + " tokens: at most 2^32 - 1");
  if (auto err = e.validate())
    return err;
  expire_pins(now);
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  bool oversize = distinct_bytes(bufs) > capacity_;
  if (oversize) // spilled at once: its file is ranked by the put's priority
    e.priority = std::min(ret.priority, max_priority);
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
  init.state = stored_state::of(std::move(e), layouts_);
  auto key = std::move(e.tokens);
  ram_flags flags;
  flags.durable = durable; // a file of its own length
  // What the entry it replaces had: its count and its engine pin.
  uint32_t inherited = 0;
  uint64_t pin_ms = ret.pin_ms;
  if (auto old = index_.find(ns, key)) {
    auto o = index_.handle(old).record;
    inherited = rank_.count(o);
    if (pin_ms == 0 && engine_pinned(o))
      pin_ms = records_.find_extras(o)->pin_ms; // the pin follows the key
  }
  auto id = emplace(std::move(init), flags, bufs, true, ret.priority);
  out.replaced = index_entry(id, ns, key, floor, now);
  if (p == protection::pin) {
    out.pin = ++pins_;
    pin(id, out.pin);
  }
  if (pin_ms != 0) {
    out.pinned = pin_for(id, pin_ms, now);
    out.pin_refused = !out.pinned;
  }
  out.serial = serial_of(id);
  out.superseded = supersede(id, inherited);
  counters_.supersessions += out.superseded;
  rank(id, ret.priority, key, ns, inherited);
  out.evicted = evict_over_cap(id);
  out.kept = true;
  announce(id, false, &key);
  notify(key, ns);
  return out;
}

std::optional<ram_hit>
ram_tier::lookup(std::span<const token> prompt, std::string_view ns,
                 const std::optional<std::string>& session, uint64_t now,
                 uint64_t better_than) {
  ++counters_.prefix_scans;
  expire_pins(now);
  auto m = index_.longest_usable(ns, prompt);
  if (!m || m->length <= better_than) {
    ++counters_.misses;
    if (session)
      ++counters_.session_misses;
    return std::nullopt;
  }
  // It trims to m->length (its floor says).
  auto [id, serial] = index_.handle(m->ref);
  auto& r = rec(id);
  ++counters_.hits;
  if (session)
    ++(r.state.session() == session ? counters_.session_hits
                                    : counters_.session_misses);
  // Lent as the donor itself (one shared reference, whatever its layer
  // count) and the usable length; views are cut when asked for.
  ram_hit out{
    r.state, index_.ns(m->ref), m->length, index_.length(m->ref), serial, {}};
  if (engine_pinned(id)) { // a hit renews the pin
    auto x = records_.find_extras(id);
    x->pin_until = now + x->pin_ms;
  }
  if (!fl(id).leaving) {
    touch(id, now);
  } else if (distinct_bytes(buffers_of(id)) <= capacity_) {
    rejoin(id, now); // in use again: resident, its write carries on
    out.evicted = evict_over_cap(id);
  } else {
    index_.touch(r.ref, stamp_at(now)); // too large to be resident: it
                                        // stays leaving
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
  auto id = index_.handle(m->ref).record;
  // The index offers only lengths the donor trims to (its floor says).
  auto served = rec(id).state.keyed(std::string{ns}, prompt.first(m->length));
  served.priority = priority_of(id); // the receiver keeps it by the donor's
  if (!fl(id).leaving)
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
  return ref ? index_.handle(ref).record : record::none;
}

void ram_tier::adopt_leases(record_id to, record_id from) {
  if (leases(from).empty())
    return;
  records_.extras(to).leases = std::move(records_.extras(from).leases);
  records_.extras(from).leases.clear();
}

bool ram_tier::mark_durable(const ram_key& key, bool durable,
                            uint64_t file_tokens) {
  auto id = find(key);
  if (id == record::none)
    return false;
  fl(id).durable = durable;
  if (!fl(id).is_object)
    set_file_tokens(id, durable ? file_tokens : 0);
  return true;
}

size_t ram_tier::mark_not_durable(std::string_view ns,
                                  std::span<const token> tokens) {
  size_t n = 0;
  for (auto ref : index_.prefixes(ns, tokens)) {
    auto id = index_.handle(ref).record;
    if (fl(id).durable && file_tokens(id) == tokens.size()) {
      fl(id).durable = false;
      set_file_tokens(id, 0);
      ++n;
    }
  }
  counters_.backing_lost += n;
  return n;
}

void ram_tier::clear() {
  auto gone = [&](record_id id) {
    if (!fl(id).is_object && rec(id).ref)
      announce(id, true);
  };
  for (auto id = lru_.front(); id != record::none; id = next_resident(id))
    gone(id);
  for (auto id = leaving_.head; id != record::none; id = rec(id).next)
    gone(id);
  index_.clear();
  objects_.clear();
  protected_ = 0;
  leases_.clear();
  records_.clear();
  lru_ = priority_lists<record_id>{};
  leaving_ = {};
  rank_ = entry_ranking{rank_.policy()};
  pinned_.clear();
  pinned_bytes_ = 0;
  ledger_.clear();
  resident_.clear();
  meta_ = 0;
  leaving_meta_ = 0;
  leaving_charges_.clear();
}

ram_counters ram_tier::counters() const {
  auto c = counters_;
  c.entries = index_.size();
  c.objects = objects_.size();
  for (auto& [key, id] : objects_)
    for (auto& a : records_.find_extras(id)->object)
      for (auto& v : a.segments)
        c.object_bytes += v.length;
  c.bytes = ledger_.bytes();
  c.capacity = capacity_;
  c.protected_entries = protected_;
  c.leaving_entries = leaving_.size;
  c.leaving_bytes = ledger_.bytes() - resident_.bytes();
  c.pinned_entries = pinned_.size();
  c.pinned_bytes = pinned_bytes_;
  c.bookkeeping_bytes = bookkeeping_bytes();
  c.bookkeeping_budget_bytes = book_budget_ == UINT64_MAX ? 0 : book_budget_;
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
