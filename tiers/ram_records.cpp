#include "tiers/ram_records.hpp"

#include <utility>

namespace kvtier::tiers {

ram_records::id ram_records::make() {
  id r;
  if (!free_.empty()) {
    r = free_.back();
    free_.pop_back();
  } else {
    KVTIER_ASSERT(made_ < ram_record::none); // 2^32 - 1 items at most
    if (made_ % chunk_size == 0)
      chunks_.push_back(std::make_unique<chunk>());
    r = made_++;
  }
  ++live_;
  return r;
}

void ram_records::free(id r) {
  (*this)[r] = ram_record{}; // its state goes now
  if (flags(r).has_extras)
    extras_.erase(r);
  flags(r) = ram_flags{};
  free_.push_back(r);
  --live_;
}

ram_record_extras& ram_records::extras(id r) {
  auto& x = extras_[r];
  flags(r).has_extras = true;
  return x;
}

const ram_record_extras* ram_records::find_extras(id r) const noexcept {
  if (!flags(r).has_extras)
    return nullptr;
  auto it = extras_.find(r);
  KVTIER_ASSERT(it != extras_.end());
  return &it->second;
}

ram_record_extras* ram_records::find_extras(id r) noexcept {
  return const_cast<ram_record_extras*>(std::as_const(*this).find_extras(r));
}

void ram_records::shrink(id r) noexcept {
  auto& f = flags(r);
  if (!f.has_extras || f.is_object)
    return;
  if (auto it = extras_.find(r); it != extras_.end() && it->second.empty()) {
    extras_.erase(it);
    f.has_extras = false;
  }
}

void ram_records::link_back(ram_record_list& l, id r) noexcept {
  auto& x = (*this)[r];
  x.prev = l.tail;
  x.next = ram_record::none;
  if (l.tail != ram_record::none)
    (*this)[l.tail].next = r;
  else
    l.head = r;
  l.tail = r;
  ++l.size;
}

void ram_records::unlink(ram_record_list& l, id r) noexcept {
  auto& x = (*this)[r];
  if (x.prev != ram_record::none)
    (*this)[x.prev].next = x.next;
  else
    l.head = x.next;
  if (x.next != ram_record::none)
    (*this)[x.next].prev = x.prev;
  else
    l.tail = x.prev;
  x.prev = x.next = ram_record::none;
  --l.size;
}

void ram_records::clear() noexcept {
  chunks_.clear();
  free_.clear();
  extras_.clear();
  made_ = 0;
  live_ = 0;
}

} // namespace kvtier::tiers
