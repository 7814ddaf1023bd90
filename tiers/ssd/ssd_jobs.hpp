// Internal to the SSD tier's sources: the state of one entry write and one
// cold read while their ops run on the I/O engine. The `*_io` parts are
// shared with engine threads (held by each op's `keep`), written there only
// by the one op of a stage that runs alone (prepare, open, verify) and read
// by the owner after that op's completion has been handed to `handle`.
#pragma once

#include "tiers/ssd/ssd_tier.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <set>

namespace kvtier::tiers::ssd {

/// An op's tag: the job's id above `sub_bits`, which op of the job below
/// (a write's: 0 a step, 1 its checksums, 2 a data write, 3 a writeback
/// hint; a read's: ssd_tier_read.cpp).
inline constexpr int sub_bits = 24;

inline uint64_t op_tag(uint64_t job, uint64_t sub) {
  return job << sub_bits | sub;
}

/// Data ops of one job waiting for a slot: at most `limit` run at once, in
/// file order, so the disk sees a few sequential streams rather than every
/// op of a large entry at once.
struct op_window {
  std::deque<io_op> backlog;
  unsigned running = 0;

  /// Submits from the backlog while fewer than `limit` run.
  template <class Submit>
  void feed(unsigned limit, Submit&& submit) {
    while (running < limit && !backlog.empty()) {
      ++running;
      submit(std::move(backlog.front()));
      backlog.pop_front();
    }
  }
};

/// Stages of an entry write, in order. Checksums are computed during the
/// data stage, in parallel with the payload writes; the header follows.
enum class write_step : uint8_t { prepare, data, sync, rename, sync_dir };

struct write_io {
  file_system* fs = nullptr;
  std::string temp_path;
  entry state;
  entry_header header;
  buffer_ref header_bytes;
  /// Zeros up to the file length after trailing empty payloads.
  buffer_ref padding;
  file_ref out;
  /// A delta candidate: the parent's name and its chain's headers, root
  /// first (immutable, shared with the index). The prepare op proves the
  /// entry's rows are the chain's (`holds_rows_of`) and then lays the
  /// header out as a delta; `refused` when they are not (written whole).
  std::string parent;
  std::vector<std::shared_ptr<const entry_header>> chain;
  /// Each link's key (the index keeps it, not the header).
  std::vector<token_seq> chain_keys;
  std::string fingerprint;
  uint32_t alignment = 0;
  uint32_t checksum_chunk = 0;
  bool refused = false;
};

struct ssd_tier::write_job {
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
  std::shared_ptr<write_io> io;
};

/// Stages of a cold read, in order. Each payload is verified as soon as
/// its reads are done, in parallel with the other reads.
enum class read_step : uint8_t { open, data };

/// One file of a restore's chain (a whole file alone, or a delta's files
/// root first).
struct read_link {
  std::string name;
  std::string path;
  std::shared_ptr<const entry_header> header;
  file_ref in;
};

struct read_io {
  file_system* fs = nullptr;
  std::string path;
  /// The files read, root first; the last is the matched file (`header`).
  std::vector<read_link> links;
  /// Per payload restored: which link it is read from.
  std::vector<size_t> link_of;
  /// The link an open or a verification failed on (the file to blame);
  /// verifications of several payloads run at once on the engine.
  std::atomic<size_t> bad_link = SIZE_MAX;
  /// The running model's geometry and fingerprint, checked against the
  /// header as re-read at open (no geometry: no check).
  std::shared_ptr<const model_geometry> geometry;
  std::string fingerprint;
  std::shared_ptr<const entry_header> header;
  /// The restored entry's tokens: the file's first p (from the index,
  /// which keeps a prefix file's key, when the read starts).
  token_seq tokens;
  file_ref in;
  /// One per payload restored: layers, then attachments when exact.
  std::vector<const payload_info*> payloads;
  std::vector<uint64_t> need;
  std::vector<buffer_builder> bufs;
  /// Set when the read is given up: the prefault call stops early.
  std::atomic<bool> stop{false};
};

struct ssd_tier::read_job {
  uint64_t tag = 0;
  read_key key;
  read_step stage = read_step::open;
  unsigned outstanding = 0;
  /// Reads left per payload; at zero that payload is verified.
  std::vector<unsigned> left;
  /// Bytes asked for and read per payload (to blame a truncated file).
  std::vector<uint64_t> want;
  std::vector<uint64_t> got;
  op_window window;
  uint64_t expected = 0;
  uint64_t done = 0;
  caf::error err;
  std::vector<restore_callback> waiters;
  uint64_t leases = 0;
  bool cancelled = false;
  std::shared_ptr<read_io> io;
};

/// One checkpoint removal (`remove_checkpoints`, or a record the start-up
/// scan could not finish): its record, the covered files still on disk or
/// still being written, and who waits for it to become durable. One step
/// (an engine call op) runs at a time: write the record, unlink the files
/// (then fsync the directory), delete the record.
struct ssd_tier::removal {
  enum class record_state : uint8_t { none, writing, durable, failed };

  /// The identity's hash (`identity_hash`) and the highest write id the
  /// record covers.
  std::string id_hash;
  uint64_t through = 0;
  record_state record = record_state::none;
  /// Record files to delete once nothing is covered any more (the scan
  /// may find several for one identity).
  std::vector<std::string> records;
  /// Covered files to unlink, by name.
  std::set<std::string> files;
  /// Covered writes in flight (job tags): their files are unlinked once
  /// they finish.
  std::set<uint64_t> waiting;
  /// A step failed; the next flush (or a covered write finishing) resumes.
  bool stalled = false;
  /// The running step, if any.
  bool busy = false;
  /// Whether the record was tried since the removal was (re)started.
  bool record_tried = false;
  caf::error err;
  std::vector<removal_callback> waiters;
  bool answered = false;
};

/// What one removal step's op did, filled on the engine thread.
struct removal_io {
  file_system* fs = nullptr;
  std::string dir;
  enum class step : uint8_t { record, unlink, drop } what = step::record;
  /// record: the record's path and a temp path; drop: the records' paths.
  std::string path;
  std::string temp;
  std::vector<std::string> drop;
  /// unlink: the files' names (in `dir`), and those found gone afterwards
  /// (only when the directory fsync that followed succeeded).
  std::vector<std::string> names;
  std::vector<std::string> gone;
};

} // namespace kvtier::tiers::ssd

namespace kvtier::tiers::ssd {

/// Reads and decodes the header of an open entry file and checks that the
/// file is as long as the header says (`ec::corrupt_data` when truncated).
caf::expected<entry_header> read_header(file& f);

/// Whether a header belongs to the running model: its fingerprint, then
/// its layers against `g` (`model_geometry::check`, each payload length
/// as the layer's bytes). `ec::incompatible_format` naming what differs.
caf::error check_header(const model_geometry& g, const std::string& fingerprint,
                        const entry_header& h);

/// The text of a kvtier error without its code (for log lines).
inline std::string context_of(const caf::error& err) {
  auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return describe(err);
}

} // namespace kvtier::tiers::ssd
