#include "runtime/tools/inspect.hpp"

#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

namespace kvtier::runtime {

namespace ssd = tiers::ssd;

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
    out.detail = ssd::context_of(shape) + " (MODEL's layers)";
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
  std::vector<std::string> fps;
  for (auto& e : stdfs::directory_iterator(dir, err))
    if (e.is_directory())
      fps.push_back(e.path().filename().string());
  std::sort(fps.begin(), fps.end());
  for (auto& fp : fps) {
    inspected_fingerprint g;
    g.fingerprint = fp;
    auto root = ssd::join_path(dir, fp);
    auto names = fs.list(root);
    if (!names)
      return names.error();
    g.model = read_text(fs, ssd::join_path(root, ssd::model_file_name));
    g.holder = read_text(fs, ssd::join_path(root, ssd::lock_file_name));
    while (!g.holder.empty() && g.holder.back() == '\n')
      g.holder.pop_back();
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
    out.fingerprints.push_back(std::move(g));
  }
  return out;
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
        << " (uses the directory while that process runs)\n";
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
      if (r.verified && f.status == "ok")
        o << " chunks=" << f.chunks_checked;
      if (!f.detail.empty())
        o << "  (" << f.detail << ")";
      o << "\n";
    }
  }
  return o.str();
}

} // namespace kvtier::runtime
