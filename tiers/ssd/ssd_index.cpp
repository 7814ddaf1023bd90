#include "tiers/ssd/ssd_index.hpp"

#include "messages/assert.hpp"

#include <algorithm>

namespace kvtier::tiers::ssd {

uint64_t header_floor(const entry_header& h) {
  std::vector<layer_state> layers;
  layers.reserve(h.layers.size());
  for (auto& l : h.layers)
    layers.push_back(
      {l.kind, l.bytes_per_token, l.window, l.tokens, l.min_offset, {}});
  // Attachments are exact-boundary: they never block a trim (they are
  // dropped from trimmed restores), as in `entry::trimmed`.
  return trim_floor(h.token_count, layers);
}

namespace {

/// `f` with a header carrying `key` again (what leaves the index).
ssd_file keyed(ssd_file f, token_seq key) {
  auto h = std::make_shared<entry_header>(*f.header);
  h->tokens = std::move(key);
  KVTIER_ASSERT(h->keyed());
  f.header = std::move(h);
  return f;
}

/// Heap bytes of a string past its inline buffer (with the allocator's).
uint64_t heap_of(const std::string& s) {
  return s.capacity() > 15 ? s.capacity() + 1 + 16 : 0;
}

/// What one indexed file costs beside the prefix tree and the ranking: its
/// record as held (name, header in its shared block, the header's own
/// heap), its by-name node (the name once more) and bucket.
uint64_t held_bytes(const ssd_file& f) {
  uint64_t n = heap_of(f.name);
  if (auto& h = f.header) {
    n += sizeof(entry_header) + 16 + 16;
    n += h->layers.capacity() * sizeof(layer_info) + 16;
    n += h->attachments.capacity() * sizeof(attachment_info);
    n += h->tokens.capacity() * sizeof(token);
    n += heap_of(h->fingerprint) + heap_of(h->ns) + heap_of(h->parent);
    if (h->session)
      n += heap_of(*h->session);
  }
  constexpr uint64_t by_name_node =
    sizeof(std::string) + 64 + 2 * sizeof(void*) + 16;
  return n + by_name_node + sizeof(void*) + heap_of(f.name);
}

} // namespace

ssd_index::ssd_index(ram_policy policy)
  : rank_(policy) {
  // nop
}

std::optional<ssd_file> ssd_index::insert(ssd_file f, bool coldest,
                                          uint32_t carried) {
  auto name = f.name;
  auto header = f.header;
  auto bytes = f.bytes;
  auto gdsf = rank_.policy() == ram_policy::gdsf;
  // A file replacing its name carries on its uses (gdsf).
  uint32_t inherited = gdsf ? std::max(uses(name), carried) : 0;
  auto replaced = erase(name);
  if (header->kind != key_kind::prefix) {
    // Found by exact key only: never in the prefix index.
    meta_bytes_ += held_bytes(f);
    auto at = by_name_.insert_or_assign(name, slot{{}, std::move(f)}).first;
    bytes_ += bytes;
    rank(*at, *header, {}, inherited, coldest);
    return replaced;
  }
  KVTIER_ASSERT(header->keyed());
  // The key is kept once, on the index's edges: the header held here has
  // no copy of its tokens.
  auto keyless = std::make_shared<entry_header>();
  *keyless = *header;
  keyless->tokens = token_seq{};
  f.header = std::move(keyless);
  auto r = index_.insert(header->ns, header->tokens, std::move(f),
                         header_floor(*header));
  meta_bytes_ += held_bytes(index_.handle(r.ref));
  if (r.replaced) {
    // Same key under another name: only possible for a hash collision or
    // a renamed file; the newer one wins either way.
    meta_bytes_ -= held_bytes(*r.replaced);
    auto old = keyed(std::move(*r.replaced), header->tokens);
    auto i = by_name_.find(old.name);
    if (i != by_name_.end()) {
      if (gdsf)
        inherited = std::max(inherited, rank_.count(i->second.rid));
      unrank(i->second);
      by_name_.erase(i);
    }
    bytes_ -= old.bytes;
    replaced = std::move(old);
  }
  if (gdsf)
    inherited = std::max(inherited, ancestors_uses(r.ref));
  auto at = by_name_.insert_or_assign(name, slot{r.ref, std::nullopt}).first;
  bytes_ += bytes;
  rank(*at, *header, header->tokens, inherited, coldest);
  return replaced;
}

void ssd_index::rank(named& at, const entry_header& h,
                     std::span<const token> key, uint32_t inherited,
                     bool coldest) {
  auto id = take_id(by_id_, free_ids_, static_cast<const named*>(&at));
  at.second.rid = id;
  // Only a prefix file has a key a ghost can remember.
  auto ghost = h.kind == key_kind::prefix ? ranking_key(h.ns, key) : 0;
  rank_.insert(id, h.token_count, h.priority, ghost, inherited, coldest);
}

uint32_t ssd_index::ancestors_uses(entry_ref ref) const {
  uint32_t n = 0;
  auto floor = index_.floor(ref);
  if (floor >= index_.length(ref))
    return n; // untrimmable: supersedes nothing
  for (auto a : index_.ancestors(ref)) {
    if (index_.length(a) < floor)
      break;
    n = std::max(n, rank_.count(by_name_.at(index_.handle(a).name).rid));
  }
  return n;
}

void ssd_index::unrank(const slot& s, bool evicted) {
  if (evicted)
    rank_.evicted(s.rid);
  else
    rank_.erase(s.rid);
  by_id_[s.rid] = nullptr;
  free_ids_.push_back(s.rid);
}

uint32_t ssd_index::uses(const std::string& name) const {
  auto i = by_name_.find(name);
  return i == by_name_.end() ? 0 : rank_.count(i->second.rid);
}

std::optional<ssd_file> ssd_index::erase(const std::string& name,
                                         bool evicted) {
  auto i = by_name_.find(name);
  if (i == by_name_.end())
    return std::nullopt;
  ssd_file f;
  if (i->second.exact) {
    meta_bytes_ -= held_bytes(*i->second.exact);
    f = std::move(*i->second.exact);
  } else {
    auto key = index_.key(i->second.ref); // before the entry goes
    meta_bytes_ -= held_bytes(index_.handle(i->second.ref));
    f = keyed(index_.erase(i->second.ref), std::move(key));
  }
  unrank(i->second, evicted);
  by_name_.erase(i);
  bytes_ -= f.bytes;
  return f;
}

std::optional<ssd_match> ssd_index::find(std::span<const token> prompt,
                                         std::string_view ns) const {
  auto m = index_.longest_usable(ns, prompt);
  if (!m)
    return std::nullopt;
  auto& f = index_.handle(m->ref);
  if (!can_restore(*f.header, m->length))
    return std::nullopt; // the index and the format disagree: no hit
  return ssd_match{f.name, f.header, m->length, m->needs_trim};
}

const ssd_file* ssd_index::file(const std::string& name) const {
  auto i = by_name_.find(name);
  if (i == by_name_.end())
    return nullptr;
  if (i->second.exact)
    return &*i->second.exact;
  return &index_.handle(i->second.ref);
}

const ssd_file* ssd_index::file(const storage_key& key) const {
  if (key.kind == key_kind::prefix) {
    auto ref = index_.find(key.ns, key.tokens);
    return ref ? &index_.handle(ref) : nullptr;
  }
  auto* f = file(file_name(key));
  // The name is a hash of the key: the header decides.
  return f && f->header->key().same_key(key) ? f : nullptr;
}

token_seq ssd_index::key(const std::string& name) const {
  auto i = by_name_.find(name);
  KVTIER_ASSERT(i != by_name_.end());
  return i->second.exact ? i->second.exact->header->tokens
                         : index_.key(i->second.ref);
}

bool ssd_index::contains(std::string_view ns,
                         std::span<const token> tokens) const {
  return static_cast<bool>(index_.find(ns, tokens));
}

bool ssd_index::contains(const storage_key& key) const {
  if (key.kind == key_kind::prefix)
    return contains(key.ns, key.tokens);
  return file(key) != nullptr;
}

void ssd_index::touch(const std::string& name) {
  auto i = by_name_.find(name);
  if (i == by_name_.end())
    return;
  rank_.touch(i->second.rid);
  if (!i->second.exact)
    index_.touch(i->second.ref);
}

void ssd_index::make_coldest(const std::string& name) {
  auto i = by_name_.find(name);
  if (i != by_name_.end())
    rank_.make_coldest(i->second.rid);
}

template <class F>
void ssd_index::in_order(F&& f) const {
  rank_.first([&](entry_ranking::id id) {
    f(by_id_[id]->first, by_id_[id]->second);
    return false;
  });
}

std::vector<std::string>
ssd_index::superseded_by(const std::string& name) const {
  std::vector<std::string> out;
  auto i = by_name_.find(name);
  if (i == by_name_.end() || i->second.exact)
    return out;
  auto ref = i->second.ref;
  auto floor = index_.floor(ref);
  if (floor >= index_.length(ref))
    return out; // untrimmable
  for (auto a : index_.ancestors(ref)) {
    if (index_.length(a) < floor)
      break; // nearest first: the rest are shorter still
    out.push_back(index_.handle(a).name);
  }
  return out;
}

std::vector<std::string> ssd_index::over_cap(uint64_t cap,
                                             const std::string& keep) const {
  return over_cap(cap, keep, {});
}

std::vector<std::string>
ssd_index::over_cap(uint64_t cap, const std::string& keep,
                    const std::function<bool(const std::string&)>& held) const {
  std::vector<std::string> out;
  uint64_t bytes = bytes_;
  if (bytes <= cap)
    return out;
  rank_.first([&](entry_ranking::id id) {
    auto& [name, s] = *by_id_[id];
    if (name == keep || (held && held(name)))
      return false;
    bytes -= s.exact ? s.exact->bytes : index_.handle(s.ref).bytes;
    out.push_back(name);
    return bytes <= cap; // enough: the walk ends
  });
  return out;
}

std::optional<std::string>
ssd_index::victim(uint64_t cap, const std::string& keep,
                  const std::function<bool(const std::string&)>& held) const {
  if (bytes_ <= cap)
    return std::nullopt;
  auto id = rank_.first([&](entry_ranking::id id) {
    auto& name = by_id_[id]->first;
    return name != keep && !(held && held(name));
  });
  if (id == entry_ranking::none)
    return std::nullopt;
  return by_id_[id]->first;
}

std::vector<const ssd_file*>
ssd_index::prefix_files(std::string_view ns,
                        std::span<const token> tokens) const {
  std::vector<const ssd_file*> out;
  for (auto ref : index_.prefixes(ns, tokens))
    out.push_back(&index_.handle(ref));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<saved_prefix> ssd_index::saved() const {
  std::vector<saved_prefix> out;
  out.reserve(by_name_.size());
  in_order([&](const std::string&, const slot& s) {
    if (!s.exact) // a prefix file: its key is the index's
      out.push_back({index_.ns(s.ref), index_.key(s.ref)});
  });
  return out;
}

std::vector<const ssd_file*> ssd_index::checkpoints() const {
  std::vector<const ssd_file*> out;
  in_order([&](const std::string&, const slot& s) {
    if (s.exact && s.exact->header->kind == key_kind::checkpoint)
      out.push_back(&*s.exact);
  });
  return out;
}

uint64_t ssd_index::longest() const {
  uint64_t n = 0;
  for (auto& [name, s] : by_name_)
    if (!s.exact)
      n = std::max<uint64_t>(n, index_.length(s.ref));
  return n;
}

} // namespace kvtier::tiers::ssd
