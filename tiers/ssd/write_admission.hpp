// What the SSD tier agrees to write (docs/ssd-format.md "Admission and the
// write budget"): the admission rule for eviction spills and the daily
// write budget. Plain single-threaded values; the SSD tier owns the rule,
// its write pipeline the budget, and the hit-ratio reference
// (runtime/tools/simulate.cpp) uses the same `spill_admission`, so the
// reference decides exactly as the service does.
//
// Admission (`ssd-tier.admission`). `all`: every spill is written (as
// before the option). `reused`: a spill of a prefix entry is written only
// when a spill of the same namespace and the same leading tokens (its
// first `lead_tokens`, or all of them when shorter) was asked for before
// within the memory: the first eviction of a conversation only remembers
// its key (a "doorkeeper"), a later one writes. The memory is a set of
// 64-bit key hashes, least recently asked first out, bounded by
// `memory_keys` (sized from the SSD cap at start, `memory_for`); each
// decision costs O(lead_tokens) to hash and O(1) to look up. A hash
// collision can only admit a write the rule would skip, never skip one it
// admits; and no decision makes state wrong: a skipped spill is a future
// miss.
//
// The budget (`ssd-tier.write-budget-bytes-per-day`, 0: none): bytes
// charged in any 24-hour window (t - 24 h, t] never exceed the budget.
// Charges are kept per minute in a ring of 1441 minutes; a charge at t is
// granted only when the minutes that may fall in (t - 24 h, t] — the
// oldest one whole — plus it stay within the budget. Every charge inside
// any window lies in those minutes, so the granted sum of any window is at
// most the budget (the check over-counts up to one minute of the past,
// never under-counts). Time only moves forward: a clock that steps back is
// read as the latest time seen.
#pragma once

#include "tiers/state.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvtier::tiers::ssd {

/// Which spills the SSD tier writes (`ssd-tier.admission`).
enum class admission_rule : uint8_t { all, reused };

/// "all" or "reused"; `ec::invalid_config` naming the word otherwise.
caf::expected<admission_rule> parse_admission_rule(std::string_view word);

const char* to_string(admission_rule r);

/// The admission rule with its bounded memory of recently spilled keys.
class spill_admission {
public:
  /// Leading tokens a key covers.
  static constexpr uint64_t lead_tokens = 1024;

  explicit spill_admission(admission_rule rule = admission_rule::all,
                           uint64_t memory_keys = 1024);

  /// Keys remembered for an SSD tier of `cap_bytes`: one per 64 KiB of
  /// the cap, at least 1024, at most 4 Mi (about 64 bytes each).
  static uint64_t memory_for(uint64_t cap_bytes);

  /// Whether a spill of (`ns`, `tokens`) is written; remembers its key
  /// (most recently asked) either way. Always true under `all`.
  bool admit(std::string_view ns, std::span<const token> tokens);

  admission_rule rule() const noexcept {
    return rule_;
  }
  uint64_t memory_keys() const noexcept {
    return cap_;
  }
  /// Keys remembered now (at most `memory_keys`).
  uint64_t remembered() const noexcept {
    return where_.size();
  }

  /// The key a spill is remembered by.
  static uint64_t key_of(std::string_view ns, std::span<const token> tokens);

private:
  admission_rule rule_;
  uint64_t cap_;
  std::list<uint64_t> order_; // front: least recently asked
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

/// Bytes written in any 24-hour window, bounded (see the header comment).
class write_budget {
public:
  static constexpr uint64_t minute_ms = 60'000;
  static constexpr uint64_t day_ms = 86'400'000;

  /// 0: no budget (every charge granted, nothing kept).
  explicit write_budget(uint64_t bytes_per_day = 0);

  /// Charges `bytes` at `now_ms` when the window allows them; false, and
  /// nothing charged, when they would exceed the budget.
  bool charge(uint64_t bytes, uint64_t now_ms);

  /// Bytes charged in the minutes the window at `now_ms` may hold (what
  /// `charge` would check against; 0 without a budget).
  uint64_t used(uint64_t now_ms) const;

  uint64_t limit() const noexcept {
    return limit_;
  }

private:
  void advance(uint64_t now_ms);

  uint64_t limit_;
  /// Bytes per minute, minute m at m % size.
  std::vector<uint64_t> minutes_;
  /// The newest minute advanced to, and the sum over the ring.
  uint64_t newest_ = 0;
  uint64_t sum_ = 0;
};

} // namespace kvtier::tiers::ssd
