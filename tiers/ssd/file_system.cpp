#include "tiers/ssd/file_system.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvtier::tiers::ssd {

file::~file() = default;

file_system::~file_system() = default;

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

  caf::error sync() override {
    if (::fsync(fd_) != 0)
      return errno_error(errno, "fsync " + path_);
    return {};
  }

  caf::expected<uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      return errno_error(errno, "stat " + path_);
    return static_cast<uint64_t>(st.st_size);
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
  int flags = O_CLOEXEC;
  flags |= mode == open_mode::read ? O_RDONLY : O_WRONLY | O_CREAT | O_EXCL;
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0)
    return errno_error(errno, "open " + path);
  return file_ref{std::make_shared<posix_file>(fd, path)};
}

caf::error posix_file_system::rename(const std::string& from,
                                     const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return errno_error(errno, "rename " + from + " to " + to);
  return {};
}

caf::error posix_file_system::remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0)
    return errno_error(errno, "remove " + path);
  return {};
}

caf::error posix_file_system::sync_dir(const std::string& dir) {
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
    struct stat st;
    auto path = join_path(dir, name);
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      out.push_back(std::move(name));
  }
  ::closedir(d);
  return out;
}

caf::error posix_file_system::make_dirs(const std::string& dir) {
  std::error_code err;
  std::filesystem::create_directories(dir, err);
  if (err)
    return errno_error(err.value(), "create directory " + dir);
  return {};
}

} // namespace kvtier::tiers::ssd
