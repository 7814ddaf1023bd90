// The fuzz targets' entry functions (tests/fuzz/, docs/testing.md): each
// takes arbitrary bytes, feeds them to one of kvtier's decoders of
// untrusted input and checks that bad input comes back as an error value
// of the decoder's documented kind. A crash, a hang, a sanitizer report or
// a broken check (reported on stderr, then `std::abort`) is a bug.
//
// Compiled twice: into the libFuzzer programs of the clang build
// (`make fuzz`, `KVTIER_FUZZ=ON`; tests/fuzz/fuzz_main.cpp is the thin
// `LLVMFuzzerTestOneInput` wrapper) and into the default suite's
// `fuzz.corpus` test (gcc), which runs every target over every file of its
// corpus, tests/fuzz/corpus/<target>/, so an input that once crashed stays
// a regression test. Single-threaded; the trace target writes a scratch
// file of its own process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvtier::fuzz {

/// One target: its name (the corpus folder and the program `fuzz_<name>`)
/// and its entry function (always returns 0, as libFuzzer wants).
struct target {
  const char* name;
  int (*run)(const uint8_t* data, size_t size);
};

/// Every target, in a fixed order.
std::span<const target> targets();

/// The target named `name`, or nullptr.
const target* find_target(const char* name);

} // namespace kvtier::fuzz
