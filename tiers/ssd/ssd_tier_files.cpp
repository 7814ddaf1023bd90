// The SSD tier's coordinator: which files leave and how (erasure, a failed
// restore, a checkpoint removal, a parent taking its delta children
// along), and what a restore's use of a file records.
#include "tiers/ssd/kill_points.hpp"
#include "tiers/ssd/start_scan.hpp"

namespace kvtier::tiers::ssd {

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

void ssd_tier::use_chain(const std::string& name) {
  // Every link is made the most recently used, root first, so the file
  // stays the most recent and its ancestors just behind it.
  for (auto* link : delta_chains::chain_of(files_.index(), name)) {
    files_.use(link->name);
    if (scan_)
      scan_->used.insert(link->name);
  }
}

void ssd_tier::read_ended(ended_read r) {
  if (!r.err) {
    // Where the rows came from: a later write of an entry extended from
    // them may leave them to these files (`delta_chains::proven_by_origin`).
    if (chains_.enabled())
      for (size_t l = 0; l < r.state.layers.size(); ++l) {
        auto& layer = r.state.layers[l];
        if (layer.kind != layer_kind::kv)
          continue;
        for (size_t k = 0; k < r.links.size(); ++k)
          if (auto& buf = layer.segments[k].buf)
            chains_.remember_origin(buf, r.links[k].name,
                                    r.links[k].header->write_id, l,
                                    r.links[k].header->parent_tokens);
      }
    for (auto& cb : r.waiters)
      cb(r.state);
    return;
  }
  // The file to blame (a delta's parent, say, else the matched file).
  // Removing or forgetting a link takes its children along: the chain is
  // never served in part.
  auto& err = r.err;
  auto& name = r.links[r.blame].name;
  auto* f = files_.index().file(name);
  bool same = f && f->header->header_sum == r.links[r.blame].header->header_sum;
  if (same && err == ec::corrupt_data) {
    io_.log("ssd: removing corrupt file " + name + ": " + reason(err));
    ++stats_.corrupt_removed;
    remove_file(name, removal_reason::corrupt);
  } else if (same && err == ec::not_found) {
    // Gone or replaced behind our back: forget it (the file, if any, is
    // not ours to delete).
    forget(name, removal_reason::gone);
  } else if (same && err == ec::incompatible_format) {
    // Another model's (or format version's) file under this name: a miss,
    // forgotten, and left on disk for whoever it belongs to.
    io_.log("ssd: not restoring " + name + ": " + context_of(err)
            + " (file kept)");
    ++stats_.restores_mismatched;
    forget(name, removal_reason::gone);
  }
  for (auto& cb : r.waiters)
    cb(err);
}

void ssd_tier::index_file(ssd_file f, uint32_t carried_uses) {
  chains_.link(f);
  files_.index().insert(std::move(f), false, carried_uses);
}

void ssd_tier::forget(const std::string& name, removal_reason why) {
  unindex(name, true, why, why);
}

std::optional<ssd_file> ssd_tier::unindex(const std::string& name, bool report,
                                          removal_reason why,
                                          removal_reason cascade) {
  auto f = files_.index().erase(name, why == removal_reason::evicted);
  if (!f)
    return f;
  auto& h = *f->header;
  chains_.unlink(name, h);
  if (report && cfg_.on_remove)
    cfg_.on_remove(remove_event{h.ns, h.tokens, why, f->bytes, h.kind,
                                h.request, h.attempt});
  // Its delta children were cut from this very file: they go with it.
  cut_children(name, why, cascade);
  return f;
}

void ssd_tier::cut_children(const std::string& name, removal_reason why,
                            removal_reason cascade) {
  for (auto& child : chains_.take_children(name)) {
    ++stats_.chain_cascades;
    io_.log("ssd: removing delta file " + child + ": its parent " + name
            + " left (" + to_string(why) + ")");
    remove_file(child, cascade);
  }
}

uint64_t ssd_tier::remove_file(const std::string& name, removal_reason why) {
  auto* f = files_.index().file(name);
  auto checkpoint = f && f->header->kind == key_kind::checkpoint
                      ? f->header
                      : std::shared_ptr<const entry_header>{};
  forget(name, why);
  // Known until its unlink is seen to succeed (or a write replaces it), so
  // a removal of its identity covers it.
  if (checkpoint)
    removals_.forgot(name, checkpoint);
  // A write of the same key may rename a fresh file over this name at any
  // moment; removing now could delete that one. Let the write replace it.
  if (writes_.writing(name))
    return 0;
  // No write of the name starts while the unlink runs: its rename could
  // land first, and the unlink would then remove the new file.
  auto tag = io_.chore(std::string{to_string(why)} + " " + name,
                       [fs = &io_.fs, p = io_.path(name)] {
                         kill_protocol in{"file-removal"};
                         return fs->remove(p);
                       });
  unlink_chores_[tag] = name;
  io_.unlinking_now.insert(name);
  return tag;
}

void ssd_tier::unlink_ended(uint64_t tag, const io_completion& c) {
  auto u = unlink_chores_.find(tag);
  if (u == unlink_chores_.end())
    return;
  // A checkpoint file whose unlink failed stays known until a removal of
  // its identity takes it (`remove_checkpoints`).
  if (!c.err || c.err == ec::not_found)
    removals_.unlinked(u->second);
  io_.unlinking_now.erase(io_.unlinking_now.find(u->second));
  unlink_chores_.erase(u);
  std::vector<cap_wait> done;
  for (auto w = cap_waits_.begin(); w != cap_waits_.end();) {
    w->tags.erase(tag);
    if (w->tags.empty()) {
      done.push_back(std::move(*w));
      w = cap_waits_.erase(w);
    } else {
      ++w;
    }
  }
  for (auto& w : done)
    w.done(w.evicted);
  pump();
  maybe_finish_flush();
}

busy_name ssd_tier::busy_names() const {
  // A name being written is left to that write: it may rename a new file
  // over it; so is a name the index holds again (a newer file renamed over
  // it whose name is not durable yet).
  return [this](const std::string& name) {
    return files_.index().file(name) != nullptr || writes_.writing(name);
  };
}

bool ssd_tier::erase(std::string_view ns, std::span<const token> tokens) {
  return erase(storage_key::prefix(std::string{ns},
                                   token_seq(tokens.begin(), tokens.end())));
}

bool ssd_tier::erase(const storage_key& key) {
  auto name = file_name(key);
  bool any = writes_.cancel(name);
  any = writes_.erase_after(name) || any;
  if (scan_ && scan_->unscanned(name))
    scan_early(name);
  if (files_.index().contains(key)) {
    remove_file(name, removal_reason::erased);
    any = true;
  }
  maybe_finish_flush();
  return any;
}

void ssd_tier::remove_checkpoints(uint64_t request, std::string_view ns,
                                  removal_callback cb) {
  auto ours = [&](key_kind kind, uint64_t req, std::string_view n) {
    return kind == key_kind::checkpoint && req == request && n == ns;
  };
  // Queued or failed writes are never written.
  auto& queue = writes_.queue();
  std::set<std::string> queued;
  if (queue.count(key_kind::checkpoint) > 0) // no walk of a prefix backlog
    for (auto& item : queue.items())
      if (!item.in_flight && ours(item.kind, item.request, item.state.ns))
        queued.insert(item.key);
  for (auto& name : queued)
    for (auto& item : queue.cancel(name)) {
      ++stats_.writes_cancelled;
      writes_.report(item, write_outcome::cancelled);
    }
  if (scan_) {
    // Write ids are known once the scan is over (no write starts before):
    // the identity's files are hidden until then, the removal starts then.
    scan_->removals.push_back({request, std::string{ns}, std::move(cb)});
    return;
  }
  start_removal(request, ns, std::move(cb));
}

void ssd_tier::start_removal(uint64_t request, std::string_view ns,
                             removal_callback cb) {
  auto ours = [&](key_kind kind, uint64_t req, std::string_view n) {
    return kind == key_kind::checkpoint && req == request && n == ns;
  };
  auto through = writes_.last_write_id();
  removal_log::cover c;
  std::vector<std::string> indexed;
  for (auto* f : files_.index().checkpoints())
    if (ours(f->header->kind, f->header->request, f->header->ns))
      indexed.push_back(f->name);
  for (auto& name : indexed) {
    forget(name, removal_reason::erased);
    c.files.insert(name);
  }
  for (auto& [tag, job] : writes_.jobs()) {
    auto& h = job->header();
    if (ours(h.kind, h.request, h.ns))
      c.waiting.insert(tag);
  }
  if (removals_.start(request, ns, through, std::move(c), std::move(cb),
                      busy_names()))
    maybe_finish_flush();
}

} // namespace kvtier::tiers::ssd
