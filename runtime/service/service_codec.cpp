#include "runtime/service/service_codec.hpp"

#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::runtime {

const char* to_string(state_source s) {
  switch (s) {
    case state_source::none: return "none";
    case state_source::ram: return "ram";
    case state_source::ssd: return "ssd";
    case state_source::checkpoint: return "checkpoint";
    case state_source::peer: return "peer";
    case state_source::store: return "store";
  }
  return "?";
}

const char* to_string(put_outcome o) {
  switch (o) {
    case put_outcome::kept: return "kept";
    case put_outcome::replaced: return "replaced";
    case put_outcome::dropped_over_cap: return "dropped_over_cap";
    case put_outcome::dropped_by_policy: return "dropped_by_policy";
    case put_outcome::dropped_closed: return "dropped_closed";
  }
  return "?";
}

} // namespace kvtier::runtime

namespace kvtier::runtime::codec {

void write_identity(msg::RequestIdentity::Builder out, const state_request& r,
                    const std::string& ns) {
  out.setId(r.id);
  out.setAttempt(r.attempt);
  out.setNs(ns);
  if (r.session)
    out.getSession().setId(*r.session);
  tiers::write_tokens(out.initPrompt(r.prompt.size()), r.prompt);
  out.setMaxNewTokens(r.max_new_tokens);
  out.setPriority(r.priority);
  out.setPinMs(r.pin_ms);
}

sealed<msg::PublishState> publish(const state_request& r,
                                  const tiers::entry& e) {
  msg::draft<msg::PublishState> d;
  write_identity(d.root().initRequest(), r, e.ns);
  auto copy = e;
  if (!copy.session && r.session)
    copy.session = r.session; // the request's session owns what it publishes
  tiers::write_entry(d, d.root().initEntry(), copy);
  return std::move(d).seal();
}

sealed<msg::SaveCheckpoint> checkpoint(const state_request& r,
                                       const tiers::entry& e) {
  msg::draft<msg::SaveCheckpoint> d;
  write_identity(d.root().initRequest(), r, e.ns);
  tiers::write_entry(d, d.root().initEntry(), e);
  return std::move(d).seal();
}

sealed<msg::PrefetchPrefix> prefetch(const tiers::token_seq& prompt,
                                     const std::string& ns,
                                     const std::optional<std::string>& s) {
  msg::draft<msg::PrefetchPrefix> d;
  d.root().setNs(ns);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  if (s)
    d.root().getSession().setId(*s);
  return std::move(d).seal();
}

namespace {

/// Where a reply says state comes from, as the API names it.
state_source source_of(msg::Tier t) {
  switch (t) {
    case msg::Tier::RAM: return state_source::ram;
    case msg::Tier::SSD: return state_source::ssd;
    case msg::Tier::CHECKPOINT: return state_source::checkpoint;
    case msg::Tier::PEER: return state_source::peer;
    case msg::Tier::STORE: return state_source::store;
    default: return state_source::none;
  }
}

} // namespace

caf::expected<acquired_state>
acquired(const sealed<msg::AcquireStateReply>& r) {
  acquired_state out;
  out.source = source_of(r.root().getSource());
  out.usable_tokens = r.root().getUsableTokens();
  out.stale_checkpoint_tokens = r.root().getStaleCheckpointTokens();
  if (out.source == state_source::none)
    return out;
  auto e = tiers::read_entry(r, r.root().getEntry());
  if (!e)
    return std::move(e.error());
  out.state = std::move(*e);
  return out;
}

caf::expected<publish_result>
published(const sealed<msg::PublishStateReply>& r) {
  publish_result out;
  out.kept = r.root().getKept();
  out.superseded = r.root().getSuperseded();
  out.pinned = r.root().getPinned();
  out.pin_refused = r.root().getPinRefused();
  switch (r.root().getOutcome()) {
    case msg::PutOutcome::KEPT: out.outcome = put_outcome::kept; break;
    case msg::PutOutcome::REPLACED: out.outcome = put_outcome::replaced; break;
    case msg::PutOutcome::DROPPED_OVER_CAP:
      out.outcome = put_outcome::dropped_over_cap;
      break;
    case msg::PutOutcome::DROPPED_BY_POLICY:
      out.outcome = put_outcome::dropped_by_policy;
      break;
    case msg::PutOutcome::DROPPED_CLOSED:
      out.outcome = put_outcome::dropped_closed;
      break;
  }
  return out;
}

template <class Reader>
caf::expected<admit_decision> decision(Reader in, bool yes) {
  if (in.isNever())
    return actors::read_error(in.getNever());
  return admit_decision{yes, in.getProjectedBytes(), in.getAvailableBytes()};
}

caf::expected<admit_decision>
admitted(const sealed<msg::AdmitRequestReply>& r) {
  auto in = r.root();
  return decision(in, !in.isNever() && in.getAdmitted());
}

caf::expected<admit_decision> fitted(const sealed<msg::FitsRequestReply>& r) {
  auto in = r.root();
  return decision(in, !in.isNever() && in.getFits());
}

caf::expected<release_result>
released(const sealed<msg::ReleaseRequestReply>& r) {
  auto in = r.root();
  release_result out;
  out.released_bytes = in.getReleasedBytes();
  out.checkpoints_removed = in.getCheckpointsRemoved();
  out.checkpoints_kept = in.getCheckpointsKept();
  out.removal_pending = in.getRemovalPending();
  if (out.removal_pending)
    out.removal_error = describe(actors::read_error(in.getRemovalError()));
  return out;
}

durability_result durability(msg::DurabilityResult::Reader in) {
  durability_result out;
  out.durable = in.getDurable();
  out.pending = in.getPending();
  out.dropped = in.getDropped();
  out.failed = in.getFailed();
  out.entries = in.getEntries();
  out.longest_durable_prefix = in.getLongestDurablePrefix();
  out.removals_pending = in.getRemovalsPending();
  out.abandoned = in.getAbandoned();
  for (auto e : in.getErrors())
    out.errors.push_back(describe(actors::read_error(e)));
  return out;
}

caf::expected<persistence_stats> pending(const sealed<msg::ReadStatsReply>& r) {
  persistence_stats out;
  auto in = r.root();
  out.pending_snapshots = in.getPendingSnapshots();
  out.pending_spills = in.getPendingSpills();
  out.pending_checkpoint_writes = in.getPendingCheckpointWrites();
  out.pending_bytes = in.getPendingBytes();
  out.retrying_writes = in.getRetryingWrites();
  out.waiting_snapshots = in.getWaitingSnapshots();
  out.leaving_entries = in.getLeavingEntries();
  return out;
}

caf::expected<std::vector<saved_prefix>>
prefixes(const sealed<msg::ListSavedPrefixesReply>& r) {
  std::vector<saved_prefix> out;
  for (auto k : r.root().getPrefixes())
    out.push_back({k.getNs().cStr(), tiers::read_tokens(k.getTokens())});
  return out;
}

caf::expected<ssd_limit_result>
ssd_limit(const sealed<msg::SetSsdLimitReply>& r) {
  return ssd_limit_result{r.root().getCapBytes(), r.root().getEvicted(),
                          r.root().getFileBytes()};
}

sealed<msg::RouteRequest> route(const tiers::token_seq& prompt,
                                const std::string& ns,
                                uint32_t max_new_tokens) {
  msg::draft<msg::RouteRequest> d;
  d.root().setNs(ns);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  d.root().setMaxNewTokens(max_new_tokens);
  return std::move(d).seal();
}

caf::expected<route_decision> routed(const sealed<msg::RouteRequestReply>& r) {
  try {
    route_decision out;
    auto in = r.root();
    for (auto o : in.getOptions()) {
      route_option x;
      x.node_id = o.getNodeId().cStr();
      x.address = o.getAddress().cStr();
      x.source = source_of(o.getSource());
      if (x.source == state_source::checkpoint) // no node serves from one
        x.source = state_source::none;
      x.from_ssd = o.getFromSsd();
      x.usable_tokens = o.getUsableTokens();
      x.cost = o.getCost();
      x.recent_tokens = o.getRecentTokens();
      x.full = o.getFull();
      out.options.push_back(std::move(x));
    }
    if (in.getBest() >= out.options.size())
      return make_error(ec::malformed_message,
                        "route reply: best option "
                          + std::to_string(in.getBest()) + " of "
                          + std::to_string(out.options.size()));
    out.best = in.getBest();
    out.chosen = out.options[out.best];
    return out;
  } catch (const kj::Exception& e) {
    return make_error(ec::malformed_message,
                      std::string{"route reply: "} + e.getDescription().cStr());
  }
}

} // namespace kvtier::runtime::codec
