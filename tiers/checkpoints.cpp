#include "tiers/checkpoints.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

namespace kvtier::tiers {

namespace {

constexpr std::string_view storage_prefix = "kvtier.checkpoint/";

} // namespace

bool checkpoint_store::save(const checkpoint_id& id, entry e) {
  auto& r = held_[id];
  if (r.state && e.size() <= r.tokens)
    return false;
  r.tokens = e.size();
  r.state = std::move(e);
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
    return found{r.state, std::nullopt};
  if (r.files.empty())
    return std::nullopt;
  return found{std::nullopt, checkpoint_file{storage_ns(id), r.files.back()}};
}

std::vector<checkpoint_file>
checkpoint_store::mark_durable(const checkpoint_id& id,
                               const token_seq& tokens) {
  auto& r = held_[id];
  if (r.state && r.state->tokens == tokens)
    r.durable = true;
  if (r.files.empty() || r.files.back().size() < tokens.size())
    r.files.push_back(tokens);
  else if (std::find(r.files.begin(), r.files.end(), tokens) == r.files.end())
    r.files.insert(r.files.begin(), tokens);
  std::vector<checkpoint_file> old;
  while (r.files.size() > 1) {
    old.push_back({storage_ns(id), std::move(r.files.front())});
    r.files.erase(r.files.begin());
  }
  return old;
}

void checkpoint_store::ordered(const checkpoint_id& id,
                               const token_seq& tokens) {
  held_[id].writing.push_back(tokens);
}

std::vector<checkpoint_file> checkpoint_store::settled(const checkpoint_id& id,
                                                       const token_seq& tokens,
                                                       bool durable) {
  auto i = held_.find(id);
  if (i == held_.end())
    return {};
  auto& w = i->second.writing;
  auto order = std::find(w.begin(), w.end(), tokens);
  if (order == w.end())
    return {};
  w.erase(order);
  return durable ? mark_durable(id, tokens) : std::vector<checkpoint_file>{};
}

bool checkpoint_store::file_removed(const checkpoint_id& id,
                                    const token_seq& tokens) {
  auto i = held_.find(id);
  if (i == held_.end())
    return false;
  auto& r = i->second;
  std::erase(r.files, tokens);
  bool cleared = r.state && r.durable && r.state->tokens == tokens;
  if (cleared)
    r.durable = false;
  if (!r.state && r.files.empty() && r.writing.empty())
    held_.erase(i);
  return cleared;
}

std::vector<checkpoint_file> checkpoint_store::remove(uint64_t request) {
  std::vector<checkpoint_file> out;
  auto i = held_.lower_bound(checkpoint_id{request, {}});
  while (i != held_.end() && i->first.request == request) {
    auto ns = storage_ns(i->first);
    auto& r = i->second;
    for (auto& f : r.files)
      out.push_back({ns, f});
    for (auto& t : r.writing)
      if (std::find(r.files.begin(), r.files.end(), t) == r.files.end())
        out.push_back({ns, t});
    i = held_.erase(i);
  }
  // One erase per key: a key ordered twice is one file.
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return std::tie(a.ns, a.tokens) < std::tie(b.ns, b.tokens);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](auto& a, auto& b) {
                          return a.ns == b.ns && a.tokens == b.tokens;
                        }),
            out.end());
  return out;
}

uint32_t checkpoint_store::count(uint64_t request) const {
  uint32_t n = 0;
  for (auto i = held_.lower_bound(checkpoint_id{request, {}});
       i != held_.end() && i->first.request == request; ++i)
    ++n;
  return n;
}

std::vector<std::pair<checkpoint_id, entry>>
checkpoint_store::undurable() const {
  std::vector<std::pair<checkpoint_id, entry>> out;
  for (auto& [id, r] : held_)
    if (r.state && !r.durable)
      out.emplace_back(id, *r.state);
  return out;
}

void checkpoint_store::clear_memory() {
  for (auto i = held_.begin(); i != held_.end();) {
    i->second.state.reset();
    auto& r = i->second;
    i = r.files.empty() && r.writing.empty() ? held_.erase(i) : std::next(i);
  }
}

std::string checkpoint_store::storage_ns(const checkpoint_id& id) {
  return std::string{storage_prefix} + std::to_string(id.request) + "/" + id.ns;
}

std::optional<checkpoint_id>
checkpoint_store::parse_storage_ns(std::string_view ns) {
  if (!ns.starts_with(storage_prefix))
    return std::nullopt;
  ns.remove_prefix(storage_prefix.size());
  auto slash = ns.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  checkpoint_id id;
  auto [end, err] = std::from_chars(ns.data(), ns.data() + slash, id.request);
  if (err != std::errc{} || end != ns.data() + slash)
    return std::nullopt;
  id.ns = std::string{ns.substr(slash + 1)};
  return id;
}

} // namespace kvtier::tiers
