// The SSD tier's coordinator: what follows from the steps and the end of
// each write (indexing, delta parents, supersession, the byte cap,
// covered checkpoint removals), and the live cap.
#include "tiers/ssd/ssd_tier.hpp"

namespace kvtier::tiers::ssd {

caf::expected<uint64_t> ssd_tier::enqueue(entry e, write_reason reason) {
  auto key = storage_key::prefix(e.ns, e.tokens);
  return enqueue(std::move(e), reason, key);
}

caf::expected<uint64_t> ssd_tier::enqueue(entry e, write_reason reason,
                                          const storage_key& key) {
  // Only an eviction's spill of a prefix entry is the rule's to skip (not
  // after a close: that answer is `closed`).
  if (reason == write_reason::spill && key.kind == key_kind::prefix
      && !writes_.closed() && !admission_.admit(e.ns, e.tokens)) {
    auto bytes =
      layout(e, cfg_.fingerprint, cfg_.alignment, cfg_.checksum_chunk)
        .file_length;
    ++stats_.admission_skipped;
    stats_.admission_skipped_bytes += bytes;
    return make_error(ec::cancelled,
                      "not written: ssd-tier.admission = reused writes a "
                      "spill only once its leading tokens were spilled "
                      "before");
  }
  auto id = writes_.enqueue(std::move(e), reason, key, cfg_.byte_cap);
  if (id)
    pump();
  return id;
}

void ssd_tier::pump() {
  if (scan_)
    return; // held until the start-up scan ends (`finish_index`)
  while (auto* item = writes_.next(io_.unlinking_now))
    start_write(*item);
}

void ssd_tier::start_write(write_item& item) {
  auto& job = writes_.begin(item);
  if (item.kind == key_kind::prefix) {
    count_new_tokens(item.state);
    auto c = chains_.choose(files_.index(), item.state);
    // The write budget charged the whole file: a delta longer than it (a
    // longer header over few shared rows) is written whole instead.
    if (c.parent && cfg_.write_budget_bytes_per_day > 0
        && layout(item.state, cfg_.fingerprint, cfg_.alignment,
                  cfg_.checksum_chunk, c.parent->name, c.tokens)
               .file_length
             > job.header().file_length)
      c = {};
    if (c.parent && chains_.proven_by_origin(item.state, c)) {
      writes_.as_delta(job, *c.parent, c.tokens);
    } else if (c.parent && c.tokens == c.parent->header->token_count) {
      std::vector<token_seq> keys;
      for (auto* link : c.chain)
        keys.push_back(files_.index().key(link->name));
      writes_.prove_on_prepare(job, c.parent->name, c.chain, std::move(keys));
    } else {
      c.parent = nullptr; // nothing proves the rows: whole
    }
    if (c.parent) {
      chains_.pin(c.parent->name);
      job.pinned = c.parent->name;
    }
  }
  writes_.prepare(job);
}

void ssd_tier::count_new_tokens(const entry& e) {
  uint64_t bpt = 0;
  for (auto& l : e.layers)
    if (l.kind == layer_kind::kv || l.kind == layer_kind::ring)
      bpt += l.bytes_per_token;
  uint64_t known = 0;
  auto files = files_.index().prefix_files(e.ns, e.tokens);
  if (!files.empty())
    known = files.front()->header->token_count;
  if (auto m = files_.index().find(e.tokens, e.ns))
    known = std::max(known, m->length);
  stats_.new_token_bytes += (e.tokens.size() - known) * bpt;
}

void ssd_tier::unpin(write_job& job) {
  if (job.pinned.empty())
    return;
  chains_.unpin(job.pinned);
  job.pinned.clear();
}

void ssd_tier::on_write(write_job& job, io_completion& c) {
  switch (writes_.on_completion(job, c)) {
    case write_progress::running: return;
    case write_progress::failed: write_failed(job); return;
    case write_progress::step_done: break;
  }
  switch (job.stage) {
    case write_step::prepare:
      if (job.refused())
        unpin(job);
      break;
    case write_step::sync:
      // The rename next replaces this key's older file, and the delta
      // children cut from it break with it (a restart's scan removes
      // them). They go now, reported gone, before the rename can land: a
      // process dying right after the rename must not lose files its
      // owner was told are durable and never told are gone.
      cut_children(job.name, removal_reason::gone, removal_reason::gone);
      break;
    case write_step::rename:
      // The older file of this key is gone from disk: forget it now (any
      // delta child cut from it since the fsync goes too, reported gone).
      // Its uses go on with the new file (gdsf), which is indexed once the
      // rename is durable.
      job.carried_uses = files_.index().uses(job.name);
      unindex(job.name, false, removal_reason::gone, removal_reason::gone);
      break;
    case write_step::sync_dir: {
      auto& h = job.header();
      if (!h.parent.empty()) {
        auto* p = files_.index().file(h.parent);
        if (!p || p->header->write_id != h.parent_write_id
            || writes_.writing(h.parent)) {
          // Its parent left (or was rewritten) while it was written: the
          // file names bytes that are gone. Or a rewrite of the parent
          // runs, whose rename may already have landed (its children
          // were reported gone before it): reported durable now, the
          // child could be lost by a crash before that rename is handled.
          // Not stored; a retry writes it again, whole or over another
          // parent.
          job.orphan = true;
          job.err = make_error(ec::io_error, "its delta parent " + h.parent
                                               + " left during the write");
          write_failed(job);
          return;
        }
      }
      write_done(job);
      return;
    }
    default: break;
  }
  writes_.advance(job);
}

void ssd_tier::write_done(write_job& job) {
  auto header = std::make_shared<const entry_header>(job.header());
  auto bytes = header->file_length;
  auto name = job.name;
  if (header->kind == key_kind::prefix)
    stats_.prefix_bytes_written += write_pipeline::handed_bytes(job);
  if (!header->parent.empty())
    ++stats_.delta_files;
  if (header->kind == key_kind::prefix && chains_.enabled())
    chains_.remember_written(name, *header, job.state());
  unpin(job);
  index_file(ssd_file{name, std::move(header), bytes}, job.carried_uses);
  files_.stamp_file(name); // the most recently used, also after a restart
  ++stats_.writes_ok;
  stats_.bytes_written += bytes;
  // The rename is durable now: an older file under the name is gone for
  // good (a removal that covered it has nothing left to do there), and so
  // is every unlink seen before this directory fsync started.
  removals_.replaced_on_disk(name);
  removals_.dir_synced(job.dir_sync);
  bool covered = removals_.write_finished(job.tag, name, true);
  writes_.end_durable(job);
  // Erased while it was written: the file goes now (no write of the key
  // is in flight any more, so the unlink is not skipped). A checkpoint
  // removal that covers the write unlinks it itself.
  if (covered)
    forget(name, removal_reason::erased);
  if (writes_.take_erased(name) && !covered)
    remove_file(name, removal_reason::erased);
  else if (!covered)
    supersede_ancestors(name);
  evict_over_cap(name);
  pump();
  removals_.resume(busy_names());
  maybe_finish_flush();
}

void ssd_tier::write_failed(write_job& job) {
  auto* item = writes_.queue().find(job.item_id);
  bool last = item != nullptr && cfg_.max_attempts > 0
              && item->attempts >= cfg_.max_attempts;
  auto err = writes_.failure(job, item, last);
  unpin(job);
  bool covered = removals_.write_finished(job.tag, job.name, job.renamed);
  bool orphan = job.orphan && job.renamed && !covered;
  if (job.renamed && !covered && !job.orphan) {
    // Only the directory sync failed: the file is whole and readable under
    // its final name, so serve it; the item stays queued until a retry
    // makes the name durable.
    auto header = std::make_shared<const entry_header>(job.header());
    auto bytes = header->file_length;
    index_file(ssd_file{job.name, std::move(header), bytes}, job.carried_uses);
  } else if (!job.renamed && job.created) {
    writes_.remove_temp(job);
  } // else an orphaned delta (below) or a covered write: not served
  auto name = job.name;
  bool renamed = job.renamed;
  if (writes_.take_erased(name) || covered) {
    // Erased while it was written: no retry; the item goes, its buffers
    // with it, and a whole file under the final name is removed (by the
    // removal covering the write, when one does).
    writes_.end_failed(job, item, failed_fate::cancelled, err);
    if (renamed && !covered)
      remove_file(name, removal_reason::erased);
  } else {
    writes_.end_failed(job, item,
                       last ? failed_fate::given_up : failed_fate::kept, err);
  }
  if (orphan)
    remove_file(name, removal_reason::gone); // never indexed: no report
  pump();
  removals_.resume(busy_names());
  maybe_finish_flush();
}

void ssd_tier::supersede_ancestors(const std::string& name) {
  for (auto& a : files_.index().superseded_by(name)) {
    // A delta parent (of this file or another) serves its children's
    // rows: it stays; it goes by the cap once it has none.
    if (chains_.held(a))
      continue;
    ++stats_.files_superseded;
    remove_file(a, removal_reason::superseded);
  }
}

void ssd_tier::evict_over_cap(const std::string& keep,
                              std::set<uint64_t>* tags) {
  auto evict = [&](const std::string& name) {
    ++stats_.evicted;
    auto tag = remove_file(name, removal_reason::evicted);
    if (tags && tag != 0)
      tags->insert(tag);
  };
  // Least recently used among the files nothing depends on, one at a
  // time: a delta parent becomes a candidate once its last child went.
  auto held = [this](const std::string& n) { return chains_.held(n); };
  auto& index = files_.index();
  while (auto name = index.victim(cfg_.byte_cap, keep, held))
    evict(*name);
  // The file just written alone over a cap lowered since it was queued:
  // it goes too, so the files stay under the cap.
  if (index.bytes() > cfg_.byte_cap && !keep.empty() && index.file(keep)
      && !chains_.held(keep)) {
    evict(keep);
    evict_over_cap({}, tags); // its parents may go now
  }
}

uint64_t ssd_tier::set_byte_cap(uint64_t bytes,
                                std::function<void(uint64_t)> on_disk) {
  cfg_.byte_cap = bytes;
  auto before = stats_.evicted;
  std::set<uint64_t> tags;
  evict_over_cap({}, &tags);
  auto evicted = stats_.evicted - before;
  if (on_disk) {
    if (tags.empty())
      on_disk(evicted);
    else
      cap_waits_.push_back({std::move(tags), evicted, std::move(on_disk)});
  }
  return evicted;
}

} // namespace kvtier::tiers::ssd
