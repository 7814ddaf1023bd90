// An I/O engine that counts what is submitted to another engine, so the
// service can show that a code path did no storage I/O (a reclaim boundary)
// and report operations per tier. Owned with the SSD tier by the SSD actor;
// `submit` and `counts` are called from the owner thread only, so the
// counters are plain integers.
#pragma once

#include "tiers/ssd/io_engine.hpp"

#include <memory>

namespace kvtier::tiers::ssd {

/// Ops submitted, by kind.
struct io_op_counts {
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t syncs = 0;
  uint64_t calls = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;

  uint64_t submitted() const noexcept {
    return reads + writes + syncs + calls;
  }
};

class counted_engine final : public io_engine {
public:
  explicit counted_engine(std::unique_ptr<io_engine> inner)
    : inner_(std::move(inner)) {}

  void submit(io_op op) override {
    switch (op.kind) {
      case io_kind::read:
        ++counts_.reads;
        counts_.bytes_read += op.length;
        break;
      case io_kind::write:
        ++counts_.writes;
        counts_.bytes_written += op.length;
        break;
      case io_kind::sync: ++counts_.syncs; break;
      case io_kind::call: ++counts_.calls; break;
    }
    inner_->submit(std::move(op));
  }

  const char* name() const noexcept override {
    return inner_->name();
  }

  const io_op_counts& counts() const noexcept {
    return counts_;
  }

private:
  std::unique_ptr<io_engine> inner_;
  io_op_counts counts_;
};

} // namespace kvtier::tiers::ssd
