#include "runtime/tools/simulate.hpp"

#include "tiers/prefix_index.hpp"
#include "tiers/sessions.hpp"

#include <algorithm>
#include <list>
#include <map>
#include <optional>
#include <unordered_map>

namespace kvtier::runtime {

using tiers::entry_ref;
using tiers::token;
using tiers::token_seq;

double simulate_result::token_hit_ratio() const {
  return input_tokens ? double(ram_tokens + ssd_tokens) / double(input_tokens)
                      : 0.0;
}

double simulate_result::infinite_hit_ratio() const {
  return input_tokens ? double(infinite_tokens) / double(input_tokens) : 0.0;
}

simulate_options reference_options(const service_options& o,
                                   const tiers::model_geometry& g) {
  simulate_options s;
  s.geometry = g;
  s.ram_cap_bytes = o.ram_cap_bytes;
  s.ram_policy = tiers::parse_ram_policy(o.ram_policy)
                   .value_or(tiers::ram_policy::lru); // validated
  s.ssd_cap_bytes = o.ssd_dir.empty() ? 0 : o.ssd_cap_bytes;
  s.ssd_policy = tiers::parse_ram_policy(o.ssd_policy)
                   .value_or(tiers::ram_policy::lru); // validated
  s.alignment = static_cast<uint32_t>(o.alignment);
  // The service's SSD tier keeps the default chunk (at least the alignment).
  s.checksum_chunk = std::max<uint32_t>(s.alignment, 1u << 20);
  auto model = running_model(o);
  s.fingerprint = model ? model->fingerprint() : o.model;
  s.position_limit = o.position_limit;
  s.kv_budget_bytes = o.kv_budget_bytes;
  if (auto rule = tiers::ssd::parse_admission_rule(o.ssd_admission))
    s.admission = *rule;
  s.admission_memory_keys =
    tiers::ssd::spill_admission::memory_for(o.ssd_cap_bytes);
  return s;
}

std::string request_ns(const trace& t, const trace_request& r) {
  return t.name + (r.ns.empty() ? "" : "/" + r.ns);
}

namespace {

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

uint64_t chunks(uint64_t len, uint64_t chunk) {
  return (len + chunk - 1) / chunk;
}

} // namespace

uint64_t entry_file_bytes(const tiers::model_geometry& geometry,
                          uint64_t tokens, const std::string& ns,
                          const std::optional<std::string>& session,
                          const std::string& fingerprint, uint32_t alignment,
                          uint32_t checksum_chunk) {
  uint64_t h = 64 + 4 + fingerprint.size() + 4 + ns.size() + 1
               + (session ? 4 + session->size() : 0) + 4 + 8 + 4 * tokens
               + 48 * geometry.layers.size() + 8;
  for (auto& l : geometry.layers)
    h += 8 * chunks(l.bytes_at(tokens), checksum_chunk);
  uint64_t at = align_up(h, alignment), end = h;
  for (auto& l : geometry.layers) {
    end = at + l.bytes_at(tokens);
    at = align_up(end, alignment);
  }
  return end;
}

namespace {

/// A run of token rows [from, to) held in one buffer (one per layer in the
/// real state; counted here as their sum).
struct segment {
  uint64_t buffer = 0;
  uint64_t from = 0;
  uint64_t to = 0;
};

struct ram_entry {
  std::string ns;
  std::vector<segment> segments;
  bool durable = false;
  std::optional<std::string> session;
  /// A prefetch lease holds it (evicted after everything else).
  bool leased = false;
  /// Pins of sessions whose newest entry it is (evicted after plain ones).
  std::vector<uint64_t> pins{};
  uint64_t serial = 0;
  /// Its id in the eviction order.
  tiers::entry_ranking::id rid = tiers::entry_ranking::none;
  entry_ref ref{};
  /// Tokens of the SSD file behind `durable` (it was restored from it).
  uint64_t file_tokens = 0;
};

struct ssd_entry {
  std::string ns;
  std::optional<std::string> session;
  uint64_t bytes = 0;
  entry_ref ref{};
  /// Its id in the SSD eviction order.
  tiers::entry_ranking::id rid = tiers::entry_ranking::none;
};

/// The reference's state: both tiers' indexes, LRU lists and bytes.
class model {
public:
  model(const simulate_options& o, simulate_result& out)
    : o_(o)
    , out_(out)
    , rank_(o.ram_policy)
    , ssd_rank_(o.ssd_policy)
    , admission_(o.admission, o.admission_memory_keys) {
    for (auto& l : o.geometry.layers)
      bpt_ += l.bytes_per_token;
  }

  void request(const std::string& ns, const token_seq& prompt,
               const std::optional<std::string>& session);

  void close_session(const std::string& s) {
    if (auto last = sessions_.close(s))
      unprotect(*last);
  }

private:
  using ram_it = std::list<ram_entry>::iterator;
  using ssd_it = std::list<ssd_entry>::iterator;
  template <class Match>
  std::vector<segment> install(const std::string& ns, const token_seq& prompt,
                               const Match& f, bool leased);
  uint64_t new_buffer(uint64_t bytes) {
    buffers_[++next_buffer_] = {bytes, 0};
    return next_buffer_;
  }
  void hold(const std::vector<segment>& segs);
  void release(const std::vector<segment>& segs);
  void drop(ram_it r);
  /// Puts `e`; returns its pin when `pin` and it was kept, else 0.
  uint64_t put(ram_entry e, const token_seq& tokens, bool pin = false);
  void unprotect(const tiers::pinned_entry& p);
  void write(const std::string& ns, const token_seq& tokens,
             const std::optional<std::string>& session);
  ram_it victim(ram_it skip);
  /// Removes the file `f` (`evicted`: by the cap); RAM hears of it from
  /// the next request on.
  void drop_file(ssd_it f, bool evicted);
  void forget_lost();

  const simulate_options& o_;
  simulate_result& out_;
  uint64_t bpt_ = 0;
  std::list<ram_entry> ram_;
  /// RAM's eviction order, as the tier's; its ids name `by_rid_`.
  tiers::entry_ranking rank_;
  std::vector<ram_it> by_rid_;
  std::vector<tiers::entry_ranking::id> free_rids_;
  tiers::prefix_index<ram_it> ram_index_;
  /// Every buffer made (bytes, holders in RAM); a few per request.
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> buffers_;
  uint64_t next_buffer_ = 0;
  uint64_t ram_bytes_ = 0;
  uint64_t serials_ = 0;
  uint64_t pins_ = 0;
  tiers::sessions sessions_;
  std::list<ssd_entry> ssd_;
  /// The SSD tier's eviction order (`ssd-tier.policy`), as its index's;
  /// its ids name `ssd_by_rid_`.
  tiers::entry_ranking ssd_rank_;
  std::vector<ssd_it> ssd_by_rid_;
  std::vector<tiers::entry_ranking::id> ssd_free_rids_;
  tiers::prefix_index<ssd_it> ssd_index_;
  uint64_t ssd_bytes_ = 0;
  /// Files evicted from SSD whose news has not reached RAM yet.
  std::vector<std::pair<std::string, token_seq>> lost_;
  tiers::ssd::spill_admission admission_;
};

void model::hold(const std::vector<segment>& segs) {
  for (auto& s : segs)
    if (buffers_.at(s.buffer).second++ == 0)
      ram_bytes_ += buffers_.at(s.buffer).first;
}

void model::release(const std::vector<segment>& segs) {
  for (auto& s : segs) {
    auto b = buffers_.find(s.buffer);
    if (--b->second.second == 0)
      ram_bytes_ -= b->second.first;
  }
}

void model::drop(ram_it r) {
  rank_.erase(r->rid); // a no-op after `evicted`
  free_rids_.push_back(r->rid);
  release(r->segments);
  if (r->ref)
    ram_index_.erase(r->ref);
  ram_.erase(r);
}

void model::unprotect(const tiers::pinned_entry& p) {
  auto ref = ram_index_.find(p.ns, p.tokens);
  if (!ref)
    return; // it left RAM, its pin with it
  auto& pins = ram_index_.handle(ref)->pins;
  std::erase(pins, p.pin);
}

model::ram_it model::victim(ram_it skip) {
  // Plain entries first, then protected ones, then leased ones; each in
  // the ranking's order.
  for (int pass = 0; pass < 3; ++pass) {
    auto id = rank_.first([&](tiers::entry_ranking::id i) {
      auto r = by_rid_[i];
      return r != skip
             && (pass == 2 || (!r->leased && (pass == 1 || r->pins.empty())));
    });
    if (id != tiers::entry_ranking::none)
      return by_rid_[id];
  }
  return ram_.end();
}

void model::write(const std::string& ns, const token_seq& tokens,
                  const std::optional<std::string>& session) {
  auto bytes =
    entry_file_bytes(o_.geometry, tokens.size(), ns, session, o_.fingerprint,
                     o_.alignment, o_.checksum_chunk);
  if (o_.ssd_cap_bytes == 0 || ssd_index_.find(ns, tokens))
    return; // no cold tier, or already durable
  if (!admission_.admit(ns, tokens)) {
    ++out_.skipped_spills;
    out_.skipped_bytes += bytes;
    return;
  }
  if (bytes > o_.ssd_cap_bytes)
    return; // too large
  ++out_.spills;
  out_.spill_bytes += bytes;
  ssd_.push_back({ns, session, bytes, {}});
  auto f = std::prev(ssd_.end());
  ssd_bytes_ += bytes;
  f->ref = ssd_index_.insert(ns, tokens, f, 0).ref;
  f->rid = tiers::take_id(ssd_by_rid_, ssd_free_rids_, f);
  // The most recently used of its priority; under gdsf it carries on the
  // uses of the ancestors it supersedes (as the SSD index does).
  uint32_t inherited = 0;
  for (auto a : ssd_index_.ancestors(f->ref))
    inherited = std::max(inherited, ssd_rank_.count(ssd_index_.handle(a)->rid));
  ssd_rank_.insert(f->rid, tokens.size(), tiers::default_priority,
                   tiers::ranking_key(ns, tokens), inherited);
  // A kv file trims to anything: it supersedes every stored ancestor.
  for (auto a : ssd_index_.ancestors(f->ref))
    drop_file(ssd_index_.handle(a), false);
  // Over the cap, files leave in the ranking's order, never the file just
  // written.
  while (ssd_bytes_ > o_.ssd_cap_bytes) {
    auto v =
      ssd_rank_.first([&](tiers::entry_ranking::id i) { return i != f->rid; });
    if (v == tiers::entry_ranking::none)
      break;
    drop_file(ssd_by_rid_[v], true);
    ++out_.ssd_evictions;
  }
}

void model::drop_file(ssd_it f, bool evicted) {
  lost_.emplace_back(f->ns, ssd_index_.key(f->ref));
  ssd_bytes_ -= f->bytes;
  if (evicted)
    ssd_rank_.evicted(f->rid);
  else
    ssd_rank_.erase(f->rid);
  ssd_free_rids_.push_back(f->rid);
  ssd_index_.erase(f->ref);
  ssd_.erase(f);
}

uint64_t model::put(ram_entry e, const token_seq& tokens, bool pin) {
  uint64_t bytes = 0;
  for (auto& s : e.segments)
    bytes += buffers_.at(s.buffer).first; // an entry's buffers are distinct
  if (bytes > o_.ram_cap_bytes) {
    write(e.ns, tokens, e.session); // larger than RAM: spilled, not kept
    return 0;
  }
  e.serial = ++serials_;
  hold(e.segments);
  ram_.push_back(std::move(e));
  auto r = std::prev(ram_.end());
  r->rid = tiers::take_id(by_rid_, free_rids_, r);
  auto ins = ram_index_.insert(r->ns, tokens, r, 0);
  r->ref = ins.ref;
  // The count it takes over: its key's previous entry's, or the ancestors'
  // it supersedes (below).
  uint32_t inherited = ins.replaced ? rank_.count((*ins.replaced)->rid) : 0;
  for (auto a : ram_index_.ancestors(r->ref))
    inherited = std::max(inherited, rank_.count(ram_index_.handle(a)->rid));
  rank_.insert(r->rid, tokens.size(), tiers::default_priority,
               tiers::ranking_key(r->ns, tokens), inherited);
  if (ins.replaced) {
    r->leased = r->leased || (*ins.replaced)->leased;
    r->pins = std::move((*ins.replaced)->pins); // pins follow the key
    (*ins.replaced)->ref = entry_ref{};
    drop(*ins.replaced);
  }
  uint64_t id = pin ? ++pins_ : 0;
  if (pin)
    r->pins.push_back(id);
  for (auto a : ram_index_.ancestors(r->ref))
    drop(ram_index_.handle(a)); // kv: floor 0, every ancestor goes
  while (ram_bytes_ > o_.ram_cap_bytes) {
    auto v = victim(r);
    auto tokens = ram_index_.key(v->ref);
    if (!v->durable)
      write(v->ns, tokens, v->session);
    rank_.evicted(v->rid);
    drop(v);
    ++out_.ram_evictions;
  }
  return id;
}

void model::forget_lost() {
  // As the RAM tier's `mark_not_durable`: the entry of the file's key and
  // entries restored trimmed from it are no longer durable.
  for (auto& [ns, key] : lost_)
    for (auto ref : ram_index_.prefixes(ns, key)) {
      auto r = ram_index_.handle(ref);
      if (r->durable && r->file_tokens == key.size())
        r->durable = false;
    }
  lost_.clear();
}

template <class Match>
std::vector<segment> model::install(const std::string& ns,
                                    const token_seq& prompt, const Match& f,
                                    bool leased) {
  // The file becomes most recently used; its first p tokens are read into
  // one buffer per layer of whole checksum chunks (at most the payload).
  auto file = ssd_index_.handle(f.ref);
  ssd_rank_.touch(file->rid);
  ssd_index_.touch(f.ref);
  ++out_.restores;
  auto p = f.length, file_tokens = ssd_index_.length(f.ref);
  uint64_t bytes = 0;
  for (auto& l : o_.geometry.layers)
    bytes += std::min(l.bytes_at(file_tokens),
                      align_up(l.bytes_at(p), o_.checksum_chunk));
  std::vector<segment> segs{{new_buffer(bytes), 0, p}};
  token_seq head(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(p));
  ram_entry e{ns, segs, true, file->session, leased};
  e.file_tokens = file_tokens;
  put(std::move(e), head);
  return segs;
}

void model::request(const std::string& ns, const token_seq& prompt,
                    const std::optional<std::string>& session) {
  uint64_t n = prompt.size();
  // The previous request's writes have finished (the replay settles them),
  // so the RAM tier has heard of every file they evicted.
  forget_lost();
  // Preparation: peek RAM, then prefetch the SSD's best file into RAM under
  // a lease when it is strictly longer than what RAM holds (else nothing is
  // read and the file is not touched).
  auto peek = ram_index_.longest_usable(ns, prompt);
  uint64_t r0 = peek ? peek->length : 0;
  uint64_t lease = 0;
  if (auto f = ssd_index_.longest_usable(ns, prompt); f && f->length > r0) {
    install(ns, prompt, *f, true);
    lease = serials_;
  }
  // Acquire: RAM lends its best (touching it); SSD wins when strictly
  // longer, restored and installed.
  auto m = ram_index_.longest_usable(ns, prompt);
  auto f = ssd_index_.longest_usable(ns, prompt);
  uint64_t r = m ? m->length : 0, s = f ? f->length : 0, p = 0;
  std::vector<segment> served;
  if (m) { // RAM lends (and touches) its best whichever tier wins
    auto d = ram_index_.handle(m->ref);
    rank_.touch(d->rid);
    ram_index_.touch(m->ref);
    for (auto& seg : d->segments)
      if (seg.from < r)
        served.push_back({seg.buffer, seg.from, std::min(seg.to, r)});
  }
  if (s > r) {
    p = s;
    out_.ssd_tokens += s;
    served = install(ns, prompt, *f, false);
  } else if (m) {
    p = r;
    // Beyond what RAM held before the prefetch: the prefetch brought it.
    (r > r0 ? out_.ssd_tokens : out_.ram_tokens) += r;
  }
  served.push_back({new_buffer((n - p) * bpt_), p, n});
  // A session's publish is pinned as its newest; the previous newest loses
  // its pin right after (the sessions actor's unprotect follows the put).
  auto pin =
    put({ns, std::move(served), false, session}, prompt, session.has_value());
  if (pin != 0)
    if (auto prev = sessions_.note_put(*session, {ns, prompt, pin}))
      unprotect(*prev);
  for (auto& e : ram_) // the lease ends; its entry may be gone already
    if (e.serial == lease)
      e.leased = false;
}

/// Tokens an infinite whole-prefix cache serves to each prompt in turn.
class infinite_model {
public:
  uint64_t request(const std::string& ns, const token_seq& prompt) {
    auto m = index_.longest_usable(ns, prompt);
    auto ins = index_.insert(ns, prompt, 0, 0);
    for (auto a : index_.ancestors(ins.ref))
      index_.erase(a);
    return m ? m->length : 0;
  }

private:
  tiers::prefix_index<char> index_;
};

} // namespace

caf::expected<simulate_result> simulate(const trace& t,
                                        const simulate_options& opts) {
  for (auto& l : opts.geometry.layers)
    if (l.kind != tiers::layer_kind::kv)
      return make_error(ec::invalid_argument,
                        "--simulate models kv layers only; "
                          + opts.geometry.name + " has a "
                          + tiers::to_string(l.kind) + " layer");
  simulate_result out;
  model m(opts, out);
  infinite_model inf;
  std::unordered_map<std::string, size_t> last; // session -> last request
  for (size_t i = 0; i < t.requests.size(); ++i)
    if (!t.requests[i].session.empty())
      last[t.requests[i].session] = i;
  for (size_t i = 0; i < t.requests.size(); ++i) {
    auto& r = t.requests[i];
    ++out.requests;
    auto ns = request_ns(t, r);
    auto prompt = prompt_tokens(r, t.block_size);
    bool never =
      prompt.size() + r.output_tokens > opts.position_limit
      || opts.geometry.projected_bytes(prompt.size(), r.output_tokens)
           > opts.kv_budget_bytes;
    out.input_tokens += prompt.size();
    if (never || prompt.empty()) {
      ++out.refused; // served nothing, its tokens still count
      continue;
    }
    out.infinite_tokens += inf.request(ns, prompt);
    std::optional<std::string> session;
    if (opts.sessions && !r.session.empty())
      session = r.session;
    m.request(ns, prompt, session);
    if (session && last[r.session] == i)
      m.close_session(r.session);
  }
  return out;
}

} // namespace kvtier::runtime
