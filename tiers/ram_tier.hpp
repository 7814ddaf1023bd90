// The RAM tier: a byte-capped cache of whole-prefix entries and exact
// tensor objects, on a `prefix_index` per namespace, evicting by priority
// and, within one, by LRU or GDSF (docs/eviction.md): the resident records
// are linked in one list per priority, least recently used first
// (`priority_lists`, the links in the records: the lru order costs an item
// nothing more), and under gdsf an `entry_ranking` orders them as well.
// Owned by the ram_tier actor, its only user: single-threaded, no locks, no
// I/O, no clocks (callers pass `now` in milliseconds of any monotonic clock).
//
// Policy (docs/ram-tier.md):
// - `lookup` lends the donor and the longest usable prefix length: the
//   donor's state is held once, shared (`ram_hit::donor`), and cut to that
//   length only when views are asked for, so a hit costs the index walk
//   and O(1) more whatever the layer count. The donor stays in place and
//   becomes most recently used, so any number of lookups share one donor;
//   a held hit keeps the donor's bytes alive like lent views (`reclaim`
//   counts a donor a hit shares as freeing nothing). `peek_prefix_len`
//   answers the same length and changes nothing (it only counts a prefix
//   scan).
// - `put` of an existing (ns, tokens) replaces it whatever the kinds. A
//   trimmable newcomer supersedes its strict prefix-ancestors that it can
//   stand in for (ancestor length >= its trim floor); an untrimmable one
//   supersedes nothing. Replaced and superseded entries leave without spill.
// - Over the cap, items leave in the ranking's order (every item of a lower
//   priority before any of a higher one; within a priority least recently
//   used first under `ram_policy::lru`, lowest GDSF rank first under
//   `ram_policy::gdsf`) as ordered spill orders;
//   `needs_spill` is false for items marked durable on SSD. The owner
//   sets and clears that mark (`mark_durable`, `mark_not_durable`) from
//   what the SSD tier reports; a mark remembers which file length gave it,
//   so a file's removal clears exactly the marks that file may have given. A
//   put's own item is never among them; an item larger than the whole cap is
//   handed back instead, never stored as resident.
// - Handoff (a tier built with a cold tier below it): nothing in memory is
//   unservable. An evicted (or popped) prefix entry that is not durable is
//   not removed but *leaving*: still indexed, found by `lookup` and
//   `peek_prefix_len`, its bytes in `bytes()` but outside the cap, until
//   the owner says what became of its write (`write_settled`): durable, it
//   leaves RAM; not stored (the SSD tier dropped or gave it up), it leaves
//   RAM and is counted as `leaving_dropped`; an attempt failed, it stays
//   while the SSD tier retries. A lookup that hits a leaving item makes it
//   resident again (when it fits the cap). The owner orders at most one
//   write per item at a time (`needs_spill`, `begin_write`), so eviction
//   and flush reuse a snapshot already written or on its way. An oversize
//   put is held as leaving too. A leaving item's bytes are also held by its
//   queued write, so RAM holds at most the cap plus the SSD tier's
//   write-behind cap (plus one oversize entry). Without a cold tier
//   nothing is leaving: eviction drops.
// - `reclaim` (a boundary) drops, without I/O, durable copies first, then
//   optional items (unprotected, unleased, no write out) that are nowhere
//   else (reported as dropped), in the resident lists' order (a lower
//   priority first, least recently used first within one), preferring
//   items whose drop frees bytes now; views lent to a request keep theirs.
// - Bytes are counted per buffer, once, however many items hold views of it.
// - Keys are held once: a prefix entry's tokens live only on the index's
//   edges (the stored body has none). A hit is keyed by its prompt
//   (`ram_hit::state(prompt)`); spill orders, `item`, `begin_write`,
//   `idle`, `undurable` and change notices rebuild the key from the index
//   (O(length)); a put reports the tokens it was handed.
// - A protected entry (one carrying at least one pin: an open session's
//   newest entry) is evicted only when nothing unprotected is left to evict
//   (the cap always wins). The tier knows pins, not sessions: the sessions
//   actor owns the table (tiers/sessions.hpp) and takes each pin back with
//   `unprotect`, which deletes nothing. A put can pin its own entry in the
//   same step (`protection::pin`), so a session's newest entry is never
//   unprotected for a moment. Pins follow the key when a put replaces it
//   (two sessions naming one entry both keep it); they leave with the entry
//   otherwise. An item held by an interest (a request or prefetch lease
//   about to consume it) leaves after everything else, the cap still
//   winning in the end.
// - An engine's pin (`retention::pin_ms`) holds an entry like a session's
//   pin (evicted only when nothing else is left), for a time to live that
//   every hit renews; once it runs out the entry is an ordinary one. Pinned
//   entries' bytes never exceed the pin budget: a pin that would go over it
//   is refused (the put stands, unpinned). A pinned entry is never
//   superseded (a longer prompt extending it leaves it in place); a put
//   replacing its key takes the pin over (re-counted against the budget).
// - Objects (exact tensor objects, `put_object`) share the ranking, the cap
//   and the durable marks; they are found by exact key only.
// - Recurrent layers and wrapped rings are exact-boundary: the index never
//   offers such an entry below its own length. Attachments ride along only
//   at full length; below it the entry is lent without them.
#pragma once

#include "tiers/byte_ledger.hpp"
#include "tiers/prefix_index.hpp"
#include "tiers/priority_lists.hpp"
#include "tiers/ram_records.hpp"
#include "tiers/ram_types.hpp"
#include "tiers/state.hpp"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers {

/// Whether a put pins its new entry (see `ram_tier::put`).
enum class protection : bool { none, pin };

/// What an engine asked of the entry a put stores.
struct retention {
  /// 0..`max_priority` (larger is clamped): every item of a lower
  /// priority leaves RAM before any of a higher one.
  uint8_t priority = default_priority;
  /// Pin the entry for this many milliseconds of the tier's clock, renewed
  /// by every hit; 0: no pin. Granted within the pin budget only.
  uint64_t pin_ms = 0;
};

class ram_tier {
public:
  /// Called with (tokens, ns) after every put that stored an entry.
  using put_observer =
    std::function<void(const token_seq& tokens, const std::string& ns)>;

  /// A tier holding at most `capacity_bytes` resident; `cold_tier`: a tier
  /// below takes evicted entries, so they are leaving until their write
  /// settles (see the header comment).
  /// `policy`: the order within a priority; `pin_budget_bytes`: the most
  /// bytes engine pins may hold (0: none granted);
  /// `bookkeeping_budget_bytes`: the most `bookkeeping_bytes` resident
  /// items may cost (see there; UINT64_MAX: unbounded).
  explicit ram_tier(uint64_t capacity_bytes, bool cold_tier = false,
                    ram_policy policy = ram_policy::lru,
                    uint64_t pin_budget_bytes = 0,
                    uint64_t bookkeeping_budget_bytes = UINT64_MAX);

  /// Offers `e`. Fails with `ec::invalid_argument` (leaving `e` untouched)
  /// for an empty token list or a state that does not validate. Otherwise
  /// ownership moves into the tier or into the returned spill orders.
  /// `durable`: a copy is already on SSD (an entry restored from there).
  /// `protection::pin`: the stored entry is protected under a new pin
  /// (`put_result::pin`) before anything is evicted for it. `r`: its
  /// priority and the engine's pin (`put_result::pinned`, `pin_refused`).
  caf::expected<put_result> put(entry&& e, uint64_t now, bool durable = false,
                                protection p = protection::none,
                                retention r = {});

  /// The longest usable prefix of `prompt` in `ns`, lent (see `ram_hit`), when
  /// it is longer than `better_than` tokens; else nullopt (a miss, nothing
  /// touched). `session` only feeds the session counters.
  std::optional<ram_hit> lookup(std::span<const token> prompt,
                                std::string_view ns,
                                const std::optional<std::string>& session,
                                uint64_t now, uint64_t better_than = 0);

  /// A peer's fetch of the longest usable prefix of `prompt` in `ns`
  /// longer than `better_than`: the donor trimmed to it, as views (the
  /// holder serves it to another node). Counts no hit or miss (only a
  /// prefix scan) and changes recency by a touch of a resident donor only
  /// (a leaving donor stays leaving); nullopt for none.
  std::optional<entry> export_prefix(std::span<const token> prompt,
                                     std::string_view ns, uint64_t now,
                                     uint64_t better_than = 0);

  /// The usable prefix length `lookup` would lend (0 for none); changes no
  /// LRU order and no counter but `prefix_scans`.
  uint64_t peek_prefix_len(std::span<const token> prompt,
                           std::string_view ns) const;

  /// Whether an entry of `projected_bytes` could be kept (fits the cap).
  bool keeps(uint64_t projected_bytes) const noexcept {
    return projected_bytes <= capacity_;
  }

  /// Whether (ns, tokens) is held.
  bool contains(std::string_view ns, std::span<const token> tokens) const;

  /// Records whether the item has a durable copy on SSD (false while a
  /// write is pending or after it failed). `file_tokens`: tokens of the
  /// SSD file that serves the item, when that is a longer file it can be
  /// restored trimmed from; 0 means a file of its own length. Returns
  /// false when not held. A put replacing the item clears the mark.
  bool mark_durable(const ram_key& key, bool durable = true,
                    uint64_t file_tokens = 0);

  /// The SSD file of exactly (ns, tokens) is gone (evicted over the SSD
  /// cap, found corrupt, erased): clears every durable mark it may have
  /// given, so those items are written again before they leave RAM rather
  /// than dropped as "on SSD". That is the item keyed exactly so, and any
  /// item keyed by a strict prefix whose mark names a file of that length
  /// (restored trimmed from it). Marks given by other files are kept; a
  /// different file of the same length is not told apart, and clearing
  /// its mark costs only a write. Returns how many marks were cleared
  /// (counted as `backing_lost`).
  size_t mark_not_durable(std::string_view ns, std::span<const token> tokens);

  /// Items last used at or before `now - idle_ms`, least recent first
  /// (items an interest holds are not idle).
  std::vector<ram_key> idle(uint64_t now, uint64_t idle_ms) const;

  /// The item `key` as views, without touching its recency or counters
  /// (the owner copies it into a write order); nullopt when not held.
  std::optional<ram_item> item(const ram_key& key) const;

  /// Resident prefix entries neither marked durable nor with a write out,
  /// least recent first (what a flush must snapshot; those with a write
  /// out are covered by the SSD tier's flush). Objects are not listed:
  /// they are never written.
  std::vector<ram_key> undurable() const;

  /// The owner orders a write of the prefix entry `key` (when `serial` is
  /// not 0, only if it is still that item): marks a write out and returns
  /// the item; nullopt when not held, an object, durable, or a write of
  /// it is out already (one write per item at a time).
  std::optional<ram_item> begin_write(const ram_key& key, uint64_t serial = 0);

  /// What became of the write of item (`key`, `serial`): see
  /// `write_result`. Returns the item when it left RAM (a leaving item
  /// whose write is durable or not stored; `released` lists its buffers);
  /// nullopt otherwise, also when the key now names another item (a newer
  /// put replaced it: that one is not concerned). `file_tokens` as in
  /// `mark_durable`.
  std::optional<spill_order> write_settled(const ram_key& key, uint64_t serial,
                                           write_result r,
                                           uint64_t file_tokens = 0);

  /// Removes one item (e.g. once idle demotion made it durable) and hands
  /// it back; nullopt when not held. Not counted as an eviction; reported
  /// to the change observer as `demoted`.
  std::optional<spill_order> remove(const ram_key& key);

  /// Pressure relief: the first resident item in eviction order
  /// (unprotected ones first) leaves as by eviction and is handed back
  /// (`leaving` when it waits for its write); nullopt when nothing is
  /// resident.
  std::optional<spill_order> pop_lru();

  /// `reclaim(all_durable)`: every durable copy, and no optional item.
  static constexpr uint64_t all_durable = UINT64_MAX;

  /// At an execution boundary, without I/O: drops resident items that are
  /// durable on SSD (a lower priority first, least recently used first
  /// within one), then, when `want_bytes` is a number (not
  /// `all_durable`), optional ones that are not (unprotected, held by no
  /// interest, no write out: their state is lost, counted as
  /// `boundary_dropped`), until `want_bytes` were freed or none is left. With
  /// `reclaim_order::freeing`, items whose drop would free nothing now are
  /// skipped and only bytes whose buffers died count. Objects stay. Not counted
  /// as evictions.
  reclaim_counts reclaim(uint64_t want_bytes,
                         reclaim_order order = reclaim_order::freeing);

  /// Lease `lease` keeps `key` resident (see the eviction order above);
  /// false when `key` is not held. A lease may hold several items.
  bool add_interest(const ram_key& key, uint64_t lease);

  /// Ends `lease` on every item it holds; removes nothing.
  void drop_interest(uint64_t lease);

  /// Pins the entry (ns, tokens) and returns the new pin; nullopt when it
  /// is not held. An entry may carry any number of pins.
  std::optional<uint64_t> protect(std::string_view ns,
                                  std::span<const token> tokens);

  /// Takes `pin` off the entry (ns, tokens); deletes nothing. False when
  /// the entry is not held or does not carry that pin (it left RAM
  /// meanwhile): not an error, a late unprotect.
  bool unprotect(std::string_view ns, std::span<const token> tokens,
                 uint64_t pin);

  /// Whether (ns, tokens) is held and carries at least one pin.
  bool is_protected(std::string_view ns, std::span<const token> tokens) const;

  /// Whether (ns, tokens) is held under an engine's pin that has not run
  /// out by `now`.
  bool is_pinned(std::string_view ns, std::span<const token> tokens,
                 uint64_t now) const;

  /// The eviction order's policy.
  ram_policy policy() const noexcept {
    return rank_.policy();
  }

  /// Stores an exact tensor object under `key` (same budget and LRU as
  /// prefix entries). Replaces an object with the same key. Evicted
  /// objects leave as spill orders like entries (`needs_spill` unless
  /// durable). `durable`: a copy is on SSD (an object restored from there).
  put_result put_object(std::string key, std::vector<attachment> tensors,
                        uint64_t now, bool durable = false);

  /// The object stored under `key` (views), counting a hit or a miss.
  std::optional<std::vector<attachment>> object(const std::string& key,
                                                uint64_t now);

  /// The object under `key` without touching its recency or counters (the
  /// owner copies it into a write order); nullopt when not held.
  std::optional<ram_object> peek_object(const std::string& key) const;

  /// Objects not marked durable, least recent first (what a flush must
  /// snapshot besides `undurable`).
  std::vector<std::string> undurable_objects() const;

  /// The SSD file of object `key` is gone: clears its durable mark, so it
  /// is written again before it leaves RAM. Returns whether one was
  /// cleared (counted as `backing_lost`).
  bool object_not_durable(const std::string& key);

  void set_put_observer(put_observer f) {
    observer_ = std::move(f);
  }

  /// Called with every change of which prefix entries the tier holds (see
  /// `ram_change`), inside the call that made it; it must not call back
  /// into the tier. Objects are not reported.
  using change_observer = std::function<void(const ram_change&)>;
  void set_change_observer(change_observer f) {
    changes_ = std::move(f);
  }

  /// Drops everything, never spilling.
  void clear();

  ram_counters counters() const;

  /// Bytes held: resident and leaving items, each buffer once.
  uint64_t bytes() const noexcept {
    return ledger_.bytes();
  }
  /// Bytes of resident items (what the cap bounds).
  uint64_t resident_bytes() const noexcept {
    return resident_.bytes();
  }
  uint64_t capacity() const noexcept {
    return capacity_;
  }
  /// Heap bytes of the prefix index (O(nodes) walk).
  uint64_t index_bytes() const {
    return index_.memory_bytes();
  }
  /// What the tier spends beside state bytes, estimated in O(1) from
  /// counts: the index (`prefix_index::approx_bytes`), per item its record,
  /// ranking slot and body (`stored_state::footprint`), per buffer its
  /// ledger slots. bench_memory prints it beside the allocator's figure.
  /// Over the bookkeeping budget, resident items are evicted as over the
  /// cap; a leaving item is allowed what it may cost (its body, record and
  /// a key of its own), since its write, not the budget, decides when it
  /// goes.
  uint64_t bookkeeping_bytes() const noexcept;
  uint64_t bookkeeping_budget() const noexcept {
    return book_budget_;
  }

private:
  using record = ram_record;
  using record_id = ram_record::id;

  record& rec(record_id r) noexcept {
    return records_[r];
  }
  const record& rec(record_id r) const noexcept {
    return records_[r];
  }
  ram_flags& fl(record_id r) noexcept {
    return records_.flags(r);
  }
  const ram_flags& fl(record_id r) const noexcept {
    return records_.flags(r);
  }
  const std::vector<uint64_t>& leases(record_id r) const noexcept;
  const std::vector<uint64_t>& pins(record_id r) const noexcept;
  /// The item's serial (an entry's is in its index handle).
  uint64_t serial_of(record_id r) const;
  /// When the item was last used (an entry's index stamp says).
  uint64_t last_used(record_id r) const;
  /// Tokens of the SSD file behind a durable entry.
  uint64_t file_tokens(record_id r) const;
  /// Records that a durable entry's file has `n` tokens (0: its own).
  void set_file_tokens(record_id r, uint64_t n);
  /// A fresh serial (never 0).
  uint32_t next_serial() noexcept;
  /// A new record on its priority's resident list (`priority`, clamped,
  /// kept in its extras when not the default) or the leaving list.
  record_id emplace(record&& init, ram_flags flags,
                    const std::vector<buffer_ref>& bufs, bool resident = true,
                    uint8_t priority = default_priority);
  /// `r`'s priority (what its resident list is).
  uint8_t priority_of(record_id r) const noexcept;
  /// The resident record after `r` in eviction order (`record::none` past
  /// the last; `lru_.front()` is the first).
  record_id next_resident(record_id r) const noexcept;
  member_links<ram_records> links() noexcept {
    return {&records_};
  }
  member_links<const ram_records> links() const noexcept {
    return {&records_};
  }
  bool gdsf() const noexcept {
    return rank_.policy() == ram_policy::gdsf;
  }
  /// Indexes the new prefix entry `id` under (ns, key), stamped `now`;
  /// what it replaced goes (its leases and pins follow the key). Returns
  /// whether it replaced an item.
  bool index_entry(record_id id, std::string_view ns,
                   std::span<const token> key, uint64_t floor, uint64_t now);
  spill_order take(record_id r);
  /// Turns a resident item into a leaving one; its spill order.
  spill_order leave(record_id r);
  /// Whether an evicted `r` leaves (waits for its write) or is dropped.
  bool leaves(record_id r) const;
  /// A leaving item becomes resident again.
  void rejoin(record_id r, uint64_t now);
  /// Bytes dropping `r` would free now (buffers only it holds anywhere).
  uint64_t would_free(record_id r) const;
  /// The buffers of `r`'s state (what the ledgers hold for it: the state
  /// is immutable while held, so the record keeps no list of them).
  std::vector<buffer_ref> buffers_of(record_id r) const;
  static std::vector<uint64_t> ids_of(const std::vector<buffer_ref>& bufs);
  reclaim_counts& reclaim_pass(reclaim_counts& out, uint64_t want,
                               reclaim_order order, bool durable_pass);
  /// A put refused for size: `s` is the only spill order.
  put_result hand_back(spill_order&& s);
  /// An oversize put with a cold tier: held as leaving.
  put_result hold_oversize(entry&& e, const std::vector<buffer_ref>& bufs,
                           uint64_t now);
  /// The item's key; a prefix entry's tokens rebuilt from the index.
  ram_key key_of(record_id r) const;
  /// A prefix entry's length (its node's depth in the index).
  uint64_t length_of(record_id r) const;
  /// The item's state with its key (a prefix entry's body keyed again).
  entry keyed(record_id r) const;
  /// Removes `r`; `released` receives the buffers no item holds any more
  /// (`refs`: r's buffers, when its state was moved out already).
  uint64_t drop(record_id r, std::vector<released_buffer>* released = nullptr,
                std::vector<buffer_ref> refs = {});
  void touch(record_id r, uint64_t now);
  bool protects(record_id r) const;
  void pin(record_id r, uint64_t id);
  /// Whether an engine's pin holds `r` (at `now_`).
  bool engine_pinned(record_id r) const;
  /// Grants `r` an engine pin of `pin_ms` from `now` when its bytes fit
  /// the budget; false (counted) otherwise.
  bool pin_for(record_id r, uint64_t pin_ms, uint64_t now);
  /// Takes `r`'s engine pin off (its bytes leave the budget).
  void unpin(record_id r);
  /// Unpins every engine pin run out by `now` (and remembers `now`).
  void expire_pins(uint64_t now);
  /// Ranks `r` anew under gdsf (a put's entry: its key, priority and
  /// inherited count); nothing to do under lru (its resident list is the
  /// order).
  void rank(record_id r, uint8_t priority, std::span<const token> key,
            std::string_view ns, uint32_t inherited);
  record_id victim(record_id skip);
  record_id lru_where(bool (ram_tier::*ok)(record_id) const, record_id skip);
  bool evictable(record_id r) const;
  bool unleased(record_id r) const;
  bool any(record_id r) const;
  std::vector<spill_order> evict_over_cap(record_id keep);
  /// What `r` costs beside its state bytes (record, body, and under gdsf
  /// its ranking slot).
  uint64_t meta_of(record_id r) const noexcept;
  /// `r` is leaving now: it may cost `meta_of`, a key of its own and its
  /// buffers' ledger slots (`buffers`), remembered until `unleave`.
  void charge_leaving(record_id r, size_t buffers);
  /// `r` is no longer leaving (resident again, or gone).
  void unleave(record_id r);
  /// Whether resident items cost more than the bookkeeping budget.
  bool over_bookkeeping() const noexcept;
  /// Removes `r`'s ancestors a trimmable `r` stands in for; `counts`
  /// receives the largest ranking count among them.
  size_t supersede(record_id r, uint32_t& counts);
  void notify(const token_seq& tokens, const std::string& ns);
  /// Tells the change observer of `r` (stored, or its `gone_as` once);
  /// `tokens`: its key when the caller has it, else rebuilt from the index.
  void announce(record_id r, bool gone, const token_seq* tokens = nullptr);
  /// Moves `from`'s leases to `to` (a put replacing `from`'s key).
  void adopt_leases(record_id to, record_id from);
  /// The record of `key`, or `ram_record::none`.
  record_id find(const ram_key& key) const;

  uint64_t capacity_;
  uint64_t book_budget_;
  uint64_t meta_ = 0;         // Σ meta_of over every item
  uint64_t leaving_meta_ = 0; // Σ of leaving_charges_
  std::unordered_map<record_id, uint64_t> leaving_charges_;
  bool cold_;
  uint64_t pin_budget_;
  uint64_t pinned_bytes_ = 0;
  std::vector<record_id> pinned_; // records holding an engine pin
  uint64_t now_ = 0;              // the latest clock reading given
  entry_ranking rank_;            // resident items, under gdsf only
  ram_records records_;
  /// Resident, by priority; each list's head the least recently used.
  priority_lists<record_id> lru_;
  ram_record_list leaving_; // leaving, oldest first
  prefix_index<ram_handle> index_;
  body_layouts layouts_;
  std::unordered_map<std::string, record_id> objects_;
  std::unordered_map<uint64_t, std::vector<ram_key>> leases_;
  byte_ledger ledger_;   // every item
  byte_ledger resident_; // resident items (the cap)
  put_observer observer_;
  change_observer changes_;
  uint32_t serials_ = 0;
  uint64_t pins_ = 0;      // pin ids handed out
  uint64_t protected_ = 0; // records carrying a pin
  mutable ram_counters counters_;
};

} // namespace kvtier::tiers
