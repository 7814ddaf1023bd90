// The one local lookup: the longest usable prefix of a prompt this node
// holds, as a restored entry, from RAM (its export: no hit counted, recency
// touched at most) or else from its stores (each store's FindPrefix, then
// RestoreEntry), by the strictly-longer rule: RAM first, then each store in
// order, a later one used only when strictly longer than every earlier
// candidate; a failed or late restore keeps the earlier candidate. The
// cluster's serve side answers a peer's FetchEntry with it
// (actors/serve_actor.cpp); the peer tier is never asked (a node serves
// what it holds, not what its peers do).
//
// Runs on the calling actor's thread: every request carries `timeout`; a
// tier that fails or is late holds nothing for this lookup.
#pragma once

#include "actors/interfaces.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace kvtier::actors {

/// A restored entry (RestoreEntryReply holding one), or nothing.
using found_entry = std::optional<sealed<msg::RestoreEntryReply>>;

/// Where the local lookup looks: RAM, then the stores in order.
struct local_tiers {
  ram_tier_actor ram;
  std::vector<store_actor> stores;
};

namespace detail {

/// The tokens of `e`'s entry (0 for none).
uint64_t tokens_of(const found_entry& e);

/// A FindPrefix of `m`'s prompt in its namespace, above `floor`.
sealed<msg::FindPrefix> find_above(const sealed<msg::FetchEntry>& m,
                                   uint64_t floor);

/// A RestoreEntry of `f`'s key, trimmed to its usable tokens.
sealed<msg::RestoreEntry> restore_of(const sealed<msg::FindPrefixReply>& f);

/// Asks store `i` and the rest after it, each above the best so far.
template <class Self>
void from_store(Self* self, std::shared_ptr<local_tiers> t, size_t i,
                sealed<msg::FetchEntry> m, std::chrono::milliseconds timeout,
                found_entry best, std::function<void(found_entry)> done) {
  if (i >= t->stores.size())
    return done(std::move(best));
  auto floor = std::max<uint64_t>(m.root().getBetterThan(), tokens_of(best));
  auto next = [self, t, i, m, timeout, done](found_entry b) {
    from_store(self, t, i + 1, m, timeout, std::move(b), done);
  };
  self->request(t->stores[i], timeout, find_above(m, floor))
    .then(
      [self, t, i, timeout, floor, best,
       next](const sealed<msg::FindPrefixReply>& f) {
        if (f.root().getUsableTokens() <= floor)
          return next(best);
        self->request(t->stores[i], timeout, restore_of(f))
          .then(
            [floor, best, next](const sealed<msg::RestoreEntryReply>& r) {
              if (r.root().isEntry()
                  && r.root().getEntry().getTokens().size() > floor)
                return next(r);
              next(best);
            },
            [best, next](const caf::error&) { next(best); });
      },
      [best, next](const caf::error&) { next(best); });
}

} // namespace detail

/// Looks `m` (a peer's FetchEntry: namespace, prompt, betterThan) up in
/// `t` from `self`'s thread; `done` gets the longest entry strictly longer
/// than betterThan, or nothing.
template <class Self>
void local_lookup(Self* self, std::shared_ptr<local_tiers> t,
                  sealed<msg::FetchEntry> m, std::chrono::milliseconds timeout,
                  std::function<void(found_entry)> done) {
  auto better = m.root().getBetterThan();
  auto stores = [self, t, m, timeout, done](found_entry ram) {
    detail::from_store(self, t, 0, m, timeout, std::move(ram), done);
  };
  if (!t->ram)
    return stores(std::nullopt);
  self->request(t->ram, timeout, export_atom::value, m)
    .then(
      [better, stores](const sealed<msg::RestoreEntryReply>& r) {
        found_entry ram;
        if (r.root().isEntry()
            && r.root().getEntry().getTokens().size() > better)
          ram = r;
        stores(std::move(ram));
      },
      [stores](const caf::error&) { stores(std::nullopt); });
}

} // namespace kvtier::actors
