#include "tiers/checkpoints.hpp"

#include <algorithm>

namespace kvtier::tiers {

bool checkpoint_store::resumes(std::span<const token> tokens,
                               std::span<const token> prompt) noexcept {
  return tokens.size() >= prompt.size()
         && std::equal(prompt.begin(), prompt.end(), tokens.begin());
}

const token_seq* checkpoint_store::newest_tokens(const record& r) {
  if (r.state)
    return &r.state->tokens;
  return r.files.empty() ? nullptr : &r.files.back().tokens;
}

bool checkpoint_store::save(const checkpoint_id& id, uint32_t attempt,
                            entry e) {
  auto i = held_.find(id);
  if (i != held_.end()) {
    auto& r = i->second;
    if (auto* newest = newest_tokens(r)) {
      if (attempt < r.owner)
        return false; // a stale attempt: the identity has moved on
      if (attempt == r.owner && resumes(*newest, e.tokens))
        return false; // not newer: the held one already covers it
    }
  }
  auto& r = held_[id];
  r.state = std::move(e);
  r.seq = {true, next_seq_++};
  r.owner = attempt;
  r.durable = false;
  return true;
}

std::optional<checkpoint_store::found>
checkpoint_store::find(const checkpoint_id& id) const {
  auto i = held_.find(id);
  if (i == held_.end())
    return std::nullopt;
  auto& r = i->second;
  if (r.state)
    return found{r.state, std::nullopt, r.state->tokens, r.owner};
  if (r.files.empty())
    return std::nullopt;
  auto& f = r.files.back();
  return found{std::nullopt,
               storage_key::checkpoint(id.request, f.attempt, id.ns, f.tokens),
               f.tokens, r.owner};
}

void checkpoint_store::adopt(const checkpoint_id& id, uint32_t attempt,
                             const std::optional<entry>& restored) {
  auto i = held_.find(id);
  if (i == held_.end() || attempt <= i->second.owner)
    return;
  auto& r = i->second;
  r.owner = attempt;
  r.durable = false; // written again under the new owner
  if (!r.state && restored && !r.files.empty()
      && restored->tokens == r.files.back().tokens) {
    r.state = restored;
    r.seq = r.files.back().seq;
  }
}

std::vector<storage_key> checkpoint_store::add_file(const checkpoint_id& id,
                                                    file_info f) {
  auto& r = held_[id];
  r.on_ssd = true;
  if (r.state && f.seq == r.seq && f.attempt == r.owner)
    r.durable = true;
  // One entry per file: a newer write of the same tokens replaced it (a
  // file found late, older than the one known, was replaced by it).
  for (auto& g : r.files)
    if (g.tokens == f.tokens && g.seq > f.seq)
      return {};
  std::erase_if(r.files, [&](auto& g) { return g.tokens == f.tokens; });
  auto at = std::find_if(r.files.begin(), r.files.end(),
                         [&](auto& g) { return g.seq > f.seq; });
  r.files.insert(at, std::move(f));
  std::vector<storage_key> old;
  while (r.files.size() > 1) {
    auto& g = r.files.front();
    old.push_back(
      storage_key::checkpoint(id.request, g.attempt, id.ns, g.tokens));
    r.files.erase(r.files.begin());
  }
  return old;
}

std::vector<storage_key>
checkpoint_store::found_file(const checkpoint_file& file) {
  auto& f = file.key;
  checkpoint_id id{f.request, f.ns};
  auto& r = held_[id];
  age seq{false, file.write_id};
  auto old = add_file(id, {f.tokens, f.attempt, seq});
  // The newest file's writer owns it (a state held has its owner).
  if (!r.state && !r.files.empty() && r.files.back().seq == seq)
    r.owner = f.attempt;
  return old;
}

uint64_t checkpoint_store::ordered(const checkpoint_id& id) {
  auto& r = held_[id];
  r.on_ssd = true;
  auto n = next_order_++;
  file_info f{r.state ? r.state->tokens : token_seq{}, r.owner, r.seq};
  r.writing.push_back({n, std::move(f)});
  orders_.emplace(n, id);
  return n;
}

std::vector<storage_key> checkpoint_store::settled(uint64_t order,
                                                   bool durable) {
  auto o = orders_.find(order);
  if (o == orders_.end())
    return {};
  auto id = o->second;
  orders_.erase(o);
  auto i = held_.find(id);
  if (i == held_.end())
    return {};
  auto& w = i->second.writing;
  auto at = std::find_if(w.begin(), w.end(),
                         [&](const auto& x) { return x.id == order; });
  if (at == w.end())
    return {};
  auto f = std::move(at->file);
  w.erase(at);
  return durable ? add_file(id, std::move(f)) : std::vector<storage_key>{};
}

bool checkpoint_store::file_removed(const checkpoint_id& id,
                                    const token_seq& tokens) {
  auto i = held_.find(id);
  if (i == held_.end())
    return false;
  auto& r = i->second;
  std::erase_if(r.files, [&](auto& f) { return f.tokens == tokens; });
  bool cleared = r.state && r.durable && r.state->tokens == tokens;
  if (cleared)
    r.durable = false;
  if (!r.state && r.files.empty() && r.writing.empty())
    held_.erase(i);
  return cleared;
}

void checkpoint_store::erase(std::map<checkpoint_id, record>::iterator i) {
  for (auto& w : i->second.writing)
    orders_.erase(w.id);
  held_.erase(i);
}

std::vector<checkpoint_store::removed>
checkpoint_store::remove(uint64_t request, uint32_t attempt) {
  std::vector<removed> out;
  auto i = held_.lower_bound(checkpoint_id{request, {}});
  while (i != held_.end() && i->first.request == request) {
    auto next = std::next(i);
    if (i->second.owner == attempt) {
      out.push_back({i->first, i->second.on_ssd});
      erase(i);
    }
    i = next;
  }
  return out;
}

uint32_t checkpoint_store::count(uint64_t request, uint32_t attempt) const {
  uint32_t n = 0;
  for (auto i = held_.lower_bound(checkpoint_id{request, {}});
       i != held_.end() && i->first.request == request; ++i)
    if (i->second.owner == attempt && newest_tokens(i->second))
      ++n;
  return n;
}

std::vector<checkpoint_store::pending> checkpoint_store::undurable() const {
  std::vector<pending> out;
  for (auto& [id, r] : held_)
    if (r.state && !r.durable)
      out.push_back({id, r.owner, *r.state});
  return out;
}

void checkpoint_store::clear_memory() {
  for (auto i = held_.begin(); i != held_.end();) {
    auto& r = i->second;
    r.state.reset();
    r.durable = false;
    if (r.files.empty() && r.writing.empty())
      erase(i++);
    else
      ++i;
  }
}

} // namespace kvtier::tiers
