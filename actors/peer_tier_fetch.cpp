// The peer tier actor's fetches: an entry pulled from the peers that
// hold it, with one deadline over every holder tried, over the bulk lane
// or in chunks, verified for the asked shape before any waiter gets it.
#include "actors/peer_tier_ops.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "tiers/entry_message.hpp"

#include <algorithm>

namespace kvtier::actors::peer_ops {

bool loopback_host(const std::string& h) {
  return h.rfind("127.", 0) == 0 || h == "::1";
}

/// Whether a fetch of `bytes` fits the bytes in flight.
bool fits(self_ptr self, uint64_t bytes) {
  auto& st = self->state;
  return st.in_flight + bytes <= st.cfg.fetch_max_bytes;
}

void count_failure(self_ptr self, const caf::error& err) {
  auto& c = self->state.count;
  if (err == ec::not_found)
    ++c.failed_none;
  else if (err == ec::peer_unreachable || err == ec::io_error)
    ++c.failed_unreachable;
  else if (err == ec::timeout)
    ++c.failed_timeout;
  else if (err == ec::corrupt_data || err == ec::malformed_message
           || err == ec::message_limit_exceeded)
    ++c.failed_corrupt;
  else
    ++c.failed_other;
}

namespace {

std::chrono::milliseconds time_left(const fetch& f) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    f.deadline - clock_type::now());
  return std::max(left, std::chrono::milliseconds{0});
}

/// Tells the holder it may free the transfer's bytes (no answer needed).
void cancel_transfer(self_ptr self, fetch& f) {
  if (!f.has_transfer || !f.holder_handle)
    return;
  f.has_transfer = false;
  msg::draft<msg::CancelTransfer> d;
  d.root().setTransferId(f.transfer_id);
  self
    ->request(f.holder_handle, std::chrono::milliseconds{1000},
              std::move(d).seal())
    .then([](const sealed<msg::CancelTransferReply>&) {},
          [](const caf::error&) {});
}

} // namespace

/// Ends fetch `id`: every waiter gets `r` (an entry) or `err`.
void finish(self_ptr self, uint64_t id,
            std::optional<sealed<msg::RestoreEntryReply>> r, caf::error err) {
  auto i = self->state.fetches.find(id);
  if (i == self->state.fetches.end())
    return;
  auto f = std::move(i->second);
  self->state.fetches.erase(i);
  self->state.by_key.erase(f.key);
  self->state.in_flight -= f.reserved;
  cancel_transfer(self, f);
  std::optional<tiers::entry> e;
  if (r)
    if (auto got = tiers::read_entry(*r, r->root().getEntry()))
      e = std::move(*got);
  for (auto& w : f.waiters) {
    if (w.restore) {
      if (r) {
        w.restore->deliver(*r);
      } else {
        msg::draft<msg::RestoreEntryReply> d;
        write_error(d.root().initFailed(), err);
        w.restore->deliver(std::move(d).seal());
      }
    } else if (w.prefetch) {
      if (!e) {
        w.prefetch->deliver(err);
        continue;
      }
      msg::draft<msg::PrefetchPrefixReply> d;
      auto lease = self->state.next_lease++;
      self->state.leases.insert(lease);
      d.root().setLeaseId(lease);
      d.root().setReadsStarted(w.joined ? 0 : 1);
      d.root().setReadsJoined(w.joined ? 1 : 0);
      d.root().setTokens(e->size());
      tiers::write_entry(d, d.root().initEntry(), *e);
      w.prefetch->deliver(std::move(d).seal());
    }
  }
}

namespace {

/// Writes a fetched entry to the local SSD (cluster.fetched-to-ssd).
void write_to_ssd(self_ptr self, const tiers::entry& e) {
  auto& st = self->state;
  if (!st.cfg.fetched_to_ssd || !st.ssd)
    return;
  msg::draft<msg::SpillEntry> d;
  d.root().setOrderId(st.next_order++);
  d.root().setReason(msg::SpillReason::SNAPSHOT);
  tiers::write_entry(d, d.root().getItem().initEntry(), e);
  d.root().getParent().setNone();
  d.root().getKind().setPrefix();
  self
    ->request(st.ssd, std::chrono::milliseconds{st.cfg.ssd_deadline_ms},
              std::move(d).seal())
    .then(
      [self](const sealed<msg::SpillEntryReply>& r) {
        auto o = r.root().getOutcome();
        if (o == msg::SpillOutcome::DURABLE
            || o == msg::SpillOutcome::ALREADY_DURABLE)
          ++self->state.count.written_to_ssd;
        else
          ++self->state.count.ssd_write_failed;
      },
      [self](const caf::error&) { ++self->state.count.ssd_write_failed; });
}

void next_holder(self_ptr self, uint64_t id);

} // namespace

/// This holder failed with `err`: counted, then the next holder.
void attempt_failed(self_ptr self, uint64_t id, caf::error err) {
  auto i = self->state.fetches.find(id);
  if (i == self->state.fetches.end())
    return;
  count_failure(self, err);
  cancel_transfer(self, i->second);
  i->second.last_error = std::move(err);
  next_holder(self, id);
}

/// The verified message of the holder: handed up only with the asked
/// shape (namespace, exactly the usable tokens of the prompt, the running
/// model's layers).
void verified(self_ptr self, uint64_t id,
              caf::expected<sealed<msg::RestoreEntryReply>> r) {
  auto i = self->state.fetches.find(id);
  if (i == self->state.fetches.end())
    return;
  auto& f = i->second;
  if (!r)
    return attempt_failed(self, id, std::move(r.error()));
  if (!r->root().isEntry())
    return attempt_failed(
      self, id,
      make_error(ec::corrupt_data,
                 "peer " + f.holder + " sent a transfer without an entry"));
  auto e = tiers::read_entry(*r, r->root().getEntry());
  if (!e)
    return attempt_failed(self, id, std::move(e.error()));
  auto want = std::span<const tiers::token>{f.prompt}.first(f.usable);
  if (e->ns != f.ns || e->size() != f.usable
      || !std::equal(want.begin(), want.end(), e->tokens.begin()))
    return attempt_failed(
      self, id,
      make_error(ec::corrupt_data, "peer " + f.holder
                                     + " sent an entry of another prompt "
                                       "or length"));
  if (auto err = self->state.geometry.check(*e))
    return attempt_failed(
      self, id,
      make_error(ec::corrupt_data, "peer " + f.holder + ": " + to_string(err)));
  auto& c = self->state.count;
  ++c.fetched;
  c.bytes += f.reserved;
  write_to_ssd(self, *e);
  finish(self, id, std::move(*r), caf::error{});
}

namespace {

/// Requests the chunks the window has room for (the chunked path).
void pump(self_ptr self, uint64_t id) {
  auto i = self->state.fetches.find(id);
  if (i == self->state.fetches.end())
    return;
  auto& f = i->second;
  auto attempt = f.attempt;
  for (auto index : f.pull->next()) {
    msg::draft<msg::FetchChunk> d;
    d.root().setTransferId(f.transfer_id);
    d.root().setIndex(index);
    self
      ->request(f.holder_handle,
                std::max(time_left(f), std::chrono::milliseconds{1}),
                std::move(d).seal())
      .then(
        [self, id, attempt](const sealed<msg::FetchChunkReply>& c) {
          auto* found = current(self, id, attempt);
          if (!found)
            return;
          auto& g = *found;
          if (auto err = g.pull->add(c.root()))
            return attempt_failed(self, id, std::move(err));
          if (!g.pull->complete())
            return pump(self, id);
          auto pull = std::move(*g.pull);
          g.pull.reset();
          verified(self, id, std::move(pull).finish<msg::RestoreEntryReply>());
        },
        [self, id, attempt](const caf::error& err) {
          if (!current(self, id, attempt))
            return;
          attempt_failed(
            self, id,
            err == caf::sec::request_timeout
              ? make_error(ec::timeout, "a chunk timed out")
              : make_error(ec::peer_unreachable, "chunk: " + to_string(err)));
        });
  }
}

/// The holder offered a transfer: read it from its lane, or in chunks.
void pull_transfer(self_ptr self, uint64_t id,
                   const sealed<msg::FetchEntryReply>& r) {
  auto& f = self->state.fetches.at(id);
  auto h = r.root().getTransfer();
  f.transfer_id = h.getTransferId();
  f.has_transfer = true;
  auto total = h.getTotalLength();
  // The reservation becomes the real size; over the cap it is refused.
  auto& st = self->state;
  st.in_flight -= f.reserved;
  f.reserved = 0;
  if (!fits(self, total)) {
    ++st.count.over_cap;
    return attempt_failed(
      self, id,
      make_error(ec::queue_full, "a transfer of " + std::to_string(total)
                                   + " bytes exceeds cluster."
                                     "fetch-max-bytes"));
  }
  f.reserved = total;
  st.in_flight += total;
  msg::reader_limits limits;
  if (h.getBulkPort() == 0) {
    ++st.count.chunk_fetches;
    auto pull = msg::transfer_pull::start(h, st.cfg.chunk_window, limits);
    if (!pull)
      return attempt_failed(self, id, std::move(pull.error()));
    f.pull = std::move(*pull);
    return pump(self, id);
  }
  std::string host = h.hasBulkHost() ? h.getBulkHost().cStr() : "127.0.0.1";
  if (host.empty())
    host = "127.0.0.1";
  if (!loopback_host(host))
    return attempt_failed(
      self, id,
      make_error(ec::invalid_argument, "peer " + f.holder + " names lane host "
                                         + host + " (loopback only)"));
  ++st.count.lane_fetches;
  f.slot = std::make_shared<lane_slot>();
  auto me = caf::actor_cast<peer_tier_actor>(self);
  st.jobs->run([slot = f.slot, r, host, deadline = f.deadline, total, me, id,
                attempt = f.attempt] {
    auto bytes = msg::bulk_fetch(host, r.root().getTransfer(), deadline, total);
    slot->result = std::move(bytes);
    // As the peer tier itself: an anonymous message is not trusted.
    caf::send_as(me, me, lane_done_atom::value, id, attempt);
  });
}

/// Asks the next holder; with none left (or no time) the fetch fails.
void next_holder(self_ptr self, uint64_t id) {
  auto i = self->state.fetches.find(id);
  if (i == self->state.fetches.end())
    return;
  auto& f = i->second;
  ++f.attempt;
  f.slot.reset();
  f.pull.reset();
  for (;;) {
    if (f.holders.empty() || time_left(f).count() <= 0) {
      auto err = f.last_error ? f.last_error
                              : make_error(ec::peer_unreachable,
                                           "no holder of the entry is up");
      if (time_left(f).count() <= 0 && !f.last_error)
        err = make_error(ec::timeout, "the peer fetch's deadline passed");
      return finish(self, id, std::nullopt, err);
    }
    f.holder = f.holders.front();
    f.holders.erase(f.holders.begin());
    auto p = self->state.peers.find(f.holder);
    if (p != self->state.peers.end()) {
      f.holder_handle = p->second;
      break;
    }
  }
  ++self->state.count.fetches;
  msg::draft<msg::FetchEntry> d;
  d.root().setNs(f.ns);
  tiers::write_tokens(d.root().initPrompt(f.prompt.size()), f.prompt);
  d.root().setBetterThan(f.usable - 1);
  auto attempt = f.attempt;
  self->request(f.holder_handle, time_left(f), std::move(d).seal())
    .then(
      [self, id, attempt](const sealed<msg::FetchEntryReply>& r) {
        auto* found = current(self, id, attempt);
        if (!found)
          return;
        auto& g = *found;
        if (!r.root().isTransfer() || r.root().getUsableTokens() != g.usable) {
          if (r.root().isTransfer()) {
            g.transfer_id = r.root().getTransfer().getTransferId();
            g.has_transfer = true;
          }
          return attempt_failed(
            self, id,
            make_error(ec::not_found,
                       "peer " + g.holder + " no longer holds the prefix"));
        }
        pull_transfer(self, id, r);
      },
      [self, id, attempt](const caf::error& err) {
        if (!current(self, id, attempt))
          return;
        attempt_failed(self, id,
                       err == caf::sec::request_timeout
                         ? make_error(ec::timeout, "FetchEntry timed out")
                         : make_error(ec::peer_unreachable,
                                      "FetchEntry: " + to_string(err)));
      });
}

} // namespace

/// Starts (or joins) the fetch of `prompt`'s first `usable` tokens from
/// `holders`; `w` waits for it.
void start_fetch(self_ptr self, std::string ns, tiers::token_seq prompt,
                 uint64_t usable, const std::vector<tiers::peer_holding>& hs,
                 waiter w) {
  auto& st = self->state;
  fetch_key key{hs.front().node, ns,
                tiers::token_seq(prompt.begin(), prompt.begin() + usable)};
  if (auto i = st.by_key.find(key); i != st.by_key.end()) {
    ++st.count.coalesced;
    w.joined = true;
    st.fetches.at(i->second).waiters.push_back(std::move(w));
    return;
  }
  auto id = st.next_fetch++;
  fetch f;
  f.key = key;
  f.ns = std::move(ns);
  f.prompt = std::move(prompt);
  f.usable = usable;
  for (auto& h : hs)
    f.holders.push_back(h.node);
  f.reserved = hs.front().bytes;
  st.in_flight += f.reserved;
  f.deadline =
    clock_type::now() + std::chrono::milliseconds{st.cfg.fetch_deadline_ms};
  f.waiters.push_back(std::move(w));
  st.fetches.emplace(id, std::move(f));
  st.by_key.emplace(std::move(key), id);
  self->delayed_send(self, std::chrono::milliseconds{st.cfg.fetch_deadline_ms},
                     fetch_deadline_atom::value, id);
  next_holder(self, id);
}

} // namespace kvtier::actors::peer_ops
