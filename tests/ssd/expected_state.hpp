// The expected state of the SSD crash loops (as RocksDB's crash test keeps
// one): what a writer was told, remembered across its kills. Tests only.
//
// The log is a text file outside the tier's directory, one event a line,
// appended with one write(2) and an fdatasync each, so a kill leaves at
// most the last line torn (it is ignored):
//   D ns t1 t2 ...        the tier reported the write of (ns, tokens) durable
//   E ns t1 t2 ...        the writer is about to erase (ns, tokens)
//   R ns t1 t2 ...        the tier reported the file of (ns, tokens) removed
//                         (evicted, superseded, erased, gone, corrupt)
//   C req att ns t1 ...   the checkpoint (req, ns, tokens) written by attempt
//                         att was reported durable
//   K req ns t1 ...       the writer is about to erase that checkpoint, or
//                         the tier reported its file removed
//   Q req ns              the writer is about to complete the generation
//                         (req, ns) (`remove_checkpoints`)
//   X req att ns          that removal answered durable: no file of the
//                         identity written by an attempt up to att may
//                         ever be served again
// An E, K, Q or R line is written before the call or inside the report,
// so before the unlink it leads to runs. Replaying the lines in order
// (`state::apply`) gives what must be on SSD: prefix keys and checkpoint
// keys whose last event is D or C; and what must never come back: the
// completed identities. A writer saves a checkpoint of a completed
// identity only with a larger attempt, and only once X is in the log.
// tests/ssd/expected_check.hpp checks a tier against a state.
#pragma once

#include "tiers/storage_key.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
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

/// A checkpoint identity: (request, ns).
using identity = std::pair<uint64_t, std::string>;

/// A checkpoint key without its attempt: (request, ns, tokens).
struct checkpoint_key {
  uint64_t request = 0;
  std::string ns;
  token_seq tokens;
  auto operator<=>(const checkpoint_key&) const = default;
};

/// What must hold after a crash.
struct state {
  /// Prefix keys reported durable and not removed since.
  std::set<entry_key> prefixes;
  /// Checkpoint keys reported durable and not removed or completed since,
  /// with the attempt that wrote them: each must be resumed.
  std::map<checkpoint_key, uint32_t> checkpoints;
  /// Completed identities, with the last attempt completed: their files of
  /// that attempt or an older one must never be served.
  std::map<identity, uint32_t> completed;

  /// Applies one log line (without its newline); false when malformed.
  bool apply(const std::string& text) {
    std::istringstream line{text};
    char kind = 0;
    line >> kind;
    uint64_t req = 0;
    uint32_t attempt = 0;
    if ((kind == 'C' || kind == 'K' || kind == 'Q' || kind == 'X')
        && !(line >> req))
      return false;
    if ((kind == 'C' || kind == 'X') && !(line >> attempt))
      return false;
    std::string ns;
    if (!(line >> ns))
      return false;
    token_seq tokens;
    for (uint64_t t; line >> t;)
      tokens.push_back(static_cast<token>(t));
    switch (kind) {
      case 'D': prefixes.insert({ns, tokens}); return true;
      case 'E':
      case 'R': prefixes.erase({ns, tokens}); return true;
      case 'C': checkpoints[{req, ns, tokens}] = attempt; return true;
      case 'K': checkpoints.erase({req, ns, tokens}); return true;
      case 'X': {
        auto& a = completed[{req, ns}];
        a = std::max(a, attempt);
        [[fallthrough]];
      }
      case 'Q':
        std::erase_if(checkpoints, [&](auto& c) {
          return c.first.request == req && c.first.ns == ns;
        });
        return true;
      default: return false;
    }
  }

  /// Whether a checkpoint file of (req, ns) by `attempt` must never be
  /// served: its generation was completed.
  bool dead(uint64_t req, const std::string& ns, uint32_t attempt) const {
    auto i = completed.find({req, ns});
    return i != completed.end() && attempt <= i->second;
  }
};

/// One log line: `kind`, then the checkpoint's request (and attempt) when
/// given, the namespace and the tokens.
inline std::string line(char kind, std::string_view ns,
                        std::span<const token> tokens,
                        std::optional<uint64_t> request = std::nullopt,
                        std::optional<uint32_t> attempt = std::nullopt) {
  std::string out{kind};
  if (request)
    out += ' ' + std::to_string(*request);
  if (attempt)
    out += ' ' + std::to_string(*attempt);
  out += ' ';
  out += ns;
  for (auto t : tokens)
    out += ' ' + std::to_string(t);
  return out;
}

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

  /// Appends a prefix event and makes it durable; false when it could not.
  bool append(char kind, std::string_view ns, std::span<const token> tokens) {
    return append(line(kind, ns, tokens));
  }

  /// Appends `text` (one `line`) and makes it durable.
  bool append(std::string text) {
    text += '\n';
    for (size_t done = 0; done < text.size();) {
      auto n = ::write(fd_, text.data() + done, text.size() - done);
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

/// Replays the log at `path`. `lines` counts the whole lines read (a torn
/// last line is skipped).
inline state replay(const std::string& path, uint64_t* lines = nullptr) {
  state out;
  std::ifstream in{path, std::ios::binary};
  std::string all{std::istreambuf_iterator<char>{in}, {}};
  size_t at = 0;
  for (;;) {
    auto end = all.find('\n', at);
    if (end == std::string::npos)
      break; // a torn last line, or none
    out.apply(all.substr(at, end - at));
    at = end + 1;
    if (lines)
      ++*lines;
  }
  return out;
}

} // namespace kvtier::tiers::ssd::expected
