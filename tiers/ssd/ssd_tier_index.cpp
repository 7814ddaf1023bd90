// The SSD tier's coordinator: start-up (`open`) and the start-up scan in
// bounded steps (`index_step`), and what waits for the scan's end: delta
// files, the removal records, the LRU order the files' mtimes record, the
// byte cap, checkpoint removals asked for meanwhile, and the writes.
#include "tiers/ssd/kill_points.hpp"
#include "tiers/ssd/start_scan.hpp"

#include <tuple>

namespace kvtier::tiers::ssd {

caf::expected<scan_report> ssd_tier::open() {
  scan_ = std::make_unique<start_scan>();
  auto& sc = *scan_;
  if (auto err = files_.own_directory()) {
    files_.release_lock();
    scan_.reset();
    return err;
  }
  auto names = files_.list();
  if (!names) {
    scan_.reset();
    return names.error();
  }
  sc.names = std::move(*names);
  // Removal records first: a checkpoint file one covers is never indexed.
  removals_.load_records(sc.names, sc.report, sc.max_write_id);
  if (!cfg_.index_at_open)
    return sc.report;
  while (!index_step(sc.names.size() + 1)) {
  }
  return scan_result_;
}

std::optional<scanned_file> ssd_tier::scan_name(const std::string& name) {
  auto& sc = *scan_;
  auto covered = [&](const std::string& n, const entry_header& h) {
    return removals_.covered_at_scan(n, h, sc.report);
  };
  std::vector<scanned_file> found;
  files_.scan_file(name, sc.report, found, sc.max_write_id, covered);
  if (found.empty())
    return std::nullopt;
  files_.saw_stamp(found.front().mtime);
  return std::move(found.front());
}

bool ssd_tier::index_step(
  size_t max_files, const std::function<void(const entry_header&)>& indexed) {
  if (!scan_)
    return true;
  auto& sc = *scan_;
  for (size_t n = 0; n < max_files && sc.next < sc.names.size(); ++n) {
    auto at = sc.next++;
    auto& name = sc.names[at];
    if (sc.scanned_early.erase(name) > 0)
      continue;
    auto f = scan_name(name);
    if (!f)
      continue;
    if (!f->file.header->parent.empty()) {
      sc.deltas.push_back(std::move(*f));
      continue;
    }
    index_found(*f, at, indexed);
  }
  if (sc.next < sc.names.size())
    return false;
  index_deltas(indexed);
  finish_index();
  return true;
}

void ssd_tier::scan_early(const std::string& name) {
  scan_->scanned_early.insert(name);
  auto f = scan_name(name);
  if (!f)
    return;
  if (!f->file.header->parent.empty()) {
    --scan_->report.loaded;
    remove_file(name, removal_reason::erased);
    return;
  }
  index_found(*f, scan_->at(name), {});
}

void ssd_tier::index_deltas(
  const std::function<void(const entry_header&)>& indexed) {
  auto& sc = *scan_;
  delta_chains::resolve(
    sc.deltas, files_.index(), sc.report, io_,
    [&](scanned_file& d) { index_found(d, sc.at(d.file.name), indexed); });
}

void ssd_tier::index_found(
  scanned_file& f, size_t at,
  const std::function<void(const entry_header&)>& indexed) {
  scan_->order.push_back({f.mtime, f.file.header->write_id, at});
  if (indexed)
    indexed(*f.file.header);
  chains_.link(f.file);
  // Below every file used since `open`; the rebuild at the end orders the
  // scanned ones by their mtimes.
  files_.index().insert(std::move(f.file), true);
}

void ssd_tier::rebuild_recency() {
  // Least recently used first, as each file's mtime recorded it (then
  // oldest write first): the LRU order from before the restart, below the
  // files used since `open`.
  auto& sc = *scan_;
  std::sort(sc.order.begin(), sc.order.end(), [](auto& a, auto& b) {
    return std::tie(a.mtime, a.write_id, a.at)
           < std::tie(b.mtime, b.write_id, b.at);
  });
  for (auto i = sc.order.rbegin(); i != sc.order.rend(); ++i) {
    auto& name = sc.names[i->at];
    if (sc.used.count(name) == 0)
      files_.index().make_coldest(name);
  }
}

void ssd_tier::finish_index() {
  auto& sc = *scan_;
  auto& r = sc.report;
  removals_.finish_records(r);
  // Above every write id on disk: no write started before this.
  writes_.set_next_write_id(sc.max_write_id + 1);
  rebuild_recency();
  // Least recently used among the files nothing depends on, as after a
  // write: a delta parent goes after its children.
  auto held = [this](const std::string& n) { return chains_.held(n); };
  // One at a time: its parent may be next.
  while (auto victim = files_.index().victim(cfg_.byte_cap, {}, held)) {
    auto& name = *victim;
    auto* f = files_.index().file(name);
    auto checkpoint = f->header->kind == key_kind::checkpoint
                        ? f->header
                        : std::shared_ptr<const entry_header>{};
    forget(name, removal_reason::evicted);
    // As any checkpoint file that leaves: known until its unlink is
    // durable, so a removal of its identity covers it.
    if (checkpoint)
      removals_.forgot(name, checkpoint);
    kill_protocol in{"start-up-scan"};
    auto err = io_.fs.remove(io_.path(name));
    if (!err)
      ++r.evicted;
    if (checkpoint && (!err || err == ec::not_found))
      removals_.unlinked(name);
  }
  stats_.corrupt_removed += r.corrupt_removed;
  stats_.evicted += r.evicted;
  stats_.geometry_mismatched += r.mismatched;
  stats_.index_ms =
    static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - sc.started)
                            .count());
  scan_result_ = r;
  auto removals = std::move(sc.removals);
  scan_.reset();
  for (auto& rm : removals)
    start_removal(rm.request, rm.ns, std::move(rm.cb));
  pump(); // the writes queued meanwhile
  maybe_finish_flush();
}

std::string scan_summary(const scan_report& r) {
  std::string found = std::to_string(r.loaded) + " files indexed";
  for (auto [n, what] : {std::pair{r.corrupt_removed, "corrupt removed"},
                         {r.temps_removed, "interrupted writes removed"},
                         {r.evicted, "evicted over the cap"},
                         {r.mismatched, "of another geometry kept"},
                         {r.ignored, "of another model or version ignored"},
                         {r.removed_by_record, "removed by removal records"},
                         {r.broken_chains, "delta files without a parent "
                                           "removed"}})
    if (n > 0)
      found += ", " + std::to_string(n) + " " + what;
  return found;
}

bool ssd_tier::removal_deferred(const entry_header& h) const {
  if (!scan_ || h.kind != key_kind::checkpoint)
    return false;
  for (auto& rm : scan_->removals)
    if (rm.request == h.request && rm.ns == h.ns)
      return true;
  return false;
}

} // namespace kvtier::tiers::ssd
