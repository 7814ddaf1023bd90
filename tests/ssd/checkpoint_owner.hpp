// The checkpoint side of the SSD crash loops' writers: an owner that saves
// generation checkpoints through the tier, drops the older ones a newer
// durable one made redundant (as the checkpoints actor does, with
// `erase`), and completes generations (`remove_checkpoints`), telling the
// expected state (expected_state.hpp) each step as a log line:
//   C  a checkpoint of a generation not being completed reported durable
//   K  before erasing a redundant one; a checkpoint file reported removed
//   Q  before completing a generation
//   X  once that removal answered durable
// A generation being completed writes nothing more; once X is told, it may
// be retried (the same request, the next attempt), which writes the same
// keys again. A removal that answered an error leaves its generation
// alone for good (neither expected nor dead). Single-threaded, on the
// tier's owner thread; `on_write`/`on_remove` are meant to be called from
// the tier's reports, the rest outside them. Tests only.
#pragma once

#include "tests/ssd/expected_state.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <functional>
#include <map>
#include <memory>
#include <random>

namespace kvtier::tiers::ssd::expected {

class checkpoint_owner {
public:
  /// Checkpoint `j` of generation `request` (a longer j extends a shorter).
  using maker = std::function<entry(uint64_t request, uint32_t j)>;
  /// Tells the expected state one line; false when it could not.
  using teller = std::function<bool(const std::string&)>;

  /// New generations get request ids from `first_request` on.
  checkpoint_owner(maker make, teller tell, uint64_t first_request)
    : make_(std::move(make))
    , tell_(std::move(tell))
    , next_request_(first_request) {}

  /// Takes over what earlier runs left: generations with a checkpoint
  /// expected go on saving; completed ones may be retried.
  void adopt(const state& past) {
    for (auto& [k, attempt] : past.checkpoints) {
      auto& g = gens_[{k.request, k.ns}];
      g.attempt = attempt;
      g.durable.insert(k.tokens);
      g.next = std::max(g.next, index_of(k.tokens) + 1);
    }
    for (auto& [id, attempt] : past.completed)
      if (!gens_.count(id)) {
        auto& g = gens_[id];
        g.attempt = attempt;
        g.phase = stage::completed;
      }
  }

  /// The tier it wrote through died: its writes will never be reported,
  /// its removals never answer (a generation being completed is left
  /// alone from now on).
  void restart() {
    items_.clear();
    for (auto& [id, g] : gens_)
      if (g.phase == stage::completing)
        g.phase = stage::left;
  }

  /// Whether a line could not be told.
  bool failed() const noexcept {
    return failed_;
  }

  /// Generations completed durably by this owner.
  uint64_t completed() const noexcept {
    return completed_;
  }

  /// The tier's `on_write` report; false when the item is not ours.
  bool on_write(const write_event& ev) {
    auto i = items_.find(ev.id);
    if (i == items_.end())
      return false;
    if (ev.outcome == write_outcome::failed)
      return true; // retried later
    auto [id, attempt, tokens] = std::move(i->second);
    items_.erase(i);
    auto& g = gens_[id];
    if (ev.outcome != write_outcome::durable || g.phase != stage::active
        || attempt != g.attempt)
      return true;
    tell(line('C', id.second, tokens, id.first, attempt));
    g.durable.insert(tokens);
    return true;
  }

  /// The tier's `on_remove` report (checkpoint files only).
  void on_remove(const remove_event& ev) {
    if (ev.kind != key_kind::checkpoint)
      return;
    tell(line('K', ev.ns, ev.tokens, ev.request));
    auto g = gens_.find({ev.request, ev.ns});
    if (g == gens_.end())
      return;
    g->second.durable.erase(ev.tokens);
    if (ev.reason == removal_reason::evicted && g->second.durable.empty())
      just_evicted_ = g->first;
  }

  /// Saves the next checkpoint of a generation: a running one, a new one
  /// (fewer than three running), or a retry of a completed one.
  void save(ssd_tier& tier, std::mt19937_64& rng) {
    std::vector<identity> running, done;
    for (auto& [id, g] : gens_)
      if (g.phase == stage::active && g.next < 12)
        running.push_back(id);
      else if (g.phase == stage::completed)
        done.push_back(id);
    identity id;
    if (!done.empty() && rng() % 4 == 0) {
      id = done[rng() % done.size()];
      auto& g = gens_[id];
      ++g.attempt;
      g.next = 0;
      g.phase = stage::active;
    } else if (running.size() < 3) {
      auto request = next_request_++;
      id = {request, make_(request, 0).ns};
      gens_[id] = {};
    } else {
      id = running[rng() % running.size()];
    }
    auto& g = gens_[id];
    auto e = make_(id.first, g.next++);
    auto key = storage_key::checkpoint(id.first, g.attempt, e.ns, e.tokens);
    auto tokens = e.tokens;
    if (auto item = tier.enqueue(std::move(e), write_reason::checkpoint, key))
      items_[*item] = {id, g.attempt, std::move(tokens)};
  }

  /// Completes a running generation that saved something (its files may
  /// be durable, being written, or already evicted), if any; every other
  /// time one with no durable file left (all evicted or not written yet),
  /// when there is one, and the one whose last file was just evicted
  /// first: its removal may find nothing to cover.
  void complete(ssd_tier& tier, std::mt19937_64& rng) {
    std::vector<identity> ready, bare;
    for (auto& [id, g] : gens_)
      if (g.phase == stage::active && g.next > 0)
        (g.durable.empty() ? bare : ready).push_back(id);
    if (!bare.empty() && (ready.empty() || rng() % 2 == 0))
      ready = std::move(bare);
    else
      ready.insert(ready.end(), bare.begin(), bare.end());
    if (ready.empty())
      return;
    auto id = ready[rng() % ready.size()];
    // Most demanding: the one whose last file the cap just pushed out (its
    // unlink may not be durable yet).
    if (just_evicted_ && std::count(ready.begin(), ready.end(), *just_evicted_))
      id = *just_evicted_;
    just_evicted_.reset();
    auto& g = gens_[id];
    tell(line('Q', id.second, {}, id.first));
    g.phase = stage::completing;
    g.durable.clear();
    auto inside = std::make_shared<bool>(true);
    tier.remove_checkpoints(id.first, id.second, [=, this](caf::error err) {
      auto& g = gens_[id];
      if (err) {
        g.phase = stage::left;
        return;
      }
      tell(line('X', id.second, {}, id.first, g.attempt));
      g.phase = stage::completed;
      ++completed_;
      answered_at_once_ += *inside ? 1 : 0;
    });
    *inside = false;
  }

  /// Of those, the removals that answered inside the call (nothing was
  /// left to cover).
  uint64_t answered_at_once() const noexcept {
    return answered_at_once_;
  }

  /// Erases, as the checkpoints actor does, every durable checkpoint of a
  /// running generation but its newest (a crash may bring one back: the
  /// newer one still wins, so it is told `K` first).
  void erase_redundant(ssd_tier& tier) {
    for (auto& [id, g] : gens_) {
      if (g.phase != stage::active)
        continue;
      while (g.durable.size() > 1) {
        auto oldest = *g.durable.begin();
        g.durable.erase(g.durable.begin());
        tell(line('K', id.second, oldest, id.first));
        tier.erase(storage_key::checkpoint(id.first, g.attempt, id.second,
                                           std::move(oldest)));
      }
    }
  }

private:
  enum class stage : uint8_t { active, completing, completed, left };
  struct generation {
    uint32_t attempt = 1;
    /// The next checkpoint's index.
    uint32_t next = 0;
    stage phase = stage::active;
    /// Keys of this attempt reported durable and not erased. One
    /// generation's keys extend each other, so the first is the oldest.
    std::set<token_seq> durable;
  };
  struct item {
    identity id;
    uint32_t attempt = 0;
    token_seq tokens;
  };

  static uint32_t index_of(const token_seq& t) {
    return static_cast<uint32_t>(t.size() >= 24 ? (t.size() - 24) / 16 : 0);
  }

  void tell(const std::string& text) {
    failed_ |= !tell_(text);
  }

  maker make_;
  teller tell_;
  uint64_t next_request_;
  std::map<identity, generation> gens_;
  /// Checkpoint writes not settled, by item id.
  std::map<uint64_t, item> items_;
  uint64_t completed_ = 0;
  uint64_t answered_at_once_ = 0;
  /// A running generation whose last durable file was just evicted.
  std::optional<identity> just_evicted_;
  bool failed_ = false;
};

} // namespace kvtier::tiers::ssd::expected
