#include "actors/serve_actor.hpp"

#include "actors/codec.hpp"
#include "actors/local_lookup.hpp"
#include "actors/tier_counters.hpp"
#include "messages/bulk_lane.hpp"
#include "tiers/entry_message.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <memory>
#include <optional>

namespace kvtier::actors {

namespace {

/// Namespaces a peer may name (the local tiers take any text; a peer's is
/// bounded so a request cannot make the node walk megabytes).
constexpr size_t max_ns_bytes = 4096;

struct serve_counters {
  uint64_t served = 0, none = 0, refused = 0, bytes = 0;
};

using fetch_promise = caf::typed_response_promise<sealed<msg::FetchEntryReply>>;

struct serve_state {
  static inline const char* name = "serve";
  serve_config cfg;
  /// What it serves from: RAM, then the node's stores (the local lookup).
  std::shared_ptr<actors::local_tiers> tiers;
  std::shared_ptr<msg::bulk_server> lane;
  std::unique_ptr<msg::transfer_table> table;
  serve_counters counters;
  uint32_t faults = 0;
  uint32_t fault_mode = 0;
  uint32_t delay_ms = 0;
  bool ticking = false;
  /// Test only: answers held back by a delay fault.
  std::vector<std::pair<fetch_promise, sealed<msg::FetchEntryReply>>> delayed;
};

using serve_pointer = serve_actor::stateful_pointer<serve_state>;

uint64_t now_ms(serve_pointer self) {
  return static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(
      self->clock().now().time_since_epoch())
      .count());
}

std::chrono::milliseconds tier_timeout(serve_pointer self) {
  return std::chrono::milliseconds{
    std::max<uint64_t>(self->state.cfg.tier_deadline_ms, 1)};
}

sealed<msg::FetchEntryReply> none_reply() {
  msg::draft<msg::FetchEntryReply> d;
  d.root().setNone();
  return std::move(d).seal();
}

/// `r` altered by a test fault (serve_fault_atom mode 0): its header
/// promises a checksum the bytes do not have (flipped, or for a lane
/// transfer one where the lane's own sum would have been).
sealed<msg::FetchEntryReply> altered(const sealed<msg::FetchEntryReply>& r) {
  msg::draft<msg::FetchEntryReply> d;
  d.root().setUsableTokens(r.root().getUsableTokens());
  auto in = r.root().getTransfer();
  d.root().setTransfer(in);
  auto out = d.root().getTransfer();
  out.setChecksum(in.getLaneChecksum() ? 1 : in.getChecksum() ^ 1);
  out.setLaneChecksum(false);
  return std::move(d).seal();
}

void tick_later(serve_pointer self) {
  if (self->state.ticking || self->state.table->size() == 0)
    return;
  self->state.ticking = true;
  auto period = std::max<uint64_t>(self->state.cfg.limits.idle_ms / 4, 50);
  self->delayed_send(self, std::chrono::milliseconds{period},
                     serve_tick_atom::value);
}

/// Offers the entry of `r` (a RestoreEntryReply holding one) and answers.
void offer(serve_pointer self, fetch_promise rp,
           const sealed<msg::RestoreEntryReply>& r) {
  auto& st = self->state;
  auto usable = r.root().getEntry().getTokens().size();
  // Test fault mode 2: offered without the lane (the receiver pulls chunks).
  bool lane = !(st.faults > 0 && st.fault_mode == 2);
  auto reply = st.table->offer(r, usable, now_ms(self), lane);
  if (!reply) {
    ++st.counters.refused;
    rp.deliver(std::move(reply.error()));
    return;
  }
  ++st.counters.served;
  st.counters.bytes += reply->root().getTransfer().getTotalLength();
  tick_later(self);
  auto out =
    st.faults > 0 && st.fault_mode == 0 ? altered(*reply) : std::move(*reply);
  if (st.faults > 0)
    --st.faults;
  if (auto delay = std::exchange(st.delay_ms, 0); delay > 0) {
    // Test only: answered late from a timer of this actor.
    self->delayed_send(self, std::chrono::milliseconds{delay},
                       serve_tick_atom::value);
    st.delayed.emplace_back(std::move(rp), std::move(out));
    return;
  }
  rp.deliver(std::move(out));
}

/// A peer's request, checked before any tier is asked.
caf::error check(serve_pointer self, msg::FetchEntry::Reader in) {
  auto n = in.getPrompt().size();
  if (in.getNs().size() > max_ns_bytes)
    return make_error(ec::invalid_argument,
                      "FetchEntry: a namespace of "
                        + std::to_string(in.getNs().size()) + " bytes (at most "
                        + std::to_string(max_ns_bytes) + ")");
  if (n == 0 || n > self->state.cfg.max_prompt_tokens)
    return make_error(
      ec::invalid_argument,
      "FetchEntry: a prompt of " + std::to_string(n) + " tokens (1 .. "
        + std::to_string(self->state.cfg.max_prompt_tokens) + ")");
  if (in.getBetterThan() >= n)
    return make_error(
      ec::invalid_argument,
      "FetchEntry: betterThan " + std::to_string(in.getBetterThan())
        + " is not below the prompt's " + std::to_string(n) + " tokens");
  return {};
}

caf::result<sealed<msg::FetchEntryReply>>
fetch_entry(serve_pointer self, const sealed<msg::FetchEntry>& m) {
  if (auto err = check(self, m.root())) {
    ++self->state.counters.refused;
    return err;
  }
  auto rp = self->make_response_promise<sealed<msg::FetchEntryReply>>();
  actors::local_lookup(self, self->state.tiers, m, tier_timeout(self),
                       [self, rp](actors::found_entry e) mutable {
                         if (e)
                           return offer(self, rp, *e);
                         ++self->state.counters.none;
                         rp.deliver(none_reply());
                       });
  return rp;
}

serve_actor::behavior_type serve(serve_pointer self, serve_config cfg,
                                 actors::local_tiers tiers,
                                 std::shared_ptr<msg::bulk_server> lane) {
  auto& st = self->state;
  // Peers learn its handle (it answers their fetches).
  actors::guard_signals(
    self, [self](const std::string&) { ++self->state.counters.refused; });
  st.cfg = std::move(cfg);
  st.tiers = std::make_shared<actors::local_tiers>(std::move(tiers));
  // The lane was started by spawn_serve (its error is the caller's); it
  // lives as long as this state, the table that offers on it with it.
  st.lane = std::move(lane);
  st.table =
    std::make_unique<msg::transfer_table>(st.cfg.limits, st.lane.get());
  return {
    [self](const sealed<msg::FetchEntry>& m) {
      return actors::decoding<sealed<msg::FetchEntryReply>>(
        [&] { return fetch_entry(self, m); });
    },
    [self](const sealed<msg::FetchChunk>& m) {
      return actors::decoding<sealed<msg::FetchChunkReply>>(
        [&]() -> caf::result<sealed<msg::FetchChunkReply>> {
          auto c = self->state.table->chunk(m.root(), now_ms(self));
          if (!c)
            return std::move(c.error());
          return std::move(*c);
        });
    },
    [self](const sealed<msg::CancelTransfer>& m) {
      return actors::decoding<sealed<msg::CancelTransferReply>>([&] {
        msg::draft<msg::CancelTransferReply> d;
        d.root().setCancelled(
          self->state.table->cancel(m.root().getTransferId()));
        return std::move(d).seal();
      });
    },
    [self](const sealed<msg::ReadReport>&) {
      auto& c = self->state.counters;
      tiers::report::peer p; // the serving side's part of it
      p.served = c.served;
      p.served_none = c.none;
      p.serve_refused = c.refused;
      p.serve_bytes = c.bytes;
      if (auto& lane = self->state.lane) {
        auto l = lane->stats();
        p.lane_refused = l.refused;
        p.lane_failed = l.failed;
      }
      msg::draft<msg::ReadReportReply> d;
      actors::report_sections{}
        .add(p, {"served", "served_none", "serve_refused", "serve_bytes",
                 "lane_refused", "lane_failed"})
        .write(d.root());
      return std::move(d).seal();
    },
    [self](serve_tick_atom) {
      // Its own timer only: a peer must not release delayed answers.
      if (actors::from_other_process(self))
        return;
      for (auto& [rp, out] : std::exchange(self->state.delayed, {}))
        rp.deliver(std::move(out));
      self->state.ticking = false;
      self->state.table->expire(now_ms(self));
      tick_later(self);
    },
    [self](serve_fault_atom, uint32_t mode, uint32_t n) {
      if (actors::from_other_process(self))
        return;
      if (mode == 1) {
        self->state.delay_ms = n;
      } else {
        self->state.faults = n;
        self->state.fault_mode = mode;
      }
    },
  };
}

} // namespace

serve_actor spawn_serve(caf::actor_system& sys, serve_config cfg,
                        local_tiers tiers,
                        std::shared_ptr<msg::bulk_server> lane) {
  return sys.spawn(serve, std::move(cfg), std::move(tiers), std::move(lane));
}

} // namespace kvtier::actors
