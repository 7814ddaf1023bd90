#include "runtime/service.hpp"

#include "runtime/service/service_impl.hpp"

#include "tiers/entry_message.hpp"

#include "messages/caller_actor.hpp"

namespace kvtier::runtime {

service::service(service_options opts, service_parts parts)
  : impl_(std::make_unique<impl>()) {
  impl_->own_cfg = std::make_unique<kvtier_config>();
  char arg0[] = "kvtier";
  char* argv[] = {arg0, nullptr};
  impl_->start_error = impl_->own_cfg->load(1, argv);
  impl_->own_cfg->options = opts;
  if (opts.cluster_enabled)
    impl_->own_cfg->load_middleman();
  impl_->opts = std::move(opts);
  impl_->own_sys = std::make_unique<caf::actor_system>(*impl_->own_cfg);
  impl_->sys = impl_->own_sys.get();
  if (!impl_->start_error)
    impl_->start(parts);
  impl_->start_http(*this);
  // Any thread may destroy the service (messages/caller_actor.hpp).
  forget_thread_logger(*impl_->sys);
}

service::service(kvtier_config& cfg, service_parts parts)
  : impl_(std::make_unique<impl>()) {
  impl_->opts = cfg.options;
  if (cfg.options.cluster_enabled)
    cfg.load_middleman();
  impl_->own_sys = std::make_unique<caf::actor_system>(cfg);
  impl_->sys = impl_->own_sys.get();
  impl_->start(parts);
  impl_->start_http(*this);
  forget_thread_logger(*impl_->sys);
}

service::service(caf::actor_system& sys, service_options opts,
                 service_parts parts)
  : impl_(std::make_unique<impl>()) {
  impl_->opts = std::move(opts);
  impl_->sys = &sys;
  impl_->start(parts);
  impl_->start_http(*this);
  forget_thread_logger(*impl_->sys);
}

service::~service() {
  if (!impl_->start_error)
    close();
  // Its routes call the service: it stops before the actors do (after
  // close, so /health said "closed" meanwhile).
  impl_->http.reset();
  // Closed to requests and flushed: now tell the peers (bounded).
  impl_->node.reset();
  auto& h = impl_->handles;
  // Stopped by an actor of this process: the actors peers can reach
  // ignore anonymous exit messages (actors/codec.hpp guard_signals).
  kvtier::caller_actor stopper{*impl_->sys};
  stopper->send_exit(h.facade, caf::exit_reason::user_shutdown);
  stopper->send_exit(h.tiers.ram, caf::exit_reason::user_shutdown);
  stopper->send_exit(h.tiers.admission, caf::exit_reason::user_shutdown);
  stopper->send_exit(h.tiers.checkpoints, caf::exit_reason::user_shutdown);
  stopper->send_exit(h.tiers.sessions, caf::exit_reason::user_shutdown);
  // Stores added beside the built-in tiers (the SSD actor goes below).
  for (auto& s : h.tiers.stores)
    if (!h.tiers.ssd || s.address() != h.tiers.ssd.address())
      stopper->send_exit(s, caf::exit_reason::user_shutdown);
  // The peer tier and the serving side (cluster.enabled): the serve
  // actor's lane threads end with it; a fetch running fails as closed.
  if (h.cluster.peer)
    stopper->send_exit(h.cluster.peer, caf::exit_reason::user_shutdown);
  if (h.cluster.serve)
    stopper->send_exit(h.cluster.serve, caf::exit_reason::user_shutdown);
  stopper->send_exit(h.feed, caf::exit_reason::user_shutdown);
  if (h.put_observer)
    stopper->send_exit(h.put_observer, caf::exit_reason::user_shutdown);
  for (auto& l : h.cluster.listeners)
    stopper->send_exit(l, caf::exit_reason::user_shutdown);
  {
    // Subscriptions the engine has not ended yet: their calls stop here.
    std::lock_guard<std::mutex> guard{impl_->pool_mtx};
    for (auto& l : impl_->listeners)
      stopper->send_exit(l, caf::exit_reason::user_shutdown);
    impl_->listeners.clear();
  }
  if (h.tiers.ssd) {
    // The SSD actor's tier holds the directory's lock until the actor's
    // state goes: wait for that, so the directory is free once this
    // returns (a restart in a caller's actor system finds it unlocked).
    kvtier::caller_actor self{*impl_->sys};
    self->monitor(h.tiers.ssd);
    self->send_exit(h.tiers.ssd, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds(30)) >> [] {});
  }
  h = {};
  // Stopped, not only let go: the clock keeps a reference to every actor
  // with a request timeout set (CAF 0.17 does not cancel one on its
  // answer), so a dropped caller would hold the actor system's shutdown
  // for a whole call deadline. A call still waiting settles as closed.
  stopper->send_exit(impl_->async_caller, caf::exit_reason::user_shutdown);
  impl_->async_caller = nullptr;
  impl_->pool.clear(); // before the actor system goes
}

caf::error service::start_error() const {
  return impl_->start_error;
}

const service_options& service::options() const noexcept {
  return impl_->opts;
}

object_cache* service::objects() noexcept {
  return impl_->opts.objects ? &objects_ : nullptr;
}

caf::actor service::peer_tier() const noexcept {
  return caf::actor_cast<caf::actor>(impl_->handles.cluster.peer);
}

caf::actor service::state_server() const noexcept {
  return impl_->handles.cluster.serve;
}

cluster::node* service::cluster() noexcept {
  return impl_->node.get();
}

caf::actor_system& service::system() noexcept {
  return *impl_->sys;
}

caf::actor service::event_feed() const noexcept {
  return caf::actor_cast<caf::actor>(impl_->handles.feed);
}

std::optional<uint64_t> service::checkpoint_every_tokens() const noexcept {
  if (impl_->opts.checkpoint_every_tokens == 0)
    return std::nullopt;
  return impl_->opts.checkpoint_every_tokens;
}

void service::set_put_observer(put_observer f) {
  impl_->observer->set(std::move(f));
}

// --- the event feed ------------------------------------------------------

struct event_subscription::state {
  caf::actor feed;
  caf::actor listener;
  std::shared_ptr<std::atomic<bool>> live;
};

event_subscription::event_subscription(std::shared_ptr<state> s)
  : state_(std::move(s)) {}

event_subscription::event_subscription(event_subscription&&) noexcept = default;

event_subscription&
event_subscription::operator=(event_subscription&& other) noexcept {
  if (this != &other) {
    end();
    state_ = std::move(other.state_);
  }
  return *this;
}

event_subscription::~event_subscription() {
  end();
}

event_subscription::operator bool() const noexcept {
  return state_ != nullptr;
}

bool event_subscription::end() {
  if (!state_)
    return false;
  auto s = std::move(state_);
  *s->live = false; // no call starts after this
  caf::anon_send(s->feed, actors::feed_drop_atom::value, s->listener);
  caf::anon_send_exit(s->listener, caf::exit_reason::user_shutdown);
  return true;
}

namespace {

feed_event api_event(const actors::feed_event& e) {
  feed_event out;
  out.seq = e.seq;
  out.kind = static_cast<feed_kind>(static_cast<uint8_t>(e.kind));
  out.tier = e.tier == msg::FeedTier::RAM ? feed_tier::ram : feed_tier::ssd;
  out.ns = e.ns;
  out.tokens = e.key;
  out.bytes = e.bytes;
  out.trimmable = e.trimmable;
  return out;
}

} // namespace

auto service::subscribe_events(std::function<void(const feed_event&)> f)
  -> result<event_subscription> {
  if (impl_->start_error)
    return impl_->start_error;
  auto live = std::make_shared<std::atomic<bool>>(true);
  auto listener = spawn_feed_listener(
    *impl_->sys, [f = std::move(f), live](const actors::feed_event& e) {
      if (*live)
        f(api_event(e));
    });
  auto feed = caf::actor_cast<caf::actor>(impl_->handles.feed);
  {
    std::lock_guard<std::mutex> guard{impl_->pool_mtx};
    impl_->listeners.push_back(listener);
  }
  kvtier::caller_actor self{*impl_->sys};
  caf::error err;
  self
    ->request(impl_->handles.feed, impl_->api_timeout(),
              actors::feed_local_atom::value, listener, true)
    .receive([](uint64_t) {}, [&](caf::error& e) { err = std::move(e); });
  if (err) {
    caf::anon_send_exit(listener, caf::exit_reason::user_shutdown);
    return impl_->timed_out(std::move(err), impl_->api_timeout());
  }
  return event_subscription{std::make_shared<event_subscription::state>(
    event_subscription::state{feed, listener, live})};
}

// --- lookups -------------------------------------------------------------

namespace {

/// `conv`, timing the call from now until its answer into `which` of
/// `book` (which it keeps alive); a call that fails (an error answer, a
/// reply `conv` refuses, a missed deadline) is counted there instead
/// (`service_impl::note_failure`).
template <class Conv>
struct timed_conv {
  std::shared_ptr<tiers::latency_book> book;
  tiers::latency_histogram tiers::latency_book::*which;
  Conv conv;
  std::chrono::steady_clock::time_point start;

  template <class Reply>
  auto operator()(const Reply& reply) const {
    auto out = conv(reply);
    if (out)
      ((*book).*which).observe(std::chrono::steady_clock::now() - start);
    else
      failed();
    return out;
  }

  void failed() const noexcept {
    ((*book).*which).fail();
  }
};

template <class Conv>
timed_conv<Conv> timed(std::shared_ptr<tiers::latency_book> book,
                       tiers::latency_histogram tiers::latency_book::*which,
                       Conv conv) {
  return {std::move(book), which, conv, std::chrono::steady_clock::now()};
}

} // namespace

std::string service::http_address() const {
  return impl_->http ? impl_->http->address() : std::string{};
}

latency_report service::latency() const {
  auto& b = *impl_->handles.latency;
  return {b.acquire.read(), b.publish.read(), b.restore.read(),
          b.remote_fetch.read()};
}

auto service::acquire(const state_request& r, const std::string& ns)
  -> result<acquired_state> {
  return impl_->call<acquired_state>(
    codec::with_identity<msg::AcquireState>(r, ns),
    timed(impl_->handles.latency, &tiers::latency_book::acquire,
          codec::acquired));
}

auto service::acquire_async(const state_request& r, const std::string& ns)
  -> future<acquired_state> {
  return as_future<acquired_state>([&](callback<acquired_state> done) {
    acquire_async(r, ns, std::move(done));
  });
}

void service::acquire_async(const state_request& r, const std::string& ns,
                            callback<acquired_state> done) {
  impl_->call_then<acquired_state>(
    codec::with_identity<msg::AcquireState>(r, ns),
    timed(impl_->handles.latency, &tiers::latency_book::acquire,
          codec::acquired),
    std::move(done));
}

namespace {

codec::sealed<msg::PeekPrefix> peek_message(const tiers::token_seq& prompt,
                                            const std::string& ns) {
  msg::draft<msg::PeekPrefix> d;
  d.root().setNs(ns);
  tiers::write_tokens(d.root().initPrompt(prompt.size()), prompt);
  return std::move(d).seal();
}

caf::expected<uint64_t> peeked(const codec::sealed<msg::PeekPrefixReply>& r) {
  return r.root().getTokens();
}

} // namespace

auto service::peek_prefix_len(const tiers::token_seq& prompt,
                              const std::string& ns) -> result<uint64_t> {
  return impl_->call<uint64_t>(peek_message(prompt, ns), peeked);
}

auto service::peek_prefix_len_async(const tiers::token_seq& prompt,
                                    const std::string& ns) -> future<uint64_t> {
  return as_future<uint64_t>([&](callback<uint64_t> done) {
    peek_prefix_len_async(prompt, ns, std::move(done));
  });
}

void service::peek_prefix_len_async(const tiers::token_seq& prompt,
                                    const std::string& ns,
                                    callback<uint64_t> done) {
  impl_->call_then<uint64_t>(peek_message(prompt, ns), peeked, std::move(done));
}

auto service::route(const tiers::token_seq& prompt, const std::string& ns,
                    uint32_t max_new_tokens) -> result<route_decision> {
  return impl_->call<route_decision>(codec::route(prompt, ns, max_new_tokens),
                                     codec::routed);
}

auto service::route_async(const tiers::token_seq& prompt, const std::string& ns,
                          uint32_t max_new_tokens) -> future<route_decision> {
  return as_future<route_decision>([&](callback<route_decision> done) {
    route_async(prompt, ns, max_new_tokens, std::move(done));
  });
}

void service::route_async(const tiers::token_seq& prompt, const std::string& ns,
                          uint32_t max_new_tokens,
                          callback<route_decision> done) {
  impl_->call_then<route_decision>(codec::route(prompt, ns, max_new_tokens),
                                   codec::routed, std::move(done));
}

// --- publishing ----------------------------------------------------------

auto service::publish(const state_request& r, tiers::entry&& state)
  -> result<publish_result> {
  auto out = impl_->call<publish_result>(codec::publish(r, state),
                                         timed(impl_->handles.latency,
                                               &tiers::latency_book::publish,
                                               codec::published));
  if (out)
    state = {};
  return out;
}

auto service::publish_async(const state_request& r, tiers::entry state)
  -> future<publish_result> {
  return as_future<publish_result>([&](callback<publish_result> done) {
    publish_async(r, std::move(state), std::move(done));
  });
}

void service::publish_async(const state_request& r, tiers::entry state,
                            callback<publish_result> done) {
  impl_->call_then<publish_result>(codec::publish(r, state),
                                   timed(impl_->handles.latency,
                                         &tiers::latency_book::publish,
                                         codec::published),
                                   std::move(done));
}

namespace {

caf::expected<bool> kept(const codec::sealed<msg::WouldKeepReply>& r) {
  return r.root().getKeeps();
}

caf::expected<bool> saved(const codec::sealed<msg::SaveCheckpointReply>& r) {
  return r.root().getKept();
}

} // namespace

auto service::keeps(const state_request& r) -> result<bool> {
  return impl_->call<bool>(codec::with_identity<msg::WouldKeep>(r, {}), kept);
}

auto service::keeps_async(const state_request& r) -> future<bool> {
  return as_future<bool>(
    [&](callback<bool> done) { keeps_async(r, std::move(done)); });
}

void service::keeps_async(const state_request& r, callback<bool> done) {
  impl_->call_then<bool>(codec::with_identity<msg::WouldKeep>(r, {}), kept,
                         std::move(done));
}

auto service::checkpoint(const state_request& r, tiers::entry&& state)
  -> result<bool> {
  auto out = impl_->call<bool>(codec::checkpoint(r, state), saved);
  if (out)
    state = {};
  return out;
}

auto service::checkpoint_async(const state_request& r, tiers::entry state)
  -> future<bool> {
  return as_future<bool>([&](callback<bool> done) {
    checkpoint_async(r, std::move(state), std::move(done));
  });
}

void service::checkpoint_async(const state_request& r, tiers::entry state,
                               callback<bool> done) {
  impl_->call_then<bool>(codec::checkpoint(r, state), saved, std::move(done));
}

} // namespace kvtier::runtime
