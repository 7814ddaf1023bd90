// An in-memory `file_system` that models what survives a power loss, for
// tests of the write protocol without a disk.
//
// Model: each file keeps its live bytes and the bytes of its last `sync()`;
// each directory keeps its live entries and the entries of its last
// `sync_dir()`. `power_loss()` rolls every file back to its synced bytes and
// every directory back to its synced entries, as a crash of the machine
// would (a file created and renamed but never made durable vanishes; a
// rename whose directory was not synced is undone). Open `file`s keep their
// bytes after the name is removed or replaced, as on POSIX. Directories
// are implicit in the paths of their files, but keep a mode once
// `make_dirs` or `set_mode` names them; files are created 0600. A lock is
// held in this instance only (a second `lock` of the same path while the
// first handle lives is `ec::locked`); locks survive no power loss.
//
// Thread-safe: one mutex guards names, one per file guards its bytes.
#pragma once

#include "tiers/ssd/file_system.hpp"

#include <map>
#include <mutex>
#include <set>

namespace kvtier::tiers::ssd {

class memory_file_system final : public file_system {
public:
  struct inode;

  memory_file_system();
  ~memory_file_system() override;

  caf::expected<file_ref> open(const std::string& path,
                               open_mode mode) override;
  caf::error rename(const std::string& from, const std::string& to) override;
  caf::error remove(const std::string& path) override;
  caf::error sync_dir(const std::string& dir) override;
  caf::expected<std::vector<std::string>> list(const std::string& dir) override;
  caf::error make_dirs(const std::string& dir) override;
  caf::expected<uint32_t> mode(const std::string& path) override;
  caf::error set_mode(const std::string& path, uint32_t mode) override;
  /// Files keep a modification time (set at creation and by every write,
  /// to the system clock, or by this); it survives a power loss.
  caf::error set_mtime(const std::string& path, uint64_t ns) override;
  caf::expected<lock_ref> lock(const std::string& path) override;

  /// Rolls files and directories back to what was last made durable.
  void power_loss();

  /// The live bytes of `path` (tests corrupt and inspect files with these).
  caf::expected<std::vector<std::byte>> contents(const std::string& path);

  /// Replaces the live (and durable) bytes of `path`.
  caf::error overwrite(const std::string& path, std::vector<std::byte> bytes);

  /// How many times `file::start_writeback` was called on the file now
  /// named `path` (it follows renames); 0 for no such file.
  uint64_t writebacks_started(const std::string& path);

private:
  using table = std::map<std::string, std::shared_ptr<inode>>;

  std::mutex mtx_;
  /// Live names: full path -> file.
  table live_;
  /// Names as of each directory's last sync.
  table durable_;
  /// Modes of the directories named so far.
  std::map<std::string, uint32_t> dir_modes_;
  /// Paths locked now, shared with their handles (which may outlive this).
  struct lock_table {
    std::mutex mtx;
    std::set<std::string> paths;
  };
  std::shared_ptr<lock_table> locks_ = std::make_shared<lock_table>();
};

} // namespace kvtier::tiers::ssd
