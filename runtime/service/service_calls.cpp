// The embedded API's admission, lifecycle, tier-management and reporting
// calls (runtime/service.hpp); lookups and publishing are in service.cpp.
#include "runtime/service/service_impl.hpp"

#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

#include <chrono>
#include <cstdio>

namespace kvtier::runtime {

namespace {

template <class Root>
using sealed = codec::sealed<Root>;

sealed<msg::AdmitRequest> admit_message(const state_request& r, bool queue) {
  msg::draft<msg::AdmitRequest> d;
  codec::write_identity(d.root().initRequest(), r, {});
  d.root().setQueue(queue);
  return std::move(d).seal();
}

sealed<msg::ReleaseRequest> release_message(const state_request& r,
                                            bool completed) {
  msg::draft<msg::ReleaseRequest> d;
  codec::write_identity(d.root().initRequest(), r, {});
  d.root().setCompleted(completed);
  return std::move(d).seal();
}

sealed<msg::CloseSession> close_session_message(const std::string& s) {
  msg::draft<msg::CloseSession> d;
  d.root().setSession(s);
  return std::move(d).seal();
}

caf::expected<uint32_t> unprotected(const sealed<msg::CloseSessionReply>& r) {
  return r.root().getUnprotected();
}

caf::expected<durability_result>
flushed(const sealed<msg::FlushStateReply>& r) {
  return codec::durability(r.root().getResult());
}

caf::expected<durability_result>
closed(const sealed<msg::CloseServiceReply>& r) {
  auto out = codec::durability(r.root().getResult());
  out.already_closed = r.root().getAlreadyClosed();
  return out;
}

sealed<msg::ReclaimAtBoundary> boundary_message(uint64_t want) {
  msg::draft<msg::ReclaimAtBoundary> d;
  d.root().setTargetBytes(want);
  return std::move(d).seal();
}

caf::expected<reclaim_result>
reclaimed(const sealed<msg::ReclaimAtBoundaryReply>& r) {
  reclaim_result out;
  out.released = r.root().getReleased();
  out.released_bytes = r.root().getReleasedBytes();
  out.dropped = r.root().getDropped();
  out.dropped_bytes = r.root().getDroppedBytes();
  return out;
}

sealed<msg::DemoteIdle> demote_message(uint64_t idle_ms) {
  msg::draft<msg::DemoteIdle> d;
  d.root().setIdleMs(idle_ms);
  return std::move(d).seal();
}

caf::expected<uint64_t> demoted(const sealed<msg::DemoteIdleReply>& r) {
  return r.root().getDemoted();
}

caf::expected<bool> stopped(const sealed<msg::StopIdleDemotionReply>& r) {
  return r.root().getStopped();
}

sealed<msg::RelievePressure> relieve_message(uint64_t target,
                                             uint64_t deadline_ms) {
  msg::draft<msg::RelievePressure> d;
  d.root().setTargetBytes(target);
  d.root().setDeadlineMs(deadline_ms);
  return std::move(d).seal();
}

caf::expected<reclaim_result>
relieved(const sealed<msg::RelievePressureReply>& r) {
  reclaim_result out;
  out.released = r.root().getReleased();
  out.released_bytes = r.root().getReleasedBytes();
  out.held_bytes = r.root().getHeldBytes();
  out.pending = r.root().getPending();
  out.error = actors::read_error(r.root().getError());
  return out;
}

} // namespace

// --- admission -----------------------------------------------------------

auto service::admit(const state_request& r) -> result<admit_decision> {
  return impl_->call<admit_decision>(admit_message(r, false), codec::admitted);
}

auto service::admit_async(const state_request& r) -> future<admit_decision> {
  return as_future<admit_decision>(
    [&](callback<admit_decision> done) { admit_async(r, std::move(done)); });
}

void service::admit_async(const state_request& r,
                          callback<admit_decision> done) {
  impl_->call_then<admit_decision>(admit_message(r, false), codec::admitted,
                                   std::move(done));
}

auto service::admit_queued(const state_request& r) -> future<admit_decision> {
  return as_future<admit_decision>(
    [&](callback<admit_decision> done) { admit_queued(r, std::move(done)); });
}

void service::admit_queued(const state_request& r,
                           callback<admit_decision> done) {
  // Waiting for budget is the contract: no deadline (docs/api.md).
  impl_->call_then_for<admit_decision>(caf::infinite, admit_message(r, true),
                                       codec::admitted, std::move(done));
}

auto service::fits(const state_request& r) -> result<admit_decision> {
  return impl_->call<admit_decision>(
    codec::with_identity<msg::FitsRequest>(r, {}), codec::fitted);
}

auto service::fits_async(const state_request& r) -> future<admit_decision> {
  return as_future<admit_decision>(
    [&](callback<admit_decision> done) { fits_async(r, std::move(done)); });
}

void service::fits_async(const state_request& r,
                         callback<admit_decision> done) {
  impl_->call_then<admit_decision>(
    codec::with_identity<msg::FitsRequest>(r, {}), codec::fitted,
    std::move(done));
}

auto service::release(const state_request& r, bool completed)
  -> result<release_result> {
  return impl_->call<release_result>(release_message(r, completed),
                                     codec::released);
}

auto service::release_async(const state_request& r, bool completed)
  -> future<release_result> {
  return as_future<release_result>([&](callback<release_result> done) {
    release_async(r, completed, std::move(done));
  });
}

void service::release_async(const state_request& r, bool completed,
                            callback<release_result> done) {
  impl_->call_then<release_result>(release_message(r, completed),
                                   codec::released, std::move(done));
}

// --- sessions and prefetch -------------------------------------------------

auto service::close_session(const std::string& session) -> result<uint32_t> {
  return impl_->call<uint32_t>(close_session_message(session), unprotected);
}

auto service::close_session_async(const std::string& session)
  -> future<uint32_t> {
  return as_future<uint32_t>([&](callback<uint32_t> done) {
    close_session_async(session, std::move(done));
  });
}

void service::close_session_async(const std::string& session,
                                  callback<uint32_t> done) {
  impl_->call_then<uint32_t>(close_session_message(session), unprotected,
                             std::move(done));
}

auto service::prefetch(const tiers::token_seq& prompt, const std::string& ns,
                       std::optional<std::string> session)
  -> result<prefetch_lease> {
  return prefetch_async(prompt, ns, std::move(session)).get();
}

auto service::prefetch_async(const tiers::token_seq& prompt,
                             const std::string& ns,
                             std::optional<std::string> session)
  -> future<prefetch_lease> {
  return as_future<prefetch_lease>([&](callback<prefetch_lease> done) {
    prefetch_async(prompt, ns, std::move(session), std::move(done));
  });
}

void service::prefetch_async(const tiers::token_seq& prompt,
                             const std::string& ns,
                             std::optional<std::string> session,
                             callback<prefetch_lease> done) {
  auto conv = [this](const sealed<msg::PrefetchPrefixReply>& r)
    -> caf::expected<prefetch_lease> {
    prefetch_info info{r.root().getLeaseId(), r.root().getReadsStarted(),
                       r.root().getReadsJoined(), r.root().getTokens(),
                       r.root().getRamTokens()};
    return prefetch_lease{info.lease != 0 ? this : nullptr, info};
  };
  impl_->call_then<prefetch_lease>(codec::prefetch(prompt, ns, session), conv,
                                   std::move(done));
}

bool service::end_prefetch(uint64_t lease) {
  msg::draft<msg::ReleasePrefetch> d;
  d.root().setLeaseId(lease);
  auto r = impl_->call<bool>(
    std::move(d).seal(), [](const sealed<msg::ReleasePrefetchReply>& r) {
      return caf::expected<bool>{r.root().getReleased()};
    });
  return r && *r;
}

prefetch_lease::prefetch_lease(service* owner, prefetch_info info)
  : owner_(owner)
  , info_(info) {}

prefetch_lease::prefetch_lease(prefetch_lease&& other) noexcept
  : owner_(std::exchange(other.owner_, nullptr))
  , info_(other.info_) {}

prefetch_lease& prefetch_lease::operator=(prefetch_lease&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    info_ = other.info_;
  }
  return *this;
}

prefetch_lease::~prefetch_lease() {
  release();
}

bool prefetch_lease::release() {
  auto* owner = std::exchange(owner_, nullptr);
  return owner && owner->end_prefetch(info_.lease);
}

// --- durability and lifecycle ------------------------------------------------

auto service::flush() -> result<durability_result> {
  return impl_->call<durability_result>(codec::empty<msg::FlushState>(),
                                        flushed);
}

auto service::flush_async() -> future<durability_result> {
  return as_future<durability_result>(
    [&](callback<durability_result> done) { flush_async(std::move(done)); });
}

void service::flush_async(callback<durability_result> done) {
  impl_->call_then<durability_result>(codec::empty<msg::FlushState>(), flushed,
                                      std::move(done));
}

auto service::close() -> result<durability_result> {
  return impl_->call<durability_result>(codec::empty<msg::CloseService>(),
                                        closed);
}

auto service::close_async() -> future<durability_result> {
  return as_future<durability_result>(
    [&](callback<durability_result> done) { close_async(std::move(done)); });
}

void service::close_async(callback<durability_result> done) {
  impl_->call_then<durability_result>(codec::empty<msg::CloseService>(), closed,
                                      std::move(done));
}

auto service::boundary(uint64_t want_bytes) -> result<reclaim_result> {
  return impl_->call<reclaim_result>(boundary_message(want_bytes), reclaimed);
}

auto service::boundary_async(uint64_t want_bytes) -> future<reclaim_result> {
  return as_future<reclaim_result>([&](callback<reclaim_result> done) {
    boundary_async(want_bytes, std::move(done));
  });
}

void service::boundary_async(uint64_t want_bytes,
                             callback<reclaim_result> done) {
  impl_->call_then<reclaim_result>(boundary_message(want_bytes), reclaimed,
                                   std::move(done));
}

auto service::demote_idle(uint64_t idle_ms) -> result<uint64_t> {
  return impl_->call<uint64_t>(demote_message(idle_ms), demoted);
}

auto service::demote_idle_async(uint64_t idle_ms) -> future<uint64_t> {
  return as_future<uint64_t>([&](callback<uint64_t> done) {
    demote_idle_async(idle_ms, std::move(done));
  });
}

void service::demote_idle_async(uint64_t idle_ms, callback<uint64_t> done) {
  impl_->call_then<uint64_t>(demote_message(idle_ms), demoted, std::move(done));
}

auto service::stop_idle_demotion() -> result<bool> {
  return impl_->call<bool>(codec::empty<msg::StopIdleDemotion>(), stopped);
}

auto service::stop_idle_demotion_async() -> future<bool> {
  return as_future<bool>(
    [&](callback<bool> done) { stop_idle_demotion_async(std::move(done)); });
}

void service::stop_idle_demotion_async(callback<bool> done) {
  impl_->call_then<bool>(codec::empty<msg::StopIdleDemotion>(), stopped,
                         std::move(done));
}

auto service::relieve_pressure(std::function<bool()> check)
  -> result<reclaim_result> {
  // The check runs here, on the caller's thread; each round releases one
  // LRU entry's worth (target: one byte below what RAM held) and answers
  // once its write settled, with the bytes whose buffers really died. The
  // whole call ends by the storage deadline: a stalled disk gets a partial
  // result and `ec::timeout`, the entries it holds still in RAM.
  using clock = std::chrono::steady_clock;
  auto deadline =
    clock::now() + std::chrono::milliseconds{impl_->opts.storage_deadline_ms};
  auto left_ms = [&]() -> uint64_t {
    auto n = std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline - clock::now())
               .count();
    return n > 0 ? static_cast<uint64_t>(n) : 0;
  };
  auto round = [&](uint64_t target) {
    auto ms = left_ms();
    return impl_->call_for<reclaim_result>(
      caf::duration{std::chrono::milliseconds{ms + 1000}},
      relieve_message(target, std::max<uint64_t>(ms, 1)), relieved);
  };
  reclaim_result total;
  auto held = round(UINT64_MAX);
  if (!held)
    return held;
  total.held_bytes = held->held_bytes;
  while (!check() && total.held_bytes > 0) {
    if (left_ms() == 0) {
      total.error = make_error(ec::timeout, "pressure relief: the storage "
                                            "deadline passed");
      break;
    }
    auto r = round(total.held_bytes - 1);
    if (!r) {
      total.error = r.error(); // what was freed before still counts
      break;
    }
    total.released += r->released;
    total.released_bytes += r->released_bytes;
    total.held_bytes = r->held_bytes;
    total.pending = r->pending;
    if (r->error) {
      total.error = r->error; // a write failed or the deadline passed
      break;
    }
    if (r->released == 0)
      break;
  }
  return total;
}

auto service::relieve_pressure_async(std::function<bool()> check)
  -> future<reclaim_result> {
  // The engine's check must run on a thread of its own: the calling thread
  // is free at once.
  return std::async(std::launch::async, [this, check = std::move(check)] {
    return relieve_pressure(check);
  });
}

// --- reporting -------------------------------------------------------------

auto service::stats() -> result<persistence_stats> {
  return impl_->call<persistence_stats>(codec::empty<msg::ReadStats>(),
                                        codec::pending);
}

auto service::stats_async() -> future<persistence_stats> {
  return as_future<persistence_stats>(
    [&](callback<persistence_stats> done) { stats_async(std::move(done)); });
}

void service::stats_async(callback<persistence_stats> done) {
  impl_->call_then<persistence_stats>(codec::empty<msg::ReadStats>(),
                                      codec::pending, std::move(done));
}

namespace {

/// The process's resident set now and at its peak, from /proc/self/status
/// (VmRSS, VmHWM in kB); zeros where it cannot be read.
service_report::process_part process_memory() {
  service_report::process_part out;
  auto* f = std::fopen("/proc/self/status", "r");
  if (!f)
    return out;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1)
      out.resident_bytes = kb * 1024;
    else if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1)
      out.peak_resident_bytes = kb * 1024;
  }
  std::fclose(f);
  return out;
}

/// The facade's report with the process's part (its resident set and the
/// event feed's memory, read from the feed's published counters) and the
/// node's part (a cluster only): its port's refusal counters, read from
/// the node's guard (their one home, the same `kvtier members` shows), and
/// the peers it was configured to join.
struct report_with_node {
  std::shared_ptr<msg::wire_guard> guard;
  uint64_t configured_peers = 0;
  std::shared_ptr<actors::feed_memory> feed;

  caf::expected<service_report>
  operator()(const codec::sealed<msg::ReadReportReply>& r) const {
    auto out = codec::report(r);
    if (out) {
      out->process = process_memory();
      if (feed) {
        auto& p = out->process;
        p.feed_ring_events = feed->ring_events.load();
        p.feed_ring_bytes = feed->ring_bytes.load();
        p.feed_table_entries = feed->table_entries.load();
        p.feed_table_bytes = feed->table_bytes.load();
      }
    }
    if (out && guard) {
      auto& n = out->node;
      n.refused_oversized = guard->oversized.load();
      n.refused_undecodable = guard->undecodable.load();
      n.oversized_frames = guard->oversized_frames.load();
      n.garbage_frames = guard->garbage_frames.load();
      n.refused_connections = guard->refused_connections.load();
      n.failed_handshakes = guard->failed_handshakes.load();
      n.configured_peers = configured_peers;
    }
    return out;
  }
};

report_with_node report_conv(const cluster::node* node,
                             const service_options& opts,
                             std::shared_ptr<actors::feed_memory> feed) {
  if (!node)
    return {nullptr, 0, std::move(feed)};
  return {node->guard(), opts.cluster_peers.size(), std::move(feed)};
}

} // namespace

auto service::report() -> result<service_report> {
  return impl_->call<service_report>(
    codec::empty<msg::ReadReport>(),
    report_conv(impl_->node.get(), impl_->opts, impl_->handles.feed_memory));
}

auto service::report_async() -> future<service_report> {
  return as_future<service_report>(
    [&](callback<service_report> done) { report_async(std::move(done)); });
}

void service::report_async(callback<service_report> done) {
  impl_->call_then<service_report>(
    codec::empty<msg::ReadReport>(),
    report_conv(impl_->node.get(), impl_->opts, impl_->handles.feed_memory),
    std::move(done));
}

auto service::saved_prefixes() -> result<std::vector<saved_prefix>> {
  return impl_->call<std::vector<saved_prefix>>(
    codec::empty<msg::ListSavedPrefixes>(), codec::prefixes);
}

auto service::saved_prefixes_async() -> future<std::vector<saved_prefix>> {
  return as_future<std::vector<saved_prefix>>(
    [&](callback<std::vector<saved_prefix>> done) {
      saved_prefixes_async(std::move(done));
    });
}

void service::saved_prefixes_async(callback<std::vector<saved_prefix>> done) {
  impl_->call_then<std::vector<saved_prefix>>(
    codec::empty<msg::ListSavedPrefixes>(), codec::prefixes, std::move(done));
}

namespace {

sealed<msg::SetSsdLimit> ssd_limit_message(uint64_t bytes) {
  msg::draft<msg::SetSsdLimit> d;
  d.root().setCapBytes(bytes);
  return std::move(d).seal();
}

} // namespace

auto service::set_ssd_limit(uint64_t bytes) -> result<ssd_limit_result> {
  return impl_->call<ssd_limit_result>(ssd_limit_message(bytes),
                                       codec::ssd_limit);
}

auto service::set_ssd_limit_async(uint64_t bytes) -> future<ssd_limit_result> {
  return as_future<ssd_limit_result>([&](callback<ssd_limit_result> done) {
    set_ssd_limit_async(bytes, std::move(done));
  });
}

void service::set_ssd_limit_async(uint64_t bytes,
                                  callback<ssd_limit_result> done) {
  impl_->call_then<ssd_limit_result>(ssd_limit_message(bytes), codec::ssd_limit,
                                     std::move(done));
}

// --- objects ---------------------------------------------------------------

namespace {

using object_views = std::optional<std::vector<tiers::attachment>>;

sealed<msg::PutObject> put_object_message(const std::string& key,
                                          std::vector<tiers::attachment>& t) {
  msg::draft<msg::PutObject> d;
  auto obj = d.root().initObject();
  obj.setKey(key);
  tiers::write_attachments(d, obj.initAttachments(t.size()), t);
  return std::move(d).seal();
}

caf::expected<bool> object_kept(const sealed<msg::PutObjectReply>& r) {
  return r.root().getKept();
}

sealed<msg::GetObject> get_object_message(const std::string& key) {
  msg::draft<msg::GetObject> d;
  d.root().setKey(key);
  return std::move(d).seal();
}

caf::expected<object_views> object_found(const sealed<msg::GetObjectReply>& r) {
  if (!r.root().isObject())
    return object_views{};
  auto a = tiers::read_attachments(r, r.root().getObject().getAttachments());
  if (!a)
    return std::move(a.error());
  return object_views{std::move(*a)};
}

} // namespace

caf::expected<bool> object_cache::put(const std::string& key,
                                      std::vector<tiers::attachment> tensors) {
  return owner_->impl_->call<bool>(put_object_message(key, tensors),
                                   object_kept);
}

void object_cache::put_async(const std::string& key,
                             std::vector<tiers::attachment> tensors,
                             service::callback<bool> done) {
  owner_->impl_->call_then<bool>(put_object_message(key, tensors), object_kept,
                                 std::move(done));
}

caf::expected<object_views> object_cache::get(const std::string& key) {
  return owner_->impl_->call<object_views>(get_object_message(key),
                                           object_found);
}

void object_cache::get_async(const std::string& key,
                             service::callback<object_views> done) {
  owner_->impl_->call_then<object_views>(get_object_message(key), object_found,
                                         std::move(done));
}

} // namespace kvtier::runtime
