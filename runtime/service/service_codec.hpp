// Internal to runtime/service/service.cpp (and the route client of
// runtime/cluster/node.cpp): builds the facade's request messages from the
// embedded API's values and converts its replies back. Plain functions,
// any thread.
#pragma once

#include "messages/type_ids.hpp"
#include "runtime/service_types.hpp"

namespace kvtier::runtime::codec {

template <class Root>
using sealed = msg::sealed<Root>;

/// The reply type of a facade request.
template <class Req>
struct reply_of;

#define KVTIER_REPLY_OF(Root)                                                  \
  template <>                                                                  \
  struct reply_of<msg::Root> {                                                 \
    using type = msg::Root##Reply;                                             \
  };
KVTIER_REPLY_OF(AcquireState)
KVTIER_REPLY_OF(PeekPrefix)
KVTIER_REPLY_OF(PublishState)
KVTIER_REPLY_OF(WouldKeep)
KVTIER_REPLY_OF(AdmitRequest)
KVTIER_REPLY_OF(FitsRequest)
KVTIER_REPLY_OF(ReleaseRequest)
KVTIER_REPLY_OF(SaveCheckpoint)
KVTIER_REPLY_OF(CloseSession)
KVTIER_REPLY_OF(PrefetchPrefix)
KVTIER_REPLY_OF(ReleasePrefetch)
KVTIER_REPLY_OF(FlushState)
KVTIER_REPLY_OF(CloseService)
KVTIER_REPLY_OF(DemoteIdle)
KVTIER_REPLY_OF(StopIdleDemotion)
KVTIER_REPLY_OF(RelievePressure)
KVTIER_REPLY_OF(ReclaimAtBoundary)
KVTIER_REPLY_OF(ReadStats)
KVTIER_REPLY_OF(ReadReport)
KVTIER_REPLY_OF(ListSavedPrefixes)
KVTIER_REPLY_OF(PutObject)
KVTIER_REPLY_OF(GetObject)
KVTIER_REPLY_OF(SetSsdLimit)
KVTIER_REPLY_OF(RouteRequest)
#undef KVTIER_REPLY_OF

/// Writes `r` (with `ns`) as a request identity.
void write_identity(msg::RequestIdentity::Builder out, const state_request& r,
                    const std::string& ns);

/// A message whose only field is a request identity (`Root.request`).
template <class Root>
sealed<Root> with_identity(const state_request& r, const std::string& ns) {
  msg::draft<Root> d;
  write_identity(d.root().initRequest(), r, ns);
  return std::move(d).seal();
}

/// A message without fields.
template <class Root>
sealed<Root> empty() {
  return msg::draft<Root>{}.seal();
}

sealed<msg::PublishState> publish(const state_request& r,
                                  const tiers::entry& e);
sealed<msg::SaveCheckpoint> checkpoint(const state_request& r,
                                       const tiers::entry& e);
sealed<msg::PrefetchPrefix> prefetch(const tiers::token_seq& prompt,
                                     const std::string& ns,
                                     const std::optional<std::string>& s);

caf::expected<acquired_state> acquired(const sealed<msg::AcquireStateReply>&);
caf::expected<publish_result> published(const sealed<msg::PublishStateReply>&);
caf::expected<admit_decision> admitted(const sealed<msg::AdmitRequestReply>&);
caf::expected<admit_decision> fitted(const sealed<msg::FitsRequestReply>&);
caf::expected<release_result> released(const sealed<msg::ReleaseRequestReply>&);
durability_result durability(msg::DurabilityResult::Reader in);
caf::expected<persistence_stats> pending(const sealed<msg::ReadStatsReply>&);
caf::expected<service_report> report(const sealed<msg::ReadReportReply>&);
caf::expected<std::vector<saved_prefix>>
prefixes(const sealed<msg::ListSavedPrefixesReply>&);
caf::expected<ssd_limit_result> ssd_limit(const sealed<msg::SetSsdLimitReply>&);

sealed<msg::RouteRequest> route(const tiers::token_seq& prompt,
                                const std::string& ns, uint32_t max_new_tokens);
/// A route reply, checked (best names an option; a remote node's answer
/// is input like any other).
caf::expected<route_decision> routed(const sealed<msg::RouteRequestReply>&);

} // namespace kvtier::runtime::codec
