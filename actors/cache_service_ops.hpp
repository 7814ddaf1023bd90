// Internal to the cache_service facade's sources: the orchestrations too
// long for a handler lambda, one function per call. Each runs on the
// facade's thread with `self` and answers through the returned result (a
// value, a delegation, or a response promise delivered later).
#pragma once

#include "actors/cache_service.hpp"

namespace kvtier::actors::ops {

using self_ptr = cache_service_pointer;

/// Checkpoint, else RAM vs SSD (strictly longer wins), else fresh.
caf::result<sealed<msg::AcquireStateReply>>
acquire(self_ptr self, const sealed<msg::AcquireState>& m);

/// The lookup timer `id` fired: each acquire whose wait for the cold tiers
/// (`cold_wait_ms`) is over is decided with the answers it has, and so is
/// each whose tier deadline is over; a timer superseded by an earlier one
/// is ignored.
void lookup_timer_over(self_ptr self, uint64_t id);

/// Offers state to RAM; one naming a session is pinned there as its
/// newest entry and reported to the sessions actor.
caf::result<sealed<msg::PublishStateReply>>
publish(self_ptr self, const sealed<msg::PublishState>& m);

/// Peeks RAM, then cold reads of a strictly longer prefix only; the
/// restored donor is installed in RAM under the lease before the reply.
caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(self_ptr self, const sealed<msg::PrefetchPrefix>& m);

/// Ends a prefetch's interest in the SSD and RAM tiers.
caf::result<sealed<msg::ReleasePrefetchReply>>
release_prefetch(self_ptr self, const sealed<msg::ReleasePrefetch>& m);

/// The holders' snapshots, then the stores' flush evidence (every member
/// of the lifecycle list: durable only when each says so).
caf::result<sealed<msg::FlushStateReply>> flush(self_ptr self);

/// Flush, then clear; idempotent, concurrent closes share one result.
caf::result<sealed<msg::CloseServiceReply>> close(self_ptr self);

/// Pending persistence: every member's own fields, summed. A member that
/// does not answer adds nothing (the report names it silent, /health
/// fails); the call fails only when none answers.
caf::result<sealed<msg::ReadStatsReply>> stats(self_ptr self,
                                               const sealed<msg::ReadStats>& m);

/// Budget back (admission) and checkpoints settled, in one reply.
caf::result<sealed<msg::ReleaseRequestReply>>
release(self_ptr self, const sealed<msg::ReleaseRequest>& m);

/// Projects the request's bytes and asks the RAM tier whether they fit.
caf::result<sealed<msg::WouldKeepReply>> keeps(self_ptr self,
                                               const sealed<msg::WouldKeep>& m);

/// Every tier's part of the report, merged; the tiers that did not answer
/// by the tier deadline are named in it (silentTiers).
caf::result<sealed<msg::ReadReportReply>> report(self_ptr self);

/// Counts an acquire's answer `r` to `request` in the token tally: its
/// usable tokens (at most the prompt's) as served by its source, the rest
/// of the prompt as computed.
void count_tokens(self_ptr self, const sealed<msg::AcquireState>& request,
                  msg::AcquireStateReply::Reader r);

/// Saved prefixes on SSD, checkpoint files left out.
caf::result<sealed<msg::ListSavedPrefixesReply>> saved(self_ptr self);

/// The node that should serve a prompt: this node's RAM and SSD prefixes,
/// every up peer's (the peer tier's directory) and loads, weighed by the
/// cost model (tiers/routing.hpp). Reads only; any sender.
caf::result<sealed<msg::RouteRequestReply>>
route(self_ptr self, const sealed<msg::RouteRequest>& m);

/// The error of a call after close.
caf::error closed_error();

/// Whether the state `e` describes has the running model's shape (layer
/// count, kinds, bytes per token, windows, state sizes), from its layer
/// descriptors alone: `ec::invalid_argument` naming the layer and field,
/// `ec::malformed_message` for an undecodable message.
caf::error check_shape(self_ptr self, msg::Entry::Reader e);

} // namespace kvtier::actors::ops
