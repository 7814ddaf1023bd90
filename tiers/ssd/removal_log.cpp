#include "tiers/ssd/removal_log.hpp"

#include "tiers/ssd/kill_points.hpp"

#include <algorithm>
#include <cstdio>

namespace kvtier::tiers::ssd {

/// One checkpoint removal (`remove_checkpoints`, or a record the start-up
/// scan could not finish): its record, the covered files still on disk or
/// still being written, and who waits for it to become durable. One step
/// (an engine call op) runs at a time: write the record, unlink the files
/// (then fsync the directory), delete the record.
struct removal_log::removal {
  enum class record_state : uint8_t { none, writing, durable, failed };

  /// The identity's hash (`identity_hash`) and the highest write id the
  /// record covers.
  std::string id_hash;
  uint64_t through = 0;
  record_state record = record_state::none;
  /// Record files to delete once nothing is covered any more (the scan
  /// may find several for one identity).
  std::vector<std::string> records;
  /// Covered files to unlink, by name.
  std::set<std::string> files;
  /// Covered writes in flight (job tags): their files are unlinked once
  /// they finish.
  std::set<uint64_t> waiting;
  /// A step failed; the next flush (or a covered write finishing) resumes.
  bool stalled = false;
  /// The running step, if any.
  bool busy = false;
  /// Whether the record was tried since the removal was (re)started.
  bool record_tried = false;
  caf::error err;
  std::vector<removal_callback> waiters;
  bool answered = false;
};

/// What one removal step's op did, filled on the engine thread.
struct removal_io {
  file_system* fs = nullptr;
  std::string dir;
  enum class step : uint8_t { record, unlink, drop } what = step::record;
  /// record: the record's path and a temp path; drop: the records' paths.
  std::string path;
  std::string temp;
  std::vector<std::string> drop;
  /// unlink: the files' names (in `dir`), and those found gone afterwards
  /// (only when the directory fsync that followed succeeded).
  std::vector<std::string> names;
  std::vector<std::string> gone;
  /// The number of the step's directory fsync (`tier_io::dir_syncs`).
  uint64_t dir_sync = 0;
};

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
  kill_protocol in{"removal-record"};
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
  kill_protocol in{"removal-unlink"};
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
  kill_protocol in{"removal-drop"};
  caf::error first;
  for (auto& p : io.drop)
    if (auto err = io.fs->remove(p); err && err != ec::not_found && !first)
      first = std::move(err);
  if (auto err = io.fs->sync_dir(io.dir); err && !first)
    first = std::move(err);
  return first;
}

} // namespace

removal_log::removal_log(tier_io& io, ssd_stats& stats)
  : io_(io)
  , stats_(stats) {}

removal_log::~removal_log() = default;

bool removal_log::start(uint64_t request, std::string_view ns, uint64_t through,
                        cover c, removal_callback cb, const busy_name& busy) {
  auto rm = std::make_unique<removal>();
  rm->id_hash = identity_hash(request, ns);
  rm->through = through;
  rm->files = std::move(c.files);
  rm->waiting = std::move(c.waiting);
  for (auto i = forgotten_.begin(); i != forgotten_.end();) {
    auto& h = *i->second.header;
    if (h.kind == key_kind::checkpoint && h.request == request && h.ns == ns) {
      rm->files.insert(i->first);
      i = forgotten_.erase(i);
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
        return false;
      }
    cb({});
    return true;
  }
  rm->records.push_back(record_name(rm->id_hash, rm->through));
  rm->waiters.push_back(std::move(cb));
  auto id = next_removal_++;
  removals_.emplace(id, std::move(rm));
  return step(id, busy);
}

void removal_log::unlinked(const std::string& name) {
  if (auto i = forgotten_.find(name); i != forgotten_.end())
    i->second.durable_at = io_.dir_syncs + 1;
}

void removal_log::dir_synced(uint64_t n) {
  std::erase_if(forgotten_, [n](auto& f) {
    return f.second.durable_at != 0 && f.second.durable_at <= n;
  });
}

void removal_log::answer(removal& rm, const caf::error& err) {
  rm.answered = true;
  for (auto& cb : std::exchange(rm.waiters, {}))
    cb(err);
}

bool removal_log::step(uint64_t id, const busy_name& busy) {
  auto i = removals_.find(id);
  if (i == removals_.end() || i->second->busy)
    return false;
  auto& rm = *i->second;
  using rs = removal::record_state;
  bool covered = !rm.files.empty() || !rm.waiting.empty();
  auto io = std::make_shared<removal_io>();
  io->fs = &io_.fs;
  io->dir = io_.root;
  // A name being written is left to that write: it may rename a new file
  // over it (which the unlink must not remove); so is a name the index
  // holds again (a newer file renamed over it whose name is not durable
  // yet: its write is retried, and its success clears the name).
  for (auto& name : rm.files)
    if (!busy(name))
      io->names.push_back(name);
  if (covered && rm.record != rs::durable && !rm.record_tried) {
    io->what = removal_io::step::record;
    io->path = io_.path(rm.records.back());
    io->temp = io->path + "." + std::to_string(io_.next_temp()) + ".tmp";
    io->names.clear();
    rm.record = rs::writing;
    rm.record_tried = true;
  } else if (!rm.stalled && !io->names.empty()) {
    io->what = removal_io::step::unlink;
    for (auto& n : io->names)
      io_.unlinking_now.insert(n);
  } else if (!covered) {
    answer(rm, {}); // everything it covered is durably gone
    if (rm.record == rs::none) {
      removals_.erase(i);
      return true;
    }
    io->what = removal_io::step::drop;
    io->names.clear();
    for (auto& r : rm.records)
      io->drop.push_back(io_.path(r));
  } else {
    // Waiting for covered writes, for a write of a covered name, or (after
    // a failure) for the next flush. Neither a record nor the unlinks could
    // be made durable: the caller hears it now.
    if (rm.stalled && rm.record == rs::failed)
      answer(rm, rm.err);
    return false;
  }
  submit(id, rm, std::move(io));
  return false;
}

void removal_log::submit(uint64_t id, removal& rm,
                         std::shared_ptr<removal_io> io) {
  rm.busy = true;
  io->dir_sync = ++io_.dir_syncs; // each step ends in one, if it succeeds
  auto tag = io_.next_tag();
  ops_.emplace(tag, std::pair{id, io});
  auto op = call_op(tag, [io] {
    switch (io->what) {
      case removal_io::step::record: return write_record(*io);
      case removal_io::step::unlink: return unlink_all(*io);
      case removal_io::step::drop: return drop_records(*io);
    }
    return caf::error{};
  });
  op.keep = io;
  io_.submit(std::move(op));
}

std::optional<uint64_t> removal_log::on_completion(uint64_t tag,
                                                   const io_completion& c,
                                                   bool& unlinked) {
  auto op = ops_.find(tag);
  auto [id, io] = op->second;
  ops_.erase(op);
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
        io_.log("ssd: removal record " + rm.records.back()
                + " not written: " + reason(c.err) + "; unlinking directly");
      } else {
        rm.record = rs::durable;
        ++stats_.removal_records;
        dir_synced(io->dir_sync);
        answer(rm, {});
      }
      break;
    case removal_io::step::unlink:
      for (auto& n : io->names)
        io_.unlinking_now.erase(io_.unlinking_now.find(n));
      for (auto& n : io->gone)
        rm.files.erase(n);
      if (!io->gone.empty()) // the directory fsync after them succeeded
        dir_synced(io->dir_sync);
      if (c.err) {
        rm.err = c.err;
        rm.stalled = true;
        ++stats_.removal_failures;
        io_.log("ssd: removing a completed checkpoint's file failed: "
                + reason(c.err) + "; pending, retried by the next flush");
      }
      unlinked = true;
      break;
    case removal_io::step::drop:
      if (c.err) // a record left behind covers nothing alive any more
        io_.log("ssd: removal record not deleted: " + reason(c.err));
      removals_.erase(i);
      return std::nullopt;
  }
  return id;
}

bool removal_log::resume(const busy_name& busy) {
  std::vector<uint64_t> ids;
  for (auto& [id, rm] : removals_)
    ids.push_back(id);
  bool ended = false;
  for (auto id : ids)
    ended = step(id, busy) || ended;
  return ended;
}

void removal_log::restart() {
  // Pending removals are retried from their failed step.
  for (auto& [id, rm] : removals_) {
    rm->stalled = false;
    rm->record_tried = rm->record == removal::record_state::durable;
  }
}

std::string removal_log::error() const {
  std::string out;
  for (auto& [id, rm] : removals_)
    if (rm->err)
      out = describe(rm->err);
  return out;
}

bool removal_log::write_finished(uint64_t tag, const std::string& name,
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

void removal_log::replaced_on_disk(const std::string& name) {
  forgotten_.erase(name);
  for (auto& [id, rm] : removals_)
    rm->files.erase(name);
}

// --- the start-up scan -----------------------------------------------------

void removal_log::load_records(const std::vector<std::string>& names,
                               scan_report& r, uint64_t& max_write_id) {
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
    max_write_id = std::max(max_write_id, rec->second);
    ++r.records;
  }
}

bool removal_log::covered_at_scan(const std::string& name,
                                  const entry_header& h, scan_report& r) {
  if (h.kind != key_kind::checkpoint)
    return false;
  auto f = found_records_.find(identity_hash(h.request, h.ns));
  if (f == found_records_.end() || h.write_id > f->second.through)
    return false;
  kill_protocol in{"scan-removal"};
  auto err = io_.fs.remove(io_.path(name));
  if (!err || err == ec::not_found) {
    ++r.removed_by_record;
  } else {
    io_.log("ssd: removing " + name + " (a completed checkpoint) failed: "
            + reason(err) + "; not indexed, retried by the next flush");
    f->second.failed.insert(name);
    f->second.err = std::move(err);
  }
  return true;
}

void removal_log::finish_records(scan_report& r) {
  kill_protocol in{"scan-removal"};
  // The unlinks above become durable before any record covering them goes.
  caf::error sync_err;
  if (r.removed_by_record > 0)
    sync_err = io_.fs.sync_dir(io_.root);
  bool dropped = false;
  for (auto& [hash, f] : found_records_) {
    if (f.failed.empty() && !sync_err) {
      for (auto& name : f.names)
        if (!io_.fs.remove(io_.path(name)))
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
    (void)io_.fs.sync_dir(io_.root);
  found_records_.clear();
}

} // namespace kvtier::tiers::ssd
