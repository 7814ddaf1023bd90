#include "tiers/ssd/ssd_tier.hpp"

#include "tiers/ssd/ssd_jobs.hpp"

#include "messages/assert.hpp"
#include "messages/log.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <tuple>

namespace kvtier::tiers::ssd {

caf::error check_header(const model_geometry& g, const std::string& fingerprint,
                        const entry_header& h) {
  if (h.fingerprint != fingerprint)
    return make_error(ec::incompatible_format,
                      "the header names fingerprint " + h.fingerprint);
  if (h.kind == key_kind::object)
    return {}; // attachments only (the decoder refuses layers): no geometry
  if (h.layers.size() != g.layers.size())
    return make_error(ec::incompatible_format,
                      "the file has " + std::to_string(h.layers.size())
                        + " layers, the model (" + g.name + ") has "
                        + std::to_string(g.layers.size()));
  for (size_t i = 0; i < h.layers.size(); ++i) {
    auto& l = h.layers[i];
    // A delta holds rows past its parent; its layer is the whole state.
    auto length =
      h.parent.empty() ? l.payload.length : l.tokens * l.bytes_per_token;
    layer_shape shape{l.kind, l.bytes_per_token, l.window, l.tokens, length};
    if (auto err = g.check(i, shape))
      return make_error(ec::incompatible_format, context_of(err));
  }
  return {};
}

caf::expected<entry_header> read_header(file& f) {
  std::vector<std::byte> buf(fixed_header_size);
  auto n = f.read_at(0, buf);
  if (!n)
    return n.error();
  buf.resize(*n);
  auto len = decode_header_length(buf);
  if (!len)
    return len.error();
  buf.resize(*len);
  n = f.read_at(0, buf);
  if (!n)
    return n.error();
  buf.resize(*n);
  auto h = decode(buf);
  if (!h)
    return h.error();
  auto size = f.size();
  if (!size)
    return size.error();
  if (*size < h->file_length)
    return make_error(ec::corrupt_data,
                      "truncated: " + std::to_string(*size) + " of "
                        + std::to_string(h->file_length) + " bytes");
  return h;
}

namespace {

ssd_config with_model_fingerprint(ssd_config cfg) {
  if (cfg.model)
    cfg.fingerprint = cfg.model->fingerprint();
  return cfg;
}

} // namespace

ssd_tier::ssd_tier(ssd_config cfg, file_system& fs, io_engine& engine)
  : cfg_(with_model_fingerprint(std::move(cfg)))
  , fs_(fs)
  , engine_(engine)
  , root_(join_path(cfg_.dir, cfg_.fingerprint))
  , queue_(cfg_.queue_cap) {
  if (cfg_.model)
    geometry_ = std::make_shared<const model_geometry>(cfg_.model->geometry);
}

ssd_tier::~ssd_tier() = default;

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

caf::expected<scan_report> ssd_tier::open() {
  scan_report r;
  if (auto err = own_directory()) {
    lock_.reset();
    return err;
  }
  auto names = fs_.list(root_);
  if (!names)
    return names.error();
  std::sort(names->begin(), names->end());
  // Removal records first: a checkpoint file one covers is never indexed.
  load_records(*names, r);
  std::vector<scanned> found;
  for (auto& name : *names)
    scan_file(name, r, found);
  resolve_chains(found, r);
  // Least recently used first, as each file's mtime recorded it (then
  // oldest write first): the LRU order from before the restart.
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) {
    return std::tie(a.mtime, a.file.header->write_id, a.file.name)
           < std::tie(b.mtime, b.file.header->write_id, b.file.name);
  });
  for (auto& f : found) {
    last_stamp_ = std::max(last_stamp_, f.mtime);
    index_file(std::move(f.file));
  }
  finish_records(r);
  next_write_id_ = max_write_id_seen_ + 1;
  // Least recently used among the files nothing depends on, as after a
  // write: a delta parent goes after its children.
  auto is_held = [this](const std::string& n) { return pinned_or_parent(n); };
  for (;;) {
    auto over = index_.over_cap(cfg_.byte_cap, {}, is_held);
    if (over.empty())
      break;
    auto& name = over.front(); // one at a time: its parent may be next
    forget(name, removal_reason::evicted);
    if (!fs_.remove(path(name)))
      ++r.evicted;
  }
  stats_.corrupt_removed += r.corrupt_removed;
  stats_.evicted += r.evicted;
  stats_.geometry_mismatched += r.mismatched;
  return r;
}

caf::error ssd_tier::own_directory() {
  if (auto err = fs_.make_dirs(root_))
    return err;
  auto mode = fs_.mode(root_);
  if (!mode)
    return mode.error();
  if ((*mode & 077) != 0) {
    // State bytes are users' prompts: the directory is the owner's alone.
    auto tight = *mode & ~uint32_t{077};
    if (auto err = fs_.set_mode(root_, tight))
      return err;
    char line[64];
    std::snprintf(line, sizeof line, " from %04o to %04o", *mode, tight);
    log("ssd: tightened the permissions of " + root_ + line);
  }
  // Before anything in the directory is read or removed: a second process
  // must not scan away the first one's temp files.
  auto lock = fs_.lock(path(lock_file_name));
  if (!lock)
    return lock.error();
  lock_ = std::move(*lock);
  return check_model_file();
}

caf::error ssd_tier::check_model_file() {
  auto want = cfg_.model
                ? cfg_.model->describe()
                : "kvtier model identity: fingerprint " + cfg_.fingerprint
                    + " (no model geometry given)\n";
  auto p = path(model_file_name);
  if (auto f = fs_.open(p, open_mode::read); f) {
    auto size = (*f)->size();
    if (!size)
      return size.error();
    std::string have(std::min<uint64_t>(*size, 1u << 16), '\0');
    auto n = (*f)->read_at(0, std::as_writable_bytes(std::span{have}));
    if (!n)
      return n.error();
    have.resize(*n);
    if (have == want)
      return {};
    // Name the first line that differs, theirs and ours.
    size_t at = 0;
    while (at < have.size() && at < want.size() && have[at] == want[at])
      ++at;
    auto line = [at](const std::string& s) {
      auto b = s.rfind('\n', at == 0 ? 0 : at - 1);
      b = (b == std::string::npos || at == 0) ? 0 : b + 1;
      return s.substr(b, s.find('\n', b) - b);
    };
    return make_error(ec::incompatible_format,
                      p + " describes another model (\"" + line(have)
                        + "\"; this service: \"" + line(want)
                        + "\"): a fingerprint collision or an edited file; "
                          "move the directory aside");
  } else if (f.error() != ec::not_found) {
    return f.error();
  }
  auto tmp = p + ".tmp";
  fs_.remove(tmp); // left by a crash while writing it, if at all
  auto out = fs_.open(tmp, open_mode::create);
  if (!out)
    return out.error();
  auto bytes = std::as_bytes(std::span{want});
  auto n = (*out)->write_at(0, bytes);
  if (!n)
    return n.error();
  if (*n != bytes.size())
    return make_error(ec::io_error, "short write of " + tmp);
  if (auto err = (*out)->sync())
    return err;
  out->reset();
  if (auto err = fs_.rename(tmp, p))
    return err;
  return fs_.sync_dir(root_);
}

void ssd_tier::scan_file(const std::string& name, scan_report& r,
                         std::vector<scanned>& found) {
  if (name == lock_file_name || name == model_file_name)
    return;
  if (ends_with(name, ".tmp")) {
    if (!fs_.remove(path(name)))
      ++r.temps_removed;
    return;
  }
  if (ends_with(name, ".kvr"))
    return; // a removal record: `load_records`
  if (!ends_with(name, ".kvt")) {
    ++r.ignored;
    return;
  }
  auto f = fs_.open(path(name), open_mode::read);
  auto h = f ? read_header(**f) : caf::expected<entry_header>{f.error()};
  // A delta's name is checked once its parent gave it its first tokens
  // (`resolve_chains`).
  bool misnamed = h && h->fingerprint == cfg_.fingerprint && h->tokens_resolved
                  && file_name(h->key()) != name;
  if ((!h && h.error() == ec::corrupt_data) || misnamed) {
    log("ssd: removing corrupt file " + name + ": "
        + (misnamed ? std::string{"misnamed"} : reason(h.error())));
    if (!fs_.remove(path(name)))
      ++r.corrupt_removed;
    return;
  }
  if (!h || h->fingerprint != cfg_.fingerprint) {
    ++r.ignored; // other version or fingerprint; or unreadable right now
    return;
  }
  max_write_id_seen_ = std::max(max_write_id_seen_, h->write_id);
  if (geometry_)
    if (auto err = check_header(*geometry_, cfg_.fingerprint, *h)) {
      // Not this model's state, whatever its name says: never served,
      // never deleted (it may be a file an operator put here by mistake).
      log("ssd: not indexing " + name + ": " + context_of(err)
          + " (file kept)");
      ++r.mismatched;
      return;
    }
  if (covered_at_scan(name, *h, r))
    return;
  auto mtime = (**f).mtime();
  auto bytes = h->file_length;
  found.push_back(
    {mtime ? *mtime : 0,
     ssd_file{name, std::make_shared<const entry_header>(std::move(*h)),
              bytes}});
  ++r.loaded;
}

void ssd_tier::resolve_chains(std::vector<scanned>& found, scan_report& r) {
  // Each delta is resolved against its parent, the parent first: by name
  // and write id, never by the listing's order. Write ids strictly fall
  // along a chain (the decoder checks parent write id < write id), so
  // this ends.
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < found.size(); ++i)
    by_name[found[i].file.name] = i;
  enum class state : uint8_t { unknown, good, bad };
  std::vector<state> st(found.size(), state::unknown);
  std::vector<std::string> why(found.size());
  std::function<bool(size_t)> resolve = [&](size_t i) -> bool {
    if (st[i] != state::unknown)
      return st[i] == state::good;
    auto& f = found[i].file;
    if (f.header->parent.empty()) {
      st[i] = state::good;
      return true;
    }
    auto p = by_name.find(f.header->parent);
    if (p == by_name.end()) {
      why[i] = "its parent " + f.header->parent + " is missing";
    } else if (!resolve(p->second)) {
      why[i] = "its parent " + f.header->parent + " is unusable";
    } else {
      auto h = std::make_shared<entry_header>(*f.header);
      if (auto err = resolve_parent(*h, *found[p->second].file.header))
        why[i] = context_of(err);
      else if (file_name(h->key()) != f.name)
        why[i] = "misnamed";
      else
        f.header = std::move(h);
    }
    st[i] = why[i].empty() ? state::good : state::bad;
    return st[i] == state::good;
  };
  for (size_t i = 0; i < found.size(); ++i)
    resolve(i); // every link first: a kept file is moved out below
  std::vector<scanned> kept;
  for (size_t i = 0; i < found.size(); ++i) {
    if (st[i] == state::good) {
      kept.push_back(std::move(found[i]));
      continue;
    }
    auto& name = found[i].file.name;
    log("ssd: removing delta file " + name + ": " + why[i]);
    --r.loaded;
    if (!fs_.remove(path(name)))
      ++r.broken_chains;
  }
  found = std::move(kept);
}

uint64_t ssd_tier::stamp() {
  uint64_t now = 0;
  if (cfg_.clock) {
    now = cfg_.clock();
  } else {
    using namespace std::chrono;
    now = static_cast<uint64_t>(
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch())
        .count());
  }
  last_stamp_ = std::max(now, last_stamp_ + 1);
  return last_stamp_;
}

void ssd_tier::use_chain(const std::string& name) {
  for (auto* link : chain_of(name)) {
    index_.touch(link->name);
    touch_file(link->name);
  }
}

void ssd_tier::touch_file(const std::string& name) {
  auto ns = stamp();
  auto [t, fresh] = touching_.try_emplace(name);
  if (!fresh) {
    t->second.next = ns; // after the one running
    return;
  }
  submit_touch(name, ns);
}

void ssd_tier::submit_touch(const std::string& name, uint64_t ns) {
  auto tag = next_tag_++;
  chore_what_[tag] = "record the use of " + name;
  touch_chores_[tag] = name;
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(tag, 0);
  op.call = [fs = &fs_, p = path(name), ns] { return fs->set_mtime(p, ns); };
  submit(std::move(op));
}

void ssd_tier::touch_done(uint64_t tag, const io_completion& c) {
  auto i = touch_chores_.find(tag);
  if (i == touch_chores_.end())
    return;
  auto name = std::move(i->second);
  touch_chores_.erase(i);
  (void)c; // a failure was logged with the chore; the stamp is advisory
  auto t = touching_.find(name);
  if (t == touching_.end())
    return;
  if (t->second.next == 0) {
    touching_.erase(t);
    return;
  }
  auto ns = std::exchange(t->second.next, 0);
  submit_touch(name, ns);
}

std::optional<ssd_match> ssd_tier::find(std::span<const token> prompt,
                                        std::string_view ns) const {
  return index_.find(prompt, ns);
}

std::optional<ssd_match> ssd_tier::find(const storage_key& key) const {
  auto* f = index_.file(key);
  if (!f)
    return std::nullopt;
  return ssd_match{f->name, f->header, f->header->token_count, false};
}

storage_key ssd_tier::key_of(const ssd_match& m) const {
  auto& h = *m.header;
  if (h.keyed())
    return h.key();
  return storage_key::prefix(h.ns, index_.key(m.name));
}

bool ssd_tier::contains(std::string_view ns,
                        std::span<const token> tokens) const {
  // A newer state of the key waiting to be written (or failed) is not on
  // SSD yet, whatever older file of that key is.
  return index_.contains(ns, tokens) && !queue_.holds(file_name(ns, tokens));
}

bool ssd_tier::contains(const storage_key& key) const {
  if (key.kind == key_kind::prefix)
    return contains(key.ns, key.tokens);
  // A checkpoint is on SSD under its owner only: a file another attempt
  // wrote is rewritten, so its header names the new owner.
  auto* f = index_.file(key);
  return f && f->header->attempt == key.attempt
         && !queue_.holds(file_name(key));
}

bool ssd_tier::erase(std::string_view ns, std::span<const token> tokens) {
  return erase(storage_key::prefix(std::string{ns},
                                   token_seq(tokens.begin(), tokens.end())));
}

bool ssd_tier::erase(const storage_key& key) {
  auto name = file_name(key);
  bool any = false;
  for (auto& item : queue_.cancel(name)) {
    ++stats_.writes_cancelled;
    report_gone(std::move(item), write_outcome::cancelled); // buffers first
    any = true;
  }
  for (auto& [tag, job] : writes_)
    if (job->name == name) {
      erase_after_.insert(name); // write_done or write_failed removes it
      any = true;
    }
  if (index_.contains(key)) {
    remove_file(name, removal_reason::erased);
    any = true;
  }
  maybe_finish_flush();
  return any;
}

std::vector<saved_prefix> ssd_tier::saved_prefixes() const {
  return index_.saved();
}

std::vector<storage_key> ssd_tier::checkpoint_files() const {
  auto files = index_.checkpoints();
  std::sort(files.begin(), files.end(), [](auto* a, auto* b) {
    return a->header->write_id < b->header->write_id;
  });
  std::vector<storage_key> out;
  for (auto* f : files)
    out.push_back(f->header->key());
  return out;
}

void ssd_tier::flush(flush_callback cb, flush_retries retries) {
  if (retries == flush_retries::now)
    stats_.writes_retried += queue_.retry_failed();
  flushes_.push_back(std::move(cb));
  pump();
  // Pending removals are retried from their failed step.
  for (auto& [id, rm] : removals_) {
    rm->stalled = false;
    rm->record_tried = rm->record == removal::record_state::durable;
  }
  resume_removals();
  maybe_finish_flush();
}

void ssd_tier::maybe_finish_flush() {
  // Unlinks too: when a flush answers, evicted files are gone from disk.
  if (flushes_.empty() || queue_.active() || !writes_.empty() || removal_busy()
      || !unlink_chores_.empty())
    return;
  durability_evidence ev;
  ev.pending = queue_.size();
  ev.failed = queue_.failed();
  ev.dropped = stats_.dropped - dropped_at_flush_;
  dropped_at_flush_ = stats_.dropped;
  ev.given_up = stats_.writes_given_up - given_up_at_flush_;
  given_up_at_flush_ = stats_.writes_given_up;
  ev.entries = index_.size();
  ev.longest_durable_prefix = index_.longest();
  ev.removals_pending = removals_.size();
  for (auto& [id, rm] : removals_)
    if (rm->err)
      ev.removal_error = describe(rm->err);
  ev.durable = ev.pending == 0 && ev.failed == 0 && ev.dropped == 0
               && ev.removals_pending == 0 && ev.given_up == 0;
  auto cbs = std::exchange(flushes_, {});
  for (auto& cb : cbs)
    cb(ev);
}

bool ssd_tier::retry(uint64_t id) {
  if (!queue_.retry(id))
    return false;
  ++stats_.writes_retried;
  pump();
  return true;
}

void ssd_tier::close(close_callback cb) {
  closed_ = true;
  std::vector<uint64_t> idle;
  for (auto& item : queue_.items())
    if (!item.in_flight)
      idle.push_back(item.id);
  for (auto id : idle)
    abandon(id); // its buffers go here
  held_.clear(); // prefetched entries, their buffers with them
  leases_.clear();
  for (auto& [tag, job] : reads_) {
    job->leases = 0;
    if (job->waiters.empty() && !job->cancelled) {
      job->cancelled = true; // discarded (buffers released) when it ends
      reading_.erase(job->key);
      ++stats_.cancelled;
    }
  }
  closes_.push_back(std::move(cb));
  maybe_finish_flush(); // the queue may have emptied
  maybe_finish_close();
}

void ssd_tier::abandon(uint64_t id) {
  auto item = queue_.take(id);
  if (!item)
    return;
  ++stats_.writes_abandoned;
  report_gone(std::move(*item), write_outcome::abandoned,
              make_error(ec::closed, "the SSD tier closed before writing it"));
}

void ssd_tier::maybe_finish_close() {
  // A write holds its buffers until its last completion is handled (the
  // engines drop an op before reporting it): none running, none held.
  // Reads are not waited for (a close never waited on one): a cancelled
  // read lets its buffers go when it ends, an awaited one hands its entry
  // to whoever awaits it.
  if (closes_.empty() || !writes_.empty())
    return;
  auto cbs = std::exchange(closes_, {});
  for (auto& cb : cbs)
    cb(stats_.writes_abandoned);
}

void ssd_tier::handle(io_completion c) {
  auto tag = c.tag >> sub_bits;
  if (writes_.count(tag) > 0) {
    on_write(tag, c);
  } else if (reads_.count(tag) > 0) {
    on_read(tag, c);
  } else if (removal_ops_.count(tag) > 0) {
    removal_done(tag, c);
  } else if (auto i = chore_what_.find(tag); i != chore_what_.end()) {
    if (c.err && c.err != ec::not_found)
      log("ssd: " + i->second + ": " + reason(c.err));
    chore_what_.erase(i);
    touch_done(tag, c);
    if (auto u = unlink_chores_.find(tag); u != unlink_chores_.end()) {
      // A checkpoint file whose unlink failed stays known until a removal
      // of its identity takes it (`remove_checkpoints`); other names are
      // not in `unlinking_`.
      if (!c.err || c.err == ec::not_found)
        unlinking_.erase(u->second);
      unlinking_now_.erase(unlinking_now_.find(u->second));
      unlink_chores_.erase(u);
      unlink_ended(tag);
      pump();
      maybe_finish_flush();
    }
  }
  maybe_finish_close();
}

bool ssd_tier::busy() const noexcept {
  return !writes_.empty() || !reads_.empty() || !chore_what_.empty()
         || !removal_ops_.empty()
         || (queue_.active() && queue_.in_flight() < cfg_.writes_in_flight);
}

ssd_stats ssd_tier::stats() const {
  auto s = stats_;
  s.files = index_.size();
  s.file_bytes = index_.bytes();
  s.queue_items = queue_.size();
  s.queue_bytes = queue_.bytes();
  s.removals_pending = removals_.size();
  return s;
}

write_backlog ssd_tier::backlog() const {
  write_backlog b;
  b.snapshots = queue_.count(write_reason::snapshot);
  b.checkpoints = queue_.count(write_reason::checkpoint);
  b.spills =
    queue_.count(write_reason::spill) + queue_.count(write_reason::demotion);
  b.bytes = queue_.bytes();
  b.retrying = queue_.failed();
  return b;
}

uint64_t ssd_tier::io_buffer_bytes() const {
  uint64_t n = 0;
  for (auto& [tag, job] : writes_)
    if (job->io && job->io->header_bytes)
      n += job->io->header_bytes->size();
  for (auto& [tag, job] : reads_)
    if (job->io)
      for (auto& b : job->io->bufs)
        n += b.size();
  return n;
}

const char* ssd_tier::engine_name() const noexcept {
  return engine_.name();
}

const char* to_string(removal_reason r) {
  switch (r) {
    case removal_reason::evicted: return "evict";
    case removal_reason::corrupt: return "remove corrupt";
    case removal_reason::gone: return "forget gone";
    case removal_reason::erased: return "erase";
    case removal_reason::superseded: return "supersede";
  }
  return "remove";
}

void ssd_tier::forget(const std::string& name, removal_reason why) {
  unindex(name, true, why, why);
}

std::optional<ssd_file> ssd_tier::unindex(const std::string& name, bool report,
                                          removal_reason why,
                                          removal_reason cascade) {
  auto f = index_.erase(name);
  if (!f)
    return f;
  auto& h = *f->header;
  if (!h.parent.empty())
    if (auto c = children_.find(h.parent); c != children_.end()) {
      c->second.erase(name);
      if (c->second.empty())
        children_.erase(c);
    }
  if (report && cfg_.on_remove)
    cfg_.on_remove(remove_event{h.ns, h.tokens, why, f->bytes, h.kind,
                                h.request, h.attempt});
  // Its delta children were cut from this very file: they go with it.
  if (auto c = children_.extract(name))
    for (auto& child : c.mapped()) {
      ++stats_.chain_cascades;
      log("ssd: removing delta file " + child + ": its parent " + name
          + " left (" + to_string(why) + ")");
      remove_file(child, cascade);
    }
  return f;
}

void ssd_tier::index_file(ssd_file f) {
  auto name = f.name;
  auto parent = f.header->parent;
  index_.insert(std::move(f));
  if (!parent.empty())
    children_[parent].insert(name);
}

bool ssd_tier::pinned_or_parent(const std::string& name) const {
  return children_.count(name) > 0 || pins_.count(name) > 0;
}

std::vector<const ssd_file*> ssd_tier::chain_of(const std::string& name) const {
  std::vector<const ssd_file*> out;
  for (auto* f = index_.file(name); f != nullptr;) {
    out.push_back(f);
    if (f->header->parent.empty())
      break;
    f = index_.file(f->header->parent);
    // An indexed delta's parent is indexed (a parent leaving takes its
    // children along), so the walk ends at a whole file.
    KVTIER_ASSERT(f != nullptr);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<const ssd_file*>
ssd_tier::serving_below(std::vector<const ssd_file*> chain, uint64_t p) {
  size_t n = 0;
  while (n < chain.size() && (n == 0 || chain[n]->header->parent_tokens < p))
    ++n;
  chain.resize(n);
  return chain;
}

uint64_t ssd_tier::remove_file(const std::string& name, removal_reason why) {
  auto* f = index_.file(name);
  auto checkpoint = f && f->header->kind == key_kind::checkpoint
                      ? f->header
                      : std::shared_ptr<const entry_header>{};
  forget(name, why);
  // Known until its unlink is seen to succeed (or a write replaces it), so
  // a removal of its identity covers it.
  if (checkpoint)
    unlinking_[name] = checkpoint;
  // A write of the same key may rename a fresh file over this name at any
  // moment; removing now could delete that one. Let the write replace it.
  for (auto& [tag, job] : writes_)
    if (job->name == name)
      return 0;
  auto tag = next_tag_++;
  chore_what_[tag] = std::string{to_string(why)} + " " + name;
  // No write of the name starts while the unlink runs: its rename could
  // land first, and the unlink would then remove the new file.
  unlink_chores_[tag] = name;
  unlinking_now_.insert(name);
  auto* fs = &fs_;
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(tag, 0);
  op.call = [fs, p = path(name)] { return fs->remove(p); };
  submit(std::move(op));
  return tag;
}

void ssd_tier::submit(io_op op) {
  engine_.submit(std::move(op));
}

void ssd_tier::log(const std::string& line) const {
  if (cfg_.log)
    cfg_.log(line);
  else
    log::warn("kvtier " + line);
}

std::string ssd_tier::path(const std::string& name) const {
  return join_path(root_, name);
}

} // namespace kvtier::tiers::ssd
