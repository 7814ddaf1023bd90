#include "runtime/tools/replay.hpp"

#include "runtime/tools/oracle.hpp"
#include "runtime/tools/simulate.hpp"

#include <chrono>
#include <deque>
#include <thread>
#include <unordered_map>

namespace kvtier::runtime {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

} // namespace

/// The engine loop's state across requests.
class replay_session::driver {
public:
  driver(const trace& t, service& svc, const tiers::model_geometry& g,
         const replay_options& o)
    : t_(t)
    , svc_(svc)
    , oracle_(g)
    , o_(o) {
    out_.trace = t_.name;
    out_.model = oracle_.geometry().name;
    out_.verified = o_.verify;
    out_.prefill_tokens_per_s = o_.prefill_tokens_per_s;
    out_.ram_cap_bytes = svc_.options().ram_cap_bytes;
    out_.ssd_cap_bytes =
      svc_.options().ssd_dir.empty() ? 0 : svc_.options().ssd_cap_bytes;
    for (size_t i = 0; i < t_.requests.size(); ++i)
      if (!t_.requests[i].session.empty())
        last_of_session_[t_.requests[i].session] = i;
    start_ = clock_type::now();
  }

  caf::expected<replay_step> step(size_t i);
  caf::expected<replay_report> finish();
  const replay_report& so_far() const {
    return out_;
  }

private:
  /// Times one service call under `name`.
  template <class F>
  auto timed(const char* name, F&& f) {
    auto t0 = clock_type::now();
    auto out = f();
    out_.calls[name].add(seconds_since(t0) * 1e6);
    return out;
  }

  caf::error one(size_t i, replay_step& st);
  caf::error admit(const state_request& req, bool& refused);
  caf::error finish_oldest();
  caf::error settle();
  /// Completed peer fetches so far (0 without a cluster).
  caf::expected<uint64_t> peer_fetches();
  /// The prompt's state: the served prefix extended when it verified
  /// (`reused`), else a fresh prefill.
  tiers::entry state_for(const acquired_state& acq, const std::string& ns,
                         const tiers::token_seq& prompt, bool& reused,
                         replay_step& st);
  caf::error decode(const state_request& req, const tiers::entry& state);

  const trace& t_;
  service& svc_;
  oracle_engine oracle_;
  const replay_options& o_;
  replay_report out_;
  std::deque<state_request> running_;
  std::unordered_map<std::string, size_t> last_of_session_;
  clock_type::time_point start_;
};

caf::error replay_session::driver::settle() {
  // Spills are written behind the call that caused them; wait until the
  // SSD tier has none pending and RAM holds no evicted entry waiting for
  // its write (it leaves once the write is durable), so every run sees
  // the same RAM and SSD contents.
  auto until = clock_type::now() + std::chrono::seconds(30);
  for (;;) {
    auto s = svc_.stats();
    if (!s)
      return s.error();
    if (s->pending_spills == 0 && s->leaving_entries == 0)
      return {};
    if (clock_type::now() > until)
      return make_error(ec::io_error, "spills still pending after 30 s "
                                      "(a failing disk?)");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

caf::error replay_session::driver::finish_oldest() {
  auto req = std::move(running_.front());
  running_.pop_front();
  auto r = timed("release", [&] { return svc_.release(req, true); });
  return r ? caf::error{} : r.error();
}

caf::error replay_session::driver::admit(const state_request& req,
                                         bool& refused) {
  for (;;) {
    auto d = timed("admit", [&] { return svc_.admit(req); });
    if (!d) {
      if (d.error() == ec::position_limit_exceeded
          || d.error() == ec::over_budget) {
        refused = true;
        return {};
      }
      return d.error();
    }
    if (d->admitted)
      return {};
    ++out_.admission_waits;
    if (running_.empty())
      return make_error(ec::over_budget, "admission waits with nothing "
                                         "running");
    if (auto err = finish_oldest())
      return err;
  }
}

tiers::entry replay_session::driver::state_for(const acquired_state& acq,
                                               const std::string& ns,
                                               const tiers::token_seq& prompt,
                                               bool& reused, replay_step& st) {
  if (acq.usable_tokens > 0 && acq.source != state_source::none) {
    bool good = true;
    if (o_.verify) {
      ++out_.verified_states;
      ++st.verified;
      if (oracle_.verify_served(acq.state, ns, prompt,
                                acq.source == state_source::checkpoint)) {
        ++out_.wrong_states;
        ++st.wrong;
        good = false;
      }
    }
    if (good)
      if (auto e = oracle_.extend(acq.state, prompt)) {
        reused = true;
        return std::move(*e);
      }
  }
  return oracle_.prefill(ns, prompt);
}

caf::error replay_session::driver::decode(const state_request& req,
                                          const tiers::entry& state) {
  auto every = svc_.checkpoint_every_tokens();
  auto out = oracle_.generate(state.ns, state.tokens, req.max_new_tokens);
  out_.output_tokens += out.size();
  if (!every || *every == 0)
    return {};
  auto tokens = state.tokens;
  auto point = state;
  for (size_t k = *every; k <= out.size(); k += *every) {
    tokens.insert(tokens.end(),
                  out.begin() + static_cast<ptrdiff_t>(k - *every),
                  out.begin() + static_cast<ptrdiff_t>(k));
    auto next = oracle_.extend(point, tokens);
    if (!next)
      return next.error();
    point = *next;
    auto r = timed("checkpoint",
                   [&] { return svc_.checkpoint(req, tiers::entry{point}); });
    if (!r)
      return r.error();
  }
  return {};
}

caf::expected<uint64_t> replay_session::driver::peer_fetches() {
  if (!svc_.cluster())
    return uint64_t{0};
  auto rep = svc_.report();
  if (!rep)
    return rep.error();
  return rep->peer.fetched;
}

caf::error replay_session::driver::one(size_t i, replay_step& st) {
  auto& r = t_.requests[i];
  auto ns = request_ns(t_, r);
  state_request req;
  req.id = i + 1;
  req.prompt = prompt_tokens(r, t_.block_size);
  req.max_new_tokens = static_cast<uint32_t>(r.output_tokens);
  if (!r.session.empty())
    req.session = r.session;
  auto n = req.prompt.size();
  ++out_.requests;
  out_.input_tokens += n;
  st.input_tokens = n;
  auto fetched_before = peer_fetches();
  if (!fetched_before)
    return fetched_before.error();
  auto before =
    timed("peek", [&] { return svc_.peek_prefix_len(req.prompt, ns); });
  if (!before)
    return before.error();
  auto lease = timed(
    "prefetch", [&] { return svc_.prefetch(req.prompt, ns, req.session); });
  if (!lease)
    return lease.error();
  if (o_.settle)
    if (auto err = settle())
      return err;
  bool refused = false;
  if (auto err = admit(req, refused))
    return err;
  if (refused || n == 0) {
    ++out_.refused;
    out_.fresh_tokens += n;
    st.refused = true;
    st.fresh_tokens = n;
    return {};
  }
  auto acq = timed("acquire", [&] { return svc_.acquire(req, ns); });
  if (!acq)
    return acq.error();
  st.source = acq->source;
  bool reused = false;
  auto state = state_for(*acq, ns, req.prompt, reused, st);
  auto used = reused ? acq->usable_tokens : 0;
  // A RAM hit beyond what RAM held before the prefetch came from SSD, or
  // from a peer when a peer fetch completed meanwhile.
  bool cold = acq->source == state_source::ssd
              || (acq->source == state_source::ram && used > *before);
  bool from_peer = acq->source == state_source::peer;
  if (cold && svc_.cluster()) {
    auto fetched_after = peer_fetches();
    if (!fetched_after)
      return fetched_after.error();
    from_peer = *fetched_after > *fetched_before;
  }
  if (used > 0) {
    auto& tier =
      from_peer ? st.peer_tokens : (cold ? st.ssd_tokens : st.ram_tokens);
    tier = used;
  }
  out_.ram_tokens += st.ram_tokens;
  out_.ssd_tokens += st.ssd_tokens;
  out_.peer_tokens += st.peer_tokens;
  st.fresh_tokens = n - used;
  out_.fresh_tokens += n - used;
  state.session = req.session;
  auto pub =
    timed("publish", [&] { return svc_.publish(req, tiers::entry{state}); });
  if (!pub)
    return pub.error();
  if (o_.settle)
    if (auto err = settle())
      return err;
  lease->release();
  if (auto err = decode(req, state))
    return err;
  running_.push_back(std::move(req));
  while (running_.size() > std::max<uint32_t>(o_.batch, 1))
    if (auto err = finish_oldest())
      return err;
  if (!r.session.empty() && last_of_session_[r.session] == i) {
    auto c =
      timed("close_session", [&] { return svc_.close_session(r.session); });
    if (!c)
      return c.error();
  }
  return {};
}

caf::expected<replay_step> replay_session::driver::step(size_t i) {
  if (i >= t_.requests.size())
    return make_error(ec::invalid_argument,
                      "request " + std::to_string(i) + " is past the trace ("
                        + std::to_string(t_.requests.size()) + " requests)");
  replay_step st;
  if (auto err = one(i, st))
    return err;
  out_.series.push_back({out_.requests, out_.input_tokens, out_.ram_tokens,
                         out_.ssd_tokens, out_.peer_tokens});
  return st;
}

caf::expected<replay_report> replay_session::driver::finish() {
  while (!running_.empty())
    if (auto err = finish_oldest())
      return err;
  if (o_.settle)
    if (auto err = settle())
      return err;
  out_.wall_s = seconds_since(start_);
  auto rep = svc_.report();
  if (!rep)
    return rep.error();
  out_.spills = rep->ssd.writes_ok;
  out_.restores = rep->ssd.restores_ok;
  out_.coalesced_reads = rep->ssd.coalesced;
  out_.demotions = rep->demotions;
  out_.drops = rep->ram.oversize + rep->ssd.dropped + rep->ssd.writes_failed
               + rep->ssd.rejected_too_large;
  out_.ram_evictions = rep->ram.evictions;
  out_.ssd_evictions = rep->ssd.evicted;
  out_.ssd_bytes_written = rep->ssd_io.bytes_written;
  out_.ssd_bytes_read = rep->ssd_io.bytes_read;
  return std::move(out_);
}

replay_session::replay_session(const trace& t, service& svc,
                               const tiers::model_geometry& geometry,
                               const replay_options& opts)
  : d_(std::make_unique<driver>(t, svc, geometry, opts)) {}

replay_session::~replay_session() = default;

caf::expected<replay_step> replay_session::step(size_t i) {
  return d_->step(i);
}

caf::expected<replay_report> replay_session::finish() {
  return d_->finish();
}

const replay_report& replay_session::so_far() const {
  return d_->so_far();
}

caf::expected<replay_report> replay(const trace& t, service& svc,
                                    const tiers::model_geometry& geometry,
                                    const replay_options& opts) {
  replay_session session(t, svc, geometry, opts);
  auto start = clock_type::now();
  auto last_progress = start;
  for (size_t i = 0; i < t.requests.size(); ++i) {
    if (opts.speed > 0) {
      auto due =
        start
        + std::chrono::duration_cast<clock_type::duration>(
          std::chrono::duration<double>(t.requests[i].arrival_s / opts.speed));
      std::this_thread::sleep_until(due);
    }
    auto st = session.step(i);
    if (!st)
      return st.error();
    if (opts.progress && seconds_since(last_progress) >= 1.0) {
      last_progress = clock_type::now();
      opts.progress(session.so_far(), t.requests.size(), seconds_since(start));
    }
  }
  return session.finish();
}

} // namespace kvtier::runtime
