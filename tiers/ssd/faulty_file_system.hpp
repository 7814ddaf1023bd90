// A `file_system` that forwards to another one and fails chosen operations,
// so tests can make any write, fsync, rename, directory sync or read fail
// (EIO, ENOSPC), write short, or stop the "process" half-way through a write.
//
// Faults are armed per operation kind and counted from the moment they are
// armed: `inject(fs_op::write, 2, fault_kind::eio)` fails the second write
// from now; `inject_any(7, kind)` targets the seventh operation of any kind.
// `fault_kind::crash` models the writer dying at that operation: a
// crashing write writes half its bytes first; that operation and every later
// mutating one fail, until `clear()`. Combined with
// `memory_file_system::power_loss()` this reproduces what a machine crash
// leaves behind. `fault_kind::stall` models a disk that stops answering:
// the operation blocks its thread until `release()` (or `clear()`, or the
// destruction of this object), then runs normally.
//
// Files it opens report no native handle, so the io_uring engine runs their
// operations through these methods too. Thread-safe (one mutex).
#pragma once

#include "tiers/ssd/file_system.hpp"

#include <array>
#include <condition_variable>
#include <mutex>
#include <optional>

namespace kvtier::tiers::ssd {

/// The operations a fault can target.
enum class fs_op : uint8_t {
  open_read,
  create,
  read,
  write,
  sync,
  rename,
  remove,
  sync_dir,
  list,
  /// `set_mtime` (the SSD tier's recency stamps).
  set_mtime,
};

inline constexpr size_t fs_op_count = 10;

const char* to_string(fs_op op);

/// What an armed fault does.
enum class fault_kind : uint8_t {
  /// The operation fails with EIO (`ec::io_error`).
  eio,
  /// The operation fails with ENOSPC (`ec::no_space`).
  enospc,
  /// A write writes half of its bytes and reports that count.
  short_write,
  /// The process "dies" here: see the header comment.
  crash,
  /// The operation blocks until released, then runs normally.
  stall,
};

const char* to_string(fault_kind k);

class faulty_file_system final : public file_system {
public:
  explicit faulty_file_system(file_system& inner);
  /// Releases stalled operations first.
  ~faulty_file_system() override;

  /// Arms a fault on the `nth` (1-based) operation of kind `op` from now.
  void inject(fs_op op, uint64_t nth, fault_kind kind);

  /// Arms a fault on the `nth` (1-based) operation of any kind from now.
  void inject_any(uint64_t nth, fault_kind kind);

  /// Disarms every fault, ends a crash and releases stalled operations.
  void clear();

  /// Lets every stalled operation (and any later stall fault) run on.
  void release();

  /// Operations blocked in a stall right now.
  uint64_t stalled() const;

  /// Whether an operation of kind `op` is blocked in a stall right now.
  bool stalled_on(fs_op op) const;

  /// Faults that fired since construction (a crash counts once).
  uint64_t fired() const;

  /// Operations of kind `op` seen since construction.
  uint64_t count(fs_op op) const;

  /// Operations of every kind seen since construction.
  uint64_t total() const;

  /// Whether a crash fault has fired (and not been cleared).
  bool crashed() const;

  /// The process "dies" now: every later mutating operation fails as after
  /// a crash fault, until `clear()` (a machine crash stopping writers that
  /// may be between operations).
  void crash_now();

  caf::expected<file_ref> open(const std::string& path,
                               open_mode mode) override;
  caf::error rename(const std::string& from, const std::string& to) override;
  caf::error remove(const std::string& path) override;
  caf::error sync_dir(const std::string& dir) override;
  caf::expected<std::vector<std::string>> list(const std::string& dir) override;
  caf::error make_dirs(const std::string& dir) override;
  /// Modes and locks are forwarded; no fault targets them.
  caf::expected<uint32_t> mode(const std::string& path) override;
  caf::error set_mode(const std::string& path, uint32_t mode) override;
  caf::error set_mtime(const std::string& path, uint64_t ns) override;
  caf::expected<lock_ref> lock(const std::string& path) override;

  /// Counts `op` and returns the fault to apply to it, if any (used by the
  /// files this opens). A stall blocks here and then returns none.
  std::optional<fault_kind> next(fs_op op);

  /// The error a fault of `kind` on `op` produces.
  static caf::error fault_error(fault_kind kind, fs_op op);

private:
  struct armed {
    uint64_t at = 0; // count value that fires; 0 = disarmed
    fault_kind kind = fault_kind::eio;
  };

  file_system& inner_;
  mutable std::mutex mtx_;
  std::condition_variable released_;
  std::array<uint64_t, fs_op_count> counts_{};
  std::array<armed, fs_op_count> armed_{};
  uint64_t total_ = 0;
  armed any_{};
  bool crashed_ = false;
  bool releasing_ = false;
  uint64_t stalled_ = 0;
  std::array<uint64_t, fs_op_count> stalled_ops_{};
  uint64_t fired_ = 0;
};

} // namespace kvtier::tiers::ssd
