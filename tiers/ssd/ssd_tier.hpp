// The SSD tier: entry files as the database, an index over their headers,
// a byte-capped write-behind queue, coalesced cold reads with interest
// leases, and flush with durability evidence (docs/ssd-format.md "Durability
// contract").
//
// Owner and threads: one owner (the SSD actor) calls every method from one
// thread; no method blocks on a disk except `open` (the header-only scan at
// start). Reads, writes, fsyncs, renames and removals run on the I/O engine;
// the owner hands every completion the engine reports back to `handle`
// (the actor turns the sink into a message to itself; tests drain a
// `completion_queue`). Callbacks (restore, flush) run inside `handle` (or
// inside the call, where stated) and may call back into the tier. Destroy
// the tier when it is not `busy()`, or destroy the engine first: ops hold
// their own buffers, but completions must not reach a destroyed tier.
//
// Files: `<dir>/<fingerprint>/<xxh3-128 of the storage key>.kvt`, written
// to a unique `.tmp` name, fsynced, renamed over the final name, directory
// fsynced. Only renamed-and-synced files enter the index; a pending write
// is not "on SSD". The byte cap evicts least-recently-used files; each
// file's last use (its write, a restore or prefetch) is recorded in its
// mtime on the engine, and the start-up scan orders the index by it, so
// the LRU order survives a restart. The owner may change the cap live
// (`set_byte_cap`). A trimmable prefix file, once durable, supersedes its
// stored prefix-ancestors' files in its namespace (removed, reported), as
// RAM supersedes entries. With `delta_files`, a prefix entry whose shared
// rows are proven to be a stored file's (the very buffers a restore read or
// a write wrote from, or equal checksums) is written as a delta naming that
// parent and holding only its own rows; restores read the chain; a parent
// is never evicted or superseded while a child or a running write depends
// on it, and a parent that leaves (or is rewritten) takes its children
// along, reported (docs/ssd-format.md, "Delta files"). Every
// header says its key kind (tiers/storage_key.hpp): prompt lookups see
// prefix files only; checkpoint files are found by exact key and listed by
// `checkpoint_files`; object files (exact tensor objects, their tensors as
// attachments) are found by exact key only.
//
// Removal records: `remove_checkpoints` (a completed generation) makes the
// removal durable before it answers: an empty record file
// `<identity hash>.<write id W>.kvr` (temp, rename, directory fsync) says
// "every file of this checkpoint identity written with a write id up to W
// is dead". The start-up scan applies records before it indexes anything, so
// a checkpoint file a record covers is removed, never indexed, even when its
// unlink failed or a crash came first; a record goes once its files are
// durably gone. Write ids increase above every id and record the scan
// found, so a later checkpoint of a reused request id is never covered.
//
// Identity and ownership (docs/ssd-format.md, "Where files live"): the
// fingerprint is the model's (`ssd_config::model`), so another model's
// files live in another directory; `open` locks `<dir>/<fingerprint>/LOCK`
// for the tier's lifetime (a second holder is refused with `ec::locked`
// naming the first), keeps that directory 0700 (tightening a looser one)
// and checks or writes its `MODEL` file. With a model set, every header is
// checked against its geometry: at the scan (a file of another shape is
// not indexed, kept, counted) and at each restore (a miss, the file kept,
// counted); `enqueue` refuses an entry of another shape.
//
// Reports: the owner hears what became of each queued write (`on_write`)
// and of every indexed file the tier stops holding (`on_remove`), so a
// tier above that marked its copy of an entry durable can tell when that
// stops being true.
//
// Close: `close` ends the writes for good and lets go of every buffer the
// tier holds (unwritten writes, prefetch results), done once no write
// runs.
//
// Every failure degrades to "no hit" or "not stored", counted, with one log
// line per failed write or corrupt file; never a wrong state, never a crash.
#pragma once

#include "tiers/model_identity.hpp"
#include "tiers/ssd/io_engine.hpp"
#include "tiers/ssd/ssd_index.hpp"
#include "tiers/ssd/ssd_stats.hpp"
#include "tiers/ssd/write_queue.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

namespace kvtier::tiers::ssd {

struct removal_io;

/// What became of one queued write (see `ssd_config::on_write`).
enum class write_outcome : uint8_t {
  /// The file is durable and indexed.
  durable,
  /// The write failed; the item stays queued for a retry (`retry`, or a
  /// flush). Not final: a later report of the same item follows.
  failed,
  /// Dropped over the queue's byte cap: never written.
  dropped,
  /// Replaced in the queue by a newer state of the same key.
  superseded,
  /// Taken back by `erase` before it was written (or, when its write was
  /// running and failed, instead of a retry): never written.
  cancelled,
  /// Released unwritten by `close` (queued, or failed and kept for a
  /// retry, or failing after the close): never written.
  abandoned,
  /// Failed `ssd_config::max_attempts` times: released, never written
  /// (`err` says why the last attempt failed).
  given_up,
};

const char* to_string(write_outcome o);

/// One report of the write-behind queue to its owner.
struct write_event {
  uint64_t id = 0;
  std::string ns;
  token_seq tokens;
  write_reason reason = write_reason::spill;
  write_outcome outcome = write_outcome::durable;
  /// Why, for `failed` and `given_up`: the step and the error, without the
  /// entry's name (so equal failures of several entries read the same).
  caf::error err;
  /// Attempts made so far (1 after the first).
  uint32_t attempts = 0;
};

/// Why the tier stopped holding an entry file (see `ssd_config::on_remove`).
enum class removal_reason : uint8_t {
  /// Least recently used over the byte cap.
  evicted,
  /// A restore found it corrupt or truncated; the file is removed.
  corrupt,
  /// A restore found it gone or replaced behind the tier's back; forgotten.
  gone,
  /// Removed on request (`erase`).
  erased,
  /// A trimmable longer file of the same namespace became durable and
  /// serves every prompt this one did (as a trimmable RAM entry
  /// supersedes its ancestors).
  superseded,
};

const char* to_string(removal_reason r);

/// One indexed file the tier no longer holds, reported to its owner.
struct remove_event {
  std::string ns;
  token_seq tokens;
  removal_reason reason = removal_reason::evicted;
  /// Bytes the file occupied.
  uint64_t bytes = 0;
  /// The file's key kind and, for a checkpoint, its owner (the header's).
  key_kind kind = key_kind::prefix;
  uint64_t request = 0;
  uint32_t attempt = 0;

  storage_key key() const {
    return {kind, ns, tokens, request, attempt};
  }
};

/// The lock file in the tier's directory (held while the tier lives).
inline constexpr const char* lock_file_name = "LOCK";
/// The file stating the directory's model identity in words.
inline constexpr const char* model_file_name = "MODEL";

/// How the tier runs. The service fills the fields its options name
/// (runtime/service/spawn.cpp); the defaults here are for tests, and those
/// an option also has equal the shipped default (checked by
/// tests/runtime/options_test.cpp) or say how they differ.
struct ssd_config {
  /// Root directory; this tier uses `<dir>/<fingerprint>/` only.
  std::string dir;
  /// Model fingerprint: a file-name-safe string naming what the state
  /// means. Replaced by `model->fingerprint()` when `model` is set.
  std::string fingerprint = "default";
  /// The running model: names the directory, is written to its MODEL file,
  /// and its geometry is checked against every header and enqueued entry.
  /// Unset (tests of the file protocol alone): no shape check.
  std::optional<model_identity> model;
  /// Bytes of entry files kept; least recently used files go first
  /// (`ssd-tier.cap-bytes`).
  uint64_t byte_cap = 16ull << 30;
  /// Bytes the write-behind queue may hold
  /// (`ssd-tier.write-behind-cap-bytes`).
  uint64_t queue_cap = 512ull << 20;
  /// Payload alignment in the files (power of two; `ssd-tier.alignment`).
  uint32_t alignment = 4096;
  /// Payload bytes per checksum (multiple of `alignment`).
  uint32_t checksum_chunk = 1u << 20;
  /// Entry writes running at once.
  uint32_t writes_in_flight = 2;
  /// Attempts a write gets before it is given up (`write_outcome::given_up`);
  /// 0: no limit (a failed item waits for `retry` or a flush for ever).
  /// The service sets `ssd-tier.write-attempts`.
  uint32_t max_attempts = 0;
  /// Largest single read or write handed to the engine.
  uint32_t max_op_bytes = 8u << 20;
  /// Data reads or writes of one entry running at once. One sequential
  /// stream per file lets kernel readahead work; concurrent reads of one
  /// file measured 45-65% of a sequential raw read here, one 65-100%.
  uint32_t ops_per_entry = 1;
  /// After each data write of a file, ask the OS to start writing it back
  /// (`file::start_writeback`, sync_file_range), so the disk works while
  /// the rest is copied and the final fsync waits for less: a 64 MiB spill
  /// measured about a third shorter here. False: the fsync starts it all.
  bool start_writeback = true;
  /// Delta files (docs/ssd-format.md, "Delta files"): a prefix entry that
  /// extends a durable prefix file of its namespace is written as a file
  /// naming that parent and holding only the rows past it, when every
  /// layer is kv and the entry's shared rows hash to the parent chain's
  /// checksums. False: every file is written whole (as before format 3).
  /// The service sets it from `ssd-tier.delta-files` (default true).
  bool delta_files = false;
  /// Most files one restore may read (a delta's chain, itself included);
  /// a delta that would make a longer chain is written whole. At least 1
  /// (1: no deltas; `ssd-tier.max-chain`).
  uint32_t max_chain = 8;
  /// Wall time in nanoseconds since the epoch, for the recency stamps the
  /// tier records in each file's mtime; the system clock when empty.
  std::function<uint64_t()> clock;
  /// Where failure lines go; kvtier's log (messages/log.hpp, warn) when
  /// empty.
  std::function<void(const std::string&)> log;
  /// Told what became of each queued write (e.g. so the RAM tier can mark
  /// an entry durable); runs inside `enqueue`, `erase` or `handle` and
  /// must not call back into the tier. A final report (all but `failed`)
  /// comes after the tier let go of the item's buffers. Optional.
  std::function<void(const write_event&)> on_write;
  /// Told about every indexed file the tier stops holding, at the moment
  /// it leaves the index (before the unlink runs), so an owner holding a
  /// copy it believed durable can clear that belief: evicted over the cap
  /// (also inside `open` and `set_byte_cap`), found corrupt or gone by a
  /// restore, erased, superseded by a trimmable longer file. Not
  /// reported: the older file of a key that a newer write of the same key
  /// replaces (that write's `on_write` report follows), and files `open`
  /// drops without indexing them (corrupt, misnamed, orphan temps). Runs
  /// inside `open`, `erase`, `set_byte_cap` or `handle` and must not call
  /// back into the tier. Optional.
  std::function<void(const remove_event&)> on_remove;
};

/// Called once with the restored entry (trimmed to the match) or an error:
/// `ec::corrupt_data` (file removed), `ec::not_found`, `ec::io_error`,
/// `ec::cancelled`. Every error means "miss".
using restore_callback = std::function<void(caf::expected<entry>)>;

using flush_callback = std::function<void(const durability_evidence&)>;

/// What a flush does with failed writes (`ssd_tier::flush`).
enum class flush_retries : uint8_t {
  /// Makes every failed write writable again at once.
  now,
  /// Leaves them to the owner's retry clock (`ssd_tier::retry`).
  owner,
};

/// Called once when a `remove_checkpoints` is durable (no error: a removal
/// record is durable, or every file it covers is durably gone), or when it
/// could not be made durable yet (the error; it stays pending and every
/// flush retries it).
using removal_callback = std::function<void(const caf::error&)>;
/// Writes not settled yet (`ssd_tier::backlog`): queued, running, or
/// failed and waiting for a retry.
struct write_backlog {
  uint64_t snapshots = 0;
  /// Spills and demotions.
  uint64_t spills = 0;
  uint64_t checkpoints = 0;
  uint64_t bytes = 0;
  /// Failed, waiting for a retry.
  uint64_t retrying = 0;
};

/// Called once a close is done, with the writes it released unwritten.
using close_callback = std::function<void(uint64_t abandoned)>;

class ssd_tier {
public:
  ssd_tier(ssd_config cfg, file_system& fs, io_engine& engine);
  ~ssd_tier();

  ssd_tier(const ssd_tier&) = delete;
  ssd_tier& operator=(const ssd_tier&) = delete;

  /// Creates `<dir>/<fingerprint>/` (0700; a looser existing one is
  /// tightened, logged), locks it (`ec::locked` naming the holder), checks
  /// its MODEL file (another model's: `ec::incompatible_format`) or writes
  /// it, then scans headers only (no payload reads) and rebuilds the
  /// index; removes orphan temps and corrupt or truncated files; ignores
  /// other fingerprints and format versions, and files whose layers do not
  /// match the model (kept, counted). Blocking: call once before serving.
  caf::expected<scan_report> open();

  /// The best usable prefix file for `prompt` in `ns`; no I/O. Never a
  /// checkpoint file.
  std::optional<ssd_match> find(std::span<const token> prompt,
                                std::string_view ns) const;

  /// The file of exactly `key` (any kind), as a match serving all of its
  /// tokens; no I/O. How a checkpoint or an object is found for its
  /// restore.
  std::optional<ssd_match> find(const storage_key& key) const;

  /// The storage key of the file a match names (a prefix file's tokens are
  /// rebuilt from the index: O(length)); the file must be indexed.
  storage_key key_of(const ssd_match& m) const;

  /// The newest write of exactly `key` the write-behind queue holds
  /// (queued, being written, or failed and kept for a retry), as views of
  /// its buffers; no I/O. A pending write is not on SSD, but its bytes are
  /// here: how an evicted object stays servable until its file is durable.
  std::optional<entry> queued(const storage_key& key) const;

  /// Whether the prefix key (ns, tokens) is durable on SSD and no newer
  /// write of it is pending or failed: only then may RAM drop it as "on
  /// SSD".
  bool contains(std::string_view ns, std::span<const token> tokens) const;

  /// The same for a key of any kind; a checkpoint's file must also name
  /// `key.attempt` (a file of another attempt is written again under the
  /// new owner).
  bool contains(const storage_key& key) const;

  /// Removes the file of exactly (ns, tokens), e.g. a completed
  /// generation's checkpoint (reported as `erased`), and every write of the
  /// key pending now: queued or failed items are cancelled (reported as
  /// `cancelled`, buffers released, not counted as dropped); an item being
  /// written finishes and its file is then removed (reported `durable`,
  /// then `erased`; if it fails, `cancelled` instead of a retry). A write
  /// of the key queued after this call is not affected. False when there
  /// was neither a file nor a write of the key. May complete a flush
  /// (its callback runs inside this call).
  bool erase(std::string_view ns, std::span<const token> tokens);

  /// The same for a key of any kind (e.g. a checkpoint file a newer one
  /// made redundant). No removal record: see `remove_checkpoints`.
  bool erase(const storage_key& key);

  /// Removes every file and pending write of the checkpoint identity
  /// (request, ns), whatever their tokens or attempt, durably: queued or
  /// failed writes are cancelled (reported `cancelled`), indexed files are
  /// forgotten (reported `erased`) and unlinked, writes in flight finish
  /// and their files are then unlinked; files an earlier removal of them
  /// left (a failed unlink) are covered too. `cb` runs once the removal is
  /// durable: a removal record covering every write of the identity issued
  /// so far is durable (or every covered file is durably gone), inside
  /// this call when nothing was covered. If neither can be made durable,
  /// `cb` gets the error; the removal stays pending, every `flush` retries
  /// it and reports it (`removals_pending`) until it is done. A write of
  /// the identity queued after this call is not affected.
  void remove_checkpoints(uint64_t request, std::string_view ns,
                          removal_callback cb);

  /// Prefix files on SSD, from headers only (no checkpoint file).
  std::vector<saved_prefix> saved_prefixes() const;

  /// Checkpoint files on SSD, by their headers' keys (request, attempt,
  /// ns, tokens), oldest write first: what the start-up hands to the
  /// checkpoints' owner.
  std::vector<storage_key> checkpoint_files() const;

  /// Queues `e` for writing as a prefix entry; returns the item id. An
  /// entry larger than the whole byte cap is not stored (`ec::no_space`);
  /// an invalid one, one the file format cannot hold (`check_storable`)
  /// or, with a model set, one of another shape (`model_geometry::check`)
  /// is `ec::invalid_argument`.
  caf::expected<uint64_t> enqueue(entry e, write_reason reason);

  /// The same under `key` (whose ns and tokens are `e`'s): a checkpoint's
  /// header records its request and attempt; an object is `e`'s
  /// attachments alone (ns the object's key, no tokens, layers or
  /// session; no model geometry applies). `ec::invalid_argument` for a key
  /// that is not `e`'s, a prefix or object key naming a request, or an
  /// object entry with tokens, layers or a session.
  caf::expected<uint64_t> enqueue(entry e, write_reason reason,
                                  const storage_key& key);

  /// Restores `m` (from `find`). Identical restores in flight share one
  /// read. When a prefetched result is held, `cb` runs before this returns.
  void restore(const ssd_match& m, restore_callback cb);

  /// Starts (or joins) the read for the best file for `prompt`; returns a
  /// lease that keeps the restored entry available until `release`, or
  /// nullopt when there is nothing worth reading: no usable file, or the
  /// best one serves no more than `better_than` tokens (what a faster
  /// tier already holds; the cold tier wins only when strictly longer).
  /// Nullopt touches nothing: no read, no lease, no recency.
  std::optional<uint64_t> prefetch(std::span<const token> prompt,
                                   std::string_view ns,
                                   uint64_t better_than = 0);

  /// The same for a match `find` already gave (no second index lookup).
  std::optional<uint64_t> prefetch(const ssd_match& m,
                                   uint64_t better_than = 0);

  /// Ends an interest; the last one ending before the read completes
  /// cancels it (its result is discarded, its buffers released).
  void release(uint64_t lease);

  /// Writes everything queued, retries pending checkpoint removals, and
  /// calls `cb` with the evidence when nothing is left in flight; at once
  /// when idle. Failed items are made writable first with
  /// `flush_retries::now` (an owner without a clock: one more attempt
  /// each); with `flush_retries::owner` they stay failed, waiting for the
  /// owner's `retry`, and the flush does not wait for them (they count as
  /// pending and failed). Concurrent flushes share one result. The tier
  /// keeps no clock: an owner that retries on a backoff waits for its own
  /// retries and flushes again (the SSD actor does, docs/ssd-format.md
  /// "Retries").
  void flush(flush_callback cb, flush_retries retries = flush_retries::now);

  /// Makes the failed item `id` writable again now (its owner's retry
  /// timer fired); false when it is not failed (written, given up, gone).
  bool retry(uint64_t id);

  /// Closes the tier for good (the service's close, after its flush).
  /// Every write not running (queued, or failed and kept for a retry) is
  /// released unwritten with its buffers (reported `abandoned`); prefetch
  /// results held for leases are dropped and every lease forgotten (a read
  /// running for leases alone is cancelled). From now on `enqueue` fails
  /// with `ec::closed`, `prefetch` starts nothing, and a write that fails
  /// is released instead of kept. Writes running finish; `cb` runs once
  /// none is left (inside this call when none runs), with the number of
  /// writes released unwritten since the first close. Reads running are
  /// not waited for: a cancelled one lets its buffers go when it ends, an
  /// awaited one completes its restore. Lookups and restores still work;
  /// a second close is harmless.
  void close(close_callback cb);

  bool closed() const noexcept {
    return closed_;
  }

  /// Sets the byte cap from now on (the owner's live limit, e.g. its share
  /// of one budget that several tiers on a root split). Lowering it
  /// removes least-recently-used files at once, on the engine (reported
  /// `evicted`), until the indexed files fit; a write queued before that
  /// finishes larger than the cap is removed when it finishes; later
  /// entries larger than it are refused (`no_space`). Files of writes in
  /// flight are not counted until durable (at most `writes_in_flight`
  /// entries). Returns the files removed now.
  /// `on_disk` (optional) runs with that count once the removed files'
  /// unlinks have run (inside this call when there are none), so the
  /// files on disk are under the cap then too.
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
  write_backlog backlog() const;

  /// The writes that failed and wait for their owner's `retry`, oldest
  /// first.
  std::vector<uint64_t> failed_writes() const {
    return queue_.failed_ids();
  }

  /// Bytes of buffers the tier's own work holds (not the entries it
  /// writes, which their owner holds): the headers of writes running and
  /// the buffers of reads running.
  uint64_t io_buffer_bytes() const;

  /// "io_uring" or "threads".
  const char* engine_name() const noexcept;

  /// `<dir>/<fingerprint>`.
  const std::string& root() const noexcept {
    return root_;
  }

  /// The fingerprint in use (the model's when one is set).
  const std::string& fingerprint() const noexcept {
    return cfg_.fingerprint;
  }

private:
  struct write_job;
  struct read_job;
  struct removal;
  struct read_key {
    std::string name;
    uint64_t length;
    auto operator<=>(const read_key&) const = default;
  };

  // Write path (ssd_tier_write.cpp).
  void pump();
  void start_write(write_item& item);
  void write_stage(write_job& job);
  /// Bytes to write at a file offset: a payload segment, the header, the
  /// padding.
  struct write_piece {
    uint64_t offset = 0;
    const std::byte* data = nullptr;
    uint64_t length = 0;
  };
  void pad_to_file_length(write_job& job, std::vector<write_piece>& out);
  /// Queues `pieces` (in file order) as write ops of at most
  /// `max_op_bytes`, each one run of adjacent file bytes gathered from as
  /// many pieces as it spans (so an op is the tier's op size, not a layer).
  void queue_writes(write_job& job, std::span<const write_piece> pieces);
  void write_done(write_job& job);
  void write_failed(write_job& job);
  /// Lets go of the delta parent `job` pinned, if any.
  void unpin(write_job& job);
  void on_write(uint64_t tag, io_completion& c);
  /// Evicts over the cap (never `keep` unless it alone is over it); the
  /// unlinks' chore tags go to `tags` when given.
  void evict_over_cap(const std::string& keep,
                      std::set<uint64_t>* tags = nullptr);
  /// An unlink chore ended: cap changes waiting for it may be done.
  void unlink_ended(uint64_t tag);
  /// The prefix file `name` just became durable: removes the ancestor
  /// files it supersedes (`ssd_index::superseded_by`).
  void supersede_ancestors(const std::string& name);
  void report(const write_item& item, write_outcome outcome,
              caf::error err = {});
  /// Reports a final outcome of an item already out of the queue, after
  /// its buffers are released.
  void report_gone(write_item item, write_outcome outcome, caf::error err = {});
  void maybe_finish_flush();
  /// Removes item `id` from the queue, unwritten, and reports it abandoned.
  void abandon(uint64_t id);
  void maybe_finish_close();

  // Read path (ssd_tier_read.cpp).
  read_job& start_read(const ssd_match& m);
  void read_stage(read_job& job);
  void prefault_buffers(read_job& job);
  void verify_payload(read_job& job, size_t i);
  void read_done(read_job& job);
  void read_failed(read_job& job);
  void on_read(uint64_t tag, io_completion& c);

  // Removal records (ssd_tier_remove.cpp).
  void load_records(const std::vector<std::string>& names, scan_report& r);
  bool covered_at_scan(const std::string& name, const entry_header& h,
                       scan_report& r);
  void finish_records(scan_report& r);
  void removal_step(uint64_t id);
  void removal_done(uint64_t tag, io_completion& c);
  void resume_removals();
  void answer(removal& rm, const caf::error& err);
  /// Write job `tag` of `name` finished: hands its file (`left`: one is on
  /// disk under the name) to the removals that cover the write; whether
  /// any did.
  bool covered_write_finished(uint64_t tag, const std::string& name, bool left);
  /// A write's rename of a new file over `name` is durable: an older
  /// (covered or stray) file of that name is gone for good.
  void replaced_on_disk(const std::string& name);
  bool removal_busy() const noexcept;

  // Shared.
  /// Tightens the directory, takes the lock, checks the MODEL file.
  caf::error own_directory();
  caf::error check_model_file();
  /// A file the scan will index, with its recorded recency.
  struct scanned {
    uint64_t mtime = 0;
    ssd_file file;
  };
  void scan_file(const std::string& name, scan_report& r,
                 std::vector<scanned>& found);
  /// The scan's second pass: resolves delta files against their parents
  /// (tokens, write ids), dropping broken links, in an order that does not
  /// depend on the listing.
  void resolve_chains(std::vector<scanned>& found, scan_report& r);
  /// The next recency stamp: the clock, but above every stamp issued or
  /// seen, so stamps increase across restarts whatever the clock does.
  uint64_t stamp();
  /// Records `name`'s use now in its mtime, on the engine (one stamp of a
  /// name runs at a time; a newer one waits for it). Advisory: a failure
  /// is logged and changes nothing else.
  void touch_file(const std::string& name);
  /// A restore's or prefetch's use of `name`: every link of its chain is
  /// made the most recently used, root first, in the index and its mtime,
  /// so the file stays the most recent and its ancestors just behind it.
  void use_chain(const std::string& name);
  void submit_touch(const std::string& name, uint64_t ns);
  void touch_done(uint64_t tag, const io_completion& c);
  /// Drops `name` from the index and reports it (`on_remove`); its delta
  /// children go with it (`remove_file`, reported with the same reason).
  void forget(const std::string& name, removal_reason why);
  /// Drops `name` from the index (reported when `report`), from its
  /// parent's children, and removes its children (`cascade` reason).
  std::optional<ssd_file> unindex(const std::string& name, bool report,
                                  removal_reason why, removal_reason cascade);
  /// Indexes a durable file and links it to its parent.
  void index_file(ssd_file f);
  /// Whether `name` may not leave for the cap or a supersession: a live
  /// delta child or a delta write in flight depends on it.
  bool pinned_or_parent(const std::string& name) const;
  /// The files a restore of `name` reads, root first (itself last).
  std::vector<const ssd_file*> chain_of(const std::string& name) const;
  /// The first links of `chain` (root first) that serve rows below `p`: up
  /// to the link holding row p - 1, the root at least.
  static std::vector<const ssd_file*>
  serving_below(std::vector<const ssd_file*> chain, uint64_t p);
  /// A delta's parent and how many of its rows the child leaves to its
  /// chain (`start_write`).
  struct delta_choice {
    const ssd_file* parent = nullptr;
    uint64_t tokens = 0;
    /// The chain root..parent as the child would read it.
    std::vector<const ssd_file*> chain;
  };
  delta_choice delta_parent(const entry& e) const;
  /// Whether every kv row [0, c.tokens) of `e` is a view of a buffer a
  /// restore read from the very link of `c.chain` that serves that row.
  bool proven_by_origin(const entry& e, const delta_choice& c) const;
  /// Records that byte 0 of `buf` is row `first_row` of layer `layer` of
  /// the file `name` written with `write_id` (buffers a restore read, and
  /// the buffers a durable write wrote that file's rows from).
  void remember_origin(const buffer_ref& buf, const std::string& name,
                       uint64_t write_id, size_t layer, uint64_t first_row);
  /// `remember_origin` for every kv row a durable write put in its file.
  void remember_written(const std::string& name, const entry_header& h,
                        const entry& e);
  /// Counts the ideal bytes of a prefix write starting now
  /// (`ssd_stats::new_token_bytes`).
  void count_new_tokens(const entry& e);

  /// `forget`, then unlinks the file on the engine.
  /// Returns the unlink's chore tag (0: left to a write of the name).
  uint64_t remove_file(const std::string& name, removal_reason why);
  void submit(io_op op);
  void log(const std::string& line) const;
  std::string path(const std::string& name) const;

  ssd_config cfg_;
  file_system& fs_;
  io_engine& engine_;
  std::string root_;
  /// The directory's lock, held from `open` until destruction.
  lock_ref lock_;
  /// The model's geometry when one is set (shared with restore ops).
  std::shared_ptr<const model_geometry> geometry_;
  ssd_index index_;
  write_queue queue_;
  ssd_stats stats_;
  uint64_t next_tag_ = 1;
  uint64_t temp_seq_ = 0;
  std::map<uint64_t, std::unique_ptr<write_job>> writes_;
  std::map<uint64_t, std::unique_ptr<read_job>> reads_;
  /// Read in flight per key (coalescing).
  std::map<read_key, uint64_t> reading_;
  /// Restored entries held for leases.
  struct held {
    entry state;
    uint64_t leases = 0;
  };
  std::map<read_key, held> held_;
  /// Lease id -> key.
  std::map<uint64_t, read_key> leases_;
  uint64_t next_lease_ = 1;
  /// Ops in flight that belong to no job (removals), and what they do.
  std::map<uint64_t, std::string> chore_what_;
  /// Keys erased while their write was in flight: the file that write
  /// leaves is removed when it finishes.
  std::set<std::string> erase_after_;
  /// The next write id (see entry_header::write_id).
  uint64_t next_write_id_ = 1;
  /// The last recency stamp issued, or the newest mtime the scan saw.
  uint64_t last_stamp_ = 0;
  /// Recency stamps by name: one runs at a time; `next` (0: none) waits.
  struct touch_state {
    uint64_t next = 0;
  };
  std::map<std::string, touch_state> touching_;
  /// Chore tags of the stamps running -> file name.
  std::map<uint64_t, std::string> touch_chores_;
  /// `set_byte_cap` calls waiting for their unlinks.
  struct cap_wait {
    std::set<uint64_t> tags;
    uint64_t evicted = 0;
    std::function<void(uint64_t)> done;
  };
  std::vector<cap_wait> cap_waits_;
  /// Checkpoint files forgotten by the index whose unlink has not been
  /// seen to succeed (running, failed, or left to a write of the same name
  /// that has not renamed yet), by name.
  std::map<std::string, std::shared_ptr<const entry_header>> unlinking_;
  /// Chore tags of every unlink running (of any file) -> file name.
  std::map<uint64_t, std::string> unlink_chores_;
  /// Checkpoint removals not finished, by id; their ops in flight, by tag.
  std::map<uint64_t, std::unique_ptr<removal>> removals_;
  std::map<uint64_t, std::pair<uint64_t, std::shared_ptr<removal_io>>>
    removal_ops_;
  uint64_t next_removal_ = 1;
  /// Names whose unlink runs right now: no write of them starts meanwhile
  /// (it could rename a new file that the unlink then removes).
  std::multiset<std::string> unlinking_now_;
  /// Removal records the start-up scan found, by identity hash (`open`).
  struct found_record {
    uint64_t through = 0;
    std::vector<std::string> names;
    /// Covered files whose removal failed at the scan.
    std::set<std::string> failed;
    caf::error err;
  };
  std::map<std::string, found_record> found_records_;
  uint64_t max_write_id_seen_ = 0;
  std::vector<flush_callback> flushes_;
  /// Delta files: indexed children by parent name, and parents of delta
  /// writes in flight (pinned: not evicted or superseded meanwhile).
  std::map<std::string, std::set<std::string>> children_;
  std::map<std::string, unsigned> pins_;
  /// Buffers restores read, by buffer id (ids are never reused): which
  /// file (name and write id), layer and first row they hold. Pruned as
  /// the buffers die.
  struct row_origin {
    std::string name;
    uint64_t write_id = 0;
    size_t layer = 0;
    uint64_t first_row = 0;
    std::weak_ptr<const buffer> buf;
  };
  std::unordered_map<uint64_t, std::vector<row_origin>> origins_;
  size_t origins_pruned_at_ = 0;
  /// Dropped and given-up counts at the last flush report.
  uint64_t dropped_at_flush_ = 0;
  uint64_t given_up_at_flush_ = 0;
  /// Closed (`close`): no write is queued or kept any more.
  bool closed_ = false;
  std::vector<close_callback> closes_;
};

} // namespace kvtier::tiers::ssd
