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
  for (auto* item : queue_.items_of(name))
    if (!(item->in_flight && erased))
      newest = item;
  if (newest == nullptr)
    return std::nullopt;
  return newest->state;
}

void ssd_tier::restore(const ssd_match& m, restore_callback cb) {
  read_key key{m.name, m.length};
  use_chain(m.name);
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
  use_chain(m.name);
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
  auto p = m.length;
  io->tokens = index_.key(m.name);
  io->tokens.resize(p);
  // The files holding rows [0, p): a whole file alone, or the delta chain
  // up to the link that holds row p - 1 (a partial restore may stop early).
  auto chain = chain_of(m.name);
  if (chain.empty() || chain.back()->header != m.header)
    io->links.push_back({m.name, path(m.name), m.header, {}}); // read alone
  else
    for (auto* f : serving_below(std::move(chain), p))
      io->links.push_back({f->name, path(f->name), f->header, {}});
  auto& h = *m.header;
  if (io->links.size() == 1 && io->links[0].header == m.header) {
    for (auto& l : h.layers) {
      io->payloads.push_back(&l.payload);
      io->need.push_back(restore_bytes(l, p));
      io->link_of.push_back(0);
    }
  } else {
    // Link-major, so each file is read in its own order; every layer is
    // kv (the decoder refuses anything else in a delta).
    for (size_t k = 0; k < io->links.size(); ++k) {
      auto& lh = *io->links[k].header;
      // A link serves rows from its own start up to where the next link
      // starts (a child may branch off inside its parent).
      auto lo = lh.parent_tokens;
      auto hi = std::min<uint64_t>(p, lh.token_count);
      if (k + 1 < io->links.size())
        hi = std::min(hi, io->links[k + 1].header->parent_tokens);
      for (auto& l : lh.layers) {
        io->payloads.push_back(&l.payload);
        io->need.push_back((hi - lo) * l.bytes_per_token);
        io->link_of.push_back(k);
      }
    }
  }
  if (p == h.token_count)
    for (auto& a : h.attachments) {
      io->payloads.push_back(&a.payload);
      io->need.push_back(a.payload.length);
      io->link_of.push_back(io->links.size() - 1);
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
  };
  submit(std::move(op));
  return ref;
}

void ssd_tier::read_stage(read_job& job) {
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
    io.bufs.emplace_back(len, cfg_.alignment, populate_when::later);
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
    auto k = io->link_of[i];
    auto err =
      verify(*io->links[k].header, *io->payloads[i], io->bufs[i].bytes());
    if (err)
      io->bad_link = k; // the file to blame
    return err;
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
    job.got[sub - 1] += c.bytes;
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
    for (size_t k = 0; k < io.links.size(); ++k) {
      segs.push_back(take(k * layers + l));
      // Where these rows came from: a later write of an entry extended
      // from them may leave them to this file (`proven_by_origin`).
      if (li.kind == layer_kind::kv && segs.back().buf && cfg_.delta_files)
        remember_origin(segs.back().buf, io.links[k].name,
                        io.links[k].header->write_id, l,
                        io.links[k].header->parent_tokens);
    }
    auto tokens = li.kind == layer_kind::object ? li.tokens : p;
    e.layers.push_back(layer_state{li.kind, li.bytes_per_token, li.window,
                                   tokens, li.min_offset, std::move(segs)});
  }
  if (p == h.token_count)
    for (size_t a = 0; a < h.attachments.size(); ++a)
      e.attachments.push_back(attachment{h.attachments[a].name,
                                         {take(io.links.size() * layers + a)}});
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
  // The file to blame: the link an open or a verification failed on (a
  // delta's parent, say), else the matched file. Removing or forgetting a
  // link takes its children along: the chain is never served in part.
  size_t k = job.io->bad_link;
  if (k >= job.io->links.size())
    k = job.io->links.size() - 1;
  auto name = job.io->links[k].name;
  auto* f = index_.file(name);
  bool same = f && f->header->header_sum == job.io->links[k].header->header_sum;
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
