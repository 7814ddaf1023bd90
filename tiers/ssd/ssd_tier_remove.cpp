// Durable checkpoint removals of the SSD tier: removal records, the
// unlinks they cover, and the start-up scan's part (records are applied
// before anything is indexed). docs/ssd-format.md, "Removal records".
#include "tiers/ssd/ssd_jobs.hpp"

#include <algorithm>
#include <cstdio>

namespace kvtier::tiers::ssd {

namespace {

constexpr size_t hash_digits = 32;
constexpr size_t id_digits = 16;

bool hex(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == s.npos;
}

/// `<32 hex>.<16 hex>.kvr`: the identity hash and the last write id.
std::optional<std::pair<std::string, uint64_t>>
parse_record(const std::string& name) {
  if (name.size() != hash_digits + 1 + id_digits + 4 || !name.ends_with(".kvr")
      || name[hash_digits] != '.')
    return std::nullopt;
  auto h = name.substr(0, hash_digits);
  auto w = name.substr(hash_digits + 1, id_digits);
  if (!hex(h) || !hex(w))
    return std::nullopt;
  return std::pair{h, std::stoull(w, nullptr, 16)};
}

std::string record_name(const std::string& id_hash, uint64_t through) {
  char buf[24];
  std::snprintf(buf, sizeof buf, ".%016llx",
                static_cast<unsigned long long>(through));
  return id_hash + buf + ".kvr";
}

/// The record: an empty file made durable under its name (temp, fsync,
/// rename, directory fsync).
caf::error write_record(removal_io& io) {
  auto f = io.fs->open(io.temp, open_mode::create);
  if (!f)
    return f.error();
  auto err = (*f)->sync();
  f->reset();
  if (!err)
    err = io.fs->rename(io.temp, io.path);
  if (err) {
    (void)io.fs->remove(io.temp); // the scan removes it otherwise
    return err;
  }
  return io.fs->sync_dir(io.dir);
}

/// Unlinks every name; those found gone count only once the directory
/// fsync after them succeeded. Returns the first failure.
caf::error unlink_all(removal_io& io) {
  caf::error first;
  std::vector<std::string> gone;
  for (auto& n : io.names) {
    auto err = io.fs->remove(join_path(io.dir, n));
    if (!err || err == ec::not_found)
      gone.push_back(n);
    else if (!first)
      first = std::move(err);
  }
  if (gone.empty())
    return first;
  if (auto err = io.fs->sync_dir(io.dir))
    return first ? first : err;
  io.gone = std::move(gone);
  return first;
}

caf::error drop_records(removal_io& io) {
  caf::error first;
  for (auto& p : io.drop)
    if (auto err = io.fs->remove(p); err && err != ec::not_found && !first)
      first = std::move(err);
  if (auto err = io.fs->sync_dir(io.dir); err && !first)
    first = std::move(err);
  return first;
}

} // namespace

void ssd_tier::remove_checkpoints(uint64_t request, std::string_view ns,
                                  removal_callback cb) {
  auto ours = [&](key_kind kind, uint64_t req, std::string_view n) {
    return kind == key_kind::checkpoint && req == request && n == ns;
  };
  // Queued or failed writes are never written.
  std::set<std::string> queued;
  if (queue_.count(key_kind::checkpoint) > 0) // no walk of a prefix backlog
    for (auto& item : queue_.items())
      if (!item.in_flight && ours(item.kind, item.request, item.state.ns))
        queued.insert(item.key);
  for (auto& name : queued)
    for (auto& item : queue_.cancel(name)) {
      ++stats_.writes_cancelled;
      report(item, write_outcome::cancelled);
    }
  auto rm = std::make_unique<removal>();
  rm->id_hash = identity_hash(request, ns);
  rm->through = next_write_id_ - 1;
  std::vector<std::string> indexed;
  for (auto* f : index_.checkpoints())
    if (ours(f->header->kind, f->header->request, f->header->ns))
      indexed.push_back(f->name);
  for (auto& name : indexed) {
    forget(name, removal_reason::erased);
    rm->files.insert(name);
  }
  for (auto& [tag, job] : writes_) {
    auto& h = job->io->header;
    if (ours(h.kind, h.request, h.ns))
      rm->waiting.insert(tag);
  }
  for (auto i = unlinking_.begin(); i != unlinking_.end();) {
    auto& h = *i->second;
    if (ours(h.kind, h.request, h.ns)) {
      rm->files.insert(i->first);
      i = unlinking_.erase(i);
    } else {
      ++i;
    }
  }
  if (rm->files.empty() && rm->waiting.empty()) {
    // Nothing on disk now; an unfinished earlier removal of the identity
    // still decides whether its files are durably dead.
    for (auto& [id, other] : removals_)
      if (other->id_hash == rm->id_hash
          && other->record != removal::record_state::durable) {
        if (other->answered)
          cb(other->err);
        else
          other->waiters.push_back(std::move(cb));
        return;
      }
    cb({});
    maybe_finish_flush();
    return;
  }
  rm->records.push_back(record_name(rm->id_hash, rm->through));
  rm->waiters.push_back(std::move(cb));
  auto id = next_removal_++;
  removals_.emplace(id, std::move(rm));
  removal_step(id);
}

void ssd_tier::answer(removal& rm, const caf::error& err) {
  rm.answered = true;
  for (auto& cb : std::exchange(rm.waiters, {}))
    cb(err);
}

void ssd_tier::removal_step(uint64_t id) {
  auto i = removals_.find(id);
  if (i == removals_.end() || i->second->busy)
    return;
  auto& rm = *i->second;
  using rs = removal::record_state;
  bool covered = !rm.files.empty() || !rm.waiting.empty();
  auto io = std::make_shared<removal_io>();
  io->fs = &fs_;
  io->dir = root_;
  // A name being written is left to that write: it may rename a new file
  // over it (which the unlink must not remove); so is a name the index
  // holds again (a newer file renamed over it whose name is not durable
  // yet: its write is retried, and its success clears the name).
  for (auto& name : rm.files)
    if (!index_.file(name)
        && std::none_of(writes_.begin(), writes_.end(),
                        [&](auto& w) { return w.second->name == name; }))
      io->names.push_back(name);
  if (covered && rm.record != rs::durable && !rm.record_tried) {
    io->what = removal_io::step::record;
    io->path = path(rm.records.back());
    io->temp = io->path + "." + std::to_string(temp_seq_++) + ".tmp";
    io->names.clear();
    rm.record = rs::writing;
    rm.record_tried = true;
  } else if (!rm.stalled && !io->names.empty()) {
    io->what = removal_io::step::unlink;
    for (auto& n : io->names)
      unlinking_now_.insert(n);
  } else if (!covered) {
    answer(rm, {}); // everything it covered is durably gone
    if (rm.record == rs::none) {
      removals_.erase(i);
      maybe_finish_flush();
      return;
    }
    io->what = removal_io::step::drop;
    io->names.clear();
    for (auto& r : rm.records)
      io->drop.push_back(path(r));
  } else {
    // Waiting for covered writes, for a write of a covered name, or (after
    // a failure) for the next flush. Neither a record nor the unlinks could
    // be made durable: the caller hears it now.
    if (rm.stalled && rm.record == rs::failed)
      answer(rm, rm.err);
    return;
  }
  rm.busy = true;
  auto tag = next_tag_++;
  removal_ops_.emplace(tag, std::pair{id, io});
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(tag, 0);
  op.keep = io;
  op.call = [io] {
    switch (io->what) {
      case removal_io::step::record: return write_record(*io);
      case removal_io::step::unlink: return unlink_all(*io);
      case removal_io::step::drop: return drop_records(*io);
    }
    return caf::error{};
  };
  submit(std::move(op));
}

void ssd_tier::removal_done(uint64_t tag, io_completion& c) {
  auto op = removal_ops_.find(tag);
  auto [id, io] = op->second;
  removal_ops_.erase(op);
  auto i = removals_.find(id);
  auto& rm = *i->second;
  rm.busy = false;
  using rs = removal::record_state;
  switch (io->what) {
    case removal_io::step::record:
      if (c.err) {
        rm.record = rs::failed;
        rm.err = c.err;
        ++stats_.removal_failures;
        log("ssd: removal record " + rm.records.back()
            + " not written: " + reason(c.err) + "; unlinking directly");
      } else {
        rm.record = rs::durable;
        ++stats_.removal_records;
        answer(rm, {});
      }
      break;
    case removal_io::step::unlink:
      for (auto& n : io->names)
        unlinking_now_.erase(unlinking_now_.find(n));
      for (auto& n : io->gone)
        rm.files.erase(n);
      if (c.err) {
        rm.err = c.err;
        rm.stalled = true;
        ++stats_.removal_failures;
        log("ssd: removing a completed checkpoint's file failed: "
            + reason(c.err) + "; pending, retried by the next flush");
      }
      pump();
      break;
    case removal_io::step::drop:
      if (c.err) // a record left behind covers nothing alive any more
        log("ssd: removal record not deleted: " + reason(c.err));
      removals_.erase(i);
      maybe_finish_flush();
      return;
  }
  removal_step(id);
  maybe_finish_flush();
}

void ssd_tier::resume_removals() {
  std::vector<uint64_t> ids;
  for (auto& [id, rm] : removals_)
    ids.push_back(id);
  for (auto id : ids)
    removal_step(id);
}

bool ssd_tier::covered_write_finished(uint64_t tag, const std::string& name,
                                      bool left) {
  bool any = false;
  for (auto& [id, rm] : removals_)
    if (rm->waiting.erase(tag) > 0) {
      any = true;
      if (left)
        rm->files.insert(name);
    }
  return any;
}

void ssd_tier::replaced_on_disk(const std::string& name) {
  unlinking_.erase(name);
  for (auto& [id, rm] : removals_)
    rm->files.erase(name);
}

bool ssd_tier::removal_busy() const noexcept {
  return !removal_ops_.empty();
}

// --- the start-up scan -----------------------------------------------------

void ssd_tier::load_records(const std::vector<std::string>& names,
                            scan_report& r) {
  found_records_.clear();
  for (auto& name : names) {
    if (!name.ends_with(".kvr"))
      continue;
    auto rec = parse_record(name);
    if (!rec) {
      ++r.ignored; // not a name this version writes: kept
      continue;
    }
    auto& f = found_records_[rec->first];
    f.through = std::max(f.through, rec->second);
    f.names.push_back(name);
    max_write_id_seen_ = std::max(max_write_id_seen_, rec->second);
    ++r.records;
  }
}

bool ssd_tier::covered_at_scan(const std::string& name, const entry_header& h,
                               scan_report& r) {
  if (h.kind != key_kind::checkpoint)
    return false;
  auto f = found_records_.find(identity_hash(h.request, h.ns));
  if (f == found_records_.end() || h.write_id > f->second.through)
    return false;
  auto err = fs_.remove(path(name));
  if (!err || err == ec::not_found) {
    ++r.removed_by_record;
  } else {
    log("ssd: removing " + name + " (a completed checkpoint) failed: "
        + reason(err) + "; not indexed, retried by the next flush");
    f->second.failed.insert(name);
    f->second.err = std::move(err);
  }
  return true;
}

void ssd_tier::finish_records(scan_report& r) {
  // The unlinks above become durable before any record covering them goes.
  caf::error sync_err;
  if (r.removed_by_record > 0)
    sync_err = fs_.sync_dir(root_);
  bool dropped = false;
  for (auto& [hash, f] : found_records_) {
    if (f.failed.empty() && !sync_err) {
      for (auto& name : f.names)
        if (!fs_.remove(path(name)))
          dropped = true;
      continue;
    }
    if (f.failed.empty())
      continue; // unsynced: kept, the next scan drops it
    auto rm = std::make_unique<removal>();
    rm->id_hash = hash;
    rm->through = f.through;
    rm->record = removal::record_state::durable;
    rm->record_tried = true;
    rm->records = f.names;
    rm->files = f.failed;
    rm->stalled = true;
    rm->err = f.err;
    rm->answered = true; // nobody waits: the record already answers
    removals_.emplace(next_removal_++, std::move(rm));
  }
  if (dropped)
    (void)fs_.sync_dir(root_);
  found_records_.clear();
}

} // namespace kvtier::tiers::ssd
