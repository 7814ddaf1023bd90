// The parts of a real SSD actor for actor tests on CAF's deterministic
// scheduler: the tier over a given file system (or an in-memory one of its
// own), opened, with an `inline_engine` whose completions reach the actor
// as io_done messages the scheduler orders, and the tier's reports routed
// to the actor's hooks. Spawn the actor with the result
// (`sys.spawn(actors::ssd_tier, inline_ssd(cfg))`).
#pragma once

#include "tests/actors/inline_engine.hpp"

#include "actors/ssd_tier_actor.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <memory>
#include <stdexcept>

namespace kvtier::testing {

/// `cfg` as given (a silent log when it has none); `fs` null: an in-memory
/// file system the parts own. Throws when the tier does not open.
inline std::shared_ptr<actors::ssd_parts>
inline_ssd(tiers::ssd::ssd_config cfg, tiers::ssd::file_system* fs = nullptr) {
  auto parts = std::make_shared<actors::ssd_parts>();
  if (fs == nullptr) {
    parts->own_fs = std::make_unique<tiers::ssd::memory_file_system>();
    fs = parts->own_fs.get();
  }
  parts->relay = std::make_shared<actors::completion_relay>();
  parts->engine = std::make_unique<tiers::ssd::counted_engine>(
    std::make_unique<inline_engine>(parts->relay->sink()));
  if (!cfg.log)
    cfg.log = [](const std::string&) {};
  parts->cap_bytes = cfg.byte_cap;
  actors::route_reports(cfg, *parts);
  parts->tier =
    std::make_unique<tiers::ssd::ssd_tier>(cfg, *fs, *parts->engine);
  if (auto scan = parts->tier->open(); !scan)
    throw std::runtime_error("the SSD tier did not open: "
                             + describe(scan.error()));
  return parts;
}

} // namespace kvtier::testing
