// KVTIER_ASSERT: the project's own assertion. CAF_ASSERT compiles to nothing
// in Debian's CAF build, so invariants use this one. It is active in every
// build type (the checks are cheap) and aborts with file, line and the
// failed expression; it is for programming errors only, never for bad input.
#pragma once

#include <cstdio>
#include <cstdlib>

// Deliberately plain stderr, not the log: the process aborts next, and an
// assertion must print even before (or without) the log facade.
#define KVTIER_ASSERT(expr)                                                    \
  do {                                                                         \
    if (!(expr)) {                                                             \
      std::fprintf(stderr, "%s:%d: kvtier assertion failed: %s\n", __FILE__,   \
                   __LINE__, #expr);                                           \
      std::abort();                                                            \
    }                                                                          \
  } while (false)
