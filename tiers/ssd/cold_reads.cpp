#include "tiers/ssd/cold_reads.hpp"

#include <algorithm>

namespace kvtier::tiers::ssd {

namespace {

/// Alignment of a restored row below `populated_threshold` (a cache line).
constexpr size_t row_alignment = 64;

/// Stages of a cold read, in order. Each payload is verified as soon as
/// its reads are done, in parallel with the other reads.
enum class read_step : uint8_t { open, data };

/// One file of a restore's chain (a whole file alone, or a delta's files
/// root first).
struct read_link {
  std::string name;
  std::string path;
  std::shared_ptr<const entry_header> header;
  file_ref in;
};

struct read_io {
  file_system* fs = nullptr;
  std::string path;
  /// The files read, root first; the last is the matched file (`header`).
  std::vector<read_link> links;
  /// Per payload restored: which link it is read from.
  std::vector<size_t> link_of;
  /// The link an open or a verification failed on (the file to blame);
  /// verifications of several payloads run at once on the engine.
  std::atomic<size_t> bad_link = SIZE_MAX;
  /// The running model's geometry and fingerprint, checked against the
  /// header as re-read at open (no geometry: no check).
  std::shared_ptr<const model_geometry> geometry;
  std::string fingerprint;
  std::shared_ptr<const entry_header> header;
  /// The restored entry's tokens: the file's first p (from the index,
  /// which keeps a prefix file's key, when the read starts).
  token_seq tokens;
  file_ref in;
  /// One per payload restored: layers, then attachments when exact.
  std::vector<const payload_info*> payloads;
  std::vector<uint64_t> need;
  std::vector<buffer_builder> bufs;
  /// Set when the read is given up: the prefault call stops early.
  std::atomic<bool> stop{false};
};

/// Which payloads of which link a read of the first `p` rows reads, and
/// how many bytes of each.
void plan_payloads(read_io& io, uint64_t p) {
  auto& h = *io.header;
  if (io.links.size() == 1 && io.links[0].header == io.header) {
    for (auto& l : h.layers) {
      io.payloads.push_back(&l.payload);
      io.need.push_back(restore_bytes(l, p));
      io.link_of.push_back(0);
    }
  } else {
    // Link-major, so each file is read in its own order; every layer is
    // kv (the decoder refuses anything else in a delta).
    for (size_t k = 0; k < io.links.size(); ++k) {
      auto& lh = *io.links[k].header;
      // A link serves rows from its own start up to where the next link
      // starts (a child may branch off inside its parent).
      auto lo = lh.parent_tokens;
      auto hi = std::min<uint64_t>(p, lh.token_count);
      if (k + 1 < io.links.size())
        hi = std::min(hi, io.links[k + 1].header->parent_tokens);
      for (auto& l : lh.layers) {
        io.payloads.push_back(&l.payload);
        io.need.push_back((hi - lo) * l.bytes_per_token);
        io.link_of.push_back(k);
      }
    }
  }
  if (p == h.token_count)
    for (auto& a : h.attachments) {
      io.payloads.push_back(&a.payload);
      io.need.push_back(a.payload.length);
      io.link_of.push_back(io.links.size() - 1);
    }
}

} // namespace

struct cold_reads::read_job {
  uint64_t tag = 0;
  read_key key;
  read_step stage = read_step::open;
  unsigned outstanding = 0;
  /// Reads left per payload; at zero that payload is verified.
  std::vector<unsigned> left;
  /// Bytes asked for and read per payload (to blame a truncated file).
  std::vector<uint64_t> want;
  std::vector<uint64_t> got;
  op_window window;
  uint64_t expected = 0;
  uint64_t done = 0;
  caf::error err;
  std::vector<restore_callback> waiters;
  uint64_t leases = 0;
  bool cancelled = false;
  std::shared_ptr<read_io> io;
};

cold_reads::cold_reads(read_config cfg, tier_io& io, ssd_stats& stats)
  : cfg_(std::move(cfg))
  , io_(io)
  , stats_(stats) {}

cold_reads::~cold_reads() = default;

read_start cold_reads::restore(const ssd_match& m, const ssd_index& index,
                               restore_callback cb) {
  read_key key{m.name, m.length};
  if (auto h = held_.find(key); h != held_.end()) {
    ++stats_.coalesced;
    cb(h->second.state);
    return {false, true};
  }
  if (auto r = reading_.find(key); r != reading_.end()) {
    ++stats_.coalesced;
    reads_.at(r->second)->waiters.push_back(std::move(cb));
    return {false, true};
  }
  start(m, index).waiters.push_back(std::move(cb));
  return {true, false};
}

prefetch_lease cold_reads::prefetch(const ssd_match& m,
                                    const ssd_index& index) {
  read_key key{m.name, m.length};
  prefetch_lease out{next_lease_++, {}};
  leases_.emplace(out.id, key);
  if (auto h = held_.find(key); h != held_.end()) {
    ++stats_.coalesced;
    ++h->second.leases;
    out.read.joined = true;
  } else if (auto r = reading_.find(key); r != reading_.end()) {
    ++stats_.coalesced;
    ++reads_.at(r->second)->leases;
    out.read.joined = true;
  } else {
    ++start(m, index).leases;
    out.read.started = true;
  }
  return out;
}

void cold_reads::release(uint64_t lease) {
  auto i = leases_.find(lease);
  if (i == leases_.end())
    return;
  auto key = i->second;
  leases_.erase(i);
  if (auto h = held_.find(key); h != held_.end()) {
    if (--h->second.leases == 0)
      held_.erase(h); // releases the restored buffers
    return;
  }
  auto r = reading_.find(key);
  if (r == reading_.end())
    return;
  auto& job = *reads_.at(r->second);
  if (--job.leases == 0 && job.waiters.empty()) {
    // Nobody wants it any more: discard at completion.
    job.cancelled = true;
    reading_.erase(r);
    ++stats_.cancelled;
  }
}

cold_reads::read_job& cold_reads::start(const ssd_match& m,
                                        const ssd_index& index) {
  auto job = std::make_unique<read_job>();
  job->tag = io_.next_tag();
  job->key = read_key{m.name, m.length};
  auto io = std::make_shared<read_io>();
  io->fs = &io_.fs;
  io->path = io_.path(m.name);
  io->geometry = cfg_.geometry;
  io->fingerprint = cfg_.fingerprint;
  io->header = m.header;
  auto p = m.length;
  io->tokens = index.key(m.name);
  io->tokens.resize(p);
  // The files holding rows [0, p): a whole file alone, or the delta chain
  // up to the link that holds row p - 1 (a partial restore may stop early).
  auto chain = delta_chains::chain_of(index, m.name);
  if (chain.empty() || chain.back()->header != m.header)
    io->links.push_back({m.name, io_.path(m.name), m.header, {}}); // alone
  else
    for (auto* f : delta_chains::serving_below(std::move(chain), p))
      io->links.push_back({f->name, io_.path(f->name), f->header, {}});
  plan_payloads(*io, p);
  job->io = io;
  ++stats_.reads;
  reading_[job->key] = job->tag;
  auto& ref = *job;
  reads_.emplace(job->tag, std::move(job));
  submit_open(ref);
  return ref;
}

void cold_reads::submit_open(read_job& job) {
  job.outstanding = 1;
  auto io = job.io;
  auto op = call_op(job.tag, [io] {
    // A chain starts at a whole file; a delta read alone (its chain left
    // the index meanwhile) has nothing to stand on.
    if (io->links.front().header->parent_tokens > 0)
      return make_error(ec::not_found, "its delta chain left the index");
    for (size_t k = 0; k < io->links.size(); ++k) {
      auto& link = io->links[k];
      io->bad_link = k;
      auto f = io->fs->open(link.path, open_mode::read);
      if (!f)
        return f.error();
      auto h = read_header(**f);
      if (!h)
        return h.error();
      // Every restore is checked against the running model, on the header
      // as it is now: a file of another model is never served.
      if (io->geometry)
        if (auto err = check_header(*io->geometry, io->fingerprint, *h))
          return err;
      if (h->header_sum != link.header->header_sum)
        return make_error(ec::not_found, "file replaced since it was indexed");
      link.in = std::move(*f);
    }
    io->bad_link = SIZE_MAX;
    return caf::error{};
  });
  op.keep = io;
  io_.submit(std::move(op));
}

void cold_reads::read_payloads(read_job& job) {
  auto& io = *job.io;
  job.left.assign(io.payloads.size(), 0);
  job.want.assign(io.payloads.size(), 0);
  job.got.assign(io.payloads.size(), 0);
  for (size_t i = 0; i < io.payloads.size(); ++i) {
    auto& p = *io.payloads[i];
    auto& link = io.links[io.link_of[i]];
    auto len = read_length(*link.header, p, io.need[i]);
    // Mapped, not yet populated: clearing a large restore's fresh pages
    // before its first read would add that time to every cold restore.
    // Reads are buffered (no O_DIRECT), so a row below the mapping size
    // needs no page: a cache line keeps a 1 KiB row from holding 4 KiB
    // of heap the RAM ledger never counts.
    auto align =
      len >= populated_threshold ? size_t{cfg_.alignment} : row_alignment;
    io.bufs.emplace_back(len, align, populate_when::later);
    auto* dst = io.bufs.back().data();
    job.want[i] = len;
    for (uint64_t done = 0; done < len;) {
      auto n = std::min<uint64_t>(len - done, cfg_.max_op_bytes);
      ++job.outstanding;
      ++job.left[i];
      job.expected += n;
      job.window.backlog.push_back(io_op{io_kind::read,
                                         link.in,
                                         p.offset + done,
                                         dst + done,
                                         n,
                                         {},
                                         job.io,
                                         op_tag(job.tag, i + 1),
                                         {}});
      done += n;
    }
  }
  prefault_buffers(job);
  job.window.feed(cfg_.ops_per_entry, [this](io_op op) { io_.submit(op); });
}

void cold_reads::prefault_buffers(read_job& job) {
  // One helper-thread pass populates the buffers in read order, ahead of
  // the disk (clearing pages runs several times faster than the disk
  // fills them), so the reads land in pages that already exist. A read
  // that catches up faults its pages itself: the bytes are the same.
  ++job.outstanding;
  auto op = call_op(job.tag, [io = job.io, step = cfg_.max_op_bytes] {
    for (auto& b : io->bufs) {
      if (b.size() < populated_threshold)
        continue;
      for (size_t at = 0; at < b.size(); at += step) {
        if (io->stop.load(std::memory_order_relaxed))
          return caf::error{};
        prefault(b.bytes().subspan(at, std::min<size_t>(step, b.size() - at)));
      }
    }
    return caf::error{};
  });
  op.keep = job.io;
  io_.submit(std::move(op));
}

void cold_reads::verify_payload(read_job& job, size_t i) {
  // Verification touches every byte read: it runs on the engine, while
  // the other payloads are still being read.
  ++job.outstanding;
  auto op = call_op(job.tag, [io = job.io, i] {
    auto k = io->link_of[i];
    auto err =
      verify(*io->links[k].header, *io->payloads[i], io->bufs[i].bytes());
    if (err)
      io->bad_link = k; // the file to blame
    return err;
  });
  op.keep = job.io;
  io_.submit(std::move(op));
}

std::optional<ended_read> cold_reads::on_completion(uint64_t tag,
                                                    io_completion& c) {
  auto& job = *reads_.at(tag);
  auto sub = sub_of(c.tag);
  --job.outstanding;
  job.done += c.bytes;
  if (c.err && !job.err)
    job.err = std::move(c.err);
  if (sub > 0) {
    job.got[sub - 1] += c.bytes;
    --job.window.running;
    if (job.err || job.cancelled) {
      job.io->stop.store(true, std::memory_order_relaxed);
      job.outstanding -= static_cast<unsigned>(job.window.backlog.size());
      job.window.backlog.clear(); // nothing more worth reading
    }
    job.window.feed(cfg_.ops_per_entry, [this](io_op op) { io_.submit(op); });
    if (--job.left[sub - 1] == 0 && !job.err && !job.cancelled)
      verify_payload(job, sub - 1);
  }
  if (job.outstanding > 0)
    return std::nullopt;
  if (job.cancelled) {
    reads_.erase(tag); // buffers go with it
    return std::nullopt;
  }
  if (!job.err && job.done < job.expected) {
    job.err = make_error(ec::corrupt_data,
                         "truncated: read " + std::to_string(job.done) + " of "
                           + std::to_string(job.expected) + " bytes");
    for (size_t i = 0; i < job.got.size(); ++i)
      if (job.got[i] < job.want[i]) {
        job.io->bad_link = job.io->link_of[i];
        break;
      }
  }
  if (job.err)
    return failed(job);
  stats_.bytes_read += job.done;
  if (job.stage == read_step::open) {
    job.stage = read_step::data;
    job.done = job.expected = 0;
    read_payloads(job);
    if (job.outstanding > 0)
      return std::nullopt;
  }
  return done(job);
}

ended_read cold_reads::done(read_job& job) {
  auto& io = *job.io;
  auto& h = *io.header;
  auto p = job.key.length;
  entry e;
  e.ns = h.ns;
  e.session = h.session;
  e.priority = h.priority; // RAM keeps the restored entry by it
  e.tokens = std::move(io.tokens);
  auto take = [&](size_t i) {
    auto b = std::move(io.bufs[i]).freeze();
    return view{std::move(b), 0, io.need[i]};
  };
  // Payload i of link k, layer l is at k * layers + l (link-major); a
  // layer's rows are its links' pieces in chain order.
  auto layers = h.layers.size();
  for (size_t l = 0; l < layers; ++l) {
    auto& li = h.layers[l];
    std::vector<view> segs;
    for (size_t k = 0; k < io.links.size(); ++k)
      segs.push_back(take(k * layers + l));
    auto tokens = li.kind == layer_kind::object ? li.tokens : p;
    e.layers.push_back(layer_state{li.kind, li.bytes_per_token, li.window,
                                   tokens, li.min_offset, std::move(segs)});
  }
  if (p == h.token_count)
    for (size_t a = 0; a < h.attachments.size(); ++a)
      e.attachments.push_back(attachment{h.attachments[a].name,
                                         {take(io.links.size() * layers + a)}});
  ++stats_.restores_ok;
  ended_read out;
  out.waiters = std::move(job.waiters);
  for (auto& link : io.links)
    out.links.push_back({link.name, link.header, link.header->file_length});
  if (job.leases > 0)
    held_[job.key] = held{e, job.leases};
  out.state = std::move(e);
  reading_.erase(job.key);
  reads_.erase(job.tag);
  return out;
}

ended_read cold_reads::failed(read_job& job) {
  ended_read out;
  out.err = std::move(job.err);
  for (auto& link : job.io->links)
    out.links.push_back({link.name, link.header, link.header->file_length});
  // The link an open or a verification failed on, else the matched file.
  out.blame = std::min<size_t>(job.io->bad_link, out.links.size() - 1);
  ++stats_.restores_failed;
  out.waiters = std::move(job.waiters);
  reading_.erase(job.key);
  reads_.erase(job.tag);
  return out;
}

void cold_reads::close() {
  held_.clear(); // prefetched entries, their buffers with them
  leases_.clear();
  for (auto& [tag, job] : reads_) {
    job->leases = 0;
    if (job->waiters.empty() && !job->cancelled) {
      job->cancelled = true; // discarded (buffers released) when it ends
      reading_.erase(job->key);
      ++stats_.cancelled;
    }
  }
}

uint64_t cold_reads::buffer_bytes() const {
  uint64_t n = 0;
  for (auto& [tag, job] : reads_)
    if (job->io)
      for (auto& b : job->io->bufs)
        n += b.size();
  return n;
}

} // namespace kvtier::tiers::ssd
