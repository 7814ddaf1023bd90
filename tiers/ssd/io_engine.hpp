// The I/O engine of the SSD tier: runs reads, writes, fsyncs and blocking
// file-system calls off the caller's thread and reports each completion.
//
// Two engines share this interface, chosen at start (`make_io_engine`):
//   io_uring  liburing; one engine thread owns the ring (submits and reaps),
//             so the caller only queues an op and writes an eventfd. Files
//             without a native descriptor (in-memory, faulty) and `call` ops
//             run on a two-thread helper pool instead.
//   threads   a Boost.Asio thread pool running pread/pwrite (`file` methods).
//
// Threads: `submit` may be called from one owner thread (the SSD actor);
// completions are delivered by calling the sink on an engine thread, never
// on the submitting thread. The sink must be cheap and thread-safe: the
// actor wraps it into a message to itself, tests use `completion_queue`.
// An op's memory (`data`) must stay valid until its completion: put its
// owner into `keep` and the engine holds it. The engine lets go of the op
// (its `keep`, `call`, `target`) before it delivers the completion, so an
// owner that has handled an op's completion knows no engine thread still
// holds a buffer of it. Destroying an engine waits for every submitted op
// to complete and be delivered.
#pragma once

#include "tiers/ssd/file_system.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace kvtier::tiers::ssd {

enum class io_kind : uint8_t { read, write, sync, call };

/// One operation for an engine.
struct io_op {
  io_kind kind = io_kind::read;
  /// The file of a read, write or sync.
  file_ref target;
  uint64_t offset = 0;
  /// Read destination or write source, `length` bytes.
  std::byte* data = nullptr;
  size_t length = 0;
  /// kind == call: a blocking file-system step run on an engine thread.
  std::function<caf::error()> call;
  /// Kept alive until the completion is delivered (owner of `data`).
  std::shared_ptr<const void> keep;
  /// Returned unchanged in the completion.
  uint64_t tag = 0;
  /// A gathered write (`file::write_gathered_at`): when not empty, the
  /// write's source is these pieces in order, `length` their total and
  /// `data` unused. One op however many pieces.
  std::vector<std::span<const std::byte>> pieces;
};

/// The outcome of one op. A read that stops at end of file is no error: it
/// reports fewer `bytes` than asked; so does a short write.
struct io_completion {
  uint64_t tag = 0;
  caf::error err;
  size_t bytes = 0;
};

using completion_sink = std::function<void(io_completion)>;

class io_engine {
public:
  virtual ~io_engine();

  /// Queues `op`; never waits for the disk.
  virtual void submit(io_op op) = 0;

  /// "io_uring" or "threads".
  virtual const char* name() const noexcept = 0;
};

/// Which engine `make_io_engine` builds.
enum class engine_choice : uint8_t { automatic, uring, threads };

/// "auto", "uring" or "threads"; anything else is `ec::invalid_config`.
caf::expected<engine_choice> parse_engine_choice(std::string_view text);

/// Builds an engine. `automatic` probes io_uring and falls back to threads;
/// `uring` fails with `ec::invalid_config` where io_uring cannot start.
/// `threads` is the pool size of the threads engine.
caf::expected<std::unique_ptr<io_engine>> make_io_engine(engine_choice choice,
                                                         completion_sink sink,
                                                         unsigned threads = 4);

/// Runs one op synchronously on the calling thread (engines use it).
io_completion run_now(const io_op& op);

/// A thread-safe completion queue: engines push, the owner drains.
class completion_queue {
public:
  /// A sink that pushes into this queue.
  completion_sink sink();

  void push(io_completion c);

  /// Everything queued, waiting up to `timeout` for at least one.
  std::vector<io_completion> wait(std::chrono::milliseconds timeout);

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<io_completion> items_;
};

} // namespace kvtier::tiers::ssd
