// The SSD tier's files: what exists in its directory and the index over
// the entry files it serves, in least-recently-used order by bytes.
//
// Owned by the coordinator (`ssd_tier`); single-owner, on the owner's
// thread. It owns the directory (`own_directory`: 0700, the LOCK held
// until destruction, the MODEL file checked or written), the start-up scan
// of one file at a time (`scan_file`: headers only; orphan temps and
// corrupt or misnamed files removed; another model's files kept, not
// indexed), the index (`ssd_index`: prefix lookups, exact keys, LRU, bytes)
// and the recency stamps: every use of a file (its write, a restore or a
// prefetch) is recorded in its mtime on the engine, one stamp of a name at
// a time, so the scan rebuilds the LRU order after a restart (stamps
// increase above every stamp issued or seen, whatever the clock does).
//
// Policy it does not decide: which files leave (the coordinator evicts
// over the cap, skipping files the delta chains hold) and what a scanned
// file's fate is beyond its own header (removal records, delta chains).
#pragma once

#include "tiers/ssd/ssd_config.hpp"
#include "tiers/ssd/ssd_index.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace kvtier::tiers::ssd {

/// A file the scan will index, with its recorded recency.
struct scanned_file {
  uint64_t mtime = 0;
  ssd_file file;
};

class file_set {
public:
  file_set(const ssd_config& cfg, tier_io& io);

  /// Creates the directory (0700; a looser one is tightened, logged),
  /// locks it (`ec::locked` naming the holder), then checks its MODEL file
  /// (another model's: `ec::incompatible_format`) or writes it. Blocking.
  caf::error own_directory();

  /// Lets go of the lock (an `open` that failed).
  void release_lock() {
    lock_.reset();
  }

  /// The directory's names, sorted. Blocking.
  caf::expected<std::vector<std::string>> list() const;

  /// Scans `name` (blocking, header only): a file to index goes to
  /// `found` (counted `loaded`) unless `covered` says a removal record
  /// took it; every header of this fingerprint raises `max_write_id`.
  void scan_file(const std::string& name, scan_report& r,
                 std::vector<scanned_file>& found, uint64_t& max_write_id,
                 const std::function<bool(const std::string&,
                                          const entry_header&)>& covered);

  /// The scan saw a file last used at `mtime`: stamps go above it.
  void saw_stamp(uint64_t mtime) {
    last_stamp_ = std::max(last_stamp_, mtime);
  }

  ssd_index& index() noexcept {
    return index_;
  }

  const ssd_index& index() const noexcept {
    return index_;
  }

  /// Makes `name` the most recently used, in the index and its mtime.
  void use(const std::string& name);

  /// Records `name`'s use now in its mtime, on the engine (one stamp of a
  /// name runs at a time; a newer one waits for it). Advisory: a failure
  /// is logged and changes nothing else.
  void stamp_file(const std::string& name);

  /// A chore ended: when it was a stamp, the next one of its name runs.
  void stamp_ended(uint64_t tag);

  /// The model's geometry when one is set (shared with restore ops).
  const std::shared_ptr<const model_geometry>& geometry() const noexcept {
    return geometry_;
  }

  const std::string& fingerprint() const noexcept {
    return fingerprint_;
  }

private:
  caf::error check_model_file();
  /// The next recency stamp: the clock, but above every stamp issued or
  /// seen.
  uint64_t stamp();
  void submit_stamp(const std::string& name, uint64_t ns);

  tier_io& io_;
  std::string fingerprint_;
  std::optional<model_identity> model_;
  std::function<uint64_t()> clock_;
  std::shared_ptr<const model_geometry> geometry_;
  /// The directory's lock, held from `own_directory` until destruction.
  lock_ref lock_;
  ssd_index index_;
  /// The last recency stamp issued, or the newest mtime the scan saw.
  uint64_t last_stamp_ = 0;
  /// Stamps by name: one runs at a time; the value (0: none) waits.
  std::map<std::string, uint64_t> stamping_;
  /// Chore tags of the stamps running -> file name.
  std::map<uint64_t, std::string> stamp_chores_;
};

} // namespace kvtier::tiers::ssd
