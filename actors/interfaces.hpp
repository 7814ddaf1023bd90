// Every typed actor interface of kvtier, one handler per line with what it
// does above it (docs/actors.md draws the map). Owned by actors/; runtime/
// spawns these roles (runtime/service/spawn.hpp) and the embedded API talks to
// the facade only.
//
// Messages are Cap'n Proto carriers (`msg::sealed<Root>`, messages/*.capnp):
// immutable, reference-counted, tensor bytes riding beside them by
// reference. A failure of a whole request travels as a `caf::error` with a
// kvtier `ec` code. Each actor is the only user of the tier object it owns,
// so no tier needs a lock; no actor waits on storage (the SSD actor's I/O
// completions come back to it as `io_done` messages).
#pragma once

#include "messages/type_ids.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::actors {

template <class Root>
using sealed = msg::sealed<Root>;

/// Shorthand for a request/reply pair `Root` -> `RootReply`.
#define KVTIER_CALL(Root)                                                      \
  caf::replies_to<sealed<msg::Root>>::with<sealed<msg::Root##Reply>>

/// One I/O engine completion, sent by the engine's thread to the SSD actor.
struct io_done {
  uint64_t tag = 0;
  caf::error err;
  uint64_t bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, io_done& x) {
  return f(caf::meta::type_name("kvtier::actors::io_done"), x.tag, x.err,
           x.bytes);
}

/// The timer tick of idle demotion (the facade sends it to itself).
using idle_tick_atom = caf::atom_constant<caf::atom("kvtidletck")>;

/// The facade's timer of one acquire's wait for the cold tiers (by id).
using cold_wait_atom = caf::atom_constant<caf::atom("kvtcoldwt")>;

/// The RAM actor's write-behind timer (it sends it to itself).
using write_behind_atom = caf::atom_constant<caf::atom("kvtwbtick")>;

/// A wait of the RAM actor (demotion, pressure relief) reached its
/// deadline; the number names the wait.
using wait_deadline_atom = caf::atom_constant<caf::atom("kvtwaitdl")>;

/// The SSD actor's retry timer of one failed write (by queue item id).
using retry_write_atom = caf::atom_constant<caf::atom("kvtretry")>;

/// The SSD actor's next batch of its start-up scan (it sends it to itself
/// until the scan is over; requests queued meanwhile run between batches).
using index_step_atom = caf::atom_constant<caf::atom("kvtindex")>;

/// The SSD actor's next round of a flush that waits for retries.
using flush_round_atom = caf::atom_constant<caf::atom("kvtflushrd")>;

/// A prefetch read of the SSD actor reached its deadline (by lease).
using prefetch_deadline_atom = caf::atom_constant<caf::atom("kvtpfdl")>;

/// The serving side of a peer fetch asks the RAM actor for an entry to
/// export (actors/serve_actor.hpp).
using export_atom = caf::atom_constant<caf::atom("kvtexport")>;

/// One change of what this node holds, told to the event feed by the RAM
/// actor (kind put, evict, demote, superseded; tier RAM) and the SSD actor
/// (durable, removed; tier SSD). Local only. `kind` and `tier` are
/// msg::FeedKind and msg::FeedTier values (messages/feed.capnp).
struct feed_change {
  uint8_t kind = 0;
  uint8_t tier = 0;
  std::string ns;
  std::vector<uint32_t> key;
  /// Bytes a fetch would move (layers only).
  uint64_t bytes = 0;
  bool trimmable = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feed_change& x) {
  return f(caf::meta::type_name("kvtier::actors::feed_change"), x.kind, x.tier,
           x.ns, x.key, x.bytes, x.trimmable);
}

/// The feed's end of a turn: pushes the events numbered since the last one
/// as one batch per subscriber (it sends it to itself).
using feed_flush_atom = caf::atom_constant<caf::atom("kvtfdflush")>;

/// A local subscriber: (atom, subscriber, from_now) subscribes an actor of
/// this process; replies with the feed's current seq.
using feed_local_atom = caf::atom_constant<caf::atom("kvtfdlocal")>;

/// Ends a subscription (the subscriber's handle).
using feed_drop_atom = caf::atom_constant<caf::atom("kvtfddrop")>;

/// The node id the feed names in its batches and snapshots (once the
/// cluster node knows its own; local only).
using feed_name_atom = caf::atom_constant<caf::atom("kvtfdname")>;

/// Test hook, local only: the feed skips this many sequence numbers (its
/// next event leaves a gap), replies with the feed's seq after the skip.
using feed_skip_atom = caf::atom_constant<caf::atom("kvtfdskip")>;

/// The feed's seq, subscriber count and ring length (tests, reports).
using feed_stats_atom = caf::atom_constant<caf::atom("kvtfdstats")>;

/// Once, at wiring: the event feed the RAM or SSD actor tells of changes.
using attach_feed_atom = caf::atom_constant<caf::atom("kvtattfeed")>;

/// Every tier's lifecycle (the RAM, SSD, peer and any new tier, and the
/// roles beside them: admission, sessions, checkpoints). The facade holds
/// them as one list (`service_actors::lifecycle`) and loops over it for
/// flush, close, stats and report; a tier implements all four calls.
/// FlushState answers durable when nothing the tier holds is left without
/// a durable copy (a tier that holds nothing of the kind answers durable);
/// CloseService releases what the tier holds and refuses later work (a
/// store's result says durable when it released nothing unwritten, and
/// counts what it did release as `abandoned`);
/// ReadStats fills the fields of its own pending work (others stay 0: the
/// facade sums the replies); ReadReport fills its own section (a new tier:
/// its declared counters in `tiers`, see tiers/counters.hpp).
using lifecycle_actor = caf::typed_actor<
  // Makes what the tier holds durable as far as it can; the evidence.
  KVTIER_CALL(FlushState),
  // Releases what the tier holds; later work is refused.
  KVTIER_CALL(CloseService),
  // Its pending persistence (its own fields of ReadStatsReply).
  KVTIER_CALL(ReadStats),
  // Its part of the report.
  KVTIER_CALL(ReadReport)>;

/// Who hears that a store stopped holding an entry (the RAM actor for
/// prefix and object files, the checkpoints actor for checkpoint files).
using spill_listener_actor =
  caf::typed_actor<caf::reacts_to<sealed<msg::SsdEvictEvent>>>;

/// The event feed (actors/feed_actor.hpp): numbers every change of what
/// this node holds, keeps a bounded ring of the latest events and the table
/// of what each tier holds, and pushes FeedBatch messages to subscribers.
using feed_actor = caf::typed_actor<
  // One change from the RAM or SSD actor: numbered, applied, queued.
  caf::reacts_to<feed_change>,
  // The end of a turn: one FeedBatch per subscriber.
  caf::reacts_to<feed_flush_atom>,
  // A subscription (a peer's follower through its node actor, or local):
  // the events from fromSeq held in the ring, or a snapshot.
  KVTIER_CALL(SubscribeFeed),
  // A local subscriber actor (from_now: no replay); the current seq.
  caf::replies_to<feed_local_atom, caf::actor, bool>::with<uint64_t>,
  // Ends a subscription (unknown subscribers are no error).
  caf::reacts_to<feed_drop_atom, caf::actor>,
  // The node id batches and snapshots name.
  caf::reacts_to<feed_name_atom, std::string>,
  // Test hook (local only): leave a gap of n sequence numbers.
  caf::replies_to<feed_skip_atom, uint64_t>::with<uint64_t>,
  // The seq, how many subscribers, how many events the ring holds.
  caf::replies_to<feed_stats_atom>::with<uint64_t, uint64_t, uint64_t>>;

/// Owns the RAM tier (tiers/ram_tier.hpp); sends spill orders to its store,
/// never waits. Its lifecycle: FlushState snapshots every entry not yet
/// durable to the store (replies once queued; without a store, durable
/// only when it holds nothing), CloseService clears everything without
/// spilling, ReadStats its write-behind snapshots waiting, ReadReport the
/// RAM and object parts and protected entries.
using ram_tier_actor = lifecycle_actor::extend<
  // An acquire's RAM lookup: lends views of the best usable donor (counted
  // as a hit or miss) as the engine's reply, which the facade forwards
  // unchanged when RAM wins.
  KVTIER_CALL(AcquireState),
  // Usable prefix length in RAM; changes no recency and no hit counter.
  KVTIER_CALL(PeekPrefix),
  // A peer's fetch: the longest usable prefix of the prompt longer than
  // betterThan, trimmed, as a restored entry (`failed` not_found: none);
  // counts no hit or miss, changes recency by a touch only.
  caf::replies_to<export_atom, sealed<msg::FetchEntry>>::with<
    sealed<msg::RestoreEntryReply>>,
  // Stores offered state (pinned when protect is set); evictions leave as
  // SpillEntry orders to the SSD.
  KVTIER_CALL(PublishState),
  // Places a restored entry (durable) with an optional interest lease.
  KVTIER_CALL(InstallEntry),
  // Whether state of this many projected bytes could be kept.
  KVTIER_CALL(KeepsBytes),
  // Idle entries: made durable (written when needed), then removed;
  // answered by the storage deadline with what left.
  KVTIER_CALL(DemoteIdle),
  // Pops LRU entries to the target; replies once their writes settled (or
  // by the deadline) with the bytes really freed.
  KVTIER_CALL(RelievePressure),
  // Drops durable copies, then optional entries; no I/O.
  KVTIER_CALL(ReclaimAtBoundary),
  // Takes one pin off an entry (from the sessions actor); deletes nothing.
  KVTIER_CALL(UnprotectEntry),
  // Ends the interest of a prefetch lease on every item it holds.
  KVTIER_CALL(ReleasePrefetch),
  // Stores an exact tensor object under the same budget.
  KVTIER_CALL(PutObject),
  // The object under a key, as views.
  KVTIER_CALL(GetObject),
  // An SSD file went: clears the durable marks it gave (from the SSD).
  caf::reacts_to<sealed<msg::SsdEvictEvent>>,
  // One outcome of a write this actor ordered (from the SSD).
  caf::reacts_to<sealed<msg::SpillSettled>>,
  // The write-behind timer: snapshots whose delay passed, within budget.
  caf::reacts_to<write_behind_atom>,
  // A demotion or relief waited until its deadline: answer it now.
  caf::reacts_to<wait_deadline_atom, uint64_t>,
  // Once, at wiring: the event feed told of every change of what RAM
  // holds (put, evict, demote, superseded).
  caf::reacts_to<attach_feed_atom, feed_actor>>;

/// A checkpoint file the SSD tier's start-up scan indexed after the
/// service started serving, by its header's key and write id.
struct found_checkpoint {
  uint64_t request = 0;
  uint32_t attempt = 0;
  std::string ns;
  std::vector<uint32_t> tokens;
  uint64_t write_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, found_checkpoint& x) {
  return f(caf::meta::type_name("kvtier::actors::found_checkpoint"), x.request,
           x.attempt, x.ns, x.tokens, x.write_id);
}

/// SSD -> checkpoints, local only: checkpoint files the start-up scan
/// indexed since the last batch (docs/ssd-format.md "Start-up"); each is
/// still held when sent, and every removal of one follows this message.
struct found_checkpoints {
  std::vector<found_checkpoint> files;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, found_checkpoints& x) {
  return f(caf::meta::type_name("kvtier::actors::found_checkpoints"), x.files);
}

/// Owns the checkpoints (tiers/checkpoints.hpp): resumable generations.
/// Its lifecycle: FlushState writes every checkpoint not yet durable to the
/// store (replies once queued), CloseService forgets every checkpoint held
/// in memory (files stay), ReadStats nothing of its own (its writes are the
/// store's pending checkpoint writes), ReadReport the checkpoints part.
using checkpoints_actor = lifecycle_actor::extend<
  // Keeps the newest resumable point of a request's generation.
  KVTIER_CALL(SaveCheckpoint),
  // The request's newest checkpoint (restored from SSD after a restart).
  KVTIER_CALL(FindCheckpoint),
  // Completed: removes the request's checkpoints; interrupted: keeps them.
  KVTIER_CALL(ReleaseRequest),
  // A checkpoint file went: the checkpoint held in memory whose file it
  // was is no longer durable (from the SSD).
  caf::reacts_to<sealed<msg::SsdEvictEvent>>,
  // Checkpoint files the SSD's start-up scan found while serving: each
  // resumable from now on (from the SSD).
  caf::reacts_to<found_checkpoints>>;

/// Any cold tier: a tier that holds prefix state outside RAM (the SSD
/// tier, a peer node) and that the facade consults for every acquire and
/// prefetch. The facade holds an ordered list of them (actors/
/// cache_service.hpp) and applies the strictly-longer rule tier by tier:
/// RAM first, then each cold tier in order; a later tier is used only when
/// its candidate is strictly longer than every earlier one. Every request
/// to a cold tier carries the facade's tier deadline; a tier that does not
/// answer by it is "no candidate" for that request, a tier actor that goes
/// down is dropped from the list. A new tier implements these four
/// handlers (its actor type may extend them) and nothing else changes.
using cold_tier_actor = caf::typed_actor<
  // The longest usable prefix of `prompt` in `ns` this tier holds, longer
  // than betterThan (usableTokens 0: no candidate), and the key of the
  // entry it would restore; from an index only, no data read.
  KVTIER_CALL(FindPrefix),
  // Reads the entry of `key` back, trimmed to usableTokens: the state, or
  // `failed` with the reason (a failed restore is "no candidate").
  KVTIER_CALL(RestoreEntry),
  // Starts (or joins) the read of the prompt's best entry when it is longer
  // than betterThan; replies when done with a lease (0: nothing read) and
  // the restored entry, which the facade installs in RAM under the lease.
  KVTIER_CALL(PrefetchPrefix),
  // Ends a prefetch lease's interest (an unknown lease is no error).
  KVTIER_CALL(ReleasePrefetch)>;

/// Once, at wiring: tells a store where the events of entry files it stops
/// holding go (prefix and object files; the RAM actor).
using attach_ram_atom = caf::atom_constant<caf::atom("kvtattram")>;

/// Once, at wiring: where the events of checkpoint files a store stops
/// holding go (the checkpoints actor).
using attach_ckpt_atom = caf::atom_constant<caf::atom("kvtattckpt")>;

/// A store: a cold tier that also takes entries spilled to it, with a
/// lifecycle: the spill target the RAM and checkpoints actors hold (the
/// SSD tier; a test tier in a map shows that any tier can be one,
/// tests/actors/map_tier.hpp). The composed interface a new tier
/// implements: the reads of a cold tier, the lifecycle, and these:
using store_actor = cold_tier_actor::extend_with<lifecycle_actor>::extend<
  // Keeps an entry (or a checkpoint, or an object) durably; replies
  // when durable, failed or dropped, or, with notify, at once (every
  // outcome follows as a SpillSettled event to the sender).
  KVTIER_CALL(SpillEntry),
  // Removes what it holds of exactly one key; cancels its pending writes.
  KVTIER_CALL(EraseEntry),
  // A completed generation: removes every checkpoint of an identity;
  // replies once the removal is durable.
  KVTIER_CALL(RemoveCheckpoints),
  // Once, at wiring: who hears of every prefix or object entry it stops
  // holding (an SsdEvictEvent each, after any reply that called it
  // durable).
  caf::reacts_to<attach_ram_atom, spill_listener_actor>,
  // Once, at wiring: who hears of every checkpoint it stops holding.
  caf::reacts_to<attach_ckpt_atom, spill_listener_actor>>;

/// One entry a peer holds or stopped holding (tiers/peer_directory.hpp).
struct directory_item {
  std::string ns;
  std::vector<uint32_t> key;
  /// tiers::peer_tier: 0 RAM, 1 SSD.
  uint8_t tier = 0;
  /// Bytes a fetch would move.
  uint64_t bytes = 0;
  bool trimmable = false;
  /// Held (put) or no longer held (removed).
  bool present = true;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, directory_item& x) {
  return f(caf::meta::type_name("kvtier::actors::directory_item"), x.ns, x.key,
           x.tier, x.bytes, x.trimmable, x.present);
}

/// Changes of what one peer node holds, in the order its feed numbered
/// them, for the peer tier's directory. With `replace`, everything the node
/// held before goes first (a snapshot after a gap, a late join or a
/// rejoin). Sent by the feed follower, local only.
struct directory_batch {
  std::string node;
  bool replace = false;
  std::vector<directory_item> items;
  /// Why a `replace` batch came (one of the reasons below); 0 for ordinary
  /// batches.
  uint8_t why = 0;
  /// The first sync with the node: a late join, a rejoin.
  static constexpr uint8_t first_sync = 1;
  /// A gap in the node's sequence.
  static constexpr uint8_t after_gap = 2;
  /// The node restarted (another incarnation).
  static constexpr uint8_t after_restart = 3;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, directory_batch& x) {
  return f(caf::meta::type_name("kvtier::actors::directory_batch"), x.node,
           x.replace, x.items, x.why);
}

/// A peer node was accepted (first time or again after being down), with
/// its node actor (actors/node_actor.hpp); told to every cluster
/// listener of a node.
using peer_up_atom = caf::atom_constant<caf::atom("kvtpeerup")>;

/// A peer node went down (silent, disconnected, left).
using peer_down_atom = caf::atom_constant<caf::atom("kvtpeerdn")>;

/// A peer's heartbeat: its node id, HOST:PORT and load (msg::NodeLoad);
/// told to every cluster listener of a node (the peer tier keeps it for
/// routing). Without the load: its address, told right after its
/// peer_up_atom, so routes name where it is before its first heartbeat.
using peer_load_atom = caf::atom_constant<caf::atom("kvtpeerld")>;

/// Once the node is published: this node's id and HOST:PORT as its peers
/// know it (the facade names itself so in its route answers).
using node_name_atom = caf::atom_constant<caf::atom("kvtnodenm")>;

/// Owns the SSD tier (tiers/ssd/ssd_tier.hpp) and its I/O engine: the
/// service's store (above). It tells the RAM actor of every entry file it
/// stops holding (SsdEvictEvent), and the checkpoints actor of every
/// checkpoint file; FindPrefix is also how the RAM actor confirms that a
/// restored entry's file is still there; RestoreEntry also reads objects
/// for the RAM actor. Its FlushState writes everything queued and replies
/// with the durability evidence; CloseService (after the flush) releases
/// writes not running, drops prefetch results, refuses later writes and
/// replies (abandoned count) once no write runs; ReadStats its pending
/// writes by reason; ReadReport the SSD part and its I/O counters. With
/// the SSD's own calls:
using ssd_tier_actor = store_actor::extend<
  // The saved prefixes, from headers only.
  KVTIER_CALL(ListSavedPrefixes),
  // The byte cap from now on; lowering it evicts LRU files at once.
  KVTIER_CALL(SetSsdLimit),
  // One I/O engine completion.
  caf::reacts_to<io_done>,
  // A failed write's backoff passed: try it again.
  caf::reacts_to<retry_write_atom, uint64_t>,
  // A flush waiting for retries runs its next round.
  caf::reacts_to<flush_round_atom>,
  // The next batch of the start-up scan (sent to itself).
  caf::reacts_to<index_step_atom>,
  // A prefetch read took too long: its lease ends, the prefetch answers.
  caf::reacts_to<prefetch_deadline_atom, uint64_t>,
  // Once, at wiring: the event feed told of every prefix file written
  // (durable) or gone (removed); the files held now are told at once.
  caf::reacts_to<attach_feed_atom, feed_actor>>;

/// A bulk-lane read of the peer tier finished (fetch id, attempt); its
/// result waits in the fetch (from the lane's thread).
using lane_done_atom = caf::atom_constant<caf::atom("kvtlanedn")>;

/// A peer fetch reached cluster.fetch-deadline-ms (by fetch id).
using fetch_deadline_atom = caf::atom_constant<caf::atom("kvtfetchdl")>;

/// The peer tier: a cold tier over what other nodes hold (a directory fed
/// by their event feeds), fetching an entry from its holder's node
/// (actors/peer_tier_actor.hpp). Its lifecycle: FlushState durable (it
/// holds copies of other nodes' state, none of its own to make durable),
/// CloseService ends its fetches and prefetch results, ReadStats nothing,
/// ReadReport the peer part (ReadReportReply::peer only).
using peer_tier_actor = cold_tier_actor::extend_with<lifecycle_actor>::extend<
  // A lane read finished: verify and hand up, or try the next holder.
  caf::reacts_to<lane_done_atom, uint64_t, uint64_t>,
  // A fetch's deadline: it fails `timeout` unless done.
  caf::reacts_to<fetch_deadline_atom, uint64_t>,
  // What a peer holds changed (from the feed follower).
  caf::reacts_to<directory_batch>,
  // A peer is up behind this node actor: its entries may be fetched.
  caf::reacts_to<peer_up_atom, std::string, caf::actor>,
  // A peer is down: everything it held leaves the directory.
  caf::reacts_to<peer_down_atom, std::string>,
  // A peer's heartbeat: its address and load, for routing.
  caf::reacts_to<peer_load_atom, std::string, std::string,
                 sealed<msg::NodeLoad>>,
  // A peer just up: its address, before any heartbeat.
  caf::reacts_to<peer_load_atom, std::string, std::string>,
  // Every up peer's longest usable prefixes of a prompt, and its load.
  KVTIER_CALL(PeerHoldings)>;

/// Owns admission (tiers/admission.hpp): the KV budget, position limit.
/// Its lifecycle: CloseService ends admission (queued admits fail
/// `closed`, so do later ones; the facade closes it first), FlushState
/// durable and ReadStats nothing (it holds no state), ReadReport the
/// admission part.
using admission_actor = lifecycle_actor::extend<
  // Holds the projected bytes, answers wait, or queues (awaitable admit).
  KVTIER_CALL(AdmitRequest),
  // Whether AdmitRequest would admit now; holds nothing.
  KVTIER_CALL(FitsRequest),
  // Returns the budget and admits queued requests in arrival order.
  KVTIER_CALL(ReleaseRequest)>;

/// Owns session affinity (tiers/sessions.hpp): each open session's newest
/// entry, whose pin in RAM it takes back when the session moves on. Its
/// lifecycle: CloseService forgets every session (RAM is cleared beside
/// it), FlushState durable and ReadStats nothing (a session table is not
/// state to persist), ReadReport the open, opened and closed counts.
using sessions_actor = lifecycle_actor::extend<
  // A session's newest entry; the previous one is unprotected in RAM.
  caf::reacts_to<sealed<msg::SessionPutEvent>>,
  // Forgets a session; replies once RAM took its newest entry's pin back.
  KVTIER_CALL(CloseSession)>;

/// The facade (actors/cache_service.hpp): orchestrates, owns no data.
using cache_service_actor = caf::typed_actor<
  // The request's checkpoint, else its longest usable prefix, else fresh.
  KVTIER_CALL(AcquireState),
  // Longest usable prefix in RAM; takes nothing.
  KVTIER_CALL(PeekPrefix),
  // Offers state for reuse; the cache keeps or drops it.
  KVTIER_CALL(PublishState),
  // Whether state the request would publish could be kept.
  KVTIER_CALL(WouldKeep),
  // Holds the request's projected bytes, or wait, or queue.
  KVTIER_CALL(AdmitRequest),
  // Whether AdmitRequest would admit now.
  KVTIER_CALL(FitsRequest),
  // Budget back; checkpoints settled.
  KVTIER_CALL(ReleaseRequest),
  // Saves a resumable point of a generation.
  KVTIER_CALL(SaveCheckpoint),
  // Drops a session's affinity.
  KVTIER_CALL(CloseSession),
  // Starts cold reads of a prefix longer than RAM's; the restored donor is
  // held for the lease.
  KVTIER_CALL(PrefetchPrefix),
  // Ends a prefetch's interest.
  KVTIER_CALL(ReleasePrefetch),
  // Makes every kept prefix and checkpoint durable as far as possible.
  KVTIER_CALL(FlushState),
  // Flush, then clear; idempotent; concurrent closes share one result.
  KVTIER_CALL(CloseService),
  // Demotes entries idle for idleMs (none without a cold tier).
  KVTIER_CALL(DemoteIdle),
  // Stops the idle-demotion timer.
  KVTIER_CALL(StopIdleDemotion),
  // Releases LRU entries down to a target, finishing their writes.
  KVTIER_CALL(RelievePressure),
  // An execution boundary: optional snapshots back, no I/O.
  KVTIER_CALL(ReclaimAtBoundary),
  // Pending persistence.
  KVTIER_CALL(ReadStats),
  // Every counter.
  KVTIER_CALL(ReadReport),
  // Token prefixes on SSD.
  KVTIER_CALL(ListSavedPrefixes),
  // The SSD tier's byte cap from now on (its owner's live limit).
  KVTIER_CALL(SetSsdLimit),
  // Stores an exact tensor object.
  KVTIER_CALL(PutObject),
  // Reads an exact tensor object.
  KVTIER_CALL(GetObject),
  // The node that should serve a prompt (tiers/routing.hpp); reads only.
  KVTIER_CALL(RouteRequest),
  // Once published: this node's id and address (for route answers).
  caf::reacts_to<node_name_atom, std::string, std::string>,
  // The idle-demotion timer fired.
  caf::reacts_to<idle_tick_atom>,
  // An acquire's wait for the cold tiers after RAM's hit is over (by id).
  caf::reacts_to<cold_wait_atom, uint64_t>>;

} // namespace kvtier::actors
