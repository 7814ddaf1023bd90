// The SSD tier actor: sole owner of a `tiers::ssd::ssd_tier` and its I/O
// engine (docs/actors.md; docs/ssd-format.md "Durability contract"). Its
// mailbox never blocks on a disk: the engine runs every op on its own threads
// and reports each completion through a `completion_relay`, which sends it to
// this actor as an `io_done` message; the handler feeds it back to the tier,
// whose callbacks then deliver the response promises of restores, prefetches,
// spill orders and flushes.
//
// Spill orders: each SpillEntry is answered when the tier reports on its
// queued write (`ssd_config::on_write`): durable, failed (the item stays
// queued for its retry; the sender does not wait for that),
// dropped over the write-behind cap, or superseded by a newer state of the
// key; at once as alreadyDurable when an equal file is durable. The tier is
// built, opened (the header-only scan, the one blocking step) and handed over
// by runtime/service/spawn.cpp before the actor serves.
//
// Start-up scan: a tier opened without `index_at_open` is indexed by this
// actor, `ssd_parts::index_batch` files a batch, each batch a message it
// sends itself (`index_step_atom`), so requests queued meanwhile are
// served between batches from the files indexed so far (docs/ssd-format.md
// "Start-up"); the feed, once attached, is told of each prefix file as it
// is indexed, and the checkpoints actor of each checkpoint file (still
// held after the batch: `found_checkpoints`, before any removal event of
// it; those found before it is attached at the attach), so a request can
// resume from a file the scan reached late; one log line when the scan is
// over.
//
// Removals: every entry file the tier stops holding (`ssd_config::on_remove`:
// evicted over the cap, found corrupt or gone by a restore, erased) becomes
// one SsdEvictEvent to the RAM actor, which clears the durable marks that
// file gave; a checkpoint file's (by its header's key kind; RAM never holds
// one) goes to the checkpoints actor instead, which clears its
// checkpoint's durable mark.
// Each is attached once, after it is spawned (`attach_ram_atom`,
// `attach_ckpt_atom`; runtime/service/spawn.cpp), and held weakly: both hold
// this one. Removals before the attach (the start-up scan's) go nowhere:
// nothing is held yet. Events and replies to one actor leave in the order
// the tier reported, so a durable reply is never overtaken by the event of
// that file's removal.
//
// Event feed: once attached (`attach_feed_atom`), every prefix file that
// becomes durable is one `feed_change` (durable, its layers' bytes from the
// header) and every prefix file the tier stops holding one (removed); at
// the attach, every prefix file held then (the start-up scan's) is told as
// durable, so the feed's table includes them. Checkpoint and object files
// are not told.
//
// Retries: each failed write has one clock, this actor's timer
// (`retry_write_atom`, `retry_backoff_ms` doubling per failure). A flush
// never tries a write early: it waits for the attempts those timers make
// (`ssd_tier::flush` with `flush_retries::owner`), so a write gets the same
// spread of attempts with or without a flush (docs/ssd-format.md
// "Retries").
//
// Admission and the write budget (docs/ssd-format.md "Admission and the
// write budget"): a spill the tier's admission rule skips is answered
// refused (`ec::cancelled` naming `ssd-tier.admission`), so RAM lets the
// entry go as not stored; a write over the daily budget is answered
// refused (`ec::over_budget`), and one of state its owner keeps (a
// snapshot, a demotion, a checkpoint) is also named in the next flush's
// answer, which is then not durable. Neither counts as a failure.
//
// EraseEntry also cancels the key's pending writes (`ssd_tier::erase`):
// their spill orders are answered `cancelled`. RemoveCheckpoints (a
// completed generation) is answered once the tier's removal record is
// durable (`ssd_tier::remove_checkpoints`). A SpillEntry carries its key
// kind: a checkpoint key only with the reason checkpoint (else refused),
// so no prefix write can become a checkpoint file.
//
// CloseService (the service's close, after its flush) closes the tier
// (`ssd_tier::close`): spill orders of writes it releases unwritten, and
// every later one, are answered `refused` with `ec::closed`; prefetch
// results held for leases go, later prefetches start nothing. The reply
// waits for the writes still running (each holds its buffers until it
// ends; a flush waited for them too) and carries the number of writes
// released unwritten (`abandoned`).
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/ssd/counted_engine.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <caf/typed_response_promise.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace kvtier::actors {

/// Carries engine completions to the SSD actor; keeps those that arrive
/// before the actor is attached and sends them on `attach`. Thread-safe.
class completion_relay : public std::enable_shared_from_this<completion_relay> {
public:
  /// The sink to build the engine with.
  tiers::ssd::completion_sink sink();

  /// From now on, completions go to `target` (held weakly).
  void attach(caf::weak_actor_ptr target);

private:
  void push(tiers::ssd::io_completion c);

  std::mutex mtx_;
  caf::weak_actor_ptr target_;
  bool attached_ = false;
  std::vector<tiers::ssd::io_completion> early_;
};

/// What runtime/service/spawn.cpp builds for the SSD actor, in destruction
/// order: the engine goes first (it waits for its ops), then the tier, then an
/// owned file system.
struct ssd_parts {
  std::unique_ptr<tiers::ssd::file_system> own_fs;
  std::shared_ptr<completion_relay> relay;
  std::unique_ptr<tiers::ssd::ssd_tier> tier;
  std::unique_ptr<tiers::ssd::counted_engine> engine;
  uint64_t cap_bytes = 0;
  /// The wait before a failed write's second attempt (doubling after).
  uint64_t retry_backoff_ms = 100;
  /// How long a prefetch read may take before its lease ends.
  uint64_t deadline_ms = 10000;
  /// Attempts a write gets (the tier's `max_attempts`): a flush waits
  /// for every failed write's retries until it is durable or given up;
  /// 0 (no limit): for one more attempt of each.
  uint32_t write_attempts = 0;
  /// Files the start-up scan indexes per batch while the actor serves
  /// (`ssd_tier::index_step`; the tier opened without `index_at_open`).
  size_t index_batch = 1024;
  /// Where the tier's `on_write` reports go (set by the actor).
  std::function<void(const tiers::ssd::write_event&)> on_write;
  /// Where the tier's `on_remove` reports go (set by the actor).
  std::function<void(const tiers::ssd::remove_event&)> on_remove;
};

/// Points `cfg`'s reports (`on_write`, `on_remove`) at `parts`' hooks,
/// which the actor fills when it starts. Call before building the tier.
void route_reports(tiers::ssd::ssd_config& cfg, ssd_parts& parts);

struct ssd_tier_state {
  static inline const char* name = "ssd-tier";

  using spill_promise =
    caf::typed_response_promise<sealed<msg::SpillEntryReply>>;
  using flush_promise =
    caf::typed_response_promise<sealed<msg::FlushStateReply>>;
  using prefetch_promise =
    caf::typed_response_promise<sealed<msg::PrefetchPrefixReply>>;
  /// A spill order waiting for the tier's final report on its write.
  struct waiter {
    msg::SpillReason reason;
    uint64_t order = 0;
    /// Answered at the first report (orders without notify).
    std::optional<spill_promise> rp;
    /// Told of every report as SpillSettled (orders with notify).
    caf::weak_actor_ptr notify;
  };
  /// A flush that waits for failing writes' retries (each on its own
  /// clock) while it runs.
  struct flush_run {
    std::vector<flush_promise> waiters;
    /// A round runs (the tier's flush has not called back yet).
    bool in_round = false;
    /// Failed writes whose next attempt the flush waits for; the next
    /// round starts once each has been tried again.
    std::unordered_set<uint64_t> awaiting;
    /// Writes whose next attempt it already waited for (without an attempt
    /// limit, each gets one).
    std::unordered_set<uint64_t> waited;
    uint64_t dropped = 0;
    uint64_t given_up = 0;
    /// Distinct failures seen meanwhile: text -> (error, writes).
    std::map<std::string, std::pair<caf::error, std::set<uint64_t>>> errors;
  };

  std::shared_ptr<ssd_parts> parts;
  /// By write-queue item id.
  std::unordered_map<uint64_t, waiter> waiting;
  std::optional<flush_run> flushing;
  /// Failures a flush has yet to report: id -> (the last failure, given
  /// up). A write waiting for its retry stays until it settles; one given
  /// up before any flush ran goes to the next flush (a flush's own write
  /// orders may fail before the flush itself arrives).
  std::unordered_map<uint64_t, std::pair<caf::error, bool>> unreported;
  /// Prefetches whose read has not answered, by lease.
  std::unordered_map<uint64_t, prefetch_promise> prefetching;
  uint64_t failures = 0;
  /// Writes of a snapshot, demotion or checkpoint the write budget refused
  /// since the last flush answer, which names them (and the last error).
  struct refused_writes {
    uint64_t writes = 0;
    caf::error last;
  };
  refused_writes over_budget;
  /// The RAM actor told of removals (`attach_ram_atom`); weak, since it
  /// holds this actor.
  caf::weak_actor_ptr ram;
  /// The checkpoints actor told of checkpoint files removed
  /// (`attach_ckpt_atom`); weak, since it holds this actor.
  caf::weak_actor_ptr checkpoints;
  /// Checkpoint files the start-up scan indexed before that attach: sent
  /// at the attach, those still held (`found_checkpoints`).
  std::vector<tiers::checkpoint_file> found_early;
  /// The event feed told of every prefix file written or gone
  /// (`attach_feed_atom`); null: none.
  feed_actor feed;
};

using ssd_tier_pointer = ssd_tier_actor::stateful_pointer<ssd_tier_state>;

/// The behaviour over an opened tier.
ssd_tier_actor::behavior_type ssd_tier(ssd_tier_pointer self,
                                       std::shared_ptr<ssd_parts> parts);

} // namespace kvtier::actors
