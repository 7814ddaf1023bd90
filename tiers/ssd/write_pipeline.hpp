// The SSD tier's write pipeline: the write-behind queue, the staging of
// each entry write on the engine (temp file -> payload writes and
// checksums -> header -> fsync -> rename -> directory fsync), the
// bookkeeping of failed writes and their retries, the reports to the
// owner (`ssd_config::on_write`), flushes and their durability evidence,
// and the close.
//
// Owned by the coordinator (`ssd_tier`); single-owner, on the owner's
// thread; a job's `write_io` is shared with the engine threads its ops run
// on (written there only by the one op of a step that runs alone). Policy:
//   - Writes run in arrival order, at most `writes_in_flight` at once and
//     one per name (`write_queue`); an entry larger than the byte cap, or
//     one the format or the model refuses, is never queued.
//   - A failed write stays queued, failed, until a retry (`retry`, or a
//     flush with `flush_retries::now`); after `max_attempts` it is given
//     up; after a close it is released.
//   - A flush answers once nothing is queued or running (the coordinator
//     adds what the index and the removal log say).
// The part decides nothing about files: a step that ends is handed back
// (`on_completion`), and the coordinator indexes, removes, supersedes or
// evicts, then moves the job on (`advance`) or ends it.
#pragma once

#include "tiers/ssd/ssd_config.hpp"
#include "tiers/ssd/ssd_index.hpp"
#include "tiers/ssd/ssd_jobs.hpp"
#include "tiers/ssd/write_queue.hpp"

namespace kvtier::tiers::ssd {

/// Stages of an entry write, in order. Checksums are computed during the
/// data stage, in parallel with the payload writes; the header follows.
enum class write_step : uint8_t { prepare, data, sync, rename, sync_dir };

const char* to_string(write_step s);

struct write_io;

/// One entry write while its ops run.
struct write_job {
  uint64_t tag = 0;
  uint64_t item_id = 0;
  std::string name;
  write_step stage = write_step::prepare;
  unsigned outstanding = 0;
  /// Bytes the stage's ops asked for and got.
  uint64_t expected = 0;
  uint64_t done = 0;
  caf::error err;
  op_window window;
  bool created = false;
  bool renamed = false;
  /// A delta whose parent left the index (or was rewritten) while it was
  /// written: its file is unusable; removed, the item kept for a retry.
  bool orphan = false;
  /// The delta parent this write pins (empty: none).
  std::string pinned;
  /// The number of its directory fsync (`tier_io::dir_syncs`; 0 before).
  uint64_t dir_sync = 0;
  /// The uses of the older file of its name its rename replaced (gdsf:
  /// the new file carries them on).
  uint32_t carried_uses = 0;
  std::shared_ptr<write_io> io;

  /// The file's header as it is written (a delta's once prepared).
  const entry_header& header() const;
  /// The entry written.
  const entry& state() const;
  /// Its rows differ from the delta parent it was to name: written whole.
  bool refused() const;
};

/// How a job's stage went (`write_pipeline::on_completion`).
enum class write_progress : uint8_t { running, step_done, failed };

/// What becomes of a failed job's item (`write_pipeline::end_failed`).
enum class failed_fate : uint8_t {
  /// Erased or covered by a removal while it was written: never written.
  cancelled,
  /// Out of attempts: released.
  given_up,
  /// Kept, failed, for a retry (released at once after a close).
  kept,
};

class write_pipeline {
public:
  /// `geometry`: the running model's, when one is set (enqueued entries
  /// are checked against it).
  write_pipeline(const ssd_config& cfg,
                 std::shared_ptr<const model_geometry> geometry, tier_io& io,
                 ssd_stats& stats);
  ~write_pipeline();

  /// Checks and queues `e` under `key` (see `ssd_tier::enqueue`).
  caf::expected<uint64_t> enqueue(entry e, write_reason reason,
                                  const storage_key& key, uint64_t byte_cap);

  /// The next item to write now, if one may start (`blocked` names may
  /// not).
  write_item* next(const std::multiset<std::string>& blocked);

  /// Starts a job for `item` (laid out whole, its write id the next).
  write_job& begin(write_item& item);
  /// Makes `job` a delta of `parent`'s first `tokens` rows, proven now.
  void as_delta(write_job& job, const ssd_file& parent, uint64_t tokens);
  /// Makes `job` a delta candidate: its prepare op compares its rows with
  /// `chain` (root first; `keys` their tokens) by checksums.
  void prove_on_prepare(write_job& job, const std::string& parent,
                        std::vector<const ssd_file*> chain,
                        std::vector<token_seq> keys);
  /// Submits the prepare step (create the temp file, prove a delta).
  void prepare(write_job& job);

  bool owns(uint64_t tag) const {
    return jobs_.count(tag) > 0;
  }
  write_job& job(uint64_t tag) {
    return *jobs_.at(tag);
  }
  const std::map<uint64_t, std::unique_ptr<write_job>>& jobs() const {
    return jobs_;
  }
  /// Whether a write of `name` runs.
  bool writing(const std::string& name) const;

  /// Feeds a completion of one of `job`'s ops.
  write_progress on_completion(write_job& job, io_completion& c);
  /// Runs `job`'s next stage.
  void advance(write_job& job);
  /// Forgets `job` (its copy of the state goes with it).
  void end(uint64_t tag) {
    jobs_.erase(tag);
  }

  /// A failed job's log line and the error its owner hears.
  caf::error failure(write_job& job, const write_item* item, bool last);

  /// Removes a failed job's temp file, on the engine.
  void remove_temp(const write_job& job);
  /// Ends a failed job: its item as `fate` says, reported with `err`.
  void end_failed(write_job& job, write_item* item, failed_fate fate,
                  const caf::error& err);
  /// Ends a durable job: its item leaves the queue, reported durable.
  void end_durable(write_job& job);

  /// The prefix bytes a durable job handed to the file system.
  static uint64_t handed_bytes(const write_job& job);

  write_queue& queue() noexcept {
    return queue_;
  }
  const write_queue& queue() const noexcept {
    return queue_;
  }

  /// Tells the owner; `report_gone` lets go of the buffers first.
  void report(const write_item& item, write_outcome outcome,
              caf::error err = {});
  void report_gone(write_item item, write_outcome outcome, caf::error err = {});

  /// Cancels every queued or failed write of `name` (reported); whether
  /// there was one.
  bool cancel(const std::string& name);
  /// Marks the running writes of `name` to be removed when they finish;
  /// whether one runs.
  bool erase_after(const std::string& name);
  /// Whether `name` was so marked (and unmarks it).
  bool take_erased(const std::string& name) {
    return erase_after_.erase(name) > 0;
  }

  /// The newest write of `key` the queue holds that is not erased.
  std::optional<entry> queued(const storage_key& key) const;

  /// Makes failed writes writable again (`flush_retries::now`). Each
  /// retry is charged to the write budget first; one it refuses is given
  /// up (reported `given_up` with `ec::over_budget`) and not retried.
  void retry_failed();
  /// False when `id` is not failed, or the budget refused its retry.
  bool retry(uint64_t id);

  /// Bytes charged to the write budget in the window now.
  uint64_t budget_used() const;

  /// Adds a flush waiting for `finish_flushes`.
  void add_flush(flush_callback cb) {
    flushes_.push_back(std::move(cb));
  }
  bool flushing() const noexcept {
    return !flushes_.empty();
  }
  /// Nothing queued to start, nothing running.
  bool idle() const noexcept {
    return !queue_.active() && jobs_.empty();
  }
  /// Answers the flushes with `ev` (its index and removal parts filled)
  /// and the queue's part.
  void finish_flushes(durability_evidence ev);

  /// Ends the writes for good: every write not running is released.
  void close(close_callback cb);
  bool closed() const noexcept {
    return closed_;
  }
  /// Removes item `id` unwritten and reports it abandoned.
  void abandon(uint64_t id);
  /// Answers the closes once no write runs.
  void maybe_finish_close();

  /// The next write id; `open` sets the first (above every id seen).
  uint64_t last_write_id() const noexcept {
    return next_write_id_ - 1;
  }
  void set_next_write_id(uint64_t id) {
    next_write_id_ = id;
  }

  bool may_start() const noexcept;
  write_backlog backlog() const;
  /// Bytes of the headers of writes running.
  uint64_t header_bytes() const;

private:
  struct write_piece;
  void write_step_ops(write_job& job);
  void pad_to_file_length(write_job& job, std::vector<write_piece>& out);
  void queue_writes(write_job& job, std::span<const write_piece> pieces);
  void data_written(write_job& job, io_completion& c);
  uint64_t now_ms() const;
  /// Charges `bytes` to the budget; the refusal's error (counted) if not.
  caf::error charge(uint64_t bytes);
  /// Charges a failed item's retry; gives it up when the budget refuses.
  bool charge_retry(uint64_t id);

  ssd_config cfg_;
  tier_io& io_;
  ssd_stats& stats_;
  std::shared_ptr<const model_geometry> geometry_;
  write_queue queue_;
  write_budget budget_;
  std::map<uint64_t, std::unique_ptr<write_job>> jobs_;
  /// Keys erased while their write was in flight: the file that write
  /// leaves is removed when it finishes.
  std::set<std::string> erase_after_;
  uint64_t next_write_id_ = 1;
  std::vector<flush_callback> flushes_;
  /// Dropped and given-up counts at the last flush report.
  uint64_t dropped_at_flush_ = 0;
  uint64_t given_up_at_flush_ = 0;
  bool closed_ = false;
  std::vector<close_callback> closes_;
};

} // namespace kvtier::tiers::ssd
