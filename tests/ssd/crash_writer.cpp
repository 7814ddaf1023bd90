// The crash test's victim: a separate process that spills and flushes
// entries into an SSD tier without end, printing one line per step so the
// test can pick a moment to SIGKILL it.
// Usage: ssd_crash_writer DIR SEED [every-kind|delta]
#include "tests/ssd/crash_common.hpp"

#include <cstdio>
#include <cstdlib>

using namespace kvtier;
using namespace kvtier::tiers::ssd;

int main(int argc, char** argv) {
  auto m = argc == 4 ? crash::parse_mode(argv[3]) : crash::mode::every_kind;
  if ((argc != 3 && argc != 4) || !m) {
    std::fprintf(stderr, "usage: %s DIR SEED [every-kind|delta]\n", argv[0]);
    return 2;
  }
  uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::automatic, q.sink());
  if (!engine)
    return 3;
  ssd_tier tier{crash::config(argv[1], *m), fs, **engine};
  if (!tier.open())
    return 4;
  bool flushed = false;
  for (uint64_t i = 0;; ++i) {
    auto reason = i % 3 == 0 ? write_reason::demotion : write_reason::spill;
    (void)tier.enqueue(crash::entry_for(seed, i, *m), reason);
    std::printf("spill %llu\n", static_cast<unsigned long long>(i));
    std::fflush(stdout);
    if (i % 5 == 4) {
      flushed = false;
      tier.flush([&](const durability_evidence&) { flushed = true; });
      while (!flushed)
        for (auto& c : q.wait(std::chrono::milliseconds(10)))
          tier.handle(std::move(c));
      std::printf("flushed %llu\n", static_cast<unsigned long long>(i));
      std::fflush(stdout);
    } else {
      for (auto& c : q.wait(std::chrono::milliseconds(0)))
        tier.handle(std::move(c));
    }
  }
}
