#include "tiers/byte_ledger.hpp"

#include "messages/assert.hpp"

namespace kvtier::tiers {

uint64_t byte_ledger::cost(const std::vector<buffer_ref>& bufs) const {
  uint64_t n = 0;
  for (auto& b : bufs)
    if (!slots_.contains(b->id()))
      n += b->size();
  return n;
}

uint64_t byte_ledger::hold(const std::vector<buffer_ref>& bufs) {
  uint64_t added = 0;
  for (auto& b : bufs) {
    auto& s = slots_[b->id()];
    if (s.holders++ == 0) {
      s.size = b->size();
      added += s.size;
    }
  }
  bytes_ += added;
  return added;
}

uint64_t byte_ledger::release(const std::vector<uint64_t>& ids,
                              std::vector<uint64_t>* gone) {
  uint64_t freed = 0;
  for (auto id : ids) {
    auto it = slots_.find(id);
    KVTIER_ASSERT(it != slots_.end() && it->second.holders > 0);
    if (--it->second.holders == 0) {
      freed += it->second.size;
      slots_.erase(it);
      if (gone)
        gone->push_back(id);
    }
  }
  bytes_ -= freed;
  return freed;
}

uint64_t byte_ledger::holders(uint64_t id) const {
  auto it = slots_.find(id);
  return it == slots_.end() ? 0 : it->second.holders;
}

uint64_t distinct_bytes(const std::vector<buffer_ref>& bufs) noexcept {
  uint64_t n = 0;
  for (auto& b : bufs)
    n += b->size();
  return n;
}

} // namespace kvtier::tiers
