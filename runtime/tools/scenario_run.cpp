// run_scenario (runtime/tools/scenario.hpp): drives the embedded service
// through a scenario's steps with the oracle engine, recording facts for the
// expectations. The SSD tier runs on an in-memory file system behind a
// `full_disk` wrapper, so a restart keeps the files and `disk-full` makes
// every write fail with ENOSPC until `disk-ok`.
#include "runtime/service.hpp"
#include "runtime/tools/mix.hpp"
#include "runtime/tools/oracle.hpp"
#include "runtime/tools/scenario.hpp"
#include "tiers/ssd/memory_file_system.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

namespace kvtier::runtime {

namespace {

using tiers::token_seq;

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// `NAME:N` tokens: a pure function of NAME, so NAME:N is a prefix of
/// NAME:M when N < M.
void named_run(const std::string& name, uint64_t n, token_seq& out) {
  uint64_t h = fnv1a(name);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t k = h + (i + 1) * golden;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    out.push_back(static_cast<uint32_t>(k % 32000));
  }
}

/// A file system whose writes fail with ENOSPC while `full` is set.
class full_disk final : public tiers::ssd::file_system {
public:
  explicit full_disk(tiers::ssd::file_system& inner)
    : inner_(inner) {}

  std::atomic<bool> full{false};

  caf::expected<tiers::ssd::file_ref>
  open(const std::string& path, tiers::ssd::open_mode mode) override {
    auto f = inner_.open(path, mode);
    if (!f)
      return f;
    return std::make_shared<file>(*f, full);
  }
  caf::error rename(const std::string& from, const std::string& to) override {
    return inner_.rename(from, to);
  }
  caf::error remove(const std::string& path) override {
    return inner_.remove(path);
  }
  caf::error sync_dir(const std::string& dir) override {
    return inner_.sync_dir(dir);
  }
  caf::expected<std::vector<std::string>>
  list(const std::string& dir) override {
    return inner_.list(dir);
  }
  caf::error make_dirs(const std::string& dir) override {
    return inner_.make_dirs(dir);
  }
  caf::expected<uint32_t> mode(const std::string& path) override {
    return inner_.mode(path);
  }
  caf::error set_mode(const std::string& path, uint32_t mode) override {
    return inner_.set_mode(path, mode);
  }
  caf::error set_mtime(const std::string& path, uint64_t ns) override {
    return inner_.set_mtime(path, ns);
  }
  caf::expected<tiers::ssd::lock_ref> lock(const std::string& path) override {
    return inner_.lock(path);
  }

private:
  class file final : public tiers::ssd::file {
  public:
    file(tiers::ssd::file_ref inner, const std::atomic<bool>& full)
      : inner_(std::move(inner))
      , full_(full) {}
    caf::expected<size_t> read_at(uint64_t off,
                                  std::span<std::byte> dst) override {
      return inner_->read_at(off, dst);
    }
    caf::expected<size_t> write_at(uint64_t off,
                                   std::span<const std::byte> src) override {
      if (full_)
        return tiers::ssd::errno_error(ENOSPC, "write (disk-full)");
      return inner_->write_at(off, src);
    }
    caf::error sync() override {
      return inner_->sync();
    }
    caf::expected<uint64_t> size() override {
      return inner_->size();
    }
    caf::expected<uint64_t> mtime() override {
      return inner_->mtime();
    }

  private:
    tiers::ssd::file_ref inner_;
    const std::atomic<bool>& full_;
  };

  tiers::ssd::file_system& inner_;
};

class runner {
public:
  runner(const scenario& s, const service_options& base)
    : s_(s)
    , base_(base)
    , disk_(memory_) {
    result_.name = s.name;
    result_.file = s.file;
  }

  scenario_result run();

private:
  caf::error configure();
  caf::error start();
  caf::error step(const scenario_step& st);
  caf::error request(const scenario_step& st);
  caf::error decode(const scenario_step& st, const state_request& req,
                    const std::string& ns, const tiers::entry* reused,
                    const token_seq& gen);
  caf::expected<token_seq> prompt_of(const std::string& expr) const;
  caf::error settle();
  caf::error refresh_report();
  void fact(const std::string& k, double v) {
    result_.facts[k] = fmt_num(v);
  }
  caf::error fail(const scenario_step& st, const std::string& what) {
    return make_error(ec::invalid_argument,
                      s_.file + ":" + std::to_string(st.line) + ": " + what);
  }

  const scenario& s_;
  service_options base_;
  service_options opts_;
  tiers::ssd::memory_file_system memory_;
  full_disk disk_;
  std::unique_ptr<service> svc_;
  std::optional<oracle_engine> oracle_;
  scenario_result result_;
  uint64_t wrong_ = 0;
  std::map<std::string, uint64_t> ids_;
  std::map<std::string, token_seq> prompts_;
  std::map<std::string, token_seq> outputs_;
};

caf::error runner::configure() {
  opts_ = base_;
  opts_.ssd_dir = "/scenario-ssd";
  opts_.model_scale = 1; // scenarios size their caps for the preset as is
  // Background snapshots would make what is durable depend on timing.
  opts_.write_behind = false;
  for (auto& [k, v] : s_.settings) {
    auto u = [&] { return std::strtoull(v.c_str(), nullptr, 10); };
    if (k == "model")
      opts_.model = v;
    else if (k == "model-scale")
      opts_.model_scale = std::strtod(v.c_str(), nullptr);
    else if (k == "model-layers")
      opts_.model_layers = v;
    else if (k == "model-identity")
      opts_.model_identity = v;
    else if (k == "ram-cap-bytes")
      opts_.ram_cap_bytes = u();
    else if (k == "ssd-cap-bytes")
      opts_.ssd_cap_bytes = u();
    else if (k == "ssd")
      opts_.ssd_dir = v == "off" ? "" : opts_.ssd_dir;
    else if (k == "kv-budget-bytes")
      opts_.kv_budget_bytes = u();
    else if (k == "position-limit")
      opts_.position_limit = u();
    else if (k == "checkpoint-every-tokens")
      opts_.checkpoint_every_tokens = u();
    else if (k == "write-behind-cap-bytes")
      opts_.write_behind_cap_bytes = u();
    else if (k == "write-behind")
      opts_.write_behind = v == "true";
    else if (k == "write-attempts")
      opts_.write_attempts = u();
    else if (k == "retry-backoff-ms")
      opts_.retry_backoff_ms = u();
    else
      return make_error(ec::invalid_argument,
                        s_.file + ": unknown setting '" + k + "'");
  }
  if (auto err = opts_.validate())
    return err;
  auto g = running_geometry(opts_);
  if (!g)
    return g.error();
  oracle_.emplace(*g);
  return {};
}

caf::error runner::start() {
  service_parts parts;
  parts.fs = &disk_;
  svc_ = std::make_unique<service>(opts_, parts);
  return svc_->start_error();
}

caf::error runner::settle() {
  // Writes to the in-memory disk take microseconds; a failed one (disk
  // full) stays pending until a flush retries it, so wait a bounded time.
  for (int i = 0; i < 2000; ++i) {
    auto s = svc_->stats();
    if (!s)
      return s.error();
    if (s->pending_spills == 0)
      return {};
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return {};
}

caf::expected<token_seq> runner::prompt_of(const std::string& expr) const {
  token_seq out;
  size_t at = 0;
  while (at <= expr.size()) {
    auto comma = expr.find(',', at);
    auto part = expr.substr(at, comma == std::string::npos ? std::string::npos
                                                           : comma - at);
    at = comma == std::string::npos ? expr.size() + 1 : comma + 1;
    if (!part.empty() && part[0] == '^') {
      bool with_out = part.size() > 4 && part.ends_with("+out");
      auto id = part.substr(1, part.size() - 1 - (with_out ? 4 : 0));
      auto p = prompts_.find(id);
      if (p == prompts_.end())
        return make_error(ec::invalid_argument, "no earlier request " + id);
      out.insert(out.end(), p->second.begin(), p->second.end());
      if (with_out)
        out.insert(out.end(), outputs_.at(id).begin(), outputs_.at(id).end());
      continue;
    }
    auto colon = part.find(':');
    if (colon == std::string::npos || colon == 0)
      return make_error(ec::invalid_argument,
                        "prompt part '" + part
                          + "' is not NAME:N or ^ID[+out]");
    named_run(part.substr(0, colon),
              std::strtoull(part.c_str() + colon + 1, nullptr, 10), out);
  }
  return out;
}

caf::error runner::refresh_report() {
  auto r = svc_->report();
  if (!r)
    return r.error();
  auto& m = *r;
  fact("report.ram.entries", m.ram.entries);
  fact("report.ram.bytes", m.ram.bytes);
  fact("report.ram.hits", m.ram.hits);
  fact("report.ram.misses", m.ram.misses);
  fact("report.ram.evictions", m.ram.evictions);
  fact("report.ram.supersessions", m.ram.supersessions);
  fact("report.ram.oversize", m.ram.oversize);
  fact("report.ssd.files", m.ssd.files);
  fact("report.ssd.writes_ok", m.ssd.writes_ok);
  fact("report.ssd.writes_failed", m.ssd.writes_failed);
  fact("report.ssd.write_no_space", m.ssd.write_no_space);
  fact("report.ssd.dropped", m.ssd.dropped);
  fact("report.ssd.evicted", m.ssd.evicted);
  fact("report.ssd.restores_ok", m.ssd.restores_ok);
  fact("report.ssd.coalesced", m.ssd.coalesced);
  fact("report.sessions.open", m.sessions.open);
  fact("report.sessions.protected_entries", m.sessions.protected_entries);
  fact("report.sessions.opened", m.sessions.opened);
  fact("report.sessions.closed", m.sessions.closed);
  fact("report.ssd.removals_pending", m.ssd.removals_pending);
  fact("report.ssd.writes_given_up", m.ssd.writes_given_up);
  fact("report.ram.leaving_entries", m.ram.leaving_entries);
  fact("report.ram.leaving_dropped", m.ram.leaving_dropped);
  fact("report.checkpoints.held", m.checkpoints.held);
  fact("report.checkpoints.resumed", m.checkpoints.resumed);
  fact("report.checkpoints.stale", m.checkpoints.stale);
  fact("report.checkpoints.removed", m.checkpoints.removed);
  fact("report.admission.admitted", m.admission.admitted);
  fact("report.admission.errors", m.admission.errors);
  fact("report.demotions", m.demotions);
  fact("wrong_states", wrong_);
  return {};
}

caf::error runner::request(const scenario_step& st) {
  auto& name = st.words[0];
  auto arg = [&](const char* k, const std::string& dflt = "") {
    auto i = st.args.find(k);
    return i == st.args.end() ? dflt : i->second;
  };
  auto prompt = prompt_of(arg("prompt"));
  if (!prompt)
    return fail(st, describe(prompt.error()));
  auto ns = arg("ns", "default");
  state_request req;
  auto same = arg("id");
  if (!same.empty() && !ids_.count(same))
    return fail(st, "id=" + same + " names no earlier request");
  req.id = same.empty() ? ids_.size() + 1 : ids_.at(same);
  ids_.emplace(name, req.id);
  req.prompt = *prompt;
  req.max_new_tokens = static_cast<uint32_t>(std::stoul(arg("new", "0")));
  req.attempt = static_cast<uint32_t>(std::stoul(arg("attempt", "0")));
  if (auto s = arg("session"); !s.empty())
    req.session = s;
  prompts_[name] = req.prompt;
  auto gen = oracle_->generate(ns, req.prompt, req.max_new_tokens);
  outputs_[name] = gen;
  fact(name + ".prompt", double(req.prompt.size()));
  auto lease = svc_->prefetch(req.prompt, ns, req.session);
  if (!lease)
    return lease.error();
  if (auto err = settle())
    return err;
  auto adm = svc_->admit(req);
  if (!adm) {
    result_.facts[name + ".admit"] = describe(adm.error());
    fact(name + ".admitted", 0);
    return {};
  }
  fact(name + ".admitted", adm->admitted ? 1 : 0);
  if (!adm->admitted)
    return {};
  auto acq = svc_->acquire(req, ns);
  if (!acq)
    return acq.error();
  result_.facts[name + ".source"] = to_string(acq->source);
  fact(name + ".usable", double(acq->usable_tokens));
  fact(name + ".stale", double(acq->stale_checkpoint_tokens));
  bool good = acq->source != state_source::none;
  if (good
      && oracle_->verify_served(acq->state, ns, req.prompt,
                                acq->source == state_source::checkpoint)) {
    ++wrong_;
    good = false;
  }
  auto reused =
    good ? std::min<uint64_t>(acq->usable_tokens, req.prompt.size()) : 0;
  fact(name + ".reused", double(reused));
  fact(name + ".reused_pct",
       req.prompt.empty() ? 0
                          : 100.0 * double(reused) / double(req.prompt.size()));
  auto err = decode(st, req, ns, good ? &acq->state : nullptr, gen);
  lease->release();
  if (!err)
    err = settle();
  return err;
}

caf::error runner::decode(const scenario_step& st, const state_request& req,
                          const std::string& ns, const tiers::entry* reused,
                          const token_seq& gen) {
  auto& name = st.words[0];
  auto stop =
    st.args.count("interrupt")
      ? std::min<uint64_t>(std::stoull(st.args.at("interrupt")), gen.size())
      : gen.size();
  auto publish = st.args.count("publish") ? st.args.at("publish") : "all";
  auto n = req.prompt.size();
  uint64_t at = 0; // generated tokens the state covers
  tiers::entry state;
  if (reused && reused->size() > n) { // a checkpoint: prompt + generated
    state = *reused;
    at = reused->size() - n;
  } else {
    auto e = reused
               ? oracle_->extend(*reused, req.prompt)
               : caf::expected<tiers::entry>{oracle_->prefill(ns, req.prompt)};
    if (!e)
      return e.error();
    state = std::move(*e);
    state.session = req.session;
    if (publish != "none") {
      auto p = svc_->publish(req, tiers::entry{state});
      if (!p)
        return p.error();
      fact(name + ".kept", p->kept ? 1 : 0);
    }
  }
  auto every = opts_.checkpoint_every_tokens;
  token_seq tokens = state.tokens;
  for (auto pos = at + 1; pos <= stop; ++pos) {
    tokens.push_back(gen[pos - 1]);
    if (every == 0 || pos % every != 0)
      continue;
    auto e = oracle_->extend(state, tokens);
    if (!e)
      return e.error();
    state = std::move(*e);
    if (auto c = svc_->checkpoint(req, tiers::entry{state}); !c)
      return c.error();
  }
  bool completed = stop == gen.size();
  if (completed && !gen.empty() && publish == "all") {
    auto e = oracle_->extend(state, tokens);
    if (!e)
      return e.error();
    e->session = req.session;
    auto p = svc_->publish(req, std::move(*e));
    if (!p)
      return p.error();
    fact(name + ".kept_full", p->kept ? 1 : 0);
  }
  auto rel = svc_->release(req, completed);
  if (!rel)
    return rel.error();
  fact(name + ".checkpoints_removed", rel->checkpoints_removed);
  fact(name + ".checkpoints_kept", rel->checkpoints_kept);
  return {};
}

caf::error runner::step(const scenario_step& st) {
  auto num = [&](size_t i, uint64_t dflt) {
    return st.words.size() > i ? std::stoull(st.words[i]) : dflt;
  };
  if (st.verb == "request")
    return request(st);
  if (st.verb == "expect") {
    if (auto err = refresh_report())
      return err;
    if (auto f = check_expectation(st, result_.facts))
      result_.failures.push_back(*f);
    return {};
  }
  if (st.verb == "flush" || st.verb == "restart") {
    auto r = st.verb == "flush" ? svc_->flush() : svc_->close();
    if (!r)
      return r.error();
    fact(st.verb + ".durable", r->durable ? 1 : 0);
    fact(st.verb + ".entries", double(r->entries));
    fact(st.verb + ".failed", double(r->failed));
    fact(st.verb + ".longest", double(r->longest_durable_prefix));
    if (st.verb == "restart") {
      svc_.reset();
      return start();
    }
    return {};
  }
  if (st.verb == "boundary") {
    auto r = svc_->boundary(num(0, UINT64_MAX));
    if (!r)
      return r.error();
    fact("boundary.released", double(r->released));
    return {};
  }
  if (st.verb == "pressure") { // the engine's check passes after N releases
    auto want = num(0, 1);
    uint64_t calls = 0;
    auto r = svc_->relieve_pressure([&] { return calls++ >= want; });
    if (!r)
      return r.error();
    fact("pressure.released", double(r->released));
    fact("pressure.held_bytes", double(r->held_bytes));
    return settle();
  }
  if (st.verb == "demote-idle") {
    auto r = svc_->demote_idle(num(0, 0));
    if (!r)
      return r.error();
    fact("demote.removed", double(*r));
    return settle();
  }
  if (st.verb == "close-session") {
    if (st.words.empty())
      return fail(st, "close-session needs a session id");
    auto r = svc_->close_session(st.words[0]);
    return r ? caf::error{} : r.error();
  }
  if (st.verb == "disk-full") { // every write from now on: ENOSPC
    disk_.full = true;
    return {};
  }
  disk_.full = false; // disk-ok
  return {};
}

} // namespace

scenario_result run_scenario(const scenario& s, const service_options& base) {
  runner r(s, base);
  return r.run();
}

namespace {

scenario_result runner::run() {
  auto err = configure();
  if (!err)
    err = start();
  for (size_t i = 0; !err && i < s_.steps.size(); ++i)
    err = step(s_.steps[i]);
  if (err)
    result_.error = describe(err);
  if (svc_)
    svc_->close();
  return std::move(result_);
}

} // namespace

} // namespace kvtier::runtime
