// What every part of the SSD tier uses to run work on the I/O engine: the
// file system, the engine, the tier's directory, op tags, chores (ops that
// belong to no job) and the log sink (`tier_io`); and the header checks
// the scan and every restore share.
//
// One `tier_io` per tier, owned by the coordinator (`ssd_tier`) and handed
// by reference to its parts, which run on the owner's thread like it. An
// op's tag is its job's (or chore's) id above `sub_bits` and which op of
// the job below; the coordinator routes each completion by the id.
#pragma once

#include "tiers/model_identity.hpp"
#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/io_engine.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>

namespace kvtier::tiers::ssd {

/// The lock file in the tier's directory (held while the tier lives).
inline constexpr const char* lock_file_name = "LOCK";
/// The file stating the directory's model identity in words.
inline constexpr const char* model_file_name = "MODEL";

/// An op's tag: the job's id above `sub_bits`, which op of the job below
/// (a write's: 0 a step, 1 its checksums, 2 a data write, 3 a writeback
/// hint; a read's: 0 a call, i + 1 a read of payload i).
inline constexpr int sub_bits = 24;

inline uint64_t op_tag(uint64_t job, uint64_t sub) {
  return job << sub_bits | sub;
}

inline uint64_t sub_of(uint64_t tag) {
  return tag & ((uint64_t{1} << sub_bits) - 1);
}

/// A call op (a blocking file-system step) of job `job`.
io_op call_op(uint64_t job, std::function<caf::error()> fn, uint64_t sub = 0);

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

/// The tier's shared means of running ops (see the top of this file).
class tier_io {
public:
  tier_io(file_system& fs, io_engine& engine, std::string root,
          std::function<void(const std::string&)> log_sink);

  file_system& fs;
  io_engine& engine;
  /// `<dir>/<fingerprint>`.
  const std::string root;
  /// Names whose unlink runs right now (a file removal or a checkpoint
  /// removal's step): no write of them starts meanwhile, as its rename
  /// could land first and the unlink would then remove the new file.
  std::multiset<std::string> unlinking_now;
  /// Directory fsyncs of `root` submitted so far: each one numbered, so an
  /// unlink seen to succeed before fsync N was submitted is durable once
  /// fsync N succeeds (`removal_log::dir_synced`).
  uint64_t dir_syncs = 0;

  /// A fresh job or chore id.
  uint64_t next_tag() {
    return next_tag_++;
  }

  /// A fresh number for a temp file's name.
  uint64_t next_temp() {
    return temp_seq_++;
  }

  void submit(io_op op) {
    engine.submit(std::move(op));
  }

  /// Runs `fn` on the engine as a chore `what` (logged when it fails, a
  /// missing file excepted); returns its tag.
  uint64_t chore(std::string what, std::function<caf::error()> fn);

  /// Whether `tag` is a chore's; if so the chore ends (its failure logged).
  bool end_chore(uint64_t tag, const io_completion& c);

  bool chores_running() const noexcept {
    return !chores_.empty();
  }

  /// `root/name`.
  std::string path(const std::string& name) const;

  /// One failure line (the owner's sink, or kvtier's log).
  void log(const std::string& line) const;

private:
  std::function<void(const std::string&)> log_sink_;
  uint64_t next_tag_ = 1;
  uint64_t temp_seq_ = 0;
  /// Ops in flight that belong to no job, and what they do.
  std::map<uint64_t, std::string> chores_;
};

/// Reads and decodes the header of an open entry file and checks that the
/// file is as long as the header says (`ec::corrupt_data` when truncated).
caf::expected<entry_header> read_header(file& f);

/// Whether a header belongs to the running model: its fingerprint, then
/// its layers against `g` (`model_geometry::check`, each payload length
/// as the layer's bytes). `ec::incompatible_format` naming what differs.
caf::error check_header(const model_geometry& g, const std::string& fingerprint,
                        const entry_header& h);

} // namespace kvtier::tiers::ssd
