// The file layer of the SSD tier: every OS file access of tiers/ssd goes
// through `file_system` and `file`, so the same tier code runs on the real
// disk (`posix_file_system`), in memory with a power-loss model
// (`memory_file_system`) and with injected faults (`faulty_file_system`).
//
// Threads: a `file_system` and the `file`s it opens may be used from several
// threads at once (the I/O engine calls `read_at`/`write_at` on pool threads
// while the owner opens and renames); implementations lock what they share.
//
// Privacy: directories `make_dirs` creates are 0700 and files `open`
// creates 0600 (state bytes are the users' prompts); `mode` and `set_mode`
// let the tier tighten a looser directory it finds.
//
// Recency: every file keeps a modification time (`file::mtime`,
// `set_mtime`), which the SSD tier uses to record last use across
// restarts.
//
// Ownership: `lock` takes a non-blocking exclusive lock that lasts as long
// as the returned handle, so one process at a time owns an SSD directory.
//
// Errors are values. errno maps to `ec::no_space` (ENOSPC, EDQUOT),
// `ec::not_found` (ENOENT) and `ec::io_error` (everything else, retryable).
// Not an error: a read that stops at end of file (it returns fewer bytes),
// a write that writes fewer bytes than asked (callers check the count).
//
// Gathered writes: `write_gathered_at` writes pieces lying in different
// buffers to one run of the file in one call (pwritev on the real disk),
// so an entry whose layers sit in separate buffers but next to each other
// in its file is written in ops of the tier's op size, not one op a layer.
#pragma once

#include "messages/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers::ssd {

/// An open file. Positional reads and writes only (no cursor), so one file
/// may serve concurrent operations at distinct offsets.
class file {
public:
  virtual ~file();

  /// Reads up to `dst.size()` bytes at `offset`; fewer only at end of file.
  virtual caf::expected<size_t> read_at(uint64_t offset,
                                        std::span<std::byte> dst) = 0;

  /// Writes up to `src.size()` bytes at `offset`; returns how many.
  virtual caf::expected<size_t> write_at(uint64_t offset,
                                         std::span<const std::byte> src) = 0;

  /// Writes the concatenation of `pieces` at `offset`; returns how many
  /// bytes, stopping after the first piece written short. The default
  /// writes piece by piece with `write_at` (so a faulty twin sees each
  /// piece as one write); the POSIX file uses pwritev.
  virtual caf::expected<size_t>
  write_gathered_at(uint64_t offset,
                    std::span<const std::span<const std::byte>> pieces);

  /// Makes written bytes durable (fsync).
  virtual caf::error sync() = 0;

  /// Asks the OS to start writing the file's dirty pages to the device now,
  /// without waiting for them (sync_file_range WRITE over the whole file),
  /// so a later `sync` has less left to do. A hint: it makes nothing
  /// durable and reports nothing (a failure shows at `sync`). The default
  /// does nothing.
  virtual void start_writeback() noexcept {}

  /// Current length in bytes.
  virtual caf::expected<uint64_t> size() = 0;

  /// The last-modification time, in nanoseconds since the epoch: what
  /// `file_system::set_mtime` set last, or the time of the last write.
  virtual caf::expected<uint64_t> mtime() = 0;

  /// The OS descriptor when there is one (io_uring may use it), else -1.
  virtual int native_handle() const noexcept {
    return -1;
  }
};

using file_ref = std::shared_ptr<file>;

/// A held lock (`file_system::lock`); destroying it releases the lock.
class file_lock {
public:
  virtual ~file_lock();
};

using lock_ref = std::unique_ptr<file_lock>;

/// How `file_system::open` opens a path.
enum class open_mode : uint8_t {
  /// Existing file, read only.
  read,
  /// A new file for writing; fails when the path exists.
  create,
};

/// Names, opens, renames and removes files. Paths are plain strings joined
/// with '/'.
class file_system {
public:
  virtual ~file_system();

  /// Opens `path` as `mode` says; a created file has mode 0600.
  virtual caf::expected<file_ref> open(const std::string& path,
                                       open_mode mode) = 0;

  /// Atomically replaces `to` with `from` (POSIX rename semantics).
  virtual caf::error rename(const std::string& from, const std::string& to) = 0;

  /// Removes a file. Removing a missing file is `ec::not_found`.
  virtual caf::error remove(const std::string& path) = 0;

  /// Makes the directory's entries (creations, renames, removals) durable.
  virtual caf::error sync_dir(const std::string& dir) = 0;

  /// Names (not paths) of the regular files in `dir`, in no given order.
  /// A missing directory is `ec::not_found`.
  virtual caf::expected<std::vector<std::string>>
  list(const std::string& dir) = 0;

  /// Creates `dir` and its parents, each missing one with mode 0700;
  /// existing directories are fine (and keep their mode).
  virtual caf::error make_dirs(const std::string& dir) = 0;

  /// The permission bits (e.g. 0700) of the file or directory `path`.
  virtual caf::expected<uint32_t> mode(const std::string& path) = 0;

  /// Sets the permission bits of `path`.
  virtual caf::error set_mode(const std::string& path, uint32_t mode) = 0;

  /// Sets the last-modification time of the file `path` (nanoseconds since
  /// the epoch; POSIX: `utimensat`, the access time left alone). The SSD
  /// tier records each file's last use there, so its LRU order survives a
  /// restart. A missing file is `ec::not_found`.
  virtual caf::error set_mtime(const std::string& path, uint64_t ns) = 0;

  /// Takes the exclusive lock on the file `path` (created 0600 when
  /// missing) until the returned handle is destroyed, without waiting, and
  /// records the holder in the file (POSIX: "pid N on host H"). Held by
  /// another holder: `ec::locked` naming that holder. POSIX: a `flock`,
  /// which the kernel releases when its process dies (no stale locks) and
  /// which a second open of the file refuses in the same process too.
  virtual caf::expected<lock_ref> lock(const std::string& path) = 0;
};

/// The real disk, through POSIX calls.
class posix_file_system final : public file_system {
public:
  caf::expected<file_ref> open(const std::string& path,
                               open_mode mode) override;
  caf::error rename(const std::string& from, const std::string& to) override;
  caf::error remove(const std::string& path) override;
  caf::error sync_dir(const std::string& dir) override;
  caf::expected<std::vector<std::string>> list(const std::string& dir) override;
  caf::error make_dirs(const std::string& dir) override;
  caf::expected<uint32_t> mode(const std::string& path) override;
  caf::error set_mode(const std::string& path, uint32_t mode) override;
  caf::error set_mtime(const std::string& path, uint64_t ns) override;
  caf::expected<lock_ref> lock(const std::string& path) override;
};

/// Maps an errno value to a kvtier error naming `what` and the OS message.
caf::error errno_error(int err, const std::string& what);

/// `a + "/" + b`.
std::string join_path(const std::string& a, const std::string& b);

} // namespace kvtier::tiers::ssd
