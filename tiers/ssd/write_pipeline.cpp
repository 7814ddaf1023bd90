#include "tiers/ssd/write_pipeline.hpp"
#include "tiers/ssd/kill_points.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>

namespace kvtier::tiers::ssd {

struct write_io {
  file_system* fs = nullptr;
  std::string temp_path;
  entry state;
  entry_header header;
  buffer_ref header_bytes;
  /// Zeros up to the file length after trailing empty payloads.
  buffer_ref padding;
  file_ref out;
  /// A delta candidate: the parent's name and its chain's headers, root
  /// first (immutable, shared with the index). The prepare op proves the
  /// entry's rows are the chain's (`holds_rows_of`) and then lays the
  /// header out as a delta; `refused` when they are not (written whole).
  std::string parent;
  std::vector<std::shared_ptr<const entry_header>> chain;
  /// Each link's key (the index keeps it, not the header).
  std::vector<token_seq> chain_keys;
  std::string fingerprint;
  uint32_t alignment = 0;
  uint32_t checksum_chunk = 0;
  bool refused = false;
};

const entry_header& write_job::header() const {
  return io->header;
}

const entry& write_job::state() const {
  return io->state;
}

bool write_job::refused() const {
  return io->refused;
}

struct write_pipeline::write_piece {
  /// Bytes to write at a file offset: a payload segment, the header, the
  /// padding.
  uint64_t offset = 0;
  const std::byte* data = nullptr;
  uint64_t length = 0;
};

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

write_pipeline::write_pipeline(const ssd_config& cfg,
                               std::shared_ptr<const model_geometry> geometry,
                               tier_io& io, ssd_stats& stats)
  : cfg_(cfg)
  , io_(io)
  , stats_(stats)
  , geometry_(std::move(geometry))
  , queue_(cfg.queue_cap)
  , budget_(cfg.write_budget_bytes_per_day) {}

write_pipeline::~write_pipeline() = default;

caf::expected<uint64_t> write_pipeline::enqueue(entry e, write_reason reason,
                                                const storage_key& key,
                                                uint64_t byte_cap) {
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
  if (h.file_length > byte_cap) {
    ++stats_.rejected_too_large;
    io_.log("ssd: not storing an entry of " + std::to_string(h.file_length)
            + " bytes: larger than the byte cap");
    return make_error(ec::no_space, "entry larger than the SSD byte cap");
  }
  if (auto err = charge(h.file_length))
    return err;
  auto name = file_name(key);
  storage_key owner{key.kind, {}, {}, key.request, key.attempt};
  auto r = queue_.push(std::move(name), std::move(e), reason, owner);
  stats_.dropped += r.dropped;
  stats_.superseded += r.superseded;
  for (auto& item : r.superseded_items)
    report_gone(std::move(item), write_outcome::superseded);
  for (auto& item : r.dropped_items)
    report_gone(std::move(item), write_outcome::dropped);
  return r.id;
}

void write_pipeline::report(const write_item& item, write_outcome outcome,
                            caf::error err) {
  if (cfg_.on_write)
    cfg_.on_write(write_event{item.id, item.state.ns, item.state.tokens,
                              item.reason, outcome, std::move(err),
                              item.attempts});
}

void write_pipeline::report_gone(write_item item, write_outcome outcome,
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

write_item* write_pipeline::next(const std::multiset<std::string>& blocked) {
  if (queue_.in_flight() >= cfg_.writes_in_flight)
    return nullptr;
  return queue_.start_next(blocked);
}

write_job& write_pipeline::begin(write_item& item) {
  auto job = std::make_unique<write_job>();
  job->tag = io_.next_tag();
  job->item_id = item.id;
  job->name = item.key;
  auto io = std::make_shared<write_io>();
  io->fs = &io_.fs;
  io->temp_path = io_.path(item.key + "." + std::to_string(io_.next_temp())
                           + "." + std::to_string(job->tag) + ".tmp");
  io->state = item.state;
  io->header =
    layout(item.state, cfg_.fingerprint, cfg_.alignment, cfg_.checksum_chunk);
  io->header.kind = item.kind;
  io->header.request = item.request;
  io->header.attempt = item.attempt;
  io->header.write_id = next_write_id_++;
  job->io = io;
  auto& ref = *job;
  jobs_.emplace(job->tag, std::move(job));
  return ref;
}

void write_pipeline::as_delta(write_job& job, const ssd_file& parent,
                              uint64_t tokens) {
  // The shared rows are the very buffers read from the chain: a delta.
  auto& io = *job.io;
  auto h = layout(io.state, cfg_.fingerprint, cfg_.alignment,
                  cfg_.checksum_chunk, parent.name, tokens);
  h.write_id = io.header.write_id;
  h.parent_write_id = parent.header->write_id;
  io.header = std::move(h);
  io.parent = parent.name;
}

void write_pipeline::prove_on_prepare(write_job& job, const std::string& parent,
                                      std::vector<const ssd_file*> chain,
                                      std::vector<token_seq> keys) {
  // A strict prefix file: the prepare op proves the shared rows by their
  // checksums and lays the header out.
  auto& io = *job.io;
  for (auto* link : chain)
    io.chain.push_back(link->header);
  io.chain_keys = std::move(keys);
  io.fingerprint = cfg_.fingerprint;
  io.alignment = cfg_.alignment;
  io.checksum_chunk = cfg_.checksum_chunk;
  io.parent = parent;
}

void write_pipeline::prepare(write_job& job) {
  auto io = job.io;
  job.outstanding = 1;
  auto op = call_op(job.tag, [io] {
    kill_protocol in{"entry-write"};
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
  io_.submit(std::move(op));
}

bool write_pipeline::writing(const std::string& name) const {
  return std::any_of(jobs_.begin(), jobs_.end(),
                     [&](auto& j) { return j.second->name == name; });
}

void write_pipeline::queue_writes(write_job& job,
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
  job.window.feed(cfg_.ops_per_entry, [this](io_op o) { io_.submit(o); });
}

void write_pipeline::pad_to_file_length(write_job& job,
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

void write_pipeline::write_step_ops(write_job& job) {
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
      io_.submit(std::move(op));
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
      io_.submit(io_op{io_kind::sync,
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
      io_.submit(call_op(
        job.tag, [fs = &io_.fs, from = io.temp_path, to = io_.path(job.name)] {
          kill_protocol in{"entry-write"};
          return fs->rename(from, to);
        }));
      break;
    case write_step::sync_dir:
      job.dir_sync = ++io_.dir_syncs;
      io_.submit(call_op(job.tag, [fs = &io_.fs, dir = io_.root] {
        kill_protocol in{"entry-write"};
        return fs->sync_dir(dir);
      }));
      break;
  }
}

void write_pipeline::data_written(write_job& job, io_completion& c) {
  (void)c;
  --job.window.running;
  if (job.err) {
    job.outstanding -= static_cast<unsigned>(job.window.backlog.size());
    job.window.backlog.clear();
  }
  job.window.feed(cfg_.ops_per_entry, [this](io_op op) { io_.submit(op); });
  if (!job.err && cfg_.start_writeback) {
    // The disk starts on these bytes while the next ones are copied, so
    // the fsync at the end waits for less (a hint: it reports nothing).
    ++job.outstanding;
    io_.submit(call_op(
      job.tag,
      [io = job.io] {
        io->out->start_writeback();
        return caf::error{};
      },
      3));
  }
}

write_progress write_pipeline::on_completion(write_job& job, io_completion& c) {
  --job.outstanding;
  job.done += c.bytes;
  if (c.err && !job.err)
    job.err = std::move(c.err);
  auto sub = sub_of(c.tag);
  if (sub == 2) // a data write
    data_written(job, c);
  if (sub == 1 && !job.err) { // checksums known: the header can go
    // Its own bytes only: the zeros up to the first payload are a hole.
    auto& hb = job.io->header_bytes;
    write_piece header{0, hb->data(), job.io->header.header_length};
    queue_writes(job, {&header, 1});
  }
  if (job.outstanding > 0)
    return write_progress::running;
  if (!job.err && job.done < job.expected)
    job.err =
      make_error(ec::io_error, "short write: " + std::to_string(job.done)
                                 + " of " + std::to_string(job.expected));
  if (job.err)
    return write_progress::failed;
  switch (job.stage) {
    case write_step::prepare:
      job.created = true;
      if (job.io->refused) {
        ++stats_.delta_refused;
        io_.log("ssd: writing " + job.name
                + " whole: its rows differ from its parent " + job.io->parent
                + "'s");
      }
      break;
    case write_step::data: break;
    case write_step::sync: job.io->out.reset(); break; // closes the file
    case write_step::rename: job.renamed = true; break;
    case write_step::sync_dir: break;
  }
  return write_progress::step_done;
}

void write_pipeline::advance(write_job& job) {
  job.stage = static_cast<write_step>(static_cast<int>(job.stage) + 1);
  job.done = job.expected = 0;
  write_step_ops(job);
}

caf::error write_pipeline::failure(write_job& job, const write_item* item,
                                   bool last) {
  io_.log("ssd: " + std::string{item ? to_string(item->reason) : "write"}
          + " of " + job.name + " failed at " + to_string(job.stage) + ": "
          + reason(job.err)
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
  return make_error(code, std::string{"write failed at "} + to_string(job.stage)
                            + ": " + context_of(job.err));
}

void write_pipeline::remove_temp(const write_job& job) {
  io_.chore("remove temp file " + job.io->temp_path,
            [fs = &io_.fs, p = job.io->temp_path] {
              kill_protocol in{"temp-cleanup"};
              return fs->remove(p);
            });
}

void write_pipeline::end_failed(write_job& job, write_item* item,
                                failed_fate fate, const caf::error& err) {
  auto id = job.item_id;
  switch (fate) {
    case failed_fate::cancelled:
    case failed_fate::given_up: {
      bool cancelled = fate == failed_fate::cancelled;
      auto taken = queue_.take(id);
      ++(cancelled ? stats_.writes_cancelled : stats_.writes_given_up);
      jobs_.erase(job.tag);
      if (taken)
        report_gone(
          std::move(*taken),
          cancelled ? write_outcome::cancelled : write_outcome::given_up, err);
      break;
    }
    case failed_fate::kept:
      queue_.fail(id);
      if (item != nullptr)
        report(*item, write_outcome::failed, err);
      jobs_.erase(job.tag);
      if (closed_)
        abandon(id); // no retry will come: released, not kept
      break;
  }
}

void write_pipeline::end_durable(write_job& job) {
  auto item = queue_.take(job.item_id);
  jobs_.erase(job.tag); // its copy of the state goes with it
  if (item)
    report_gone(std::move(*item), write_outcome::durable);
}

uint64_t write_pipeline::handed_bytes(const write_job& job) {
  auto& h = job.io->header;
  uint64_t handed = h.header_length;
  for (auto& l : h.layers)
    handed += l.payload.length;
  for (auto& a : h.attachments)
    handed += a.payload.length;
  if (job.io->padding)
    handed += job.io->padding->size();
  return handed;
}

bool write_pipeline::cancel(const std::string& name) {
  bool any = false;
  for (auto& item : queue_.cancel(name)) {
    ++stats_.writes_cancelled;
    report_gone(std::move(item), write_outcome::cancelled); // buffers first
    any = true;
  }
  return any;
}

bool write_pipeline::erase_after(const std::string& name) {
  bool any = false;
  for (auto& [tag, job] : jobs_)
    if (job->name == name) {
      erase_after_.insert(name); // its end removes the file it leaves
      any = true;
    }
  return any;
}

std::optional<entry> write_pipeline::queued(const storage_key& key) const {
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

uint64_t write_pipeline::now_ms() const {
  using namespace std::chrono;
  auto ns = cfg_.clock
              ? cfg_.clock()
              : static_cast<uint64_t>(duration_cast<nanoseconds>(
                                        system_clock::now().time_since_epoch())
                                        .count());
  return ns / 1'000'000;
}

caf::error write_pipeline::charge(uint64_t bytes) {
  auto now = now_ms();
  if (budget_.charge(bytes, now))
    return {};
  ++stats_.budget_refused;
  stats_.budget_refused_bytes += bytes;
  return make_error(
    ec::over_budget,
    "not written: " + std::to_string(bytes)
      + " bytes would pass ssd-tier.write-budget-bytes-per-day = "
      + std::to_string(budget_.limit()) + " ("
      + std::to_string(budget_.used(now))
      + " bytes written in the last 24 hours)");
}

bool write_pipeline::charge_retry(uint64_t id) {
  auto* item = queue_.find(id);
  if (budget_.limit() == 0 || !item || !item->failed)
    return true; // nothing to charge, or nothing to retry
  auto bytes =
    layout(item->state, cfg_.fingerprint, cfg_.alignment, cfg_.checksum_chunk)
      .file_length;
  auto err = charge(bytes);
  if (!err)
    return true;
  io_.log("ssd: " + std::string{to_string(item->reason)} + " of " + item->key
          + " given up: its retry is over the write budget");
  auto taken = queue_.take(id);
  ++stats_.writes_given_up;
  report_gone(std::move(*taken), write_outcome::given_up, err);
  return false;
}

void write_pipeline::retry_failed() {
  for (auto id : queue_.failed_ids())
    if (charge_retry(id) && queue_.retry(id))
      ++stats_.writes_retried;
}

bool write_pipeline::retry(uint64_t id) {
  if (!charge_retry(id) || !queue_.retry(id))
    return false;
  ++stats_.writes_retried;
  return true;
}

uint64_t write_pipeline::budget_used() const {
  return budget_.used(now_ms());
}

void write_pipeline::finish_flushes(durability_evidence ev) {
  ev.pending = queue_.size();
  ev.failed = queue_.failed();
  ev.dropped = stats_.dropped - dropped_at_flush_;
  dropped_at_flush_ = stats_.dropped;
  ev.given_up = stats_.writes_given_up - given_up_at_flush_;
  given_up_at_flush_ = stats_.writes_given_up;
  ev.durable = ev.pending == 0 && ev.failed == 0 && ev.dropped == 0
               && ev.removals_pending == 0 && ev.given_up == 0;
  auto cbs = std::exchange(flushes_, {});
  for (auto& cb : cbs)
    cb(ev);
}

void write_pipeline::close(close_callback cb) {
  closed_ = true;
  std::vector<uint64_t> idle;
  for (auto& item : queue_.items())
    if (!item.in_flight)
      idle.push_back(item.id);
  for (auto id : idle)
    abandon(id); // its buffers go here
  closes_.push_back(std::move(cb));
}

void write_pipeline::abandon(uint64_t id) {
  auto item = queue_.take(id);
  if (!item)
    return;
  ++stats_.writes_abandoned;
  report_gone(std::move(*item), write_outcome::abandoned,
              make_error(ec::closed, "the SSD tier closed before writing it"));
}

void write_pipeline::maybe_finish_close() {
  // A write holds its buffers until its last completion is handled (the
  // engines drop an op before reporting it): none running, none held.
  // Reads are not waited for (a close never waited on one): a cancelled
  // read lets its buffers go when it ends, an awaited one hands its entry
  // to whoever awaits it.
  if (closes_.empty() || !jobs_.empty())
    return;
  auto cbs = std::exchange(closes_, {});
  for (auto& cb : cbs)
    cb(stats_.writes_abandoned);
}

bool write_pipeline::may_start() const noexcept {
  return queue_.active() && queue_.in_flight() < cfg_.writes_in_flight;
}

write_backlog write_pipeline::backlog() const {
  write_backlog b;
  b.snapshots = queue_.count(write_reason::snapshot);
  b.checkpoints = queue_.count(write_reason::checkpoint);
  b.spills =
    queue_.count(write_reason::spill) + queue_.count(write_reason::demotion);
  b.bytes = queue_.bytes();
  b.retrying = queue_.failed();
  return b;
}

uint64_t write_pipeline::header_bytes() const {
  uint64_t n = 0;
  for (auto& [tag, job] : jobs_)
    if (job->io && job->io->header_bytes)
      n += job->io->header_bytes->size();
  return n;
}

} // namespace kvtier::tiers::ssd
