// The read path of the SSD tier: coalesced cold reads into fresh aligned
// buffers (no intermediate copy), chunk verification, interest leases.
#include "tiers/ssd/ssd_jobs.hpp"

namespace kvtier::tiers::ssd {

std::optional<entry> ssd_tier::queued(const storage_key& key) const {
  auto name = file_name(key);
  const write_item* newest = nullptr;
  // Oldest first. A write in flight when its key was erased is dead: its
  // file goes once it finishes (only one write of a name runs at a time,
  // so `erase_after_` names exactly that one).
  bool erased = erase_after_.count(name) > 0;
  for (auto& item : queue_.items())
    if (item.key == name && !(item.in_flight && erased))
      newest = &item;
  if (newest == nullptr)
    return std::nullopt;
  return newest->state;
}

void ssd_tier::restore(const ssd_match& m, restore_callback cb) {
  read_key key{m.name, m.length};
  index_.touch(m.name);
  touch_file(m.name);
  if (auto h = held_.find(key); h != held_.end()) {
    ++stats_.coalesced;
    cb(h->second.state);
    return;
  }
  if (auto r = reading_.find(key); r != reading_.end()) {
    ++stats_.coalesced;
    reads_.at(r->second)->waiters.push_back(std::move(cb));
    return;
  }
  start_read(m).waiters.push_back(std::move(cb));
}

std::optional<uint64_t> ssd_tier::prefetch(std::span<const token> prompt,
                                           std::string_view ns,
                                           uint64_t better_than) {
  auto m = find(prompt, ns);
  if (!m)
    return std::nullopt;
  return prefetch(*m, better_than);
}

std::optional<uint64_t> ssd_tier::prefetch(const ssd_match& m,
                                           uint64_t better_than) {
  if (closed_ || m.length <= better_than)
    return std::nullopt; // closed: nothing is held for a lease any more
  read_key key{m.name, m.length};
  index_.touch(m.name);
  touch_file(m.name);
  auto lease = next_lease_++;
  leases_.emplace(lease, key);
  if (auto h = held_.find(key); h != held_.end()) {
    ++stats_.coalesced;
    ++h->second.leases;
  } else if (auto r = reading_.find(key); r != reading_.end()) {
    ++stats_.coalesced;
    ++reads_.at(r->second)->leases;
  } else {
    ++start_read(m).leases;
  }
  return lease;
}

void ssd_tier::release(uint64_t lease) {
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

ssd_tier::read_job& ssd_tier::start_read(const ssd_match& m) {
  auto job = std::make_unique<read_job>();
  job->tag = next_tag_++;
  job->key = read_key{m.name, m.length};
  auto io = std::make_shared<read_io>();
  io->fs = &fs_;
  io->path = path(m.name);
  io->geometry = geometry_;
  io->fingerprint = cfg_.fingerprint;
  io->header = m.header;
  auto& h = *m.header;
  for (auto& l : h.layers) {
    io->payloads.push_back(&l.payload);
    io->need.push_back(restore_bytes(l, m.length));
  }
  if (m.length == h.tokens.size())
    for (auto& a : h.attachments) {
      io->payloads.push_back(&a.payload);
      io->need.push_back(a.payload.length);
    }
  job->io = io;
  ++stats_.reads;
  reading_[job->key] = job->tag;
  auto& ref = *job;
  reads_.emplace(job->tag, std::move(job));
  ref.outstanding = 1;
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(ref.tag, 0);
  op.keep = io;
  op.call = [io] {
    auto f = io->fs->open(io->path, open_mode::read);
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
    if (h->header_sum != io->header->header_sum)
      return make_error(ec::not_found, "file replaced since it was indexed");
    io->in = std::move(*f);
    return caf::error{};
  };
  submit(std::move(op));
  return ref;
}

void ssd_tier::read_stage(read_job& job) {
  auto& io = *job.io;
  job.left.assign(io.payloads.size(), 0);
  for (size_t i = 0; i < io.payloads.size(); ++i) {
    auto& p = *io.payloads[i];
    auto len = read_length(*io.header, p, io.need[i]);
    // Mapped, not yet populated: clearing a large restore's fresh pages
    // before its first read would add that time to every cold restore.
    io.bufs.emplace_back(len, cfg_.alignment, populate_when::later);
    auto* dst = io.bufs.back().data();
    for (uint64_t done = 0; done < len;) {
      auto n = std::min<uint64_t>(len - done, cfg_.max_op_bytes);
      ++job.outstanding;
      ++job.left[i];
      job.expected += n;
      job.window.backlog.push_back(io_op{io_kind::read,
                                         io.in,
                                         p.offset + done,
                                         dst + done,
                                         n,
                                         {},
                                         job.io,
                                         op_tag(job.tag, i + 1)});
      done += n;
    }
  }
  prefault_buffers(job);
  job.window.feed(cfg_.ops_per_entry, [this](io_op op) { submit(op); });
}

void ssd_tier::prefault_buffers(read_job& job) {
  // One helper-thread pass populates the buffers in read order, ahead of
  // the disk (clearing pages runs several times faster than the disk
  // fills them), so the reads land in pages that already exist. A read
  // that catches up faults its pages itself: the bytes are the same.
  ++job.outstanding;
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(job.tag, 0);
  op.keep = job.io;
  op.call = [io = job.io, step = cfg_.max_op_bytes] {
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
  };
  submit(std::move(op));
}

void ssd_tier::verify_payload(read_job& job, size_t i) {
  // Verification touches every byte read: it runs on the engine, while
  // the other payloads are still being read.
  ++job.outstanding;
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(job.tag, 0);
  op.keep = job.io;
  op.call = [io = job.io, i] {
    return verify(*io->header, *io->payloads[i], io->bufs[i].bytes());
  };
  submit(std::move(op));
}

void ssd_tier::on_read(uint64_t tag, io_completion& c) {
  auto& job = *reads_.at(tag);
  auto sub = c.tag & ((uint64_t{1} << sub_bits) - 1);
  --job.outstanding;
  job.done += c.bytes;
  if (c.err && !job.err)
    job.err = std::move(c.err);
  if (sub > 0) {
    --job.window.running;
    if (job.err || job.cancelled) {
      job.io->stop.store(true, std::memory_order_relaxed);
      job.outstanding -= static_cast<unsigned>(job.window.backlog.size());
      job.window.backlog.clear(); // nothing more worth reading
    }
    job.window.feed(cfg_.ops_per_entry, [this](io_op op) { submit(op); });
    if (--job.left[sub - 1] == 0 && !job.err && !job.cancelled)
      verify_payload(job, sub - 1);
  }
  if (job.outstanding > 0)
    return;
  if (job.cancelled) {
    reads_.erase(tag); // buffers go with it
    return;
  }
  if (!job.err && job.done < job.expected)
    job.err = make_error(ec::corrupt_data,
                         "truncated: read " + std::to_string(job.done) + " of "
                           + std::to_string(job.expected) + " bytes");
  if (job.err) {
    read_failed(job);
    return;
  }
  stats_.bytes_read += job.done;
  if (job.stage == read_step::open) {
    job.stage = read_step::data;
    job.done = job.expected = 0;
    read_stage(job);
    if (job.outstanding > 0)
      return;
  }
  read_done(job);
}

void ssd_tier::read_done(read_job& job) {
  auto& io = *job.io;
  auto& h = *io.header;
  auto p = job.key.length;
  entry e;
  e.ns = h.ns;
  e.session = h.session;
  e.tokens.assign(h.tokens.begin(), h.tokens.begin() + p);
  size_t i = 0;
  auto take = [&] {
    auto b = std::move(io.bufs[i]).freeze();
    auto v = view{std::move(b), 0, io.need[i]};
    ++i;
    return std::vector<view>{std::move(v)};
  };
  for (auto& l : h.layers) {
    auto tokens = l.kind == layer_kind::object ? l.tokens : p;
    e.layers.push_back(layer_state{l.kind, l.bytes_per_token, l.window, tokens,
                                   l.min_offset, take()});
  }
  if (p == h.tokens.size())
    for (auto& a : h.attachments)
      e.attachments.push_back(attachment{a.name, take()});
  ++stats_.restores_ok;
  auto waiters = std::move(job.waiters);
  if (job.leases > 0)
    held_[job.key] = held{e, job.leases};
  reading_.erase(job.key);
  reads_.erase(job.tag);
  for (auto& cb : waiters)
    cb(e);
}

void ssd_tier::read_failed(read_job& job) {
  auto err = std::move(job.err);
  auto& name = job.key.name;
  auto* f = index_.file(name);
  bool same = f && f->header->header_sum == job.io->header->header_sum;
  if (same && err == ec::corrupt_data) {
    log("ssd: removing corrupt file " + name + ": " + reason(err));
    ++stats_.corrupt_removed;
    remove_file(name, removal_reason::corrupt);
  } else if (same && err == ec::not_found) {
    // Gone or replaced behind our back: forget it (the file, if any, is
    // not ours to delete).
    forget(name, removal_reason::gone);
  } else if (same && err == ec::incompatible_format) {
    // Another model's (or format version's) file under this name: a miss,
    // forgotten, and left on disk for whoever it belongs to.
    log("ssd: not restoring " + name + ": " + context_of(err) + " (file kept)");
    ++stats_.restores_mismatched;
    forget(name, removal_reason::gone);
  }
  ++stats_.restores_failed;
  auto waiters = std::move(job.waiters);
  reading_.erase(job.key);
  reads_.erase(job.tag);
  for (auto& cb : waiters)
    cb(err);
}

} // namespace kvtier::tiers::ssd
