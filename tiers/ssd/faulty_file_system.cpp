#include "tiers/ssd/faulty_file_system.hpp"

namespace kvtier::tiers::ssd {

const char* to_string(fs_op op) {
  switch (op) {
    case fs_op::open_read: return "open_read";
    case fs_op::create: return "create";
    case fs_op::read: return "read";
    case fs_op::write: return "write";
    case fs_op::sync: return "sync";
    case fs_op::rename: return "rename";
    case fs_op::remove: return "remove";
    case fs_op::sync_dir: return "sync_dir";
    case fs_op::list: return "list";
    case fs_op::set_mtime: return "set_mtime";
  }
  return "unknown";
}

const char* to_string(fault_kind k) {
  switch (k) {
    case fault_kind::eio: return "eio";
    case fault_kind::enospc: return "enospc";
    case fault_kind::short_write: return "short_write";
    case fault_kind::crash: return "crash";
    case fault_kind::stall: return "stall";
  }
  return "unknown";
}

namespace {

bool mutating(fs_op op) {
  return op != fs_op::open_read && op != fs_op::read && op != fs_op::list;
}

class faulty_file final : public file {
public:
  faulty_file(faulty_file_system& fs, file_ref inner)
    : fs_(fs)
    , inner_(std::move(inner)) {}

  caf::expected<size_t> read_at(uint64_t offset,
                                std::span<std::byte> dst) override {
    if (auto f = fs_.next(fs_op::read))
      return faulty_file_system::fault_error(*f, fs_op::read);
    return inner_->read_at(offset, dst);
  }

  caf::expected<size_t> write_at(uint64_t offset,
                                 std::span<const std::byte> src) override {
    auto f = fs_.next(fs_op::write);
    if (!f)
      return inner_->write_at(offset, src);
    if (*f == fault_kind::short_write || *f == fault_kind::crash) {
      auto half = src.first(src.size() / 2);
      auto n = inner_->write_at(offset, half);
      if (*f == fault_kind::short_write || !n)
        return n;
    }
    return faulty_file_system::fault_error(*f, fs_op::write);
  }

  caf::error sync() override {
    if (auto f = fs_.next(fs_op::sync))
      return faulty_file_system::fault_error(*f, fs_op::sync);
    return inner_->sync();
  }

  // A hint, not an operation faults count (so `inject_any` numbering is
  // the same with or without it): forwarded as it is.
  void start_writeback() noexcept override {
    inner_->start_writeback();
  }

  caf::expected<uint64_t> size() override {
    return inner_->size();
  }

  caf::expected<uint64_t> mtime() override {
    return inner_->mtime();
  }

private:
  faulty_file_system& fs_;
  file_ref inner_;
};

} // namespace

faulty_file_system::faulty_file_system(file_system& inner)
  : inner_(inner) {}

faulty_file_system::~faulty_file_system() {
  std::unique_lock guard{mtx_};
  releasing_ = true;
  released_.notify_all();
  released_.wait(guard, [this] { return stalled_ == 0; });
}

void faulty_file_system::inject(fs_op op, uint64_t nth, fault_kind kind) {
  std::lock_guard guard{mtx_};
  auto i = static_cast<size_t>(op);
  armed_[i] = armed{counts_[i] + nth, kind};
  releasing_ = false;
}

void faulty_file_system::inject_any(uint64_t nth, fault_kind kind) {
  std::lock_guard guard{mtx_};
  any_ = armed{total_ + nth, kind};
  releasing_ = false;
}

void faulty_file_system::clear() {
  std::lock_guard guard{mtx_};
  armed_ = {};
  any_ = {};
  crashed_ = false;
  releasing_ = true;
  released_.notify_all();
}

void faulty_file_system::release() {
  std::lock_guard guard{mtx_};
  releasing_ = true;
  released_.notify_all();
}

uint64_t faulty_file_system::stalled() const {
  std::lock_guard guard{mtx_};
  return stalled_;
}

bool faulty_file_system::stalled_on(fs_op op) const {
  std::lock_guard guard{mtx_};
  return stalled_ops_[static_cast<size_t>(op)] > 0;
}

uint64_t faulty_file_system::fired() const {
  std::lock_guard guard{mtx_};
  return fired_;
}

uint64_t faulty_file_system::total() const {
  std::lock_guard guard{mtx_};
  return total_;
}

uint64_t faulty_file_system::count(fs_op op) const {
  std::lock_guard guard{mtx_};
  return counts_[static_cast<size_t>(op)];
}

bool faulty_file_system::crashed() const {
  std::lock_guard guard{mtx_};
  return crashed_;
}

void faulty_file_system::crash_now() {
  std::lock_guard guard{mtx_};
  crashed_ = true;
}

std::optional<fault_kind> faulty_file_system::next(fs_op op) {
  std::unique_lock guard{mtx_};
  auto i = static_cast<size_t>(op);
  auto n = ++counts_[i];
  auto t = ++total_;
  if (crashed_ && mutating(op))
    return fault_kind::crash;
  std::optional<fault_kind> kind;
  if (armed_[i].at != 0 && armed_[i].at == n) {
    kind = armed_[i].kind;
    armed_[i] = {};
  } else if (any_.at != 0 && any_.at == t) {
    kind = any_.kind;
    any_ = {};
  }
  if (!kind)
    return std::nullopt;
  ++fired_;
  if (*kind == fault_kind::crash)
    crashed_ = true;
  if (*kind == fault_kind::stall) {
    ++stalled_;
    ++stalled_ops_[i];
    released_.wait(guard, [this] { return releasing_; });
    --stalled_ops_[i];
    --stalled_;
    released_.notify_all(); // the destructor may be waiting for this
    return std::nullopt;
  }
  return kind;
}

caf::error faulty_file_system::fault_error(fault_kind kind, fs_op op) {
  auto what =
    std::string{"injected "} + to_string(kind) + " on " + to_string(op);
  if (kind == fault_kind::enospc)
    return make_error(ec::no_space, std::move(what));
  return make_error(ec::io_error, std::move(what));
}

caf::expected<file_ref> faulty_file_system::open(const std::string& path,
                                                 open_mode mode) {
  auto op = mode == open_mode::read ? fs_op::open_read : fs_op::create;
  if (auto f = next(op))
    return fault_error(*f, op);
  auto inner = inner_.open(path, mode);
  if (!inner)
    return inner.error();
  return file_ref{std::make_shared<faulty_file>(*this, std::move(*inner))};
}

caf::error faulty_file_system::rename(const std::string& from,
                                      const std::string& to) {
  if (auto f = next(fs_op::rename))
    return fault_error(*f, fs_op::rename);
  return inner_.rename(from, to);
}

caf::error faulty_file_system::remove(const std::string& path) {
  if (auto f = next(fs_op::remove))
    return fault_error(*f, fs_op::remove);
  return inner_.remove(path);
}

caf::error faulty_file_system::sync_dir(const std::string& dir) {
  if (auto f = next(fs_op::sync_dir))
    return fault_error(*f, fs_op::sync_dir);
  return inner_.sync_dir(dir);
}

caf::expected<std::vector<std::string>>
faulty_file_system::list(const std::string& dir) {
  if (auto f = next(fs_op::list))
    return fault_error(*f, fs_op::list);
  return inner_.list(dir);
}

caf::error faulty_file_system::make_dirs(const std::string& dir) {
  return inner_.make_dirs(dir);
}

caf::expected<uint32_t> faulty_file_system::mode(const std::string& path) {
  return inner_.mode(path);
}

caf::error faulty_file_system::set_mode(const std::string& path,
                                        uint32_t mode) {
  return inner_.set_mode(path, mode);
}

caf::error faulty_file_system::set_mtime(const std::string& path, uint64_t ns) {
  if (auto f = next(fs_op::set_mtime))
    return fault_error(*f, fs_op::set_mtime);
  return inner_.set_mtime(path, ns);
}

caf::expected<lock_ref> faulty_file_system::lock(const std::string& path) {
  return inner_.lock(path);
}

} // namespace kvtier::tiers::ssd
