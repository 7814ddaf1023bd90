// The expected state of the SSD crash loops (as RocksDB's crash test keeps
// one): what a writer was told, remembered across its kills. Tests only.
//
// The log is a text file outside the tier's directory, one event a line,
// appended with one write(2) and an fdatasync each, so a kill leaves at
// most the last line torn (it is ignored):
//   D ns t1 t2 ...   the tier reported the write of (ns, tokens) durable
//   E ns t1 t2 ...   the writer is about to erase (ns, tokens)
//   R ns t1 t2 ...   the tier reported the file of (ns, tokens) removed
//                    (evicted, superseded, erased, gone, corrupt)
// An E or R line is written before the call or inside the report, so
// before the unlink it leads to runs. Replaying the lines in order gives
// the keys that must be on SSD: those whose last event is D.
// tests/ssd/expected_check.hpp checks a tier against such a set.
#pragma once

#include "tiers/state.hpp"

#include <cerrno>
#include <fstream>
#include <iterator>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace kvtier::tiers::ssd::expected {

/// A prefix entry's identity.
using entry_key = std::pair<std::string, token_seq>;

/// The log a writer appends to (and a checker, for evictions at its open).
class event_log {
public:
  explicit event_log(const std::string& path)
    : fd_(
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) {}
  ~event_log() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;

  bool ok() const noexcept {
    return fd_ >= 0;
  }

  /// Appends one line and makes it durable; false when it could not.
  bool append(char kind, std::string_view ns, std::span<const token> tokens) {
    std::string line{kind};
    line += ' ';
    line += ns;
    for (auto t : tokens)
      line += ' ' + std::to_string(t);
    line += '\n';
    for (size_t done = 0; done < line.size();) {
      auto n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      done += static_cast<size_t>(n);
    }
    return ::fdatasync(fd_) == 0;
  }

private:
  int fd_;
};

/// Replays the log at `path`: the keys whose last event is D. `lines`
/// counts the whole lines read (a torn last line is skipped).
inline std::set<entry_key> replay(const std::string& path,
                                  uint64_t* lines = nullptr) {
  std::set<entry_key> out;
  std::ifstream in{path, std::ios::binary};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  size_t at = 0;
  for (;;) {
    auto end = all.find('\n', at);
    if (end == std::string::npos)
      break; // a torn last line, or none
    std::istringstream line{all.substr(at, end - at)};
    at = end + 1;
    char kind = 0;
    entry_key key;
    line >> kind >> key.first;
    for (uint64_t t; line >> t;)
      key.second.push_back(static_cast<token>(t));
    if (lines)
      ++*lines;
    if (kind == 'D')
      out.insert(std::move(key));
    else
      out.erase(key);
  }
  return out;
}

} // namespace kvtier::tiers::ssd::expected
