// The SSD tier's coordinator: lookups, reads, flush, close and
// the routing of engine completions to its parts.
#include "tiers/ssd/start_scan.hpp"

#include <algorithm>

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

std::optional<ssd_match> ssd_tier::find(std::span<const token> prompt,
                                        std::string_view ns) const {
  return files_.index().find(prompt, ns);
}

std::optional<ssd_match> ssd_tier::find(const storage_key& key) const {
  auto* f = files_.index().file(key);
  if (!f || removal_deferred(*f->header))
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
  return f && f->header->attempt == key.attempt && !removal_deferred(*f->header)
         && !writes_.queue().holds(file_name(key));
}

std::vector<saved_prefix> ssd_tier::saved_prefixes() const {
  return files_.index().saved();
}

std::vector<checkpoint_file> ssd_tier::checkpoint_files() const {
  auto files = files_.index().checkpoints();
  std::erase_if(files,
                [this](auto* f) { return removal_deferred(*f->header); });
  std::sort(files.begin(), files.end(), [](auto* a, auto* b) {
    return a->header->write_id < b->header->write_id;
  });
  std::vector<checkpoint_file> out;
  for (auto* f : files)
    out.push_back({f->header->key(), f->header->write_id});
  return out;
}

bool ssd_tier::holds(const checkpoint_file& c) const {
  auto* f = files_.index().file(c.key);
  return f && f->header->attempt == c.key.attempt
         && f->header->write_id == c.write_id && !removal_deferred(*f->header);
}

read_start ssd_tier::restore(const ssd_match& m, restore_callback cb) {
  if (files_.index().policy() == ram_policy::lru) {
    use_chain(m.name); // every restore: the most recently used
    return reads_.restore(m, files_.index(), std::move(cb));
  }
  // gdsf counts a file's uses by the reads that start: a restore joining a
  // read (or taking the result held for a prefetch's lease) is the use
  // that read counted, as the replay's reference has it.
  auto start = reads_.restore(m, files_.index(), std::move(cb));
  if (start.started)
    use_chain(m.name);
  return start;
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
  if (files_.index().policy() == ram_policy::lru) {
    use_chain(m.name);
    return reads_.prefetch(m, files_.index());
  }
  auto lease = reads_.prefetch(m, files_.index()); // as `restore`
  if (lease.read.started)
    use_chain(m.name);
  return lease;
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
  // Writes queued during the start-up scan start at its end.
  return !writes_.jobs().empty() || reads_.busy() || io_.chores_running()
         || removals_.busy() || (writes_.may_start() && !scan_);
}

ssd_stats ssd_tier::stats() const {
  auto s = stats_;
  s.files = files_.index().size();
  s.indexing = scan_ ? 1 : 0;
  s.index_files = scan_ ? scan_->report.loaded : scan_result_.loaded;
  s.file_bytes = files_.index().bytes();
  s.index_bytes = files_.index().approx_bytes();
  s.queue_items = writes_.queue().size();
  s.queue_bytes = writes_.queue().bytes();
  s.removals_pending = removals_.pending();
  s.budget_used_bytes = writes_.budget_used();
  s.budget_bytes_per_day = cfg_.write_budget_bytes_per_day;
  return s;
}

} // namespace kvtier::tiers::ssd
