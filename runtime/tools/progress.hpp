// The progress line of `kvtier replay` and `kvtier demo` (and `replay
// --nodes`) on stderr: requests done of the total, the rate and the time
// left. On a terminal it is one line rewritten in place (`\r`, erased to
// its end); anywhere else (CI, a pipe, a file) it is a plain line now and
// then: when 10 % more of the requests are done or 10 s have passed since
// the last one, whichever comes first, so a log holds a dozen lines, never
// a pile of `\r` updates.
//
// Policy: the meter only formats; the caller writes what it returns (so a
// test reads the exact bytes). One thread uses a meter.
#pragma once

#include <cstdint>
#include <string>

namespace kvtier::runtime {

/// "ETA 1m05s" style time left: "12s", "3m07s", "1h02m"; "--" when it
/// cannot be told yet (nothing done, or no time passed).
std::string eta_text(uint64_t done, uint64_t total, double elapsed_s);

class progress_meter {
public:
  /// `terminal`: stderr is a terminal (isatty).
  explicit progress_meter(bool terminal)
    : terminal_(terminal) {}

  /// The bytes to write for an update (`progress_text` of the arguments,
  /// e.g. label "[replay]", extra "hit ratio 0.3712"), or "" when nothing
  /// is due. Called about once a second by the replay loop.
  std::string update(const std::string& label, uint64_t done, uint64_t total,
                     double elapsed_s, const std::string& extra = {});

  /// What ends the progress output: a newline after a terminal's line
  /// (else the next output would land on it), nothing otherwise.
  std::string finish();

  /// Starts over (a new scenario of `replay --nodes`).
  void restart();

  bool terminal() const {
    return terminal_;
  }

private:
  bool terminal_;
  bool line_open_ = false;
  bool printed_ = false;
  double last_s_ = 0;
  uint64_t last_done_ = 0;
};

/// The line itself (no `\r`, no newline): "LABEL 1,200/12,031 requests
/// (10 %), 130 req/s, ETA 1m23s[, EXTRA]".
std::string progress_text(const std::string& label, uint64_t done,
                          uint64_t total, double elapsed_s,
                          const std::string& extra);

} // namespace kvtier::runtime
