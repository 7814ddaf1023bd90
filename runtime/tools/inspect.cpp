#include "runtime/tools/inspect.hpp"

#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace kvtier::runtime {

namespace ssd = tiers::ssd;

const char* to_string(lock_state s) {
  switch (s) {
    case lock_state::none: return "none";
    case lock_state::held: return "held";
    case lock_state::stale: return "stale";
    case lock_state::unknown: return "unknown";
  }
  return "?";
}

uint64_t inspect_report::problems() const {
  uint64_t n = 0;
  for (auto& f : fingerprints)
    n += f.problems;
  return n;
}

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Reads every payload of `h` from `f` and checks its chunk sums.
caf::error verify_payloads(ssd::file& f, const ssd::entry_header& h,
                           uint64_t& chunks) {
  std::vector<const ssd::payload_info*> all;
  for (auto& l : h.layers)
    all.push_back(&l.payload);
  for (auto& a : h.attachments)
    all.push_back(&a.payload);
  std::vector<std::byte> buf;
  for (auto* p : all) {
    buf.resize(p->length);
    auto n = f.read_at(p->offset, buf);
    if (!n)
      return n.error();
    if (*n != p->length)
      return make_error(ec::corrupt_data, "short payload read at offset "
                                            + std::to_string(p->offset));
    if (auto err = ssd::verify(h, *p, buf))
      return err;
    chunks += p->chunk_sums.size();
  }
  return {};
}

/// The whole (small) text file `path`, or "" when it cannot be read.
std::string read_text(ssd::file_system& fs, const std::string& path) {
  auto f = fs.open(path, ssd::open_mode::read);
  if (!f)
    return {};
  auto size = (*f)->size();
  if (!size)
    return {};
  std::string s(std::min<uint64_t>(*size, 1u << 16), '\0');
  auto n = (*f)->read_at(0, std::as_writable_bytes(std::span{s}));
  s.resize(n ? *n : 0);
  return s;
}

/// The geometry a MODEL text's "layers: " line gives, if it parses.
std::optional<tiers::model_geometry> model_layers(const std::string& text) {
  auto at = text.find("\nlayers: ");
  if (at == std::string::npos)
    return std::nullopt;
  at += 9;
  auto g = tiers::model_geometry::parse_layers(
    text.substr(at, text.find('\n', at) - at));
  if (!g)
    return std::nullopt;
  return std::move(*g);
}

inspected_file inspect_file(ssd::file_system& fs, const std::string& root,
                            const std::string& fingerprint,
                            const std::optional<tiers::model_geometry>& model,
                            const std::string& name, bool verify) {
  inspected_file out;
  out.name = name;
  if (ends_with(name, ".tmp")) {
    out.status = "temp";
    out.detail = "an interrupted write (removed by the next start)";
    return out;
  }
  if (ends_with(name, ".kvr")) {
    out.status = "record";
    out.detail = "checkpoint files of one identity up to a write id are "
                 "dead (applied and removed by the next start)";
    return out;
  }
  if (!ends_with(name, ".kvt")) {
    out.status = "other";
    return out;
  }
  auto f = fs.open(ssd::join_path(root, name), ssd::open_mode::read);
  if (!f) {
    out.status = "unreadable";
    out.detail = describe(f.error());
    return out;
  }
  auto h = ssd::read_header(**f);
  if (!h) {
    out.status =
      h.error() == ec::incompatible_format ? "incompatible" : "corrupt";
    out.detail = describe(h.error());
    return out;
  }
  out.ns = h->ns;
  out.session = h->session.value_or("");
  out.kind = tiers::to_string(h->kind);
  out.request = h->request;
  out.attempt = h->attempt;
  out.write_id = h->write_id;
  out.priority = h->priority;
  out.tokens = h->tokens.size();
  out.parent = h->parent;
  out.parent_write_id = h->parent_write_id;
  out.parent_tokens = h->parent_tokens;
  auto own = h->tokens.begin() + static_cast<ptrdiff_t>(h->parent_tokens);
  out.head.assign(own, own
                         + static_cast<ptrdiff_t>(
                           std::min<size_t>(8, out.tokens - h->parent_tokens)));
  out.layers = static_cast<uint32_t>(h->layers.size());
  out.attachments = static_cast<uint32_t>(h->attachments.size());
  out.bytes = h->file_length;
  caf::error shape;
  if (model)
    shape = ssd::check_header(*model, fingerprint, *h);
  if (h->fingerprint != fingerprint) {
    out.status = "incompatible";
    out.detail = "header names fingerprint " + h->fingerprint;
  } else if (shape) {
    out.status = "mismatched";
    out.detail = context_of(shape) + " (MODEL's layers)";
  } else if (h->tokens_resolved && ssd::file_name(h->key()) != name) {
    out.status = "misnamed";
    out.detail = "header hashes to " + ssd::file_name(h->key());
  } else if (verify) {
    if (auto err = verify_payloads(**f, *h, out.chunks_checked)) {
      out.status = "corrupt";
      out.detail = describe(err);
    }
  }
  return out;
}

/// Whether the process a LOCK's text ("pid N on host H") names still
/// runs. Read-only: the lock itself is not tried (taking it would empty
/// the text, and could make a starting service fail).
lock_state lock_of(const std::string& holder) {
  if (holder.empty())
    return lock_state::none;
  long long pid = 0;
  char host[256] = {};
  if (std::sscanf(holder.c_str(), "pid %lld on host %255s", &pid, host) != 2
      || pid <= 0)
    return lock_state::unknown;
  char here[256] = {};
  if (::gethostname(here, sizeof here - 1) != 0 || std::string{here} != host)
    return lock_state::unknown;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)
    return lock_state::held;
  return lock_state::stale;
}

/// Whether `names` (a directory's regular files) are a fingerprint
/// directory's own: its MODEL or LOCK file, or entry files.
bool is_fingerprint_dir(const std::vector<std::string>& names) {
  for (auto& n : names)
    if (n == ssd::model_file_name || n == ssd::lock_file_name
        || ends_with(n, ".kvt") || ends_with(n, ".kvr") || ends_with(n, ".tmp"))
      return true;
  return false;
}

caf::expected<inspected_fingerprint>
inspect_fingerprint(ssd::file_system& fs, const std::string& root,
                    const std::string& fp, bool verify) {
  inspected_fingerprint g;
  g.fingerprint = fp;
  g.path = root;
  auto names = fs.list(root);
  if (!names)
    return names.error();
  g.model = read_text(fs, ssd::join_path(root, ssd::model_file_name));
  g.holder = read_text(fs, ssd::join_path(root, ssd::lock_file_name));
  while (!g.holder.empty() && g.holder.back() == '\n')
    g.holder.pop_back();
  g.lock = lock_of(g.holder);
  auto layers = model_layers(g.model);
  std::sort(names->begin(), names->end());
  for (auto& name : *names) {
    if (name == ssd::model_file_name || name == ssd::lock_file_name)
      continue;
    auto f = inspect_file(fs, root, fp, layers, name, verify);
    if (f.status == "ok") {
      ++g.entries;
      g.entry_bytes += f.bytes;
    } else if (f.status != "other" && f.status != "record") {
      ++g.problems;
    }
    g.files.push_back(std::move(f));
  }
  return g;
}

/// A name in `dir` no file has yet: `name`, else `name.1`, `name.2`, ...
std::string free_name(ssd::file_system& fs, const std::string& dir,
                      const std::string& name) {
  auto taken = fs.list(dir);
  auto has = [&](const std::string& n) {
    return taken && std::find(taken->begin(), taken->end(), n) != taken->end();
  };
  auto out = name;
  for (int i = 1; has(out); ++i)
    out = name + "." + std::to_string(i);
  return out;
}

} // namespace

caf::expected<inspect_report> inspect(ssd::file_system& fs,
                                      const std::string& dir, bool verify) {
  namespace stdfs = std::filesystem;
  std::error_code err;
  if (!stdfs::is_directory(dir, err))
    return make_error(ec::not_found, dir + " is not a directory");
  inspect_report out;
  out.dir = dir;
  out.verified = verify;
  // A model's own directory: inspected as the one fingerprint it is.
  if (auto here = fs.list(dir); here && is_fingerprint_dir(*here)) {
    auto fp = stdfs::path(dir).lexically_normal().filename().string();
    if (fp.empty()) // "DIR/" normalises to "DIR/": its parent's last part
      fp =
        stdfs::path(dir).lexically_normal().parent_path().filename().string();
    auto g = inspect_fingerprint(fs, dir, fp, verify);
    if (!g)
      return g.error();
    out.fingerprints.push_back(std::move(*g));
    return out;
  }
  std::vector<std::string> fps;
  for (auto& e : stdfs::directory_iterator(dir, err))
    if (e.is_directory())
      fps.push_back(e.path().filename().string());
  std::sort(fps.begin(), fps.end());
  for (auto& fp : fps) {
    auto g = inspect_fingerprint(fs, ssd::join_path(dir, fp), fp, verify);
    if (!g)
      return g.error();
    out.fingerprints.push_back(std::move(*g));
  }
  return out;
}

caf::expected<uint64_t> quarantine(ssd::file_system& fs, inspect_report& r) {
  auto movable = [](const inspected_file& f) {
    return f.status == "corrupt" || f.status == "misnamed";
  };
  // Nothing moves unless every directory it would move in is free: its
  // lock is taken as a service takes it, and held while files move (a
  // service that starts meanwhile waits for nothing: it is refused).
  std::vector<ssd::lock_ref> locks;
  for (auto& g : r.fingerprints)
    if (std::any_of(g.files.begin(), g.files.end(), movable)) {
      auto l = fs.lock(ssd::join_path(g.path, ssd::lock_file_name));
      if (!l)
        return make_error(ec::locked, "nothing moved: " + reason(l.error())
                                        + "; stop that service first");
      locks.push_back(std::move(*l));
    }
  uint64_t moved = 0;
  for (auto& g : r.fingerprints) {
    auto dir = ssd::join_path(g.path, quarantine_dir_name);
    uint64_t here = 0;
    for (auto& f : g.files) {
      if (!movable(f))
        continue;
      if (auto err = fs.make_dirs(dir))
        return err;
      auto to = free_name(fs, dir, f.name);
      if (auto err =
            fs.rename(ssd::join_path(g.path, f.name), ssd::join_path(dir, to)))
        return err;
      f.quarantined = std::string{quarantine_dir_name} + "/" + to;
      f.status = "quarantined";
      --g.problems;
      ++here;
    }
    moved += here;
    if (here > 0) {
      if (auto err = fs.sync_dir(dir))
        return err;
      if (auto err = fs.sync_dir(g.path))
        return err;
    }
  }
  return moved;
}

std::string render_inspect(const inspect_report& r) {
  std::ostringstream o;
  o << r.dir << ": " << r.fingerprints.size() << " fingerprint"
    << (r.fingerprints.size() == 1 ? "" : "s")
    << (r.verified ? ", payload checksums verified" : "") << "\n";
  for (auto& g : r.fingerprints) {
    o << "\n[" << g.fingerprint << "] " << g.entries << " entries, "
      << g.entry_bytes << " bytes, " << g.problems << " problems\n";
    // The MODEL file's lines but its first (a heading) and fingerprint.
    std::istringstream model(g.model);
    std::string line;
    for (int i = 0; std::getline(model, line); ++i)
      if (i > 0 && line.rfind("fingerprint: ", 0) != 0)
        o << "  " << line << "\n";
    if (!g.holder.empty())
      o << "  LOCK: " << g.holder
        << (g.lock == lock_state::held
              ? " (held: that process uses the directory)"
            : g.lock == lock_state::stale
              ? " (stale: that process has exited; the next start takes "
                "the lock over)"
              : " (not checked: another host's process)")
        << "\n";
    for (auto& f : g.files) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "  %-38s %-12s %8llu tokens %12llu B  ",
                    f.name.c_str(), f.status.c_str(),
                    static_cast<unsigned long long>(f.tokens),
                    static_cast<unsigned long long>(f.bytes));
      if (f.kind == "object")
        o << buf << "object key=" << f.ns << " attachments=" << f.attachments;
      else
        o << buf << "ns=" << f.ns;
      if (f.kind == "checkpoint")
        o << " checkpoint request=" << f.request << " attempt=" << f.attempt;
      if (!f.parent.empty())
        o << " parent=" << f.parent << " (write " << f.parent_write_id
          << ", its first " << f.parent_tokens << " tokens)";
      if (f.tokens > 0) {
        o << (f.parent.empty() ? " prefix=[" : " own=[");
        for (size_t i = 0; i < f.head.size(); ++i)
          o << (i ? " " : "") << f.head[i];
        o << (f.tokens > f.head.size() ? " ...]" : "]");
      }
      if (!f.session.empty())
        o << " session=" << f.session;
      if (f.priority != tiers::default_priority)
        o << " priority=" << f.priority;
      if (r.verified && f.status == "ok")
        o << " chunks=" << f.chunks_checked;
      if (!f.detail.empty())
        o << "  (" << f.detail << ")";
      if (!f.quarantined.empty())
        o << " -> " << f.quarantined;
      o << "\n";
    }
  }
  return o.str();
}

} // namespace kvtier::runtime
