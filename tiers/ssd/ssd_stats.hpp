// Plain value types the SSD tier reports: the start-up scan, flush evidence
// (docs/ssd-format.md "Durability contract") and its counters.
// Copy freely; no behaviour.
#pragma once

#include <cstdint>
#include <string>

namespace kvtier::tiers::ssd {

/// What the header-only scan at start found.
struct scan_report {
  /// Entry files indexed.
  uint64_t loaded = 0;
  /// Corrupt or truncated entry files removed.
  uint64_t corrupt_removed = 0;
  /// Orphan temp files (writes a crash interrupted) removed.
  uint64_t temps_removed = 0;
  /// Files of another fingerprint or format version, left alone.
  uint64_t ignored = 0;
  /// Files of this fingerprint whose layers do not match the running
  /// geometry: not indexed, left alone.
  uint64_t mismatched = 0;
  /// Files removed at once because the byte cap is smaller than the data.
  uint64_t evicted = 0;
  /// Checkpoint files a removal record covered: removed, never indexed.
  uint64_t removed_by_record = 0;
  /// Delta files whose parent is missing, was rewritten or is unusable
  /// (whatever the listing order): removed, never indexed.
  uint64_t broken_chains = 0;
  /// Removal records found (each a `.kvr` file).
  uint64_t records = 0;
};

/// The outcome of `flush`.
struct durability_evidence {
  /// Everything queued since the last flush is on disk: nothing pending,
  /// nothing failed, nothing dropped.
  bool durable = false;
  /// Items still in the write-behind queue (failed ones included).
  uint64_t pending = 0;
  /// Items dropped over the queue cap since the previous flush report.
  uint64_t dropped = 0;
  /// Items whose write failed and that stay queued for a retry.
  uint64_t failed = 0;
  /// Items given up after their last attempt since the previous flush
  /// report (never written).
  uint64_t given_up = 0;
  /// Durable entry files.
  uint64_t entries = 0;
  /// Tokens of the longest durable prefix entry (checkpoints are not
  /// prefixes).
  uint64_t longest_durable_prefix = 0;
  /// Checkpoint removals not durably done (a failed record write or
  /// unlink); each flush retries them. Not durable while any is pending.
  uint64_t removals_pending = 0;
  /// The last failure of a pending removal, for the operator.
  std::string removal_error;
};

/// Counters since construction (and the current sizes).
struct ssd_stats {
  uint64_t files = 0;
  /// Entry files the start-up scan indexed so far (its `loaded`).
  uint64_t index_files = 0;
  /// 1 while the start-up scan runs (`ssd_tier::indexing`).
  uint64_t indexing = 0;
  /// Milliseconds from `open` to the end of the start-up scan (0 until it
  /// ended).
  uint64_t index_ms = 0;
  uint64_t file_bytes = 0;
  /// What the index holds in RAM (`ssd_index::approx_bytes`).
  uint64_t index_bytes = 0;
  uint64_t queue_items = 0;
  uint64_t queue_bytes = 0;
  uint64_t writes_ok = 0;
  /// Write attempts that failed (an item retried counts each time).
  uint64_t writes_failed = 0;
  /// Writes given up after their last attempt (never written).
  uint64_t writes_given_up = 0;
  /// Failed writes made writable again (`retry`, a flush).
  uint64_t writes_retried = 0;
  uint64_t write_no_space = 0;
  uint64_t bytes_written = 0;
  uint64_t dropped = 0;
  uint64_t superseded = 0;
  /// Queued writes taken back by `erase` (never written; not `dropped`).
  uint64_t writes_cancelled = 0;
  /// Writes `close` released unwritten (queued, failed, or failing after).
  uint64_t writes_abandoned = 0;
  uint64_t rejected_too_large = 0;
  /// Files removed least recently used first over the byte cap (after a
  /// write, at the scan, or when `set_byte_cap` lowers it).
  uint64_t evicted = 0;
  /// Prefix files removed because a trimmable longer file of the same
  /// namespace superseded them.
  uint64_t files_superseded = 0;
  /// Reads issued to the engine (one per distinct restore in flight).
  uint64_t reads = 0;
  /// Restores that joined a read already in flight or a held result.
  uint64_t coalesced = 0;
  uint64_t restores_ok = 0;
  uint64_t restores_failed = 0;
  uint64_t corrupt_removed = 0;
  /// Files the scan left unindexed because their layers do not match the
  /// running geometry (kept on disk).
  uint64_t geometry_mismatched = 0;
  /// Restores that found the file's layers do not match the running
  /// geometry: a miss, the file forgotten but kept (also counted in
  /// `restores_failed`).
  uint64_t restores_mismatched = 0;
  /// Reads whose last interest ended before they completed.
  uint64_t cancelled = 0;
  /// Removal records written (`remove_checkpoints`, durable).
  uint64_t removal_records = 0;
  /// Removal steps that failed (record write, unlink, directory fsync).
  uint64_t removal_failures = 0;
  /// Checkpoint removals not durably done right now.
  uint64_t removals_pending = 0;
  uint64_t bytes_read = 0;
  /// Delta files made durable (each names a parent and holds only the rows
  /// past it), and prefix writes that had a parent but were written whole
  /// because the entry's shared rows did not hash to the parent chain's.
  uint64_t delta_files = 0;
  uint64_t delta_refused = 0;
  /// Delta children removed because a file they depend on left (corrupt,
  /// gone, erased, rewritten).
  uint64_t chain_cascades = 0;
  /// Prefix writes: bytes handed to the engine (header, payloads, padding)
  /// and the ideal: for each write when it starts, its tokens beyond the
  /// longest prefix of it already on SSD (any prefix file, also one that
  /// serves it trimmed), times the entry's bytes per token.
  uint64_t prefix_bytes_written = 0;
  uint64_t new_token_bytes = 0;
  /// Spills the admission rule did not write, and the bytes of the files
  /// they would have been (`ssd-tier.admission`).
  uint64_t admission_skipped = 0;
  uint64_t admission_skipped_bytes = 0;
  /// Writes (or retries) the write budget refused, and their files' bytes.
  uint64_t budget_refused = 0;
  uint64_t budget_refused_bytes = 0;
  /// Bytes charged to the budget in the last 24 hours (at most a minute
  /// more: the window's oldest minute counts whole); the budget itself.
  uint64_t budget_used_bytes = 0;
  uint64_t budget_bytes_per_day = 0;
};

} // namespace kvtier::tiers::ssd
