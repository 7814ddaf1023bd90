// Kill points: the SSD tier's crash tests name one mutating file-system
// step of a real process at which it dies, so a kill lands exactly between
// (or inside) any two steps of the write protocol, not only where a timer
// happens to fall.
//
// The environment variable KVTIER_KILL_AT, read once at the first step:
//   unset or empty  nothing is counted (one call testing a flag a step);
//   N               the process dies at its N-th step of any kind (N >= 1);
//   KIND:N          at its N-th step of that kind; KIND is one of
//                   create, write, sync, rename, remove, sync_dir;
//   ...@PROTOCOL    either form, counting only steps run inside a
//                   protocol whose name starts with PROTOCOL (below):
//                   `sync_dir:2@removal` is the second directory fsync
//                   of the checkpoint removals.
// A step is a file created for writing (`create`), a positional or
// gathered write (`write`), a file fsync (`sync`), a rename, a removal
// (unlink), a directory fsync (`sync_dir`), whether run through
// `posix_file_system` or submitted to io_uring. Reads, listings, modes,
// time stamps and the LOCK file are not steps. At the chosen step the
// process writes one line to stderr ("kvtier: kill point: write #N of
// any kind on PATH (in entry-write)") and raises SIGKILL, so its parent
// sees what a `kill -9` leaves. A write step dies half way through: the
// first half of its bytes, rounded down to a 512-byte sector multiple of
// the file offset, is written first (a process that died between two of
// the kernel calls one write takes); every other step dies before it
// runs.
//
// Protocols: the tier names the protocol a thread's steps belong to
// (`kill_protocol`, a scope guard around the step's code), so the line
// says what was killed and `@PROTOCOL` can aim at it: entry-write (steps
// 1, 4 and 5 of a write; its payload writes and fsync, submitted by the
// owner, carry no name), file-removal (an evicted, erased or superseded
// file's unlink), temp-cleanup, removal-record (a removal record's temp,
// fsync, rename and directory fsync), removal-unlink (the covered files'
// unlinks and directory fsync), removal-drop (deleting the record and its
// directory fsync), scan-removal (the start-up scan applying records).
//
// Which step a value lands on: steps are counted with one atomic counter
// in the order threads reach the point. The tier's owner submits payload
// writes and fsyncs (io_uring) while the engine's threads run creates,
// renames, unlinks and directory fsyncs, and the order in which the owner
// submits depends on when completions come back. So one value does not
// name the same step from run to run, and never could with real I/O. The
// crash loops do not need it to: they draw a value per round, read the
// line above to learn which step of which protocol died, and print how
// often each was hit (tests/ssd/expected_state_test.cpp); `@PROTOCOL`
// narrows the count to one protocol, whose steps run one at a time for
// one removal, so `rename:1@removal-record` dies at the rename of the
// first removal record to get there. Measured (the writer of
// expected_state_test, one seed, five runs each from an empty directory):
// `60` died at a write, a rename or a directory fsync; `remove:5` and
// `rename:1@removal-record` at the same protocol step every time.
//
// A malformed value ends the process at its first step with exit status 2
// and a line naming the value and the accepted forms (a crash test must
// not run on, believing it kills). Only `posix_file_system` and the
// io_uring engine call these; the in-memory and faulty file systems count
// nothing (their tests arm faults directly). Thread-safe.
#pragma once

#include "messages/error.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvtier::tiers::ssd {

/// The kinds of step a kill point counts.
enum class kill_step : uint8_t {
  create,
  write,
  sync,
  rename,
  remove,
  sync_dir
};

const char* to_string(kill_step s);

/// What KVTIER_KILL_AT asks for: the step kind counted (none: every kind),
/// the protocol counted (empty: any, steps outside one included) and the
/// step to die at.
struct kill_plan {
  std::optional<kill_step> only;
  std::string protocol;
  uint64_t at = 0;
};

/// Names the protocol the current thread's steps belong to while it lives
/// (the previous name comes back after it); `name` must outlive it (a
/// literal). One thread-local store each way.
class kill_protocol {
public:
  explicit kill_protocol(const char* name) noexcept;
  ~kill_protocol();
  kill_protocol(const kill_protocol&) = delete;
  kill_protocol& operator=(const kill_protocol&) = delete;

private:
  const char* previous_;
};

/// Parses a KVTIER_KILL_AT value; `ec::invalid_config` naming the value and
/// the accepted forms when malformed.
caf::expected<kill_plan> parse_kill_plan(std::string_view text);

/// Steps counted so far (of the kind KVTIER_KILL_AT names); 0 when unset.
/// A run with a count past its last step tells how many it takes.
uint64_t kill_steps_counted() noexcept;

namespace detail {
/// Whether KVTIER_KILL_AT names a step (read once; a malformed value ends
/// the process here).
bool kill_points_armed() noexcept;
/// Counts `s`; true when it is the step to die at.
bool take_kill_step(kill_step s) noexcept;
[[noreturn]] void die_at(kill_step s, const std::string& what) noexcept;
[[noreturn]] void die_in_write(int fd, uint64_t offset,
                               std::span<const std::span<const std::byte>> src,
                               const std::string& what) noexcept;
} // namespace detail

/// Counts step `s` (on `what`, a path for the line); dies when it is the
/// chosen one. Unset KVTIER_KILL_AT: one call that tests a flag.
inline void kill_point(kill_step s, const std::string& what) {
  if (detail::kill_points_armed() && detail::take_kill_step(s))
    detail::die_at(s, what);
}

/// The same for a write of `src` at `offset` to descriptor `fd`: the
/// chosen one writes its first half (sector-rounded) to `fd`, then dies.
inline void kill_point_write(int fd, uint64_t offset,
                             std::span<const std::span<const std::byte>> src,
                             const std::string& what) {
  if (detail::kill_points_armed() && detail::take_kill_step(kill_step::write))
    detail::die_in_write(fd, offset, src, what);
}

} // namespace kvtier::tiers::ssd
