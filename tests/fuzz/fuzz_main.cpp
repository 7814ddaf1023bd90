// The libFuzzer wrapper of one target (tests/fuzz/targets.hpp): built once
// per target with KVTIER_FUZZ_TARGET naming it, in the clang build only.
#include "tests/fuzz/targets.hpp"

#include <cstdio>
#include <cstdlib>

namespace {

const kvtier::fuzz::target* chosen() {
  static const auto* t = [] {
    auto* found = kvtier::fuzz::find_target(KVTIER_FUZZ_TARGET);
    if (!found) {
      std::fprintf(stderr, "no fuzz target %s\n", KVTIER_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chosen()->run(data, size);
}
