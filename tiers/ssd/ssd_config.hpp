// The SSD tier's configuration and the callbacks its owner hands it: the
// directory and model, the caps, the write and read geometry, delta files,
// the clock and log, and the reports (ssd_events.hpp). A plain value the
// owner builds once; the tier keeps its own copy (the byte cap changes
// live through `ssd_tier::set_byte_cap`).
#pragma once

#include "tiers/entry_ranking.hpp"
#include "tiers/model_identity.hpp"
#include "tiers/ssd/ssd_events.hpp"
#include "tiers/ssd/ssd_stats.hpp"
#include "tiers/ssd/write_admission.hpp"

#include <functional>
#include <optional>

namespace kvtier::tiers::ssd {

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
  /// Bytes of entry files kept; files go in eviction order: a lower
  /// priority first, then by `policy` (`ssd-tier.cap-bytes`).
  uint64_t byte_cap = 16ull << 30;
  /// The eviction order among files of one priority (`ssd-tier.policy`,
  /// tiers/ssd/ssd_index.hpp): least recently used first, or gdsf's rank
  /// (uses × recompute cost, aged by an inflation clock).
  ram_policy policy = ram_policy::lru;
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
  /// True: `open` indexes every entry file before it returns (blocking;
  /// the tests' default). False: `open` does only the listing and the
  /// removal records, and the owner indexes the files with `index_step`,
  /// a bounded batch at a time, serving between batches (docs/ssd-format.md
  /// "Start-up"); the service does that.
  bool index_at_open = true;
  /// Which eviction spills (`write_reason::spill` of a prefix entry) are
  /// written (`ssd-tier.admission`, write_admission.hpp): all, or those
  /// whose key was spilled before within the memory. Demotions,
  /// snapshots (a flush's writes), checkpoints and objects always are.
  admission_rule admission = admission_rule::all;
  /// Keys the `reused` rule remembers; 0: `spill_admission::memory_for`
  /// the byte cap at construction.
  uint64_t admission_memory_keys = 0;
  /// Bytes the tier may write in any 24 hours
  /// (`ssd-tier.write-budget-bytes-per-day`; 0: no budget): each write is
  /// charged its whole file's length when it is queued and again at each
  /// retry; a write the budget refuses is not written (`ec::over_budget`).
  uint64_t write_budget_bytes_per_day = 0;
  /// Wall time in nanoseconds since the epoch, for the recency stamps the
  /// tier records in each file's mtime and the write budget's window; the
  /// system clock when empty.
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
  /// it leaves the index (before the unlink runs, or the rename of a
  /// rewrite that breaks a delta child's parent), so an owner holding a
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

/// How a restore or a prefetch reached the file's bytes.
struct read_start {
  /// A new read of the file began (counted in `ssd_stats::reads`).
  bool started = false;
  /// It joined a read of the same file and length in flight, or a
  /// prefetched result held for a lease (counted in
  /// `ssd_stats::coalesced`; a restore's callback then ran inside the
  /// call).
  bool joined = false;
};

/// An interest `prefetch` took: its lease and how its read began.
struct prefetch_lease {
  uint64_t id = 0;
  read_start read;
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

} // namespace kvtier::tiers::ssd
