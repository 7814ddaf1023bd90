// Internal to the peer tier actor's sources (actors/peer_tier_*.cpp): its
// state, and the fetch of an entry from the peers that hold it (one fetch
// per holder, namespace and length, coalesced; holders tried in order
// under one deadline; the lane or chunked pulls; the verified result
// handed to every waiter and, when configured, written to the local SSD),
// called on the actor's thread.
#pragma once

#include "actors/peer_tier_actor.hpp"

#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "tiers/peer_directory.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

namespace kvtier::actors::peer_ops {

using clock_type = std::chrono::steady_clock;
using restore_promise =
  caf::typed_response_promise<sealed<msg::RestoreEntryReply>>;
using prefetch_promise =
  caf::typed_response_promise<sealed<msg::PrefetchPrefixReply>>;
using report_promise =
  caf::typed_response_promise<sealed<msg::ReadReportReply>>;

/// Namespaces a FindPrefix may name.
constexpr size_t max_ns_bytes = 4096;

struct counters {
  uint64_t finds = 0, over_cap = 0, fetches = 0, fetched = 0, bytes = 0,
           coalesced = 0, lane_fetches = 0, chunk_fetches = 0, failed_none = 0,
           failed_unreachable = 0, failed_timeout = 0, failed_corrupt = 0,
           failed_other = 0, written_to_ssd = 0, ssd_write_failed = 0;
  /// Snapshots applied, and of them those after a gap or a restart.
  uint64_t feed_snapshots = 0, feed_gap_resyncs = 0, feed_restart_resyncs = 0;
  uint64_t refused_remote = 0;
};

/// One waiter of a fetch: a restore or a prefetch.
struct waiter {
  std::optional<restore_promise> restore;
  std::optional<prefetch_promise> prefetch;
  bool joined = false;
};

/// Where a lane thread leaves its result before it tells the actor.
struct lane_slot {
  caf::expected<buffer_ref> result{caf::error{}};
};

/// What coalesces: the first holder, the namespace, the usable tokens.
using fetch_key = std::tuple<std::string, std::string, tiers::token_seq>;

struct fetch {
  fetch_key key;
  std::string ns;
  /// The prompt asked (usable + 1 tokens) and the tokens it must serve.
  tiers::token_seq prompt;
  uint64_t usable = 0;
  /// Holders still to try, in order; `holder` is the one asked now.
  std::vector<std::string> holders;
  std::string holder;
  caf::actor holder_handle;
  uint64_t attempt = 0;
  /// Bytes this fetch counts against fetch-max-bytes.
  uint64_t reserved = 0;
  clock_type::time_point deadline;
  std::vector<waiter> waiters;
  /// The holder's transfer, once it offered one.
  uint64_t transfer_id = 0;
  bool has_transfer = false;
  std::shared_ptr<lane_slot> slot;
  std::optional<msg::transfer_pull> pull;
  caf::error last_error;
};

struct peer_tier_state {
  static inline const char* name = "peer-tier";
  peer_tier_config cfg;
  tiers::model_geometry geometry;
  /// The local store fetched entries are written to (fetched-to-ssd).
  store_actor ssd;
  caf::actor serve;
  /// CloseService ran: no fetch starts, no candidate is offered.
  bool closed = false;
  tiers::peer_directory directory;
  std::map<std::string, caf::actor> peers;
  /// Each up peer's address and load, from its last heartbeat (routing).
  std::map<std::string,
           std::pair<std::string, std::optional<sealed<msg::NodeLoad>>>>
    loads;
  std::map<uint64_t, fetch> fetches;
  std::map<fetch_key, uint64_t> by_key;
  uint64_t next_fetch = 1;
  uint64_t in_flight = 0;
  std::set<uint64_t> leases;
  uint64_t next_lease = 1;
  uint64_t next_order = 1;
  counters count;
  /// Lane reads run here; declared last, so its destructor (which joins
  /// them, each bounded by its deadline) runs first.
  std::unique_ptr<msg::bulk_jobs> jobs = std::make_unique<msg::bulk_jobs>();
};

using self_ptr = peer_tier_actor::stateful_pointer<peer_tier_state>;

/// Fetch `id` while `attempt` is still its current one; nullptr when it
/// ended or moved on to another holder (a late reply is then ignored).
inline fetch* current(self_ptr self, uint64_t id, uint64_t attempt) {
  auto i = self->state.fetches.find(id);
  return i == self->state.fetches.end() || i->second.attempt != attempt
           ? nullptr
           : &i->second;
}

/// Whether `h` names a loopback address.
bool loopback_host(const std::string& h);

/// Whether a fetch of `bytes` fits the bytes in flight.
bool fits(self_ptr self, uint64_t bytes);

/// Counts a failed fetch attempt by its error's kind.
void count_failure(self_ptr self, const caf::error& err);

/// Ends fetch `id`: every waiter gets `r` (an entry) or `err`.
void finish(self_ptr self, uint64_t id,
            std::optional<sealed<msg::RestoreEntryReply>> r, caf::error err);

/// This holder failed with `err`: counted, then the next holder.
void attempt_failed(self_ptr self, uint64_t id, caf::error err);

/// The verified message of the holder (see peer_tier_fetch.cpp).
void verified(self_ptr self, uint64_t id,
              caf::expected<sealed<msg::RestoreEntryReply>> r);

/// Starts a fetch of `usable` tokens of `prompt` in `ns` from holders `hs`
/// (cheapest first) for waiter `w`, or joins the same fetch running.
void start_fetch(self_ptr self, std::string ns, tiers::token_seq prompt,
                 uint64_t usable, const std::vector<tiers::peer_holding>& hs,
                 waiter w);

} // namespace kvtier::actors::peer_ops
