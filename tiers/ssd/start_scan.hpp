// The SSD tier's start-up scan between its steps (`ssd_tier::index_step`):
// the listing taken at `open`, how far the scan got, what it found so far
// and what the tier was asked meanwhile that must wait for its end.
// Private to the tier's coordinator (ssd_tier*.cpp); single-owner, on the
// owner's thread; no I/O of its own.
#pragma once

#include "tiers/ssd/ssd_tier.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_set>

namespace kvtier::tiers::ssd {

struct ssd_tier::start_scan {
  /// The directory's names at `open`, sorted; [next, end) not scanned yet.
  std::vector<std::string> names;
  size_t next = 0;
  /// Names scanned out of order (an erase of a name not reached yet).
  std::unordered_set<std::string> scanned_early;
  scan_report report;
  uint64_t max_write_id = 0;
  /// Delta files found: indexed at the end, parents first (a parent may
  /// come later in the listing).
  std::vector<scanned_file> deltas;
  /// The files indexed, by their recorded recency, for the LRU rebuild:
  /// (mtime, write id, the name's place in `names`).
  struct seen {
    uint64_t mtime = 0;
    uint64_t write_id = 0;
    size_t at = 0;
  };
  std::vector<seen> order;
  /// Names a restore or prefetch used meanwhile: more recent than any
  /// mtime, they keep their place at the rebuild.
  std::unordered_set<std::string> used;
  /// Checkpoint removals asked for meanwhile: their identities are hidden
  /// from lookups, and each starts at the end.
  struct removal {
    uint64_t request = 0;
    std::string ns;
    removal_callback cb;
  };
  std::vector<removal> removals;
  std::chrono::steady_clock::time_point started =
    std::chrono::steady_clock::now();

  /// `name`'s place in the listing (it is there).
  size_t at(const std::string& name) const {
    return static_cast<size_t>(
      std::lower_bound(names.begin(), names.end(), name) - names.begin());
  }

  /// Whether `name` is in the listing and not scanned yet.
  bool unscanned(const std::string& name) const {
    if (scanned_early.count(name) > 0)
      return false;
    auto from = names.begin() + static_cast<std::ptrdiff_t>(next);
    auto i = std::lower_bound(from, names.end(), name);
    return i != names.end() && *i == name;
  }
};

} // namespace kvtier::tiers::ssd
