#include "tiers/ssd/file_system.hpp"

#include "tiers/ssd/kill_points.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace kvtier::tiers::ssd {

file::~file() = default;

caf::expected<size_t>
file::write_gathered_at(uint64_t offset,
                        std::span<const std::span<const std::byte>> pieces) {
  size_t done = 0;
  for (auto piece : pieces) {
    auto n = write_at(offset + done, piece);
    if (!n)
      return n;
    done += *n;
    if (*n < piece.size())
      break; // short: the caller sees the count
  }
  return done;
}

file_system::~file_system() = default;

file_lock::~file_lock() = default;

caf::error errno_error(int err, const std::string& what) {
  auto text = what + ": " + std::strerror(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT: return make_error(ec::no_space, std::move(text));
    case ENOENT: return make_error(ec::not_found, std::move(text));
    default: return make_error(ec::io_error, std::move(text));
  }
}

std::string join_path(const std::string& a, const std::string& b) {
  if (a.empty())
    return b;
  if (a.back() == '/')
    return a + b;
  return a + "/" + b;
}

namespace {

class posix_file final : public file {
public:
  posix_file(int fd, std::string path)
    : fd_(fd)
    , path_(std::move(path)) {}

  ~posix_file() override {
    ::close(fd_);
  }

  caf::expected<size_t> read_at(uint64_t offset,
                                std::span<std::byte> dst) override {
    size_t done = 0;
    while (done < dst.size()) {
      auto n = ::pread(fd_, dst.data() + done, dst.size() - done,
                       static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno_error(errno, "read " + path_);
      if (n == 0)
        break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

  caf::expected<size_t> write_at(uint64_t offset,
                                 std::span<const std::byte> src) override {
    const std::span<const std::byte> one[] = {src};
    kill_point_write(fd_, offset, one, path_);
    size_t done = 0;
    while (done < src.size()) {
      auto n = ::pwrite(fd_, src.data() + done, src.size() - done,
                        static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno_error(errno, "write " + path_);
      done += static_cast<size_t>(n);
    }
    return done;
  }

  caf::expected<size_t> write_gathered_at(
    uint64_t offset,
    std::span<const std::span<const std::byte>> pieces) override {
    kill_point_write(fd_, offset, pieces, path_);
    size_t done = 0;
    size_t i = 0, skip = 0; // next piece, and bytes of it already written
    std::vector<iovec> iov;
    while (i < pieces.size()) {
      iov.clear();
      for (auto k = i; k < pieces.size() && iov.size() < IOV_MAX; ++k) {
        auto from = k == i ? skip : 0;
        iov.push_back({const_cast<std::byte*>(pieces[k].data()) + from,
                       pieces[k].size() - from});
      }
      auto n = ::pwritev(fd_, iov.data(), static_cast<int>(iov.size()),
                         static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno_error(errno, "write " + path_);
      if (n == 0)
        break;
      done += static_cast<size_t>(n);
      for (auto left = static_cast<size_t>(n); left > 0 && i < pieces.size();) {
        auto here = std::min(left, pieces[i].size() - skip);
        left -= here;
        skip += here;
        if (skip == pieces[i].size()) {
          ++i;
          skip = 0;
        }
      }
      while (i < pieces.size() && pieces[i].empty())
        ++i;
    }
    return done;
  }

  caf::error sync() override {
    kill_point(kill_step::sync, path_);
    if (::fsync(fd_) != 0)
      return errno_error(errno, "fsync " + path_);
    return {};
  }

  void start_writeback() noexcept override {
    // Offset 0, length 0: to the end of the file. Pages already under
    // writeback are skipped; an error here shows again at fsync.
    (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
  }

  caf::expected<uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      return errno_error(errno, "stat " + path_);
    return static_cast<uint64_t>(st.st_size);
  }

  caf::expected<uint64_t> mtime() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      return errno_error(errno, "stat " + path_);
    return static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000u
           + static_cast<uint64_t>(st.st_mtim.tv_nsec);
  }

  int native_handle() const noexcept override {
    return fd_;
  }

private:
  int fd_;
  std::string path_;
};

} // namespace

caf::expected<file_ref> posix_file_system::open(const std::string& path,
                                                open_mode mode) {
  if (mode == open_mode::create)
    kill_point(kill_step::create, path);
  int flags = O_CLOEXEC;
  flags |= mode == open_mode::read ? O_RDONLY : O_WRONLY | O_CREAT | O_EXCL;
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0)
    return errno_error(errno, "open " + path);
  return file_ref{std::make_shared<posix_file>(fd, path)};
}

caf::error posix_file_system::rename(const std::string& from,
                                     const std::string& to) {
  kill_point(kill_step::rename, to);
  if (::rename(from.c_str(), to.c_str()) != 0)
    return errno_error(errno, "rename " + from + " to " + to);
  return {};
}

caf::error posix_file_system::remove(const std::string& path) {
  kill_point(kill_step::remove, path);
  if (::unlink(path.c_str()) != 0)
    return errno_error(errno, "remove " + path);
  return {};
}

caf::error posix_file_system::sync_dir(const std::string& dir) {
  kill_point(kill_step::sync_dir, dir);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno_error(errno, "open directory " + dir);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return errno_error(err, "fsync directory " + dir);
  return {};
}

caf::expected<std::vector<std::string>>
posix_file_system::list(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return errno_error(errno, "list " + dir);
  std::vector<std::string> out;
  while (auto* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name == "." || name == "..")
      continue;
    // The entry's type from the directory itself where the file system
    // gives it: a stat of each of a million names reads their inodes, in
    // the directory's hash order (most of a start-up's listing on ext4).
    // A link or an unknown type is stat'ed, as before (a link to a
    // regular file counts).
    if (ent->d_type != DT_REG) {
      if (ent->d_type != DT_LNK && ent->d_type != DT_UNKNOWN)
        continue;
      struct stat st;
      auto path = join_path(dir, name);
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        continue;
    }
    out.push_back(std::move(name));
  }
  ::closedir(d);
  return out;
}

caf::error posix_file_system::make_dirs(const std::string& dir) {
  // Component by component, so that every directory made is 0700 (not
  // 0777 less the umask, as std::filesystem would make it).
  std::string at;
  size_t pos = 0;
  while (pos <= dir.size()) {
    auto next = dir.find('/', pos);
    if (next == std::string::npos)
      next = dir.size();
    at = dir.substr(0, next);
    pos = next + 1;
    if (at.empty() || at == "." || at == "..")
      continue;
    if (::mkdir(at.c_str(), 0700) == 0)
      continue;
    int err = errno;
    struct stat st;
    if (err != EEXIST || ::stat(at.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return errno_error(err == EEXIST ? ENOTDIR : err,
                         "create directory " + at);
  }
  return {};
}

caf::expected<uint32_t> posix_file_system::mode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno_error(errno, "stat " + path);
  return static_cast<uint32_t>(st.st_mode & 07777);
}

caf::error posix_file_system::set_mode(const std::string& path, uint32_t mode) {
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
    return errno_error(errno, "chmod " + path);
  return {};
}

caf::error posix_file_system::set_mtime(const std::string& path, uint64_t ns) {
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT; // the access time stays
  times[1].tv_sec = static_cast<time_t>(ns / 1000000000u);
  times[1].tv_nsec = static_cast<long>(ns % 1000000000u);
  if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0)
    return errno_error(errno, "set the time of " + path);
  return {};
}

namespace {

/// A held flock; its file says who holds it, and is emptied on release.
class posix_lock final : public file_lock {
public:
  explicit posix_lock(int fd)
    : fd_(fd) {}

  ~posix_lock() override {
    // Emptied while still held, so no later holder's name is lost.
    [[maybe_unused]] auto rc = ::ftruncate(fd_, 0);
    ::close(fd_); // releases the flock
  }

private:
  int fd_;
};

/// "pid N on host H".
std::string this_holder() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "?");
  return "pid " + std::to_string(::getpid()) + " on host " + host;
}

} // namespace

caf::expected<lock_ref> posix_file_system::lock(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return errno_error(errno, "open lock file " + path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[512] = {};
    auto n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return errno_error(err, "lock " + path);
    std::string holder{buf, n > 0 ? static_cast<size_t>(n) : 0};
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == 0))
      holder.pop_back();
    return make_error(
      ec::locked,
      path + " is held by "
        + (holder.empty() ? "another process (not yet named)" : holder)
        + ": one process at a time may use an SSD directory");
  }
  auto text = this_holder() + "\n";
  if (::ftruncate(fd, 0) != 0
      || ::pwrite(fd, text.data(), text.size(), 0)
           != static_cast<ssize_t>(text.size())) {
    int err = errno;
    ::close(fd);
    return errno_error(err, "write lock file " + path);
  }
  return lock_ref{std::make_unique<posix_lock>(fd)};
}

} // namespace kvtier::tiers::ssd
