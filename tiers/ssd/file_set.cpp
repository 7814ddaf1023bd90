#include "tiers/ssd/file_set.hpp"
#include "tiers/ssd/kill_points.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace kvtier::tiers::ssd {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

file_set::file_set(const ssd_config& cfg, tier_io& io)
  : io_(io)
  , fingerprint_(cfg.fingerprint)
  , model_(cfg.model)
  , clock_(cfg.clock)
  , index_(cfg.policy) {
  if (model_)
    geometry_ = std::make_shared<const model_geometry>(model_->geometry);
}

caf::expected<std::vector<std::string>> file_set::list() const {
  auto names = io_.fs.list(io_.root);
  if (names)
    std::sort(names->begin(), names->end());
  return names;
}

caf::error file_set::own_directory() {
  if (auto err = io_.fs.make_dirs(io_.root))
    return err;
  auto mode = io_.fs.mode(io_.root);
  if (!mode)
    return mode.error();
  if ((*mode & 077) != 0) {
    // State bytes are users' prompts: the directory is the owner's alone.
    auto tight = *mode & ~uint32_t{077};
    if (auto err = io_.fs.set_mode(io_.root, tight))
      return err;
    char line[64];
    std::snprintf(line, sizeof line, " from %04o to %04o", *mode, tight);
    io_.log("ssd: tightened the permissions of " + io_.root + line);
  }
  // Before anything in the directory is read or removed: a second process
  // must not scan away the first one's temp files.
  auto lock = io_.fs.lock(io_.path(lock_file_name));
  if (!lock)
    return lock.error();
  lock_ = std::move(*lock);
  return check_model_file();
}

caf::error file_set::check_model_file() {
  auto want = model_ ? model_->describe()
                     : "kvtier model identity: fingerprint " + fingerprint_
                         + " (no model geometry given)\n";
  auto p = io_.path(model_file_name);
  if (auto f = io_.fs.open(p, open_mode::read); f) {
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
  kill_protocol in{"model-file"};
  auto tmp = p + ".tmp";
  io_.fs.remove(tmp); // left by a crash while writing it, if at all
  auto out = io_.fs.open(tmp, open_mode::create);
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
  if (auto err = io_.fs.rename(tmp, p))
    return err;
  return io_.fs.sync_dir(io_.root);
}

void file_set::scan_file(
  const std::string& name, scan_report& r, std::vector<scanned_file>& found,
  uint64_t& max_write_id,
  const std::function<bool(const std::string&, const entry_header&)>& covered) {
  if (name == lock_file_name || name == model_file_name)
    return;
  kill_protocol in{"start-up-scan"};
  if (ends_with(name, ".tmp")) {
    if (!io_.fs.remove(io_.path(name)))
      ++r.temps_removed;
    return;
  }
  if (ends_with(name, ".kvr"))
    return; // a removal record: `load_records`
  if (!ends_with(name, ".kvt")) {
    ++r.ignored;
    return;
  }
  auto f = io_.fs.open(io_.path(name), open_mode::read);
  auto h = f ? read_header(**f) : caf::expected<entry_header>{f.error()};
  // A delta's name is checked once its parent gave it its first tokens
  // (`resolve_chains`).
  bool misnamed = h && h->fingerprint == fingerprint_ && h->tokens_resolved
                  && file_name(h->key()) != name;
  if ((!h && h.error() == ec::corrupt_data) || misnamed) {
    io_.log("ssd: removing corrupt file " + name + ": "
            + (misnamed ? std::string{"misnamed"} : reason(h.error())));
    if (!io_.fs.remove(io_.path(name)))
      ++r.corrupt_removed;
    return;
  }
  if (!h || h->fingerprint != fingerprint_) {
    ++r.ignored; // other version or fingerprint; or unreadable right now
    return;
  }
  max_write_id = std::max(max_write_id, h->write_id);
  if (geometry_)
    if (auto err = check_header(*geometry_, fingerprint_, *h)) {
      // Not this model's state, whatever its name says: never served,
      // never deleted (it may be a file an operator put here by mistake).
      io_.log("ssd: not indexing " + name + ": " + context_of(err)
              + " (file kept)");
      ++r.mismatched;
      return;
    }
  if (covered(name, *h))
    return;
  auto mtime = (**f).mtime();
  auto bytes = h->file_length;
  found.push_back(
    {mtime ? *mtime : 0,
     ssd_file{name, std::make_shared<const entry_header>(std::move(*h)),
              bytes}});
  ++r.loaded;
}

uint64_t file_set::stamp() {
  uint64_t now = 0;
  if (clock_) {
    now = clock_();
  } else {
    using namespace std::chrono;
    now = static_cast<uint64_t>(
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch())
        .count());
  }
  last_stamp_ = std::max(now, last_stamp_ + 1);
  return last_stamp_;
}

void file_set::use(const std::string& name) {
  index_.touch(name);
  stamp_file(name);
}

void file_set::stamp_file(const std::string& name) {
  auto ns = stamp();
  auto [t, fresh] = stamping_.try_emplace(name, 0);
  if (!fresh) {
    t->second = ns; // after the one running
    return;
  }
  submit_stamp(name, ns);
}

void file_set::submit_stamp(const std::string& name, uint64_t ns) {
  auto tag = io_.chore(
    "record the use of " + name,
    [fs = &io_.fs, p = io_.path(name), ns] { return fs->set_mtime(p, ns); });
  stamp_chores_[tag] = name;
}

void file_set::stamp_ended(uint64_t tag) {
  auto i = stamp_chores_.find(tag);
  if (i == stamp_chores_.end())
    return;
  auto name = std::move(i->second);
  stamp_chores_.erase(i);
  // A failure was logged with the chore; the stamp is advisory.
  auto t = stamping_.find(name);
  if (t == stamping_.end())
    return;
  if (t->second == 0) {
    stamping_.erase(t);
    return;
  }
  auto ns = std::exchange(t->second, 0);
  submit_stamp(name, ns);
}

} // namespace kvtier::tiers::ssd
