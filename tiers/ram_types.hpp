// Value types the RAM tier (tiers/ram_tier.hpp) hands to its owner: what a
// lookup lends, what a put did, what left RAM and must be spilled, and the
// counters. Plain values; they hold buffer references, never copies of
// bytes, and are safe to move to another thread or actor.
#pragma once

#include "tiers/state.hpp"
#include "tiers/stored_state.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// A buffer the tier stopped holding, watched weakly: the owner checks,
/// once it let go of its own copies, whether the bytes really went
/// (`died_bytes`). A view lent to an engine or a write still queued keeps
/// them alive.
struct released_buffer {
  std::weak_ptr<const buffer> buf;
  uint64_t size = 0;
};

/// Bytes of `released` whose buffers no longer exist anywhere.
uint64_t died_bytes(const std::vector<released_buffer>& released) noexcept;

/// Names an item in RAM: a prefix entry (ns, tokens) or an object (key).
struct ram_key {
  bool object = false;
  /// The namespace of a prefix entry, or the key of an object.
  std::string name;
  token_seq tokens;

  bool operator==(const ram_key&) const = default;
};

/// An item that left RAM by eviction (or, with a cold tier, started to
/// leave), handed to the caller in order.
struct spill_order {
  ram_key key;
  /// The whole prefix entry (empty for an object).
  entry state;
  /// The object's tensors (empty for a prefix entry).
  std::vector<attachment> object;
  /// The owner must order a write of `state`: no durable copy is on SSD
  /// (`mark_durable`) and, for a leaving item, no write of it is out yet.
  /// Without a cold tier: true for an item that was not durable (the
  /// caller drops it; there is nowhere to write).
  bool needs_spill = true;
  /// With a cold tier: the item stays indexed as *leaving* (servable,
  /// counted in `bytes()`, outside the cap) until `write_settled` says its
  /// write is durable or not stored. False: it left RAM now.
  bool leaving = false;
  /// The item's serial (see `put_result::serial`), for `write_settled`.
  uint64_t serial = 0;
  /// Buffers the tier stopped holding when the item left (empty while it
  /// is leaving).
  std::vector<released_buffer> released;
};

/// What a RAM lookup lends: the donor's stored state itself, shared with
/// the tier (one reference for the whole entry, whatever its layer count:
/// the lookup does no per-layer work), and the usable length. `state(prompt)`
/// cuts the views to that length when they are wanted (O(layers)); a writer
/// that can cut as it goes (`write_entry` with a length and a key) never
/// builds them. While a hit is held the donor's buffers stay alive, as
/// lent views do.
///
/// The tier holds each key once, in its index, so the donor comes without
/// tokens: what is lent is keyed by the prompt the lookup answered, whose
/// first `length` tokens are the donor's own (that is what matched).
struct ram_hit {
  /// The donor's whole state (never null in a hit) as the tier stores it
  /// (tiers/stored_state.hpp): layers, attachments and session, no tokens
  /// (its length is `donor_length`).
  stored_state donor;
  /// The donor's namespace (the tier keeps it in its index).
  std::string ns;
  /// The usable prefix length p (<= donor->size()).
  uint64_t length = 0;
  /// The donor's own length (> length when it is served trimmed).
  uint64_t donor_length = 0;
  /// The donor's serial (see `put_result::serial`).
  uint64_t donor_serial = 0;
  /// The donor was leaving (its write pending) and became resident again:
  /// what that evicted over the cap, least recently used first.
  std::vector<spill_order> evicted;

  /// The donor's state cut to `length` tokens, as views (attachments only
  /// when that is the donor's whole length), keyed by the first `length`
  /// tokens of `prompt`: the prompt this hit answered (at least `length`
  /// tokens long).
  entry state(std::span<const token> prompt) const;
  /// Usable tokens (`length`).
  uint64_t size() const noexcept {
    return length;
  }
};

/// What `write_settled` is told of an item's write.
enum class write_result : uint8_t {
  /// The file is durable: a leaving item leaves RAM, a resident one is
  /// marked durable.
  durable,
  /// It will not be stored (dropped over the write-behind cap, given up
  /// after its last attempt, cancelled, refused): a leaving item leaves
  /// RAM (counted as `leaving_dropped`), a resident one stays undurable.
  not_stored,
  /// An attempt failed and the SSD tier retries it: nothing changes.
  failed,
};

/// What `ram_tier::reclaim` gave back at a boundary.
struct reclaim_counts {
  /// Items already durable on SSD that were dropped, and their bytes.
  uint64_t released = 0;
  uint64_t released_bytes = 0;
  /// Optional items not durable anywhere that were dropped, and their
  /// bytes (the state is lost, not demoted).
  uint64_t dropped = 0;
  uint64_t dropped_bytes = 0;
  /// Bytes whose buffers died (with `reclaim_order::freeing`, the same as
  /// released + dropped bytes).
  uint64_t freed_bytes = 0;
};

/// How `reclaim` picks its victims, walking the resident items in order (a
/// lower priority first, least recently used first within one).
enum class reclaim_order : uint8_t {
  /// Skips items whose drop would free no byte now (views lent to a
  /// running request, a write still holding them); bytes count as freed
  /// only when their buffers died.
  freeing,
  /// Every candidate in that order; bytes count as the byte ledger
  /// releases them.
  lru,
};

/// A look at one held item without touching it (`ram_tier::item`).
struct ram_item {
  /// See `put_result::serial`; a newer put of the key changes it.
  uint64_t serial = 0;
  /// Marked durable on SSD.
  bool durable = false;
  /// The prefix entry as views (empty for an object).
  entry state;
  /// Leaving (evicted, its write pending); a write of it is out.
  bool leaving = false;
  bool writing = false;
};

/// A look at one held object without touching it (`ram_tier::peek_object`).
struct ram_object {
  /// See `put_result::serial`; a newer put of the key changes it.
  uint64_t serial = 0;
  /// Marked durable on SSD.
  bool durable = false;
  /// The tensors as views.
  std::vector<attachment> tensors;
};

/// What a put did. When `kept` is false the offered item was larger than
/// the whole cap: it comes back as the only spill order, and RAM is as it
/// was; with a cold tier it is held as leaving meanwhile (servable until
/// its write settles, never counted against the cap).
struct put_result {
  bool kept = false;
  /// Identity of the stored item: the tier's count of puts that stored one
  /// (1, 2, ..., 32 bits wide, never 0: a number comes back after 2^32
  /// puts); 0 when not kept.
  uint64_t serial = 0;
  /// An item with the same key was replaced (removed without spill).
  bool replaced = false;
  /// Strict prefix-ancestors removed without spill.
  size_t superseded = 0;
  /// Items evicted over the cap, least recently used first.
  std::vector<spill_order> evicted;
  /// The pin protecting the stored entry (a put with `protection::pin`
  /// that kept it); 0 otherwise.
  uint64_t pin = 0;
  /// The engine's pin (`retention::pin_ms`) was granted / refused because
  /// it would have gone over the pin budget.
  bool pinned = false;
  bool pin_refused = false;
};

/// Every counter of the RAM tier.
struct ram_counters {
  uint64_t entries = 0;
  uint64_t objects = 0;
  /// Bytes held, each shared buffer counted once.
  uint64_t bytes = 0;
  uint64_t capacity = 0;
  /// `lookup` calls that lent a prefix / found none.
  uint64_t hits = 0;
  uint64_t misses = 0;
  /// `lookup` calls naming a session: served from an entry that session
  /// published / not.
  uint64_t session_hits = 0;
  uint64_t session_misses = 0;
  /// Index walks: every `lookup` and every `peek_prefix_len`.
  uint64_t prefix_scans = 0;
  /// Items evicted over the cap or popped for pressure relief.
  uint64_t evictions = 0;
  /// Ancestors removed by a trimmable newcomer.
  uint64_t supersessions = 0;
  /// Items replaced by a put with the same key.
  uint64_t replacements = 0;
  /// Puts refused because the item alone exceeds the cap.
  uint64_t oversize = 0;
  /// Bytes of the objects' tensors (the views' lengths).
  uint64_t object_bytes = 0;
  uint64_t object_hits = 0;
  uint64_t object_misses = 0;
  /// Put observers that threw (contained).
  uint64_t observer_errors = 0;
  /// Entries carrying at least one pin right now.
  uint64_t protected_entries = 0;
  /// Durable marks cleared because the SSD file behind them went
  /// (`mark_not_durable`): each such item is written again before it
  /// leaves RAM.
  uint64_t backing_lost = 0;
  /// Items leaving right now (evicted, their write pending or failed and
  /// retried), and the bytes only they hold (outside the cap).
  uint64_t leaving_entries = 0;
  uint64_t leaving_bytes = 0;
  /// Leaving items dropped because their write was not stored.
  uint64_t leaving_dropped = 0;
  /// Leaving items a lookup made resident again.
  uint64_t rejoined = 0;
  /// Items a boundary dropped without a durable copy (optional state).
  uint64_t boundary_dropped = 0;
  /// Entries an engine's pin holds right now, and their bytes (at most
  /// the pin budget).
  uint64_t pinned_entries = 0;
  uint64_t pinned_bytes = 0;
  /// Engine pins granted, refused over the budget, and run out (their
  /// time to live passed without a hit).
  uint64_t pins_granted = 0;
  uint64_t pins_refused = 0;
  uint64_t pins_expired = 0;
  /// What the tier spends beside state bytes (`ram_tier::bookkeeping_bytes`)
  /// and the most resident items may (0: unbounded); items evicted over
  /// that budget alone.
  uint64_t bookkeeping_bytes = 0;
  uint64_t bookkeeping_budget_bytes = 0;
  uint64_t bookkeeping_evictions = 0;
};

/// A change of which prefix entries the tier holds (the event feed's RAM
/// part, actors/feed_actor.hpp). Replacing an entry of the same key is one
/// `stored` (the old one is not reported gone); a leaving entry is still
/// held (servable) until it goes.
enum class ram_change_kind : uint8_t {
  /// Stored by a put (a publish, an install, a replace).
  stored,
  /// Left RAM: over the cap (once its write settled), at a boundary, at a
  /// clear.
  evicted,
  /// Left RAM by `remove` (idle demotion, once durable).
  demoted,
  /// Left RAM: a longer trimmable entry stands in for it.
  superseded,
};

/// One change, as `ram_tier::set_change_observer` reports it.
struct ram_change {
  ram_change_kind kind = ram_change_kind::stored;
  const std::string& ns;
  const token_seq& tokens;
  /// Bytes of the entry's layers (what a fetch of it would move).
  uint64_t bytes = 0;
  /// Whether it serves shorter prefixes (trim floor below its length).
  bool trimmable = false;
};

} // namespace kvtier::tiers
