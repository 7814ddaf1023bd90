// The SSD tier's coordinator: start-up, lookups, reads, flush, close and
// the routing of engine completions to its parts.
#include "tiers/ssd/ssd_tier.hpp"

#include <algorithm>
#include <tuple>

namespace kvtier::tiers::ssd {

namespace {

ssd_config with_model_fingerprint(ssd_config cfg) {
  if (cfg.model)
    cfg.fingerprint = cfg.model->fingerprint();
  return cfg;
}

read_config reads_of(const ssd_config& cfg, const file_set& files) {
  return {cfg.alignment, cfg.max_op_bytes, cfg.ops_per_entry, cfg.fingerprint,
          files.geometry()};
}

} // namespace

ssd_tier::ssd_tier(ssd_config cfg, file_system& fs, io_engine& engine)
  : cfg_(with_model_fingerprint(std::move(cfg)))
  , io_(fs, engine, join_path(cfg_.dir, cfg_.fingerprint), cfg_.log)
  , files_(cfg_, io_)
  , chains_(cfg_.delta_files, cfg_.max_chain)
  , admission_(cfg_.admission, cfg_.admission_memory_keys > 0
                                 ? cfg_.admission_memory_keys
                                 : spill_admission::memory_for(cfg_.byte_cap))
  , reads_(reads_of(cfg_, files_), io_, stats_)
  , writes_(cfg_, files_.geometry(), io_, stats_)
  , removals_(io_, stats_) {}

ssd_tier::~ssd_tier() = default;

caf::expected<scan_report> ssd_tier::open() {
  scan_report r;
  if (auto err = files_.own_directory()) {
    files_.release_lock();
    return err;
  }
  auto names = files_.list();
  if (!names)
    return names.error();
  uint64_t max_write_id = 0;
  // Removal records first: a checkpoint file one covers is never indexed.
  removals_.load_records(*names, r, max_write_id);
  std::vector<scanned_file> found;
  auto covered = [&](const std::string& name, const entry_header& h) {
    return removals_.covered_at_scan(name, h, r);
  };
  for (auto& name : *names)
    files_.scan_file(name, r, found, max_write_id, covered);
  delta_chains::resolve(found, r, io_);
  // Least recently used first, as each file's mtime recorded it (then
  // oldest write first): the LRU order from before the restart.
  std::sort(found.begin(), found.end(), [](auto& a, auto& b) {
    return std::tie(a.mtime, a.file.header->write_id, a.file.name)
           < std::tie(b.mtime, b.file.header->write_id, b.file.name);
  });
  for (auto& f : found) {
    files_.saw_stamp(f.mtime);
    index_file(std::move(f.file));
  }
  removals_.finish_records(r);
  writes_.set_next_write_id(max_write_id + 1);
  // Least recently used among the files nothing depends on, as after a
  // write: a delta parent goes after its children.
  auto held = [this](const std::string& n) { return chains_.held(n); };
  for (;;) {
    auto over = files_.index().over_cap(cfg_.byte_cap, {}, held);
    if (over.empty())
      break;
    auto& name = over.front(); // one at a time: its parent may be next
    forget(name, removal_reason::evicted);
    if (!io_.fs.remove(io_.path(name)))
      ++r.evicted;
  }
  stats_.corrupt_removed += r.corrupt_removed;
  stats_.evicted += r.evicted;
  stats_.geometry_mismatched += r.mismatched;
  return r;
}

std::optional<ssd_match> ssd_tier::find(std::span<const token> prompt,
                                        std::string_view ns) const {
  return files_.index().find(prompt, ns);
}

std::optional<ssd_match> ssd_tier::find(const storage_key& key) const {
  auto* f = files_.index().file(key);
  if (!f)
    return std::nullopt;
  return ssd_match{f->name, f->header, f->header->token_count, false};
}

storage_key ssd_tier::key_of(const ssd_match& m) const {
  auto& h = *m.header;
  if (h.keyed())
    return h.key();
  return storage_key::prefix(h.ns, files_.index().key(m.name));
}

std::optional<entry> ssd_tier::queued(const storage_key& key) const {
  return writes_.queued(key);
}

bool ssd_tier::contains(std::string_view ns,
                        std::span<const token> tokens) const {
  // A newer state of the key waiting to be written (or failed) is not on
  // SSD yet, whatever older file of that key is.
  return files_.index().contains(ns, tokens)
         && !writes_.queue().holds(file_name(ns, tokens));
}

bool ssd_tier::contains(const storage_key& key) const {
  if (key.kind == key_kind::prefix)
    return contains(key.ns, key.tokens);
  // A checkpoint is on SSD under its owner only: a file another attempt
  // wrote is rewritten, so its header names the new owner.
  auto* f = files_.index().file(key);
  return f && f->header->attempt == key.attempt
         && !writes_.queue().holds(file_name(key));
}

std::vector<saved_prefix> ssd_tier::saved_prefixes() const {
  return files_.index().saved();
}

std::vector<storage_key> ssd_tier::checkpoint_files() const {
  auto files = files_.index().checkpoints();
  std::sort(files.begin(), files.end(), [](auto* a, auto* b) {
    return a->header->write_id < b->header->write_id;
  });
  std::vector<storage_key> out;
  for (auto* f : files)
    out.push_back(f->header->key());
  return out;
}

read_start ssd_tier::restore(const ssd_match& m, restore_callback cb) {
  use_chain(m.name);
  return reads_.restore(m, files_.index(), std::move(cb));
}

std::optional<prefetch_lease> ssd_tier::prefetch(std::span<const token> prompt,
                                                 std::string_view ns,
                                                 uint64_t better_than) {
  auto m = find(prompt, ns);
  if (!m)
    return std::nullopt;
  return prefetch(*m, better_than);
}

std::optional<prefetch_lease> ssd_tier::prefetch(const ssd_match& m,
                                                 uint64_t better_than) {
  if (closed() || m.length <= better_than)
    return std::nullopt; // closed: nothing is held for a lease any more
  use_chain(m.name);
  return reads_.prefetch(m, files_.index());
}

void ssd_tier::release(uint64_t lease) {
  reads_.release(lease);
}

void ssd_tier::flush(flush_callback cb, flush_retries retries) {
  if (retries == flush_retries::now)
    writes_.retry_failed();
  writes_.add_flush(std::move(cb));
  pump();
  removals_.restart();
  removals_.resume(busy_names());
  maybe_finish_flush();
}

void ssd_tier::maybe_finish_flush() {
  // Unlinks too: when a flush answers, evicted files are gone from disk.
  if (!writes_.flushing() || !writes_.idle() || removals_.busy()
      || !unlink_chores_.empty())
    return;
  durability_evidence ev;
  ev.entries = files_.index().size();
  ev.longest_durable_prefix = files_.index().longest();
  ev.removals_pending = removals_.pending();
  ev.removal_error = removals_.error();
  writes_.finish_flushes(std::move(ev));
}

bool ssd_tier::retry(uint64_t id) {
  if (!writes_.retry(id))
    return false;
  pump();
  return true;
}

void ssd_tier::close(close_callback cb) {
  writes_.close(std::move(cb));
  reads_.close();
  maybe_finish_flush(); // the queue may have emptied
  writes_.maybe_finish_close();
}

void ssd_tier::handle(io_completion c) {
  auto tag = c.tag >> sub_bits;
  if (writes_.owns(tag)) {
    on_write(writes_.job(tag), c);
  } else if (reads_.owns(tag)) {
    if (auto ended = reads_.on_completion(tag, c))
      read_ended(std::move(*ended));
  } else if (removals_.owns(tag)) {
    bool unlinked = false;
    auto id = removals_.on_completion(tag, c, unlinked);
    if (unlinked)
      pump();
    if (id)
      removals_.step(*id, busy_names());
    maybe_finish_flush();
  } else if (io_.end_chore(tag, c)) {
    files_.stamp_ended(tag);
    unlink_ended(tag, c);
  }
  writes_.maybe_finish_close();
}

bool ssd_tier::busy() const noexcept {
  return !writes_.jobs().empty() || reads_.busy() || io_.chores_running()
         || removals_.busy() || writes_.may_start();
}

ssd_stats ssd_tier::stats() const {
  auto s = stats_;
  s.files = files_.index().size();
  s.file_bytes = files_.index().bytes();
  s.queue_items = writes_.queue().size();
  s.queue_bytes = writes_.queue().bytes();
  s.removals_pending = removals_.pending();
  s.budget_used_bytes = writes_.budget_used();
  s.budget_bytes_per_day = cfg_.write_budget_bytes_per_day;
  return s;
}

} // namespace kvtier::tiers::ssd
