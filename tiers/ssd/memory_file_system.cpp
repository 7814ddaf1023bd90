#include "tiers/ssd/memory_file_system.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <set>

namespace kvtier::tiers::ssd {

struct memory_file_system::inode {
  std::mutex mtx;
  uint32_t mode = 0600;
  std::vector<std::byte> data;
  std::vector<std::byte> synced;
  /// Writes since the last sync, in order (what a power loss may keep).
  struct pending_write {
    uint64_t offset = 0;
    std::vector<std::byte> bytes;
  };
  std::vector<pending_write> pending;
  /// Nanoseconds since the epoch; metadata, kept across a power loss.
  uint64_t mtime = 0;
  /// `start_writeback` calls (tests count the hints).
  std::atomic<uint64_t> writebacks = 0;
};

namespace {

uint64_t wall_ns() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
    duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}

std::string parent_of(const std::string& path) {
  auto pos = path.rfind('/');
  return pos == std::string::npos ? std::string{} : path.substr(0, pos);
}

class memory_file final : public file {
public:
  using inode = memory_file_system::inode;

  memory_file(std::shared_ptr<inode> node, bool writable)
    : node_(std::move(node))
    , writable_(writable) {}

  caf::expected<size_t> read_at(uint64_t offset,
                                std::span<std::byte> dst) override {
    std::lock_guard guard{node_->mtx};
    auto& d = node_->data;
    if (offset >= d.size())
      return size_t{0};
    auto n = std::min<uint64_t>(dst.size(), d.size() - offset);
    std::memcpy(dst.data(), d.data() + offset, n);
    return static_cast<size_t>(n);
  }

  caf::expected<size_t> write_at(uint64_t offset,
                                 std::span<const std::byte> src) override {
    if (!writable_)
      return make_error(ec::io_error, "write to a file opened for reading");
    std::lock_guard guard{node_->mtx};
    auto& d = node_->data;
    if (d.size() < offset + src.size())
      d.resize(offset + src.size());
    if (!src.empty())
      std::memcpy(d.data() + offset, src.data(), src.size());
    node_->pending.push_back({offset, {src.begin(), src.end()}});
    node_->mtime = wall_ns();
    return src.size();
  }

  caf::error sync() override {
    std::lock_guard guard{node_->mtx};
    node_->synced = node_->data;
    node_->pending.clear();
    return {};
  }

  void start_writeback() noexcept override {
    // Nothing becomes durable (the model keeps only what `sync` made so).
    ++node_->writebacks;
  }

  caf::expected<uint64_t> size() override {
    std::lock_guard guard{node_->mtx};
    return static_cast<uint64_t>(node_->data.size());
  }

  caf::expected<uint64_t> mtime() override {
    std::lock_guard guard{node_->mtx};
    return node_->mtime;
  }

private:
  std::shared_ptr<inode> node_;
  bool writable_;
};

} // namespace

memory_file_system::memory_file_system() = default;

memory_file_system::~memory_file_system() = default;

caf::expected<file_ref> memory_file_system::open(const std::string& path,
                                                 open_mode mode) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(path);
  if (mode == open_mode::read) {
    if (i == live_.end())
      return make_error(ec::not_found, "open " + path);
    return file_ref{std::make_shared<memory_file>(i->second, false)};
  }
  if (i != live_.end())
    return make_error(ec::io_error, "open " + path + ": file exists");
  auto node = std::make_shared<inode>();
  node->mtime = wall_ns();
  live_.emplace(path, node);
  record(path, node);
  return file_ref{std::make_shared<memory_file>(node, true)};
}

caf::error memory_file_system::rename(const std::string& from,
                                      const std::string& to) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(from);
  if (i == live_.end())
    return make_error(ec::not_found, "rename " + from);
  auto node = i->second;
  live_.erase(i);
  live_[to] = node;
  record(to, std::move(node), from);
  return {};
}

caf::error memory_file_system::remove(const std::string& path) {
  std::lock_guard guard{mtx_};
  if (live_.erase(path) == 0)
    return make_error(ec::not_found, "remove " + path);
  record(path, nullptr);
  return {};
}

caf::error memory_file_system::sync_dir(const std::string& dir) {
  std::lock_guard guard{mtx_};
  std::erase_if(durable_, [&](auto& kv) { return parent_of(kv.first) == dir; });
  for (auto& [path, node] : live_)
    if (parent_of(path) == dir)
      durable_[path] = node;
  for (auto& op : dir_ops_)
    op.unsynced.erase(dir);
  std::erase_if(dir_ops_, [](const dir_op& op) { return op.unsynced.empty(); });
  return {};
}

void memory_file_system::record(std::string name, std::shared_ptr<inode> node,
                                std::string from) {
  dir_op op{std::move(name), std::move(node), std::move(from), {}};
  op.unsynced.insert(parent_of(op.name));
  if (!op.from.empty())
    op.unsynced.insert(parent_of(op.from));
  dir_ops_.push_back(std::move(op));
}

caf::expected<std::vector<std::string>>
memory_file_system::list(const std::string& dir) {
  std::lock_guard guard{mtx_};
  std::vector<std::string> out;
  for (auto& [path, node] : live_)
    if (parent_of(path) == dir)
      out.push_back(path.substr(dir.size() + 1));
  return out;
}

caf::error memory_file_system::make_dirs(const std::string& dir) {
  // Directories are implicit in the paths of their files; each one named
  // here gets a mode (0700) unless it has one.
  std::lock_guard guard{mtx_};
  for (auto at = dir; !at.empty() && at != "/"; at = parent_of(at))
    dir_modes_.emplace(at, 0700);
  return {};
}

caf::expected<uint32_t> memory_file_system::mode(const std::string& path) {
  std::lock_guard guard{mtx_};
  if (auto i = live_.find(path); i != live_.end()) {
    std::lock_guard file_guard{i->second->mtx};
    return i->second->mode;
  }
  if (auto d = dir_modes_.find(path); d != dir_modes_.end())
    return d->second;
  return make_error(ec::not_found, "stat " + path);
}

caf::error memory_file_system::set_mtime(const std::string& path, uint64_t ns) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(path);
  if (i == live_.end())
    return make_error(ec::not_found, "set the time of " + path);
  std::lock_guard file_guard{i->second->mtx};
  i->second->mtime = ns;
  return {};
}

caf::error memory_file_system::set_mode(const std::string& path,
                                        uint32_t mode) {
  std::lock_guard guard{mtx_};
  if (auto i = live_.find(path); i != live_.end()) {
    std::lock_guard file_guard{i->second->mtx};
    i->second->mode = mode;
    return {};
  }
  dir_modes_[path] = mode;
  return {};
}

namespace {

template <class Table>
class memory_lock final : public file_lock {
public:
  memory_lock(std::shared_ptr<Table> table, std::string path)
    : table_(std::move(table))
    , path_(std::move(path)) {}

  ~memory_lock() override {
    std::lock_guard guard{table_->mtx};
    table_->paths.erase(path_);
  }

private:
  std::shared_ptr<Table> table_;
  std::string path_;
};

} // namespace

caf::expected<lock_ref> memory_file_system::lock(const std::string& path) {
  {
    std::lock_guard guard{locks_->mtx};
    if (!locks_->paths.insert(path).second)
      return make_error(ec::locked,
                        path
                          + " is held by another holder in this process "
                            "(in-memory file system): one at a time may "
                            "use an SSD directory");
  }
  std::lock_guard guard{mtx_};
  auto& node = live_[path];
  if (!node)
    node = std::make_shared<inode>();
  std::lock_guard file_guard{node->mtx};
  static constexpr char holder[] = "this process (in-memory file system)\n";
  auto p = reinterpret_cast<const std::byte*>(holder);
  node->data.assign(p, p + sizeof holder - 1);
  return lock_ref{std::make_unique<memory_lock<lock_table>>(locks_, path)};
}

void memory_file_system::power_loss() {
  std::lock_guard guard{mtx_};
  live_ = durable_;
  dir_ops_.clear();
  for (auto& [path, node] : live_) {
    std::lock_guard file_guard{node->mtx};
    node->data = node->synced;
    node->pending.clear();
  }
}

memory_file_system::loss_report memory_file_system::power_loss(uint64_t seed) {
  std::mt19937_64 rng{seed};
  loss_report r;
  r.keep_quarters = static_cast<unsigned>(rng() % 5);
  auto keep = [&] { return rng() % 4 < r.keep_quarters; };
  std::lock_guard guard{mtx_};
  // Names: the synced entries, then a random subset of the later
  // operations in a random order.
  std::vector<dir_op*> ops;
  for (auto& op : dir_ops_) {
    ++r.dir_ops_pending;
    if (keep())
      ops.push_back(&op);
  }
  std::shuffle(ops.begin(), ops.end(), rng);
  live_ = durable_;
  for (auto* op : ops) {
    ++r.dir_ops_kept;
    if (!op->from.empty())
      live_.erase(op->from);
    if (op->node)
      live_[op->name] = op->node;
    else
      live_.erase(op->name);
  }
  dir_ops_.clear();
  durable_ = live_;
  // Bytes: each file a name reaches, once (in name order, so the seed
  // alone decides).
  std::set<inode*> seen;
  for (auto& [path, node] : live_) {
    if (!seen.insert(node.get()).second)
      continue;
    std::lock_guard file_guard{node->mtx};
    std::vector<inode::pending_write*> writes;
    for (auto& w : node->pending) {
      ++r.writes_pending;
      if (keep())
        writes.push_back(&w);
    }
    std::shuffle(writes.begin(), writes.end(), rng);
    auto& d = node->data;
    d = node->synced;
    for (size_t k = 0; k < writes.size(); ++k) {
      auto& w = *writes[k];
      auto len = static_cast<uint64_t>(w.bytes.size());
      ++r.writes_kept;
      if (k + 1 == writes.size() && rng() % 2 == 0) {
        // Sector boundaries strictly inside the write.
        auto first = (w.offset / sector_bytes + 1) * sector_bytes;
        auto end = w.offset + len;
        if (first < end) {
          auto cuts = (end - 1 - first) / sector_bytes + 1;
          len = first + (rng() % cuts) * sector_bytes - w.offset;
          ++r.writes_torn;
        }
      }
      if (d.size() < w.offset + len)
        d.resize(w.offset + len);
      if (len > 0)
        std::memcpy(d.data() + w.offset, w.bytes.data(), len);
    }
    node->synced = d;
    node->pending.clear();
  }
  return r;
}

caf::expected<std::vector<std::byte>>
memory_file_system::contents(const std::string& path) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(path);
  if (i == live_.end())
    return make_error(ec::not_found, path);
  std::lock_guard file_guard{i->second->mtx};
  return i->second->data;
}

uint64_t memory_file_system::writebacks_started(const std::string& path) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(path);
  return i == live_.end() ? 0 : i->second->writebacks.load();
}

caf::error memory_file_system::overwrite(const std::string& path,
                                         std::vector<std::byte> bytes) {
  std::lock_guard guard{mtx_};
  auto i = live_.find(path);
  if (i == live_.end())
    return make_error(ec::not_found, path);
  std::lock_guard file_guard{i->second->mtx};
  i->second->synced = bytes;
  i->second->pending.clear();
  i->second->data = std::move(bytes);
  return {};
}

} // namespace kvtier::tiers::ssd
