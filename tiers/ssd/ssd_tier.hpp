// The SSD tier: entry files as the database (docs/ssd-format.md), served
// by a small coordinator over five parts, each with its own contract:
//
//   file_set        the directory, the start-up scan, the index (LRU by
//                   bytes) and the recency stamps
//   write_pipeline  the write-behind queue, each write's stages, retries,
//                   reports, flushes and their evidence, the close
//   cold_reads      coalesced verified reads, prefetch leases
//   removal_log     durable checkpoint removals (removal records)
//   delta_chains    delta links, pins and row origins
//
// The coordinator owns the parts and the policies that span them; parts
// never call each other or the coordinator, it passes each what it needs:
//   - Only renamed-and-synced files enter the index: a pending write is
//     not "on SSD".
//   - The byte cap evicts least-recently-used files that no delta child
//     or delta write holds; a trimmable prefix file, once durable,
//     supersedes its stored prefix-ancestors in its namespace (as RAM
//     supersedes entries). Both are reported (`on_remove`).
//   - A file that leaves takes its delta children along; a restore that
//     finds its file corrupt removes it, gone or of another model forgets
//     it.
//   - A write that finishes feeds the checkpoint removals covering it.
//
// Owner and threads: one owner (the SSD actor) calls every method from one
// thread; no method blocks on a disk except `open` and `index_step` (the
// header-only scan at start, one bounded batch per step). Reads, writes,
// fsyncs, renames and removals run on the I/O engine; the owner hands every
// completion the engine reports back to `handle`. Callbacks (restore, flush,
// removal, close) run inside `handle` (or inside the call, where stated) and
// may call back into the tier; the reports (`ssd_config::on_write`,
// `on_remove`) must not. Destroy the tier when it is not `busy()`, or destroy
// the engine first.
//
// Every failure degrades to "no hit" or "not stored", counted, with one log
// line per failed write or corrupt file; never a wrong state, never a crash.
#pragma once

#include "tiers/ssd/cold_reads.hpp"
#include "tiers/ssd/removal_log.hpp"
#include "tiers/ssd/write_pipeline.hpp"

namespace kvtier::tiers::ssd {

class ssd_tier {
public:
  ssd_tier(ssd_config cfg, file_system& fs, io_engine& engine);
  ~ssd_tier();

  ssd_tier(const ssd_tier&) = delete;
  ssd_tier& operator=(const ssd_tier&) = delete;

  /// Owns the directory (`file_set::own_directory`), lists it and reads
  /// its removal records; then (with `ssd_config::index_at_open`) scans
  /// headers only and rebuilds the index (orphan temps, corrupt, misnamed
  /// and broken-chain files removed; other fingerprints, versions and
  /// shapes kept, not indexed), then evicts over the cap. Blocking: call
  /// once before serving. Without `index_at_open` the scan is left to
  /// `index_step`, and the report counts only the records.
  caf::expected<scan_report> open();

  /// The start-up scan, `max_files` names of the listing at a time
  /// (blocking, header reads only): each file found goes into the index at
  /// once (a delta file waits for the end: its parent may come later);
  /// `indexed` is told each file's header as it enters (keyed). Returns
  /// true once the scan is over (then: delta files resolved, records
  /// finished, LRU order rebuilt from the mtimes, the cap enforced,
  /// checkpoint removals asked for meanwhile started, held writes let go).
  /// While it runs (docs/ssd-format.md "Start-up"): lookups see the files
  /// indexed so far; writes are queued, not started (a write id must be
  /// above every file's, and no scan may see a file a write is making);
  /// an erase of a name not scanned yet unlinks it and the scan skips it;
  /// a checkpoint removal forgets what is indexed of the identity, hides
  /// the rest and starts once the scan is over.
  bool index_step(size_t max_files,
                  const std::function<void(const entry_header&)>& indexed = {});

  /// Whether the start-up scan is still running.
  bool indexing() const noexcept {
    return scan_ != nullptr;
  }

  /// What the start-up scan found, complete once `indexing` is false.
  const scan_report& scan_result() const noexcept {
    return scan_result_;
  }

  /// The best usable prefix file for `prompt` in `ns`; no I/O. Never a
  /// checkpoint or an object file.
  std::optional<ssd_match> find(std::span<const token> prompt,
                                std::string_view ns) const;

  /// The file of exactly `key` (any kind), serving all its tokens; no I/O.
  std::optional<ssd_match> find(const storage_key& key) const;

  /// The storage key of the indexed file a match names (O(length)).
  storage_key key_of(const ssd_match& m) const;

  /// The newest pending write of exactly `key` (queued, running, or failed
  /// and kept), as views of its buffers; no I/O. Not on SSD, but servable.
  std::optional<entry> queued(const storage_key& key) const;

  /// Whether the prefix key is durable on SSD and no newer write of it is
  /// pending or failed: only then may RAM drop it as "on SSD".
  bool contains(std::string_view ns, std::span<const token> tokens) const;

  /// The same for any kind; a checkpoint's file must name `key.attempt`.
  bool contains(const storage_key& key) const;

  /// Removes the file of exactly the key (reported `erased`) and every
  /// write of it pending now: queued or failed ones are cancelled
  /// (reported `cancelled`); a running one finishes and its file is then
  /// removed (`durable`, then `erased`; `cancelled` if it fails). False
  /// when there was neither. May complete a flush inside the call.
  bool erase(std::string_view ns, std::span<const token> tokens);
  bool erase(const storage_key& key);

  /// Removes every file and pending write of the checkpoint identity
  /// (request, ns) durably (`removal_log`); `cb` runs once the removal is
  /// durable (inside the call when nothing was covered), or with the error
  /// when it could not be made durable yet (it stays pending; every flush
  /// retries it). A later write of the identity is not affected.
  void remove_checkpoints(uint64_t request, std::string_view ns,
                          removal_callback cb);

  /// Prefix files on SSD, from headers only.
  std::vector<saved_prefix> saved_prefixes() const;

  /// Checkpoint files indexed, by their headers' keys and write ids,
  /// oldest write first; none of an identity whose removal waits for the
  /// start-up scan's end.
  std::vector<checkpoint_file> checkpoint_files() const;

  /// Whether the checkpoint file `f` names (its key, attempt and write id)
  /// is indexed and not hidden by a removal waiting for the scan's end:
  /// still the file the start-up scan found.
  bool holds(const checkpoint_file& f) const;

  /// Queues `e` for writing as a prefix entry; returns the item id.
  /// `ec::no_space` when larger than the byte cap; `ec::invalid_argument`
  /// when invalid, not storable, or (with a model) of another shape;
  /// `ec::closed` after a close. A spill the admission rule does not
  /// write is `ec::cancelled` naming the rule (counted
  /// `admission_skipped`); a write over the daily write budget is
  /// `ec::over_budget` naming it (`budget_refused`); neither is queued.
  caf::expected<uint64_t> enqueue(entry e, write_reason reason);

  /// The same under `key` (ns and tokens `e`'s): a checkpoint's header
  /// records its owner; an object is `e`'s attachments alone.
  caf::expected<uint64_t> enqueue(entry e, write_reason reason,
                                  const storage_key& key);

  /// Restores `m` (from `find`). Identical restores in flight share one
  /// read; a prefetched result held runs `cb` before this returns. Says
  /// whether this call started the read or joined one.
  read_start restore(const ssd_match& m, restore_callback cb);

  /// Starts or joins the read of the best file for `prompt`; returns its
  /// lease (the result is held until `release`) and how the read began,
  /// or nullopt when nothing serves more than `better_than` tokens or the
  /// tier is closed (then nothing is touched: no read, lease or recency).
  std::optional<prefetch_lease> prefetch(std::span<const token> prompt,
                                         std::string_view ns,
                                         uint64_t better_than = 0);

  /// The same for a match `find` already gave.
  std::optional<prefetch_lease> prefetch(const ssd_match& m,
                                         uint64_t better_than = 0);

  /// Ends an interest; the last one ending before the read completes
  /// cancels it.
  void release(uint64_t lease);

  /// Writes everything queued, retries pending removals, and calls `cb`
  /// with the evidence once nothing is left in flight (at once when
  /// idle). Failed writes are made writable first with
  /// `flush_retries::now`; with `flush_retries::owner` they wait for the
  /// owner's `retry` and count as pending and failed. Concurrent flushes
  /// share one result.
  void flush(flush_callback cb, flush_retries retries = flush_retries::now);

  /// Makes the failed item `id` writable again now; false when it is not
  /// failed.
  bool retry(uint64_t id);

  /// Closes the tier for good: writes not running are released
  /// (`abandoned`), prefetch results and leases dropped; `enqueue` fails
  /// and `prefetch` starts nothing from now on. `cb` runs once no write
  /// runs, with the writes released unwritten. Lookups and restores still
  /// work; a second close is harmless.
  void close(close_callback cb);

  bool closed() const noexcept {
    return writes_.closed();
  }

  /// Sets the byte cap from now on; lowering it evicts least-recently-used
  /// files at once (reported `evicted`). Returns the files removed now;
  /// `on_disk` runs with that count once their unlinks ran.
  uint64_t set_byte_cap(uint64_t bytes,
                        std::function<void(uint64_t evicted)> on_disk = {});

  uint64_t byte_cap() const noexcept {
    return cfg_.byte_cap;
  }

  /// Feeds one engine completion back; runs callbacks it completes.
  void handle(io_completion c);

  /// Whether any op is in flight or any write could start.
  bool busy() const noexcept;

  ssd_stats stats() const;

  /// What the write-behind queue holds, by reason.
  write_backlog backlog() const {
    return writes_.backlog();
  }

  /// The failed writes waiting for their owner's `retry`, oldest first.
  std::vector<uint64_t> failed_writes() const {
    return writes_.queue().failed_ids();
  }

  /// Bytes of buffers the tier's own work holds: the headers of writes
  /// running and the buffers of reads running.
  uint64_t io_buffer_bytes() const {
    return writes_.header_bytes() + reads_.buffer_bytes();
  }

  /// "io_uring" or "threads".
  const char* engine_name() const noexcept {
    return io_.engine.name();
  }

  /// `<dir>/<fingerprint>`.
  const std::string& root() const noexcept {
    return io_.root;
  }

  /// The fingerprint in use (the model's when one is set).
  const std::string& fingerprint() const noexcept {
    return cfg_.fingerprint;
  }

private:
  // Writes (ssd_tier_write.cpp).
  void pump();
  void start_write(write_item& item);
  void on_write(write_job& job, io_completion& c);
  void write_done(write_job& job);
  void write_failed(write_job& job);
  void unpin(write_job& job);
  void count_new_tokens(const entry& e);
  void supersede_ancestors(const std::string& name);
  /// Evicts over the cap (never `keep` unless it alone is over it); the
  /// unlinks' chore tags go to `tags` when given.
  void evict_over_cap(const std::string& keep,
                      std::set<uint64_t>* tags = nullptr);
  void maybe_finish_flush();

  // The start-up scan (ssd_tier_index.cpp).
  struct start_scan;
  void finish_index();
  void index_deltas(const std::function<void(const entry_header&)>& indexed);
  void rebuild_recency();
  /// Scans the listed `name` (blocking): the file to index, if any.
  std::optional<scanned_file> scan_name(const std::string& name);
  /// Indexes a file the scan found at `at` in the listing (below the files
  /// used since `open`), told to `indexed`.
  void index_found(scanned_file& f, size_t at,
                   const std::function<void(const entry_header&)>& indexed);
  /// Scans the listed name `name` ahead of the scan (an erase of it): a
  /// whole file is indexed, a delta file removed (it is being erased).
  void scan_early(const std::string& name);
  /// The disk part of `remove_checkpoints` (files indexed, writes running).
  void start_removal(uint64_t request, std::string_view ns,
                     removal_callback cb);
  /// A checkpoint of (request, ns) whose removal waits for the scan's end.
  bool removal_deferred(const entry_header& h) const;

  // Files (ssd_tier_files.cpp).
  void use_chain(const std::string& name);
  void read_ended(ended_read r);
  void index_file(ssd_file f, uint32_t carried_uses = 0);
  /// Drops `name` from the index and reports it; its delta children go.
  void forget(const std::string& name, removal_reason why);
  /// Drops `name` (reported when `report`) and removes its children
  /// (`cascade`).
  std::optional<ssd_file> unindex(const std::string& name, bool report,
                                  removal_reason why, removal_reason cascade);
  /// Removes the delta children of `name` (reported `cascade`; the log
  /// line names `why` its parent left).
  void cut_children(const std::string& name, removal_reason why,
                    removal_reason cascade);
  /// `forget`, then unlinks the file; the unlink's chore tag (0: left to a
  /// write of the name).
  uint64_t remove_file(const std::string& name, removal_reason why);
  /// An unlink chore ended.
  void unlink_ended(uint64_t tag, const io_completion& c);
  /// Names a removal may not unlink now (indexed, or being written).
  busy_name busy_names() const;

  ssd_config cfg_;
  ssd_stats stats_;
  tier_io io_;
  file_set files_;
  delta_chains chains_;
  spill_admission admission_;
  cold_reads reads_;
  write_pipeline writes_;
  removal_log removals_;
  /// Chore tags of every unlink running (of any file) -> file name.
  std::map<uint64_t, std::string> unlink_chores_;
  /// `set_byte_cap` calls waiting for their unlinks.
  struct cap_wait {
    std::set<uint64_t> tags;
    uint64_t evicted = 0;
    std::function<void(uint64_t)> done;
  };
  std::vector<cap_wait> cap_waits_;
  /// The start-up scan while it runs (null once it ended).
  std::unique_ptr<start_scan> scan_;
  scan_report scan_result_;
};

/// "N files indexed", then the counts of the report that are not 0 ("2
/// corrupt removed, ..."): the recovery figures of a start.
std::string scan_summary(const scan_report& r);

} // namespace kvtier::tiers::ssd
