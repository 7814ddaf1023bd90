// Session affinity: the table of open sessions, each with its newest entry
// (docs/actors.md "Sessions"). Plain single-threaded
// C++; the sessions actor owns the only instance.
//
// Policy. A session is open from its first noted put until `close`. Its
// newest entry is the last one it published that RAM kept; RAM protects
// that entry from eviction under a pin (`ram_tier::put` with
// `protection::pin` hands the pin id back). The table only remembers which
// pin names the newest entry, so the owner can take it back: `note_put`
// returns the previous newest entry (to unprotect) and `close` the last
// one. The table never deletes state and never knows whether RAM still
// holds an entry: the cap always wins there, and unprotecting an entry
// that is gone is a no-op.
//
// A put of the same key again returns the previous pin of that key: every
// pin is taken back exactly once, so the entry stays protected by its new
// pin only.
//
// Not an error: closing a session that is not open (twice, or one whose
// puts RAM never kept) returns nullopt and counts nothing.
#pragma once

#include "tiers/state.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace kvtier::tiers {

/// An entry in RAM (ns, exact tokens) and the pin that protects it there.
struct pinned_entry {
  std::string ns;
  token_seq tokens;
  /// The RAM tier's pin id (`put_result::pin`); never 0 for a real pin.
  uint64_t pin = 0;

  bool operator==(const pinned_entry&) const = default;
};

/// Every counter of the session table.
struct session_counters {
  /// Sessions that became open (a session closed and used again counts
  /// again).
  uint64_t opened = 0;
  /// Open sessions that `close` forgot.
  uint64_t closed = 0;
  /// Sessions open right now.
  uint64_t open = 0;
};

class sessions {
public:
  /// Records `newest` as `session`'s newest entry. Returns the entry it
  /// replaces as newest (its pin is to be dropped), or nullopt when the
  /// session was not open (it is open now).
  std::optional<pinned_entry> note_put(const std::string& session,
                                       pinned_entry newest);

  /// Forgets `session` and returns its newest entry (its pin is to be
  /// dropped); nullopt when it was not open.
  std::optional<pinned_entry> close(const std::string& session);

  /// `session`'s newest entry; null when it is not open. Valid until the
  /// next call that changes the table.
  const pinned_entry* newest(const std::string& session) const;

  /// Forgets every session without counting closes (the service closed;
  /// RAM is cleared with it, so no pin needs taking back).
  void clear();

  session_counters counters() const;

private:
  std::unordered_map<std::string, pinned_entry> open_;
  uint64_t opened_ = 0;
  uint64_t closed_ = 0;
};

} // namespace kvtier::tiers
