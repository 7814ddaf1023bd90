// An in-memory `file_system` that models what survives a power loss, for
// tests of the write protocol without a disk.
//
// Model: each file keeps its live bytes, the bytes of its last `sync()` and
// the writes made since (offset and bytes, in order); each directory keeps
// its live entries, the entries of its last `sync_dir()` and the directory
// operations made since (creations, renames, removals; a rename across two
// directories waits for both to be synced). A power loss starts from the
// synced state and may add some of what was not synced:
//
//   - `power_loss()` adds nothing: every file rolls back to its synced
//     bytes and every directory to its synced entries (a file created and
//     renamed but never made durable vanishes; a rename whose directory
//     was not synced is undone).
//   - `power_loss(seed)` draws, from the seed alone, one keep probability
//     p in {0, 1/4, 1/2, 3/4, 1} and then keeps each unsynced directory
//     operation with probability p and applies the kept ones in a random
//     order (a creation names its file, a rename names the file it moved
//     under the new name and drops the old name, whole and atomic; a
//     removal drops the name); then, for every file a name reaches, keeps
//     each unsynced write with probability p and applies the kept ones over
//     the synced bytes in a random order. The last write so applied is torn
//     with probability 1/2 when it spans a 512-byte sector boundary: only
//     its bytes before one such boundary (drawn uniformly among those
//     inside it) land, the rest of the write, sectors whole, is lost. A
//     write within one sector is never torn (sectors are atomic). Bytes
//     past the synced length that no kept write covers read as zeros (the
//     file is as long as its longest kept write reaches). p = 0 is the
//     rollback above; p = 1 with no tear keeps everything, in some order.
//     Random order is harsher than a disk behind a page cache: two kept
//     writes to the same bytes may land older over newer, and a creation
//     may land after the rename that moved its file (both names then
//     reach it). The SSD tier never writes the same bytes twice before a
//     sync and reports nothing durable before the directory sync that
//     covers its names, so the harsher model only widens the search.
//
// Whatever a power loss leaves becomes the synced state. Open `file`s keep
// their bytes after the name is removed or replaced, as on POSIX. Directories
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

  /// What a random power loss kept and tore (counts over every file and
  /// directory).
  struct loss_report {
    /// The keep probability drawn, in quarters (0..4).
    unsigned keep_quarters = 0;
    uint64_t dir_ops_pending = 0;
    uint64_t dir_ops_kept = 0;
    uint64_t writes_pending = 0;
    uint64_t writes_kept = 0;
    /// Kept writes torn at a sector boundary.
    uint64_t writes_torn = 0;
  };

  /// A power loss that keeps a random subset of the unsynced writes and
  /// directory operations, in a random order, and may tear the last write
  /// of a file at a sector boundary (the header comment's model); the same
  /// seed over the same history keeps the same subset.
  loss_report power_loss(uint64_t seed);

  /// Bytes of the sectors a torn write keeps whole (512).
  static constexpr uint64_t sector_bytes = 512;

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
  /// A directory operation not yet made durable: `name` is given `node`
  /// (null: the name goes); a rename also drops `from`.
  struct dir_op {
    std::string name;
    std::shared_ptr<inode> node;
    std::string from;
    /// Directories whose sync it still waits for.
    std::set<std::string> unsynced;
  };
  std::vector<dir_op> dir_ops_;
  void record(std::string name, std::shared_ptr<inode> node,
              std::string from = {});
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
