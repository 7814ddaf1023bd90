// The expected-state crash loop's writer (tests/ssd/expected_state_test.cpp):
// a separate process that writes COUNT entries through an SSD tier on the
// real disk, flushing every fifth and erasing now and then, and appends to
// the expected-state log (expected_state.hpp) every write the tier
// reported durable, every file it reported removed and every erase it is
// about to ask for. Beside them it saves generation checkpoints (every
// second entry), drops redundant ones and completes a generation every
// sixth entry (tests/ssd/checkpoint_owner.hpp), going on with the
// generations earlier runs left in the log. It prints "spill I" per entry (so a
// test can pick a moment to SIGKILL it) and "done after N kill-point steps" at
// the end (N counted when KVTIER_KILL_AT is set), then exits 0. A kill point
// (KVTIER_KILL_AT, tiers/ssd/kill_points.hpp) may end it at any
// file-system step of the tier.
// Usage: ssd_expected_writer DIR LOG SEED every-kind|delta COUNT
#include "tests/ssd/checkpoint_owner.hpp"
#include "tests/ssd/crash_common.hpp"
#include "tiers/ssd/kill_points.hpp"

#include <cstdio>
#include <cstdlib>

using namespace kvtier;
using namespace kvtier::tiers::ssd;

int main(int argc, char** argv) {
  auto m = argc == 6 ? crash::parse_mode(argv[4]) : std::nullopt;
  uint64_t count = argc == 6 ? std::strtoull(argv[5], nullptr, 10) : 0;
  if (!m || count == 0) {
    std::fprintf(stderr, "usage: %s DIR LOG SEED every-kind|delta COUNT\n",
                 argv[0]);
    return 2;
  }
  uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  expected::event_log log{argv[2]};
  if (!log.ok()) {
    std::fprintf(stderr, "cannot open the log %s\n", argv[2]);
    return 3;
  }
  bool log_failed = false;
  expected::checkpoint_owner owner{
    [&](uint64_t request, uint32_t j) {
      return crash::checkpoint_for(request, j, *m);
    },
    [&](const std::string& line) { return log.append(line); }, seed * 16};
  owner.adopt(expected::replay(argv[2]));
  auto cfg = crash::config(argv[1], *m);
  cfg.on_write = [&](const write_event& ev) {
    if (!owner.on_write(ev) && ev.outcome == write_outcome::durable)
      log_failed |= !log.append('D', ev.ns, ev.tokens);
  };
  cfg.on_remove = [&](const remove_event& ev) {
    if (ev.kind == tiers::key_kind::prefix)
      log_failed |= !log.append('R', ev.ns, ev.tokens);
    owner.on_remove(ev);
  };
  std::mt19937_64 rng{seed};
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::automatic, q.sink());
  if (!engine)
    return 3;
  ssd_tier tier{cfg, fs, **engine};
  if (auto r = tier.open(); !r) {
    std::fprintf(stderr, "open: %s\n", describe(r.error()).c_str());
    return 4;
  }
  auto flush = [&] {
    bool flushed = false;
    tier.flush([&](const durability_evidence&) { flushed = true; });
    while (!flushed)
      for (auto& c : q.wait(std::chrono::milliseconds(10)))
        tier.handle(std::move(c));
  };
  for (uint64_t i = 0; i < count; ++i) {
    auto reason = i % 3 == 0 ? write_reason::demotion : write_reason::spill;
    (void)tier.enqueue(crash::entry_for(seed, i, *m), reason);
    if (i % 7 == 6) {
      // An entry written a few steps ago: durable, in flight or queued.
      auto gone = crash::entry_for(seed, i - 3, *m);
      log_failed |= !log.append('E', gone.ns, gone.tokens);
      tier.erase(gone.ns, gone.tokens);
    }
    if (i % 2 == 1)
      owner.save(tier, rng);
    if (i % 6 == 5)
      owner.complete(tier, rng);
    owner.erase_redundant(tier);
    std::printf("spill %llu\n", static_cast<unsigned long long>(i));
    std::fflush(stdout);
    if (i % 5 == 4)
      flush();
    else
      for (auto& c : q.wait(std::chrono::milliseconds(0)))
        tier.handle(std::move(c));
  }
  owner.erase_redundant(tier);
  flush();
  while (tier.busy())
    for (auto& c : q.wait(std::chrono::milliseconds(10)))
      tier.handle(std::move(c));
  if (log_failed || owner.failed()) {
    std::fprintf(stderr, "an expected-state line could not be written\n");
    return 5;
  }
  std::printf("done after %llu kill-point steps\n",
              static_cast<unsigned long long>(kill_steps_counted()));
  std::fflush(stdout);
  return 0;
}
