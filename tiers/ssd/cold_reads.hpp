// The SSD tier's cold reads: restores and prefetches read into fresh
// aligned buffers (no intermediate copy) and verified chunk by chunk on the
// engine; identical reads coalesce; a prefetch holds its result for a
// lease.
//
// Owned by the coordinator (`ssd_tier`); single-owner, on the owner's
// thread; the `read_io` of a read is shared with the engine threads its
// ops run on (written there only by the one op of a step that runs alone).
// Policy:
//   - One read per (file, length) at a time: a restore or prefetch of the
//     same file and length joins it (counted `coalesced`), or takes the
//     result held for a lease at once. What each call did is its result
//     (`read_start`), so nobody infers it from counters.
//   - A read reads its file's delta chain root first, one op stream per
//     file (`ssd_config::ops_per_entry`), each payload verified as soon as
//     it is read; every header is re-read at open and checked against the
//     running model and the header the index holds.
//   - The last interest ending before a read completes cancels it (its
//     buffers go when its ops end).
// The part decides nothing about files: a read that ended is handed back
// (`on_completion`) with the file to blame when it failed; the coordinator
// removes or forgets files and runs the callbacks.
#pragma once

#include "tiers/ssd/delta_chains.hpp"

#include <atomic>

namespace kvtier::tiers::ssd {

/// What a cold read needs of the tier's configuration.
struct read_config {
  uint32_t alignment = 4096;
  uint32_t max_op_bytes = 8u << 20;
  uint32_t ops_per_entry = 1;
  std::string fingerprint;
  std::shared_ptr<const model_geometry> geometry;
};

/// A read that ended (`cold_reads::on_completion`).
struct ended_read {
  /// Set when it failed: every waiter hears a miss.
  caf::error err;
  /// The restored entry (trimmed to the match) when it succeeded.
  entry state;
  /// The files read, root first; when it failed, `blame` is the index of
  /// the one to blame (an open or verification failed on it, else the
  /// matched file).
  std::vector<ssd_file> links;
  size_t blame = 0;
  std::vector<restore_callback> waiters;
};

class cold_reads {
public:
  cold_reads(read_config cfg, tier_io& io, ssd_stats& stats);
  ~cold_reads();

  /// Restores `m` (its tokens and chain from `index`); `cb` runs inside
  /// the call when a prefetched result is held.
  read_start restore(const ssd_match& m, const ssd_index& index,
                     restore_callback cb);

  /// Takes an interest in `m`'s read, starting it if none runs.
  prefetch_lease prefetch(const ssd_match& m, const ssd_index& index);

  /// Ends an interest (see the top of this file).
  void release(uint64_t lease);

  /// Drops every held result and lease; reads running for leases alone
  /// are cancelled, awaited ones complete.
  void close();

  bool owns(uint64_t tag) const {
    return reads_.count(tag) > 0;
  }

  /// Feeds a completion of one of its ops; returns the read when it ended
  /// (not when it was cancelled: its buffers simply go).
  std::optional<ended_read> on_completion(uint64_t tag, io_completion& c);

  bool busy() const noexcept {
    return !reads_.empty();
  }

  /// Bytes of the buffers of reads running.
  uint64_t buffer_bytes() const;

private:
  struct read_key {
    std::string name;
    uint64_t length;
    auto operator<=>(const read_key&) const = default;
  };
  struct read_job;
  struct held {
    entry state;
    uint64_t leases = 0;
  };

  read_job& start(const ssd_match& m, const ssd_index& index);
  void submit_open(read_job& job);
  void read_payloads(read_job& job);
  void prefault_buffers(read_job& job);
  void verify_payload(read_job& job, size_t i);
  ended_read done(read_job& job);
  ended_read failed(read_job& job);

  read_config cfg_;
  tier_io& io_;
  ssd_stats& stats_;
  std::map<uint64_t, std::unique_ptr<read_job>> reads_;
  /// Read in flight per key (coalescing).
  std::map<read_key, uint64_t> reading_;
  /// Restored entries held for leases.
  std::map<read_key, held> held_;
  /// Lease id -> key.
  std::map<uint64_t, read_key> leases_;
  uint64_t next_lease_ = 1;
};

} // namespace kvtier::tiers::ssd
