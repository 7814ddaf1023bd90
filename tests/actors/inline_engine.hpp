// An SSD I/O engine for actor tests on the deterministic scheduler: each op
// runs at once on the submitting thread, and the sink (the SSD actor's
// relay) turns its completion into an io_done message for later. The op,
// and the buffers it holds, goes before the completion is handed on, as
// with a real engine (tests that count live buffer bytes rely on it).
#pragma once

#include "tiers/ssd/io_engine.hpp"

#include <utility>

namespace kvtier::testing {

class inline_engine final : public tiers::ssd::io_engine {
public:
  explicit inline_engine(tiers::ssd::completion_sink sink)
    : sink_(std::move(sink)) {}

  void submit(tiers::ssd::io_op op) override {
    auto c = tiers::ssd::run_now(op);
    op = tiers::ssd::io_op{};
    sink_(std::move(c));
  }

  const char* name() const noexcept override {
    return "inline";
  }

private:
  tiers::ssd::completion_sink sink_;
};

} // namespace kvtier::testing
