// The SSD tier's removal log (docs/ssd-format.md, "Removal records"):
// durable removals of a completed checkpoint's files.
//
// Owned by the coordinator (`ssd_tier`); single-owner, on the owner's
// thread; each step runs as one call op on the engine. Policy:
//   - A removal of a checkpoint identity (request, ns) is durable once an
//     empty record file `<identity hash>.<write id W>.kvr` is (temp,
//     fsync, rename, directory fsync): "every file of this identity
//     written with a write id up to W is dead". When the record cannot be
//     written, it is durable once every covered file is durably unlinked.
//   - Covered files are unlinked after the record; a name a write is
//     writing (or the index holds again) is left to that write. Once
//     nothing covered is left, the record is deleted.
//   - One step of a removal runs at a time; a failed step stalls it until
//     the next flush (`restart`) or a covered write finishing.
//   - At start, records are read before anything is indexed
//     (`load_records`): a covered checkpoint file is removed, never
//     indexed (`covered_at_scan`); records whose files are durably gone
//     are deleted (`finish_records`), the others resume as removals.
//   - Checkpoint files the index forgot stay known (`forgot`) until their
//     unlink is durable: seen to succeed, then a directory fsync submitted
//     after that succeeded (`unlinked`, `dir_synced`). A later removal of
//     their identity covers them, so it writes its record even when the
//     files are gone from the directory but may come back after a power
//     loss (issue #32: a removal with nothing left answered at once, and
//     a file whose unlink had not reached the disk came back).
// The coordinator finds what a removal covers (indexed files, writes in
// flight) and says which names are busy; the log owns the rest.
#pragma once

#include "tiers/ssd/ssd_config.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <functional>
#include <map>
#include <memory>
#include <set>

namespace kvtier::tiers::ssd {

/// Whether a name may not be unlinked now (a write of it runs, or the
/// index holds a newer file of it).
using busy_name = std::function<bool(const std::string&)>;

/// What one removal step's op does (removal_log.cpp).
struct removal_io;

class removal_log {
public:
  removal_log(tier_io& io, ssd_stats& stats);
  ~removal_log();

  /// What a new removal covers: indexed files (already forgotten) and
  /// writes in flight (job tags).
  struct cover {
    std::set<std::string> files;
    std::set<uint64_t> waiting;
  };

  /// Starts the removal of identity (request, ns) covering write ids up
  /// to `through`; `cb` runs once it is durable (see
  /// `ssd_tier::remove_checkpoints`). True when it ended at once (nothing
  /// was covered; `cb` ran).
  bool start(uint64_t request, std::string_view ns, uint64_t through, cover c,
             removal_callback cb, const busy_name& busy);

  bool owns(uint64_t tag) const {
    return ops_.count(tag) > 0;
  }

  /// Feeds the completion of a step; returns the removal to step next
  /// (none: it ended), and whether the step unlinked (writes blocked on
  /// those names may start).
  std::optional<uint64_t> on_completion(uint64_t tag, const io_completion& c,
                                        bool& unlinked);

  /// Runs removal `id`'s next step, if any; true when it ended.
  bool step(uint64_t id, const busy_name& busy);

  /// Steps every removal; true when one ended.
  bool resume(const busy_name& busy);

  /// A flush: every stalled removal tries again from its failed step.
  void restart();

  /// Write job `tag` of `name` finished (`left`: a file of it is on disk
  /// under the name): the removals covering it take that file; whether
  /// any did.
  bool write_finished(uint64_t tag, const std::string& name, bool left);

  /// A rename of a new file over `name` is durable: an older file of that
  /// name is gone for good.
  void replaced_on_disk(const std::string& name);

  /// The checkpoint file `name` (header `h`) left the index; its unlink
  /// has not been seen to succeed.
  void forgot(const std::string& name, std::shared_ptr<const entry_header> h) {
    forgotten_[name] = {std::move(h), 0};
  }

  /// `name`'s unlink succeeded (or found nothing): known until the next
  /// directory fsync submitted from now on succeeds.
  void unlinked(const std::string& name);

  /// Directory fsync number `n` (`tier_io::dir_syncs`) succeeded: unlinks
  /// seen before it was submitted are durable.
  void dir_synced(uint64_t n);

  /// Removals not finished.
  size_t pending() const noexcept {
    return removals_.size();
  }

  /// The last error of a removal not finished (empty: none).
  std::string error() const;

  /// Whether a step runs.
  bool busy() const noexcept {
    return !ops_.empty();
  }

  // --- the start-up scan ---------------------------------------------------

  /// Reads the records among `names` (blocking); raises `max_write_id`.
  void load_records(const std::vector<std::string>& names, scan_report& r,
                    uint64_t& max_write_id);

  /// Whether a record covers the scanned checkpoint file `name`; if so it
  /// is removed (blocking), or kept for a removal when that fails.
  bool covered_at_scan(const std::string& name, const entry_header& h,
                       scan_report& r);

  /// Deletes the records whose files are durably gone; the others become
  /// removals (blocking).
  void finish_records(scan_report& r);

private:
  struct removal;
  struct found_record {
    uint64_t through = 0;
    std::vector<std::string> names;
    /// Covered files whose removal failed at the scan.
    std::set<std::string> failed;
    caf::error err;
  };

  void answer(removal& rm, const caf::error& err);
  void submit(uint64_t id, removal& rm, std::shared_ptr<removal_io> io);

  tier_io& io_;
  ssd_stats& stats_;
  /// Removals not finished, by id; their steps in flight, by tag.
  std::map<uint64_t, std::unique_ptr<removal>> removals_;
  std::map<uint64_t, std::pair<uint64_t, std::shared_ptr<removal_io>>> ops_;
  uint64_t next_removal_ = 1;
  /// A checkpoint file forgotten by the index whose unlink is not known
  /// durable: running, failed, left to a write of the same name that has
  /// not renamed yet, or seen to succeed (then `durable_at`, the number of
  /// the directory fsync that makes it durable; 0 until then).
  struct forgotten_file {
    std::shared_ptr<const entry_header> header;
    uint64_t durable_at = 0;
  };
  /// Those files, by name.
  std::map<std::string, forgotten_file> forgotten_;
  /// Records the start-up scan found, by identity hash.
  std::map<std::string, found_record> found_records_;
};

} // namespace kvtier::tiers::ssd
