#include "actors/cache_service.hpp"

#include "actors/cache_service_ops.hpp"
#include "actors/codec.hpp"

#include "messages/log.hpp"

#include <caf/logger.hpp>
#include <caf/sec.hpp>

#include <algorithm>

namespace kvtier::actors {

namespace {

using namespace std::chrono;

void idle_tick(cache_service_pointer self) {
  auto& st = self->state;
  if (!st.idle_running || st.closed || !st.tiers.store)
    return;
  msg::draft<msg::DemoteIdle> d;
  d.root().setIdleMs(st.idle_ms);
  // The RAM actor answers by the storage deadline (it counts demotions).
  auto again = [self] {
    self->delayed_send(self, idle_period(self->state.idle_ms),
                       idle_tick_atom::value);
  };
  self
    ->request(st.tiers.ram, milliseconds{st.deadline_ms + 1000},
              std::move(d).seal())
    .then([again](const sealed<msg::DemoteIdleReply>&) { again(); },
          [again](const caf::error&) { again(); });
}

/// Delegates `m` to `to` (which answers the caller directly), or fails
/// with `ec::closed` after close.
template <class Reply, class Handle, class Message>
caf::result<sealed<Reply>> guarded(cache_service_pointer self, const Handle& to,
                                   const Message& m) {
  if (self->state.closed)
    return ops::closed_error();
  return self->delegate(to, m);
}

// Admin requests from another process are refused here: the facade is
// never published, admin requests from peers reach it through the node
// actor (cluster.remote-admin, runtime/cluster/node.hpp), which asks it
// itself; a remote sender here holds a handle that leaked.
caf::error remote_refused(const char* what) {
  return make_error(ec::not_permitted,
                    std::string{what}
                      + " from a remote sender: admin requests reach a "
                        "service only through its node actor");
}

sealed<msg::StopIdleDemotionReply> stop_idle(cache_service_pointer self) {
  msg::draft<msg::StopIdleDemotionReply> d;
  d.root().setStopped(std::exchange(self->state.idle_running, false));
  return std::move(d).seal();
}

caf::error no_objects() {
  return make_error(ec::unsupported, "this service has no object cache "
                                     "(ram-tier.objects is false)");
}

sealed<msg::PublishStateReply> dropped_closed() {
  msg::draft<msg::PublishStateReply> d;
  d.root().setOutcome(msg::PutOutcome::DROPPED_CLOSED);
  return std::move(d).seal();
}

/// Watches every cold tier: one that goes down leaves the lookups for good
/// (logged and counted once; requests already sent to it fail at once and
/// count as no candidate).
void monitor_cold_tiers(cache_service_pointer self) {
  for (auto& c : self->state.tiers.cold)
    self->monitor(c.actor);
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& cold = self->state.tiers.cold;
    auto gone = std::find_if(cold.begin(), cold.end(), [&](auto& c) {
      return c.actor.address() == dm.source;
    });
    if (gone == cold.end())
      return;
    CAF_LOG_WARNING("cold tier" << gone->name << "went down:" << dm.reason);
    // A shutdown's exit is expected (debug); anything else is an event.
    bool shutdown = dm.reason == caf::exit_reason::user_shutdown
                    || dm.reason == caf::exit_reason::normal;
    log::write(shutdown ? log::level::debug : log::level::warn,
               "kvtier: cold tier " + gone->name + " went down ("
                 + self->system().render(dm.reason)
                 + "); lookups go on without it");
    ++self->state.dead_tiers;
    cold.erase(gone);
  });
}

} // namespace

caf::error timed_out(cache_service_pointer self, const caf::error& err,
                     const std::string& what) {
  if (err != caf::sec::request_timeout)
    return err;
  return make_error(ec::timeout, what + " did not answer within "
                                   + std::to_string(tier_timeout(self).count())
                                   + " ms (half the storage deadline)");
}

std::chrono::milliseconds idle_period(uint64_t idle_ms) {
  return std::max(std::chrono::milliseconds{idle_ms / 4}, min_idle_period);
}

cache_service_actor::behavior_type
cache_service(cache_service_pointer self, service_actors tiers,
              tiers::model_geometry geometry, bool checkpoints_possible,
              uint64_t idle_ms, bool objects, uint64_t deadline_ms,
              uint64_t cold_wait_ms, tiers::route_costs route,
              std::shared_ptr<tiers::latency_book> latency) {
  auto& st = self->state;
  // A node actor forwards peers' route requests to it, so peers learn its
  // handle.
  guard_signals(self, "cache service");
  st.latency =
    latency ? std::move(latency) : std::make_shared<tiers::latency_book>();
  st.objects = objects;
  st.route = route;
  st.routed = tiers::route_load{route.load_window};
  st.deadline_ms = deadline_ms;
  st.cold_wait_ms = cold_wait_ms;
  st.tiers = std::move(tiers);
  st.geometry = std::move(geometry);
  st.checkpoints_possible = checkpoints_possible;
  st.idle_ms = idle_ms;
  st.idle_running = idle_ms > 0 && st.tiers.store;
  monitor_cold_tiers(self);
  if (st.idle_running)
    self->delayed_send(self, idle_period(idle_ms), idle_tick_atom::value);
  auto& t = st.tiers;
  return {
    [self](const sealed<msg::AcquireState>& m) {
      return ops::acquire(self, m);
    },
    [self](cold_wait_atom, uint64_t id) {
      if (self->current_sender().get() == self->ctrl()) // its own timer only
        ops::lookup_timer_over(self, id);
    },
    [self, &t](const sealed<msg::PeekPrefix>& m) {
      return guarded<msg::PeekPrefixReply>(self, t.ram, m);
    },
    [self](const sealed<msg::PublishState>& m)
      -> caf::result<sealed<msg::PublishStateReply>> {
      if (self->state.closed || self->state.closing)
        return dropped_closed();
      return ops::publish(self, m);
    },
    [self](const sealed<msg::WouldKeep>& m) { return ops::keeps(self, m); },
    [self, &t](const sealed<msg::AdmitRequest>& m) {
      return guarded<msg::AdmitRequestReply>(self, t.admission, m);
    },
    [self, &t](const sealed<msg::FitsRequest>& m)
      -> caf::result<sealed<msg::FitsRequestReply>> {
      return self->delegate(t.admission, m);
    },
    [self](const sealed<msg::ReleaseRequest>& m) {
      return ops::release(self, m);
    },
    [self, &t](const sealed<msg::SaveCheckpoint>& m)
      -> caf::result<sealed<msg::SaveCheckpointReply>> {
      if (!self->state.closed)
        if (auto err = ops::check_shape(self, m.root().getEntry()))
          return err;
      return guarded<msg::SaveCheckpointReply>(self, t.checkpoints, m);
    },
    [self, &t](const sealed<msg::CloseSession>& m)
      -> caf::result<sealed<msg::CloseSessionReply>> {
      if (from_other_process(self))
        return remote_refused("close session");
      if (!t.sessions)
        return msg::draft<msg::CloseSessionReply>{}.seal();
      return self->delegate(t.sessions, m);
    },
    [self](const sealed<msg::PrefetchPrefix>& m) {
      return ops::prefetch(self, m);
    },
    [self](const sealed<msg::ReleasePrefetch>& m) {
      return ops::release_prefetch(self, m);
    },
    [self](const sealed<msg::FlushState>&)
      -> caf::result<sealed<msg::FlushStateReply>> {
      if (from_other_process(self))
        return remote_refused("flush");
      return ops::flush(self);
    },
    [self](const sealed<msg::CloseService>&)
      -> caf::result<sealed<msg::CloseServiceReply>> {
      if (from_other_process(self))
        return remote_refused("close");
      return ops::close(self);
    },
    [self, &t](const sealed<msg::DemoteIdle>& m)
      -> caf::result<sealed<msg::DemoteIdleReply>> {
      if (from_other_process(self))
        return remote_refused("demote idle");
      // The RAM actor answers by the storage deadline and counts it.
      return guarded<msg::DemoteIdleReply>(self, t.ram, m);
    },
    [self](const sealed<msg::StopIdleDemotion>&)
      -> caf::result<sealed<msg::StopIdleDemotionReply>> {
      if (from_other_process(self))
        return remote_refused("stop idle demotion");
      return stop_idle(self);
    },
    [self, &t](const sealed<msg::RelievePressure>& m)
      -> caf::result<sealed<msg::RelievePressureReply>> {
      if (from_other_process(self))
        return remote_refused("relieve pressure");
      return guarded<msg::RelievePressureReply>(self, t.ram, m);
    },
    [self, &t](const sealed<msg::ReclaimAtBoundary>& m)
      -> caf::result<sealed<msg::ReclaimAtBoundaryReply>> {
      if (from_other_process(self))
        return remote_refused("reclaim at boundary");
      return guarded<msg::ReclaimAtBoundaryReply>(self, t.ram, m);
    },
    [self](const sealed<msg::RouteRequest>& m) { return ops::route(self, m); },
    [self](node_name_atom, const std::string& id, const std::string& address) {
      if (from_other_process(self))
        return;
      self->state.node_id = id;
      self->state.address = address;
    },
    [self](const sealed<msg::ReadStats>& m) { return ops::stats(self, m); },
    [self](const sealed<msg::ReadReport>&) { return ops::report(self); },
    [self](const sealed<msg::ListSavedPrefixes>&) { return ops::saved(self); },
    [self, &t](const sealed<msg::SetSsdLimit>& m)
      -> caf::result<sealed<msg::SetSsdLimitReply>> {
      if (from_other_process(self))
        return remote_refused("set SSD limit");
      if (!t.ssd)
        return make_error(ec::unsupported, "this service has no SSD tier "
                                           "(ssd-tier.dir is empty)");
      return guarded<msg::SetSsdLimitReply>(self, t.ssd, m);
    },
    [self, &t](const sealed<msg::PutObject>& m)
      -> caf::result<sealed<msg::PutObjectReply>> {
      if (!self->state.objects)
        return no_objects();
      return guarded<msg::PutObjectReply>(self, t.ram, m);
    },
    [self, &t](const sealed<msg::GetObject>& m)
      -> caf::result<sealed<msg::GetObjectReply>> {
      if (!self->state.objects)
        return no_objects();
      return guarded<msg::GetObjectReply>(self, t.ram, m);
    },
    [self](idle_tick_atom) { idle_tick(self); },
  };
}

} // namespace kvtier::actors
