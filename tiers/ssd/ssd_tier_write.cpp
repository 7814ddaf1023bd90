// The write path of the SSD tier: write-behind queue -> temp file ->
// payload writes -> fsync -> rename -> directory fsync -> index.
#include "tiers/ssd/ssd_jobs.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

namespace kvtier::tiers::ssd {

namespace {

const char* to_string(write_step s) {
  switch (s) {
    case write_step::prepare: return "create";
    case write_step::data: return "write";
    case write_step::sync: return "fsync";
    case write_step::rename: return "rename";
    case write_step::sync_dir: return "directory fsync";
  }
  return "unknown";
}

io_op call_op(uint64_t job, std::function<caf::error()> fn, uint64_t sub = 0) {
  io_op op;
  op.kind = io_kind::call;
  op.tag = op_tag(job, sub);
  op.call = std::move(fn);
  return op;
}

} // namespace

caf::expected<uint64_t> ssd_tier::enqueue(entry e, write_reason reason) {
  auto key = storage_key::prefix(e.ns, e.tokens);
  return enqueue(std::move(e), reason, key);
}

caf::expected<uint64_t> ssd_tier::enqueue(entry e, write_reason reason,
                                          const storage_key& key) {
  if (closed_)
    return make_error(ec::closed, "the SSD tier is closed");
  if (key.ns != e.ns || key.tokens != e.tokens)
    return make_error(ec::invalid_argument, "a storage key that is not the "
                                            "entry's (ns or tokens differ)");
  if (key.kind != key_kind::checkpoint
      && (key.request != 0 || key.attempt != 0))
    return make_error(ec::invalid_argument, std::string{"a "}
                                              + to_string(key.kind)
                                              + " key names a request");
  if (key.kind == key_kind::object) {
    // An object's tensors are attachments: no tokens, no layers, so no
    // model geometry to check (attachments never are).
    if (!e.tokens.empty() || !e.layers.empty() || e.session)
      return make_error(ec::invalid_argument,
                        "an object is stored as attachments only (no "
                        "tokens, layers or session)");
  } else {
    if (e.tokens.empty())
      return make_error(ec::invalid_argument, "entry without tokens");
    if (auto err = e.validate())
      return err;
    if (auto err = check_storable(e))
      return err;
    if (geometry_)
      if (auto err = geometry_->check(e))
        return err;
  }
  auto h = layout(e, cfg_.fingerprint, cfg_.alignment, cfg_.checksum_chunk);
  if (h.file_length > cfg_.byte_cap) {
    ++stats_.rejected_too_large;
    log("ssd: not storing an entry of " + std::to_string(h.file_length)
        + " bytes: larger than the byte cap");
    return make_error(ec::no_space, "entry larger than the SSD byte cap");
  }
  auto name = file_name(key);
  storage_key owner{key.kind, {}, {}, key.request, key.attempt};
  auto r = queue_.push(std::move(name), std::move(e), reason, owner);
  stats_.dropped += r.dropped;
  stats_.superseded += r.superseded;
  for (auto& item : r.superseded_items)
    report_gone(std::move(item), write_outcome::superseded);
  for (auto& item : r.dropped_items)
    report_gone(std::move(item), write_outcome::dropped);
  pump();
  return r.id;
}

const char* to_string(write_outcome o) {
  switch (o) {
    case write_outcome::durable: return "durable";
    case write_outcome::failed: return "failed";
    case write_outcome::dropped: return "dropped";
    case write_outcome::superseded: return "superseded";
    case write_outcome::cancelled: return "cancelled";
    case write_outcome::abandoned: return "abandoned";
    case write_outcome::given_up: return "given up";
  }
  return "unknown";
}

void ssd_tier::report(const write_item& item, write_outcome outcome,
                      caf::error err) {
  if (cfg_.on_write)
    cfg_.on_write(write_event{item.id, item.state.ns, item.state.tokens,
                              item.reason, outcome, std::move(err),
                              item.attempts});
}

void ssd_tier::report_gone(write_item item, write_outcome outcome,
                           caf::error err) {
  // The buffers go first: whoever hears the report may count them freed.
  write_event ev{item.id,
                 std::move(item.state.ns),
                 std::move(item.state.tokens),
                 item.reason,
                 outcome,
                 std::move(err),
                 item.attempts};
  item = write_item{};
  if (cfg_.on_write)
    cfg_.on_write(ev);
}

void ssd_tier::pump() {
  while (queue_.in_flight() < cfg_.writes_in_flight) {
    auto* item = queue_.start_next(unlinking_now_);
    if (item == nullptr)
      return;
    start_write(*item);
  }
}

void ssd_tier::start_write(write_item& item) {
  auto job = std::make_unique<write_job>();
  job->tag = next_tag_++;
  job->item_id = item.id;
  job->name = item.key;
  auto io = std::make_shared<write_io>();
  io->fs = &fs_;
  io->temp_path = path(item.key + "." + std::to_string(temp_seq_++) + "."
                       + std::to_string(job->tag) + ".tmp");
  io->state = item.state;
  io->header =
    layout(item.state, cfg_.fingerprint, cfg_.alignment, cfg_.checksum_chunk);
  io->header.kind = item.kind;
  io->header.request = item.request;
  io->header.attempt = item.attempt;
  io->header.write_id = next_write_id_++;
  if (item.kind == key_kind::prefix) {
    count_new_tokens(item.state);
    auto c = delta_parent(item.state);
    if (c.parent && proven_by_origin(item.state, c)) {
      // The shared rows are the very buffers read from the chain: a delta.
      auto h = layout(item.state, cfg_.fingerprint, cfg_.alignment,
                      cfg_.checksum_chunk, c.parent->name, c.tokens);
      h.write_id = io->header.write_id;
      h.parent_write_id = c.parent->header->write_id;
      io->header = std::move(h);
    } else if (c.parent && c.tokens == c.parent->header->token_count) {
      // A strict prefix file: the prepare op proves the shared rows by
      // their checksums and lays the header out.
      for (auto* link : c.chain) {
        io->chain.push_back(link->header);
        io->chain_keys.push_back(index_.key(link->name));
      }
      io->fingerprint = cfg_.fingerprint;
      io->alignment = cfg_.alignment;
      io->checksum_chunk = cfg_.checksum_chunk;
    } else {
      c.parent = nullptr; // nothing proves the rows: whole
    }
    if (c.parent) {
      io->parent = c.parent->name;
      ++pins_[c.parent->name];
      job->pinned = c.parent->name;
    }
  }
  job->io = io;
  auto& ref = *job;
  writes_.emplace(job->tag, std::move(job));
  ref.outstanding = 1;
  auto op = call_op(ref.tag, [io] {
    auto f = io->fs->open(io->temp_path, open_mode::create);
    if (!f)
      return f.error();
    io->out = std::move(*f);
    if (!io->chain.empty()) {
      // Wrong state is the worst failure: the file may leave rows to its
      // parent chain only when the entry's own rows are those very bytes.
      bool same = true;
      for (size_t k = 0; k < io->chain.size() && same; ++k)
        same = holds_rows_of(io->state, *io->chain[k], io->chain_keys[k]);
      if (same) {
        auto& parent = *io->chain.back();
        auto h = layout(io->state, io->fingerprint, io->alignment,
                        io->checksum_chunk, io->parent, parent.token_count);
        h.kind = io->header.kind;
        h.write_id = io->header.write_id;
        h.parent_write_id = parent.write_id;
        io->header = std::move(h);
      } else {
        io->refused = true;
      }
    }
    return caf::error{};
  });
  op.keep = io;
  submit(std::move(op));
}

ssd_tier::delta_choice ssd_tier::delta_parent(const entry& e) const {
  delta_choice c;
  if (!cfg_.delta_files || cfg_.max_chain < 2)
    return c;
  for (auto& l : e.layers)
    if (l.kind != layer_kind::kv)
      return c; // only kv rows can be left to a parent
  // The file sharing the longest prefix with the entry (a strict prefix
  // file, or one the entry branches off inside), and of its chain the
  // links that serve rows below that length.
  auto m = index_.find(e.tokens, e.ns);
  if (!m || m->length == 0 || m->length >= e.tokens.size()
      || m->name == file_name(e.ns, e.tokens))
    return c; // nothing shared, or a rewrite of the key itself: whole
  c.chain = serving_below(chain_of(m->name), m->length);
  if (c.chain.empty() || c.chain.size() + 1 > cfg_.max_chain)
    return {}; // at the chain bound: written whole
  c.parent = c.chain.back();
  c.tokens = m->length;
  return c;
}

void ssd_tier::remember_origin(const buffer_ref& buf, const std::string& name,
                               uint64_t write_id, size_t layer,
                               uint64_t first_row) {
  auto& v = origins_[buf->id()];
  v.push_back(row_origin{name, write_id, layer, first_row, buf});
  if (v.size() > 4)
    v.erase(v.begin()); // the newest files a buffer went to are enough
  // Prune the dead now and then: amortized O(1) per buffer remembered.
  if (origins_.size() >= 2 * origins_pruned_at_ + 64) {
    std::erase_if(origins_, [](auto& kv) {
      return kv.second.empty() || kv.second.front().buf.expired();
    });
    origins_pruned_at_ = origins_.size();
  }
}

void ssd_tier::remember_written(const std::string& name, const entry_header& h,
                                const entry& e) {
  for (size_t l = 0; l < e.layers.size() && l < h.layers.size(); ++l) {
    auto& layer = e.layers[l];
    uint64_t bpt = layer.bytes_per_token;
    if (layer.kind != layer_kind::kv || bpt == 0)
      continue;
    uint64_t row = 0;
    for (auto& seg : layer.segments) {
      if (!seg.buf || seg.offset % bpt != 0 || seg.length % bpt != 0)
        break;
      // Only the rows this file holds (a delta's start past its parent).
      if (row + seg.length / bpt > h.parent_tokens)
        remember_origin(seg.buf, name, h.write_id, l, row - seg.offset / bpt);
      row += seg.length / bpt;
    }
  }
}

bool ssd_tier::proven_by_origin(const entry& e, const delta_choice& c) const {
  // Buffers are immutable and their ids never reused: a view of a buffer
  // a restore read from file X at write id W, or a write wrote X's rows
  // from, holds X's bytes. Each row [0, c.tokens) must be one of the link
  // that serves it in the chain the child names (a row of another link,
  // or past a link's cut, could be another branch's bytes).
  for (size_t l = 0; l < e.layers.size(); ++l) {
    auto& layer = e.layers[l];
    uint64_t bpt = layer.bytes_per_token;
    if (bpt == 0)
      return false;
    uint64_t pos = 0;
    for (auto& seg : layer.segments) {
      if (pos >= c.tokens)
        break;
      if (!seg.buf || seg.offset % bpt != 0 || seg.length % bpt != 0)
        return false;
      auto o = origins_.find(seg.buf->id());
      if (o == origins_.end())
        return false;
      // The segment starts at row `seg_row`, byte seg.offset of its buffer.
      auto seg_row = pos;
      auto seg_end = std::min(pos + seg.length / bpt, c.tokens);
      while (pos < seg_end) {
        size_t i = c.chain.size();
        while (i > 0 && c.chain[i - 1]->header->parent_tokens > pos)
          --i;
        if (i == 0)
          return false;
        auto* link = c.chain[i - 1];
        uint64_t cut =
          i < c.chain.size() ? c.chain[i]->header->parent_tokens : c.tokens;
        bool known = std::any_of(
          o->second.begin(), o->second.end(), [&](const row_origin& r) {
            return r.name == link->name && r.write_id == link->header->write_id
                   && r.layer == l && r.first_row + seg.offset / bpt == seg_row;
          });
        if (!known)
          return false;
        pos = std::min(seg_end, cut);
      }
    }
    if (pos < c.tokens)
      return false;
  }
  return true;
}

void ssd_tier::count_new_tokens(const entry& e) {
  uint64_t bpt = 0;
  for (auto& l : e.layers)
    if (l.kind == layer_kind::kv || l.kind == layer_kind::ring)
      bpt += l.bytes_per_token;
  uint64_t known = 0;
  auto files = index_.prefix_files(e.ns, e.tokens);
  if (!files.empty())
    known = files.front()->header->token_count;
  if (auto m = index_.find(e.tokens, e.ns))
    known = std::max(known, m->length);
  stats_.new_token_bytes += (e.tokens.size() - known) * bpt;
}

void ssd_tier::unpin(write_job& job) {
  if (job.pinned.empty())
    return;
  auto p = pins_.find(job.pinned);
  if (p != pins_.end() && --p->second == 0)
    pins_.erase(p);
  job.pinned.clear();
}

void ssd_tier::queue_writes(write_job& job,
                            std::span<const write_piece> pieces) {
  uint64_t max = cfg_.max_op_bytes;
  std::optional<io_op> op;
  uint64_t end = 0; // file offset just past `op`'s bytes
  auto close = [&] {
    if (!op)
      return;
    if (op->pieces.size() == 1) { // a plain write
      op->data = const_cast<std::byte*>(op->pieces.front().data());
      op->pieces.clear();
    }
    ++job.outstanding;
    job.expected += op->length;
    job.window.backlog.push_back(std::move(*op));
    op.reset();
  };
  for (auto& w : pieces)
    for (uint64_t done = 0; done < w.length;) {
      if (op && (w.offset + done != end || op->length == max))
        close();
      if (!op) {
        op = io_op{io_kind::write,
                   job.io->out,
                   w.offset + done,
                   nullptr,
                   0,
                   {},
                   job.io,
                   op_tag(job.tag, 2),
                   {}};
        end = w.offset + done;
      }
      auto n = std::min(w.length - done, max - op->length);
      op->pieces.push_back({w.data + done, n});
      op->length += n;
      end += n;
      done += n;
    }
  close();
  job.window.feed(cfg_.ops_per_entry, [this](io_op o) { submit(o); });
}

void ssd_tier::pad_to_file_length(write_job& job,
                                  std::vector<write_piece>& out) {
  // Empty payloads at the end sit at an aligned offset past the last byte
  // written, and the file length names that offset: zeros fill the gap
  // (less than one alignment), so the file is as long as its header says.
  auto& h = job.io->header;
  uint64_t end = h.payload_start();
  auto grow = [&](const payload_info& p) {
    if (p.length > 0)
      end = std::max(end, p.offset + p.length);
  };
  for (auto& l : h.layers)
    grow(l.payload);
  for (auto& a : h.attachments)
    grow(a.payload);
  if (h.file_length <= end)
    return;
  buffer_builder zeros(h.file_length - end);
  std::memset(zeros.data(), 0, zeros.size());
  job.io->padding = std::move(zeros).freeze();
  out.push_back({end, job.io->padding->data(), job.io->padding->size()});
}

void ssd_tier::write_stage(write_job& job) {
  auto& io = *job.io;
  std::vector<write_piece> pieces;
  auto payload = [&](const payload_info& pi, const std::vector<view>& segs) {
    uint64_t off = pi.offset;
    for (auto& s : segs) {
      pieces.push_back({off, s.bytes().data(), s.length});
      off += s.length;
    }
  };
  ++job.outstanding;
  switch (job.stage) {
    case write_step::prepare: break;
    case write_step::data: {
      // Checksums touch every byte: they run on the engine beside the
      // payload writes; the header is written once they are known.
      auto op = call_op(
        job.tag,
        [io = job.io] {
          compute_checksums(io->header, io->state);
          io->header_bytes = encode(io->header);
          return caf::error{};
        },
        1);
      op.keep = job.io;
      submit(std::move(op));
      for (size_t i = 0; i < io.state.layers.size(); ++i)
        payload(io.header.layers[i].payload,
                payload_segments(io.header, io.state, i));
      for (size_t i = 0; i < io.state.attachments.size(); ++i)
        payload(io.header.attachments[i].payload,
                io.state.attachments[i].segments);
      pad_to_file_length(job, pieces);
      queue_writes(job, pieces);
      break;
    }
    case write_step::sync:
      submit(io_op{io_kind::sync,
                   io.out,
                   0,
                   nullptr,
                   0,
                   {},
                   job.io,
                   op_tag(job.tag, 0),
                   {}});
      break;
    case write_step::rename:
      submit(
        call_op(job.tag, [fs = &fs_, from = io.temp_path, to = path(job.name)] {
          return fs->rename(from, to);
        }));
      break;
    case write_step::sync_dir:
      submit(call_op(job.tag,
                     [fs = &fs_, dir = root_] { return fs->sync_dir(dir); }));
      break;
  }
}

void ssd_tier::on_write(uint64_t tag, io_completion& c) {
  auto& job = *writes_.at(tag);
  --job.outstanding;
  job.done += c.bytes;
  if (c.err && !job.err)
    job.err = std::move(c.err);
  auto sub = c.tag & ((uint64_t{1} << sub_bits) - 1);
  if (sub == 2) { // a data write
    --job.window.running;
    if (job.err) {
      job.outstanding -= static_cast<unsigned>(job.window.backlog.size());
      job.window.backlog.clear();
    }
    job.window.feed(cfg_.ops_per_entry, [this](io_op op) { submit(op); });
    if (!job.err && cfg_.start_writeback) {
      // The disk starts on these bytes while the next ones are copied, so
      // the fsync at the end waits for less (a hint: it reports nothing).
      ++job.outstanding;
      submit(call_op(
        job.tag,
        [io = job.io] {
          io->out->start_writeback();
          return caf::error{};
        },
        3));
    }
  }
  if (sub == 1 && !job.err) { // checksums known: the header can go
    // Its own bytes only: the zeros up to the first payload are a hole.
    auto& hb = job.io->header_bytes;
    write_piece header{0, hb->data(), job.io->header.header_length};
    queue_writes(job, {&header, 1});
  }
  if (job.outstanding > 0)
    return;
  if (!job.err && job.done < job.expected)
    job.err =
      make_error(ec::io_error, "short write: " + std::to_string(job.done)
                                 + " of " + std::to_string(job.expected));
  if (job.err) {
    write_failed(job);
    return;
  }
  switch (job.stage) {
    case write_step::prepare:
      job.created = true;
      if (job.io->refused) {
        ++stats_.delta_refused;
        log("ssd: writing " + job.name
            + " whole: its rows differ from its "
              "parent "
            + job.io->parent + "'s");
        unpin(job);
      }
      break;
    case write_step::data: break;
    case write_step::sync: job.io->out.reset(); break; // closes the file
    case write_step::rename:
      job.renamed = true;
      // The older file of this key is gone from disk: forget it now (its
      // delta children were cut from it: they go, reported gone).
      unindex(job.name, false, removal_reason::gone, removal_reason::gone);
      break;
    case write_step::sync_dir:
      if (!job.io->header.parent.empty()) {
        auto* p = index_.file(job.io->header.parent);
        if (!p || p->header->write_id != job.io->header.parent_write_id) {
          // Its parent left (or was rewritten) while it was written: the
          // file names bytes that are gone. Not stored; a retry writes it
          // again, whole or over another parent.
          job.orphan = true;
          job.err =
            make_error(ec::io_error, "its delta parent " + job.io->header.parent
                                       + " left during the write");
          write_failed(job);
          return;
        }
      }
      write_done(job);
      return;
  }
  job.stage = static_cast<write_step>(static_cast<int>(job.stage) + 1);
  job.done = job.expected = 0;
  write_stage(job);
}

void ssd_tier::write_done(write_job& job) {
  auto header = std::make_shared<const entry_header>(job.io->header);
  auto bytes = header->file_length;
  auto name = job.name;
  if (header->kind == key_kind::prefix) {
    uint64_t handed = header->header_length;
    for (auto& l : header->layers)
      handed += l.payload.length;
    for (auto& a : header->attachments)
      handed += a.payload.length;
    if (job.io->padding)
      handed += job.io->padding->size();
    stats_.prefix_bytes_written += handed;
  }
  if (!header->parent.empty())
    ++stats_.delta_files;
  if (header->kind == key_kind::prefix && cfg_.delta_files)
    remember_written(name, *header, job.io->state);
  unpin(job);
  index_file(ssd_file{name, std::move(header), bytes});
  touch_file(name); // the most recently used, also after a restart
  ++stats_.writes_ok;
  stats_.bytes_written += bytes;
  auto item = queue_.take(job.item_id);
  // The rename is durable now: an older file under the name is gone for
  // good (a removal that covered it has nothing left to do there).
  replaced_on_disk(name);
  bool covered = covered_write_finished(job.tag, name, true);
  writes_.erase(job.tag); // its copy of the state goes with it
  if (item)
    report_gone(std::move(*item), write_outcome::durable);
  // Erased while it was written: the file goes now (no write of the key
  // is in flight any more, so the unlink is not skipped). A checkpoint
  // removal that covers the write unlinks it itself.
  if (covered)
    forget(name, removal_reason::erased);
  if (erase_after_.erase(name) > 0 && !covered)
    remove_file(name, removal_reason::erased);
  else if (!covered)
    supersede_ancestors(name);
  evict_over_cap(name);
  pump();
  resume_removals();
  maybe_finish_flush();
}

void ssd_tier::write_failed(write_job& job) {
  auto* item = queue_.find(job.item_id);
  bool last = item != nullptr && cfg_.max_attempts > 0
              && item->attempts >= cfg_.max_attempts;
  log("ssd: " + std::string{item ? to_string(item->reason) : "write"} + " of "
      + job.name + " failed at " + to_string(job.stage) + ": " + reason(job.err)
      + (closed_ ? "; not stored, released (the tier is closed)"
         : last  ? "; not stored, given up after "
                    + std::to_string(item->attempts) + " attempts"
                : "; not stored, kept for a retry"));
  ++stats_.writes_failed;
  if (job.err == ec::no_space)
    ++stats_.write_no_space;
  // What the owner hears names the step and the error, not the entry.
  auto code = job.err.category() == caf::atom("kvtier")
                ? static_cast<ec>(job.err.code())
                : ec::io_error;
  auto err =
    make_error(code, std::string{"write failed at "} + to_string(job.stage)
                       + ": " + context_of(job.err));
  unpin(job);
  bool covered = covered_write_finished(job.tag, job.name, job.renamed);
  bool orphan = job.orphan && job.renamed && !covered;
  if (job.renamed && !covered && !job.orphan) {
    // Only the directory sync failed: the file is whole and readable under
    // its final name, so serve it; the item stays queued until a retry
    // makes the name durable.
    auto header = std::make_shared<const entry_header>(job.io->header);
    auto bytes = header->file_length;
    index_file(ssd_file{job.name, std::move(header), bytes});
  } else if (job.renamed) {
    // An orphaned delta (below) or a covered write: not served.
  } else if (job.created) {
    auto tag = next_tag_++;
    chore_what_[tag] = "remove temp file " + job.io->temp_path;
    // (call_op tags it as op 0 of chore `tag`.)
    submit(call_op(
      tag, [fs = &fs_, p = job.io->temp_path] { return fs->remove(p); }));
  }
  auto name = job.name;
  auto id = job.item_id;
  bool renamed = job.renamed;
  if (erase_after_.erase(name) > 0 || covered) {
    // Erased while it was written: no retry; the item goes, its buffers
    // with it, and a whole file under the final name is removed (by the
    // removal covering the write, when one does).
    auto taken = queue_.take(id);
    ++stats_.writes_cancelled;
    writes_.erase(job.tag);
    if (taken)
      report_gone(std::move(*taken), write_outcome::cancelled, err);
    if (renamed && !covered)
      remove_file(name, removal_reason::erased);
  } else if (last) {
    auto taken = queue_.take(id);
    ++stats_.writes_given_up;
    writes_.erase(job.tag);
    if (taken)
      report_gone(std::move(*taken), write_outcome::given_up, err);
  } else {
    queue_.fail(id);
    if (item != nullptr)
      report(*item, write_outcome::failed, err);
    writes_.erase(job.tag);
    if (closed_)
      abandon(id); // no retry will come: released, not kept
  }
  if (orphan)
    remove_file(name, removal_reason::gone); // never indexed: no report
  pump();
  resume_removals();
  maybe_finish_flush();
}

void ssd_tier::supersede_ancestors(const std::string& name) {
  for (auto& a : index_.superseded_by(name)) {
    // A delta parent (of this file or another) serves its children's
    // rows: it stays; it goes by the cap once it has none.
    if (pinned_or_parent(a))
      continue;
    ++stats_.files_superseded;
    remove_file(a, removal_reason::superseded);
  }
}

void ssd_tier::evict_over_cap(const std::string& keep,
                              std::set<uint64_t>* tags) {
  auto evict = [&](const std::string& name) {
    ++stats_.evicted;
    auto tag = remove_file(name, removal_reason::evicted);
    if (tags && tag != 0)
      tags->insert(tag);
  };
  // Least recently used among the files nothing depends on, one at a
  // time: a delta parent becomes a candidate once its last child went.
  auto is_held = [this](const std::string& n) { return pinned_or_parent(n); };
  for (;;) {
    auto names = index_.over_cap(cfg_.byte_cap, keep, is_held);
    if (names.empty())
      break;
    evict(names.front());
  }
  // The file just written alone over a cap lowered since it was queued:
  // it goes too, so the files stay under the cap.
  if (index_.bytes() > cfg_.byte_cap && !keep.empty() && index_.file(keep)
      && !pinned_or_parent(keep)) {
    evict(keep);
    evict_over_cap({}, tags); // its parents may go now
  }
}

uint64_t ssd_tier::set_byte_cap(uint64_t bytes,
                                std::function<void(uint64_t)> on_disk) {
  cfg_.byte_cap = bytes;
  auto before = stats_.evicted;
  std::set<uint64_t> tags;
  evict_over_cap({}, &tags);
  auto evicted = stats_.evicted - before;
  if (on_disk) {
    if (tags.empty())
      on_disk(evicted);
    else
      cap_waits_.push_back({std::move(tags), evicted, std::move(on_disk)});
  }
  return evicted;
}

void ssd_tier::unlink_ended(uint64_t tag) {
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
}

} // namespace kvtier::tiers::ssd
