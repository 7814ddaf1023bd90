// Every message root kvtier sends, and their registration with CAF 0.17.6:
// one type-ID block (`caf::id_block::kvtier`) holding `sealed<Root>` for
// each root listed in KVTIER_MESSAGE_ROOTS. Owned by messages/; a new
// message is added by appending its root to the list (ids follow the list
// order, so append only).
//
// In-process sending needs no registration (carriers are inspectable, so
// `caf::make_message` accepts them). Sending through CAF's middleman needs
// the type names: call `register_message_types(cfg)` on every node's
// config before the actor system starts. Other folders that need CAF type
// ids start their own block at `caf::id_block::kvtier::end`.
#pragma once

#include "messages/cluster.capnp.h"
#include "messages/feed.capnp.h"
#include "messages/membership.capnp.h"
#include "messages/replay.capnp.h"
#include "messages/sealed.hpp"
#include "messages/service.capnp.h"
#include "messages/tiers.capnp.h"

#include <caf/type_id.hpp>

namespace caf {
class actor_system_config;
}

// clang-format off
/// X-macro over every message root, in id order (service.capnp, then
/// tiers.capnp, then cluster.capnp, then later additions). Append only.
#define KVTIER_MESSAGE_ROOTS(X)                                                \
  X(PeekPrefix) X(PeekPrefixReply)                                             \
  X(AcquireState) X(AcquireStateReply)                                         \
  X(PublishState) X(PublishStateReply)                                         \
  X(WouldKeep) X(WouldKeepReply)                                               \
  X(AdmitRequest) X(AdmitRequestReply)                                         \
  X(FitsRequest) X(FitsRequestReply)                                           \
  X(ReleaseRequest) X(ReleaseRequestReply)                                     \
  X(SaveCheckpoint) X(SaveCheckpointReply)                                     \
  X(CloseSession) X(CloseSessionReply)                                         \
  X(PrefetchPrefix) X(PrefetchPrefixReply)                                     \
  X(ReleasePrefetch) X(ReleasePrefetchReply)                                   \
  X(FlushState) X(FlushStateReply)                                             \
  X(CloseService) X(CloseServiceReply)                                         \
  X(DemoteIdle) X(DemoteIdleReply)                                             \
  X(StopIdleDemotion) X(StopIdleDemotionReply)                                 \
  X(RelievePressure) X(RelievePressureReply)                                   \
  X(ReclaimAtBoundary) X(ReclaimAtBoundaryReply)                               \
  X(ReadStats) X(ReadStatsReply)                                               \
  X(ReadReport) X(ReadReportReply)                                             \
  X(ListSavedPrefixes) X(ListSavedPrefixesReply)                               \
  X(PutEvent)                                                                  \
  X(PutObject) X(PutObjectReply)                                               \
  X(GetObject) X(GetObjectReply)                                               \
  X(FindPrefix) X(FindPrefixReply)                                             \
  X(RestoreEntry) X(RestoreEntryReply)                                         \
  X(SpillEntry) X(SpillEntryReply)                                             \
  X(FindCheckpoint) X(FindCheckpointReply)                                     \
  X(PeerPutEvent) X(PeerEvictEvent)                                            \
  X(FetchEntry) X(FetchEntryReply)                                             \
  X(FetchChunk) X(FetchChunkReply)                                             \
  X(CancelTransfer) X(CancelTransferReply)                                     \
  X(InstallEntry) X(InstallEntryReply)                                         \
  X(SsdEvictEvent)                                                             \
  X(KeepsBytes) X(KeepsBytesReply)                                             \
  X(EraseEntry) X(EraseEntryReply)                                             \
  X(SessionPutEvent)                                                           \
  X(UnprotectEntry) X(UnprotectEntryReply)                                     \
  X(RemoveCheckpoints) X(RemoveCheckpointsReply)                               \
  X(SetSsdLimit) X(SetSsdLimitReply)                                           \
  X(SpillSettled)                                                              \
  X(ClusterHello) X(ClusterHelloReply)                                         \
  X(ClusterHeartbeat)                                                          \
  X(ClusterLeave) X(ClusterLeaveReply)                                         \
  X(ListMembers) X(ListMembersReply)                                           \
  X(FeedBatch) X(SubscribeFeed) X(SubscribeFeedReply)                         \
  X(FeedSnapshot)                                                              \
  X(RouteRequest) X(RouteRequestReply)                                         \
  X(PeerHoldings) X(PeerHoldingsReply)                                         \
  X(NodeLoad)                                                                  \
  X(ReplayStep) X(ReplayStepReply) X(ReplayFinish) X(ReplayFinishReply)
// clang-format on

#define KVTIER_ADD_MESSAGE_TYPE_ID(Root)                                       \
  CAF_ADD_TYPE_ID(kvtier, (kvtier::msg::sealed<kvtier::msg::Root>))

CAF_BEGIN_TYPE_ID_BLOCK(kvtier, caf::first_custom_type_id)
KVTIER_MESSAGE_ROOTS(KVTIER_ADD_MESSAGE_TYPE_ID)
CAF_END_TYPE_ID_BLOCK(kvtier)

#undef KVTIER_ADD_MESSAGE_TYPE_ID

namespace kvtier::msg {

/// Registers every carrier type (by name) so the middleman can send them.
void register_message_types(caf::actor_system_config& cfg);

} // namespace kvtier::msg
