#include "actors/local_lookup.hpp"

namespace kvtier::actors::detail {

uint64_t tokens_of(const found_entry& e) {
  return e ? e->root().getEntry().getTokens().size() : 0;
}

sealed<msg::FindPrefix> find_above(const sealed<msg::FetchEntry>& m,
                                   uint64_t floor) {
  msg::draft<msg::FindPrefix> q;
  q.root().setNs(m.root().getNs());
  q.root().setPrompt(m.root().getPrompt());
  q.root().setBetterThan(floor);
  return std::move(q).seal();
}

sealed<msg::RestoreEntry> restore_of(const sealed<msg::FindPrefixReply>& f) {
  msg::draft<msg::RestoreEntry> d;
  d.root().setKey(f.root().getKey());
  d.root().setUsableTokens(f.root().getUsableTokens());
  return std::move(d).seal();
}

} // namespace kvtier::actors::detail
