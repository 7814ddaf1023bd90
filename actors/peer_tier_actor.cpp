#include "actors/peer_tier_actor.hpp"

#include "actors/codec.hpp"
#include "actors/tier_counters.hpp"
#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/peer_directory.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

namespace kvtier::actors {

namespace {

using clock_type = std::chrono::steady_clock;
using restore_promise =
  caf::typed_response_promise<sealed<msg::RestoreEntryReply>>;
using prefetch_promise =
  caf::typed_response_promise<sealed<msg::PrefetchPrefixReply>>;
using report_promise =
  caf::typed_response_promise<sealed<msg::ReadReportReply>>;

/// Namespaces a FindPrefix may name.
constexpr size_t max_ns_bytes = 4096;

struct counters {
  uint64_t finds = 0, over_cap = 0, fetches = 0, fetched = 0, bytes = 0,
           coalesced = 0, lane_fetches = 0, chunk_fetches = 0, failed_none = 0,
           failed_unreachable = 0, failed_timeout = 0, failed_corrupt = 0,
           failed_other = 0, written_to_ssd = 0, ssd_write_failed = 0;
  /// Snapshots applied, and of them those after a gap or a restart.
  uint64_t feed_snapshots = 0, feed_gap_resyncs = 0, feed_restart_resyncs = 0;
  uint64_t refused_remote = 0;
};

/// One waiter of a fetch: a restore or a prefetch.
struct waiter {
  std::optional<restore_promise> restore;
  std::optional<prefetch_promise> prefetch;
  bool joined = false;
};

/// Where a lane thread leaves its result before it tells the actor.
struct lane_slot {
  caf::expected<buffer_ref> result{caf::error{}};
};

/// What coalesces: the first holder, the namespace, the usable tokens.
using fetch_key = std::tuple<std::string, std::string, tiers::token_seq>;

struct fetch {
  fetch_key key;
  std::string ns;
  /// The prompt asked (usable + 1 tokens) and the tokens it must serve.
  tiers::token_seq prompt;
  uint64_t usable = 0;
  /// Holders still to try, in order; `holder` is the one asked now.
  std::vector<std::string> holders;
  std::string holder;
  caf::actor holder_handle;
  uint64_t attempt = 0;
  /// Bytes this fetch counts against fetch-max-bytes.
  uint64_t reserved = 0;
  clock_type::time_point deadline;
  std::vector<waiter> waiters;
  /// The holder's transfer, once it offered one.
  uint64_t transfer_id = 0;
  bool has_transfer = false;
  std::shared_ptr<lane_slot> slot;
  std::optional<msg::transfer_pull> pull;
  caf::error last_error;
};

struct peer_tier_state {
  static inline const char* name = "peer-tier";
  peer_tier_config cfg;
  tiers::model_geometry geometry;
  /// The local store fetched entries are written to (fetched-to-ssd).
  store_actor ssd;
  caf::actor serve;
  /// CloseService ran: no fetch starts, no candidate is offered.
  bool closed = false;
  tiers::peer_directory directory;
  std::map<std::string, caf::actor> peers;
  /// Each up peer's address and load, from its last heartbeat (routing).
  std::map<std::string,
           std::pair<std::string, std::optional<sealed<msg::NodeLoad>>>>
    loads;
  std::map<uint64_t, fetch> fetches;
  std::map<fetch_key, uint64_t> by_key;
  uint64_t next_fetch = 1;
  uint64_t in_flight = 0;
  std::set<uint64_t> leases;
  uint64_t next_lease = 1;
  uint64_t next_order = 1;
  counters count;
  /// Lane reads run here; declared last, so its destructor (which joins
  /// them, each bounded by its deadline) runs first.
  std::unique_ptr<msg::bulk_jobs> jobs = std::make_unique<msg::bulk_jobs>();
};

using self_ptr = peer_tier_actor::stateful_pointer<peer_tier_state>;

bool loopback_host(const std::string& h) {
  return h.rfind("127.", 0) == 0 || h == "::1";
}

/// The best candidate for `prompt` among holders that are up, longer than
/// `better_than`; holders are those up, cheapest first.
std::optional<tiers::peer_directory::candidate>
candidate_for(self_ptr self, std::string_view ns,
              std::span<const tiers::token> prompt, uint64_t better_than) {
  if (self->state.closed)
    return std::nullopt;
  auto c = self->state.directory.longest_usable(ns, prompt);
  if (!c || c->length <= better_than)
    return std::nullopt;
  auto& hs = c->holders;
  hs.erase(std::remove_if(hs.begin(), hs.end(),
                          [&](const tiers::peer_holding& h) {
                            return self->state.peers.count(h.node) == 0;
                          }),
           hs.end());
  if (hs.empty())
    return std::nullopt;
  return c;
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
          auto j = self->state.fetches.find(id);
          if (j == self->state.fetches.end() || j->second.attempt != attempt)
            return;
          auto& g = j->second;
          if (auto err = g.pull->add(c.root()))
            return attempt_failed(self, id, std::move(err));
          if (!g.pull->complete())
            return pump(self, id);
          auto pull = std::move(*g.pull);
          g.pull.reset();
          verified(self, id, std::move(pull).finish<msg::RestoreEntryReply>());
        },
        [self, id, attempt](const caf::error& err) {
          auto j = self->state.fetches.find(id);
          if (j == self->state.fetches.end() || j->second.attempt != attempt)
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
        auto j = self->state.fetches.find(id);
        if (j == self->state.fetches.end() || j->second.attempt != attempt)
          return;
        auto& g = j->second;
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
        auto j = self->state.fetches.find(id);
        if (j == self->state.fetches.end() || j->second.attempt != attempt)
          return;
        attempt_failed(self, id,
                       err == caf::sec::request_timeout
                         ? make_error(ec::timeout, "FetchEntry timed out")
                         : make_error(ec::peer_unreachable,
                                      "FetchEntry: " + to_string(err)));
      });
}

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

/// A prompt from a facade request, checked.
caf::error check_prompt(self_ptr self, capnp::Text::Reader ns, size_t n) {
  if (ns.size() > max_ns_bytes || n > self->state.cfg.max_prompt_tokens)
    return make_error(ec::invalid_argument,
                      "peer tier: a namespace of " + std::to_string(ns.size())
                        + " bytes or a prompt of " + std::to_string(n)
                        + " tokens is over its limit");
  return {};
}

/// Every up peer with its longest usable prefixes of the prompt and its
/// last reported load (a peer the directory knows nothing of: 0 tokens).
sealed<msg::PeerHoldingsReply> holdings(self_ptr self,
                                        msg::PeerHoldings::Reader in) {
  auto& st = self->state;
  msg::draft<msg::PeerHoldingsReply> d;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(d).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  std::map<std::string, tiers::peer_directory::node_prefixes> held;
  for (auto& p : st.directory.per_node(in.getNs().cStr(), prompt.span()))
    held.emplace(p.node, p);
  auto out = d.root().initPeers(static_cast<unsigned>(st.peers.size()));
  unsigned k = 0;
  for (auto& [node, _] : st.peers) {
    auto o = out[k++];
    o.setNodeId(node);
    if (auto h = held.find(node); h != held.end()) {
      o.setRamTokens(h->second.ram_tokens);
      o.setSsdTokens(h->second.ssd_tokens);
    }
    if (auto l = st.loads.find(node); l != st.loads.end()) {
      o.setAddress(l->second.first);
      if (l->second.second)
        o.setLoad(l->second.second->root());
    }
  }
  return std::move(d).seal();
}

sealed<msg::FindPrefixReply> find_prefix(self_ptr self,
                                         msg::FindPrefix::Reader in) {
  msg::draft<msg::FindPrefixReply> d;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(d).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  auto c =
    candidate_for(self, in.getNs().cStr(), prompt.span(), in.getBetterThan());
  if (!c)
    return std::move(d).seal();
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return std::move(d).seal();
  }
  ++self->state.count.finds;
  d.root().setUsableTokens(c->length);
  auto key = d.root().initKey();
  key.setNs(in.getNs());
  tiers::write_tokens(key.initTokens(c->length + 1),
                      prompt.span().first(c->length + 1));
  key.getKind().setPrefix();
  return std::move(d).seal();
}

sealed<msg::RestoreEntryReply> failed_reply(caf::error err) {
  msg::draft<msg::RestoreEntryReply> d;
  write_error(d.root().initFailed(), err);
  return std::move(d).seal();
}

caf::result<sealed<msg::RestoreEntryReply>>
restore(self_ptr self, msg::RestoreEntry::Reader in) {
  auto key = in.getKey();
  auto usable = in.getUsableTokens();
  auto n = key.getTokens().size();
  if (!key.getKind().isPrefix() || usable == 0 || usable >= n
      || check_prompt(self, key.getNs(), n))
    return failed_reply(make_error(ec::invalid_argument,
                                   "peer tier: not a key its FindPrefix "
                                   "answered"));
  tiers::tokens_of prompt{key.getTokens()};
  auto c = candidate_for(self, key.getNs().cStr(), prompt.span(), usable - 1);
  if (!c || c->length != usable) {
    ++self->state.count.failed_none;
    return failed_reply(
      make_error(ec::not_found, "no peer holds the prefix any more"));
  }
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return failed_reply(
      make_error(ec::queue_full, "over cluster.fetch-max-bytes"));
  }
  auto rp = self->make_response_promise<sealed<msg::RestoreEntryReply>>();
  waiter w;
  w.restore = rp;
  start_fetch(self, key.getNs().cStr(),
              tiers::token_seq(prompt.span().begin(), prompt.span().end()),
              usable, c->holders, std::move(w));
  return rp;
}

caf::result<sealed<msg::PrefetchPrefixReply>>
prefetch(self_ptr self, msg::PrefetchPrefix::Reader in) {
  msg::draft<msg::PrefetchPrefixReply> none;
  if (check_prompt(self, in.getNs(), in.getPrompt().size()))
    return std::move(none).seal();
  tiers::tokens_of prompt{in.getPrompt()};
  auto c =
    candidate_for(self, in.getNs().cStr(), prompt.span(), in.getBetterThan());
  if (!c)
    return std::move(none).seal();
  if (!fits(self, c->holders.front().bytes)) {
    ++self->state.count.over_cap;
    return std::move(none).seal();
  }
  auto rp = self->make_response_promise<sealed<msg::PrefetchPrefixReply>>();
  waiter w;
  w.prefetch = rp;
  auto p = prompt.span().first(c->length + 1);
  start_fetch(self, in.getNs().cStr(), tiers::token_seq(p.begin(), p.end()),
              c->length, c->holders, std::move(w));
  return rp;
}

/// A peer went down: its entries leave, its fetches move on.
void peer_gone(self_ptr self, const std::string& node) {
  auto& st = self->state;
  st.peers.erase(node);
  st.loads.erase(node);
  st.directory.drop(node);
  std::vector<uint64_t> hit;
  for (auto& [id, f] : st.fetches)
    if (f.holder == node)
      hit.push_back(id);
  for (auto id : hit) {
    auto& f = st.fetches.at(id);
    f.has_transfer = false; // nobody to tell
    attempt_failed(self, id,
                   make_error(ec::peer_unreachable,
                              "peer " + node + " went down mid-fetch"));
  }
}

void apply(self_ptr self, const directory_batch& b) {
  auto& dir = self->state.directory;
  if (b.node.empty())
    return;
  if (b.replace) {
    dir.drop(b.node);
    auto& c = self->state.count;
    ++c.feed_snapshots;
    c.feed_gap_resyncs += b.why == directory_batch::after_gap ? 1 : 0;
    c.feed_restart_resyncs += b.why == directory_batch::after_restart ? 1 : 0;
  }
  for (auto& it : b.items) {
    if (it.tier > 1 || it.key.empty() || it.ns.size() > max_ns_bytes)
      continue;
    auto t = static_cast<tiers::peer_tier>(it.tier);
    if (it.present)
      dir.put(b.node, it.ns, it.key, t, it.bytes, it.trimmable);
    else
      dir.remove(b.node, it.ns, it.key, t);
  }
}

/// The peer part: the fetching side's counters (the same names) and, from
/// `serve`'s reply when it answered, the serving side's.
sealed<msg::ReadReportReply> report(self_ptr self,
                                    const sealed<msg::ReadReportReply>* serve) {
  auto& st = self->state;
  auto part = tiers::report::peer::from(st.count);
  part.peers_up = st.peers.size();
  part.entries = st.directory.entries();
  part.in_flight_bytes = st.in_flight;
  if (serve)
    read_part(serve->root(), part);
  msg::draft<msg::ReadReportReply> d;
  report_sections{}.add(part).write(d.root());
  return std::move(d).seal();
}

/// Whether the current message came from another process: the peer tier
/// serves its own node only (peers learn its handle as the sender of its
/// requests, and must not steer its directory, its peers or its fetches).
/// Counted; requests get `not_permitted`.
bool from_elsewhere(self_ptr self) {
  if (!from_other_process(self))
    return false;
  ++self->state.count.refused_remote;
  return true;
}

caf::error not_local() {
  return make_error(ec::not_permitted,
                    "peer tier: requests from another process are refused");
}

/// The close: every fetch in flight fails `closed` (its waiters answered),
/// leases end, and from now on no candidate is offered.
sealed<msg::CloseServiceReply> close(self_ptr self) {
  self->state.closed = true;
  std::vector<uint64_t> ids;
  for (auto& [id, f] : self->state.fetches)
    ids.push_back(id);
  for (auto id : ids)
    finish(self, id, std::nullopt,
           make_error(ec::closed, "the peer tier is closed"));
  self->state.leases.clear();
  return msg::draft<msg::CloseServiceReply>{}.seal();
}

peer_tier_actor::behavior_type peer_tier(self_ptr self, peer_tier_config cfg,
                                         tiers::model_geometry geometry,
                                         store_actor ssd, caf::actor serve) {
  auto& st = self->state;
  st.cfg = cfg;
  // Peers learn its handle (it sends them fetches).
  guard_signals(
    self, [self](const std::string&) { ++self->state.count.refused_remote; });
  st.geometry = std::move(geometry);
  st.ssd = std::move(ssd);
  st.serve = std::move(serve);
  self->set_down_handler([self](const caf::down_msg& dm) {
    for (auto& [node, h] : self->state.peers)
      if (h.address() == dm.source) {
        auto gone = node;
        return peer_gone(self, gone);
      }
  });
  return {
    [self](const sealed<msg::FindPrefix>& m)
      -> caf::result<sealed<msg::FindPrefixReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::FindPrefixReply>>(
        [&] { return find_prefix(self, m.root()); });
    },
    [self](const sealed<msg::RestoreEntry>& m)
      -> caf::result<sealed<msg::RestoreEntryReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::RestoreEntryReply>>(
        [&] { return restore(self, m.root()); });
    },
    [self](const sealed<msg::PrefetchPrefix>& m)
      -> caf::result<sealed<msg::PrefetchPrefixReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::PrefetchPrefixReply>>(
        [&] { return prefetch(self, m.root()); });
    },
    [self](const sealed<msg::ReleasePrefetch>& m)
      -> caf::result<sealed<msg::ReleasePrefetchReply>> {
      if (from_elsewhere(self))
        return not_local();
      msg::draft<msg::ReleasePrefetchReply> d;
      d.root().setReleased(self->state.leases.erase(m.root().getLeaseId()) > 0);
      return std::move(d).seal();
    },
    [self](const sealed<msg::FlushState>&)
      -> caf::result<sealed<msg::FlushStateReply>> {
      if (from_elsewhere(self))
        return not_local();
      // Copies of other nodes' state: none of its own to make durable.
      return nothing_to_flush();
    },
    [self](const sealed<msg::CloseService>&)
      -> caf::result<sealed<msg::CloseServiceReply>> {
      if (from_elsewhere(self))
        return not_local();
      return close(self);
    },
    [self](const sealed<msg::ReadStats>&)
      -> caf::result<sealed<msg::ReadStatsReply>> {
      if (from_elsewhere(self))
        return not_local();
      return msg::draft<msg::ReadStatsReply>{}.seal(); // writes nothing
    },
    [self](const sealed<msg::ReadReport>&)
      -> caf::result<sealed<msg::ReadReportReply>> {
      if (from_elsewhere(self))
        return not_local();
      if (!self->state.serve)
        return report(self, nullptr);
      auto rp = self->make_response_promise<sealed<msg::ReadReportReply>>();
      self
        ->request(self->state.serve, std::chrono::milliseconds{1000},
                  msg::draft<msg::ReadReport>{}.seal())
        .then(
          [self, rp](const sealed<msg::ReadReportReply>& r) mutable {
            rp.deliver(report(self, &r));
          },
          [self, rp](const caf::error&) mutable {
            rp.deliver(report(self, nullptr));
          });
      return rp;
    },
    [self](lane_done_atom, uint64_t id, uint64_t attempt) {
      if (from_elsewhere(self))
        return;
      auto i = self->state.fetches.find(id);
      if (i == self->state.fetches.end() || i->second.attempt != attempt
          || !i->second.slot)
        return;
      auto slot = std::move(i->second.slot);
      if (!slot->result)
        return attempt_failed(self, id, std::move(slot->result.error()));
      verified(
        self, id,
        sealed<msg::RestoreEntryReply>::from_flat(std::move(*slot->result)));
    },
    [self](fetch_deadline_atom, uint64_t id) {
      if (from_elsewhere(self))
        return;
      auto i = self->state.fetches.find(id);
      if (i == self->state.fetches.end())
        return;
      ++self->state.count.failed_timeout;
      finish(self, id, std::nullopt,
             make_error(ec::timeout, "the peer fetch took longer than "
                                     "cluster.fetch-deadline-ms"));
    },
    [self](const directory_batch& b) {
      if (!from_elsewhere(self))
        apply(self, b);
    },
    [self](peer_up_atom, const std::string& node, const caf::actor& h) {
      if (from_elsewhere(self) || !h || node.empty())
        return;
      self->monitor(h);
      self->state.peers[node] = h;
    },
    [self](peer_down_atom, const std::string& node) {
      if (!from_elsewhere(self))
        peer_gone(self, node);
    },
    [self](peer_load_atom, const std::string& node, const std::string& address,
           const sealed<msg::NodeLoad>& load) {
      if (from_elsewhere(self) || self->state.peers.count(node) == 0)
        return;
      self->state.loads[node] = {address, load};
    },
    [self](peer_load_atom, const std::string& node,
           const std::string& address) {
      // Right after its peer_up: where it is, its load still unknown.
      if (from_elsewhere(self) || self->state.peers.count(node) == 0)
        return;
      self->state.loads[node].first = address;
    },
    [self](const sealed<msg::PeerHoldings>& m)
      -> caf::result<sealed<msg::PeerHoldingsReply>> {
      if (from_elsewhere(self))
        return not_local();
      return decoding<sealed<msg::PeerHoldingsReply>>(
        [&] { return holdings(self, m.root()); });
    },
  };
}

} // namespace

peer_tier_actor spawn_peer_tier(caf::actor_system& sys, peer_tier_config cfg,
                                tiers::model_geometry geometry, store_actor ssd,
                                caf::actor serve) {
  return sys.spawn(peer_tier, cfg, std::move(geometry), std::move(ssd),
                   std::move(serve));
}

} // namespace kvtier::actors
