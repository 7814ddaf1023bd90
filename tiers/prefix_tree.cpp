#include "tiers/prefix_tree.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace kvtier::tiers {

namespace {

constexpr uint32_t no_floor = std::numeric_limits<uint32_t>::max();

/// Length of the common prefix of a[0, n) and b[0, n): memcmp in blocks,
/// then a scan of the block that differs.
size_t lcp(const token* a, const token* b, size_t n) {
  constexpr size_t block = 64;
  size_t i = 0;
  while (i + block <= n
         && std::memcmp(a + i, b + i, block * sizeof(token)) == 0)
    i += block;
  while (i < n && a[i] == b[i])
    ++i;
  return i;
}

} // namespace

/// A tree node: the edge into it (`run`), its children by first token, an
/// optional entry, and aggregates over the trimmable entries strictly below.
struct prefix_tree::node {
  node* parent = nullptr;
  std::unique_ptr<token[]> run;
  uint32_t run_len = 0;
  /// Tokens from the root to the end of this node's edge.
  uint32_t depth = 0;
  /// Sorted by first token; the tree owns the children.
  std::vector<std::pair<token, node*>> children;
  uint64_t value = 0;
  uint64_t stamp = 0;
  uint32_t floor = 0;
  bool has_entry = false;
  /// Least floor among trimmable entries strictly below, and how many share it.
  uint32_t below_min = no_floor;
  uint32_t below_count = 0;
  /// The trimmable entry strictly below with the highest stamp.
  node* below_best = nullptr;

  bool trimmable() const noexcept {
    return has_entry && floor < depth;
  }

  /// Least floor of trimmable entries here or below.
  uint32_t total_min() const noexcept {
    return trimmable() ? std::min(floor, below_min) : below_min;
  }

  /// The highest-stamped trimmable entry here or below.
  node* total_best() noexcept {
    if (trimmable() && (!below_best || stamp > below_best->stamp))
      return this;
    return below_best;
  }

  auto child_at(token t) {
    return std::lower_bound(
      children.begin(), children.end(), t,
      [](const std::pair<token, node*>& c, token v) { return c.first < v; });
  }

  node* child(token t) {
    auto it = child_at(t);
    return it != children.end() && it->first == t ? it->second : nullptr;
  }

  /// Recomputes the below-aggregates from the children.
  void recompute() noexcept {
    below_min = no_floor;
    below_count = 0;
    below_best = nullptr;
    auto add = [this](uint32_t m, uint32_t k) {
      if (m < below_min) {
        below_min = m;
        below_count = k;
      } else if (m == below_min && m != no_floor) {
        below_count += k;
      }
    };
    for (auto& [t, c] : children) {
      if (c->trimmable())
        add(c->floor, 1);
      add(c->below_min, c->below_count);
      auto b = c->total_best();
      if (b && (!below_best || b->stamp > below_best->stamp))
        below_best = b;
    }
  }
};

struct prefix_tree::root_node : prefix_tree::node {
  std::string ns;
};

namespace {

using node = prefix_tree::node;

node* as_node(void* p) {
  return static_cast<node*>(p);
}

std::unique_ptr<token[]> copy_run(const token* src, size_t n) {
  auto out = std::make_unique<token[]>(n);
  std::copy(src, src + n, out.get());
  return out;
}

/// Walks `pr` down from `root` as far as it matches: the number of tokens
/// matched and the node whose edge the walk ended in (or at).
std::pair<node*, size_t> descend(node* root, std::span<const token> pr) {
  node* y = root;
  size_t m = 0;
  while (m < pr.size()) {
    auto c = y->child(pr[m]);
    if (!c)
      break;
    auto l = lcp(c->run.get(), pr.data() + m,
                 std::min<size_t>(c->run_len, pr.size() - m));
    m += l;
    y = c;
    if (l < c->run_len)
      break;
  }
  return {y, m};
}

/// The highest-stamped trimmable entry at or below `y` with floor <= k
/// (`y` itself only when `with_own`), by branch and bound over aggregates.
node* pick(node* y, bool with_own, uint32_t k) {
  node* best = nullptr;
  auto offer = [&best](node* c) {
    if (!best || c->stamp > best->stamp)
      best = c;
  };
  if (with_own && y->trimmable() && y->floor <= k)
    offer(y);
  std::vector<node*> todo{y};
  while (!todo.empty()) {
    auto n = todo.back();
    todo.pop_back();
    if (n->below_min > k)
      continue;
    auto b = n->below_best;
    if (best && b->stamp <= best->stamp)
      continue;
    if (b->floor <= k) {
      offer(b);
      continue;
    }
    // The most recent entry below cannot trim to k: look deeper.
    for (auto& [t, c] : n->children) {
      if (c->total_min() > k)
        continue;
      if (c->trimmable() && c->floor <= k)
        offer(c);
      todo.push_back(c);
    }
  }
  return best;
}

} // namespace

prefix_tree::prefix_tree() = default;

prefix_tree::~prefix_tree() {
  clear();
}

prefix_tree::prefix_tree(prefix_tree&& other) noexcept
  : roots_(std::move(other.roots_))
  , entries_(std::exchange(other.entries_, 0))
  , nodes_(std::exchange(other.nodes_, 0))
  , tokens_(std::exchange(other.tokens_, 0))
  , clock_(other.clock_) {}

prefix_tree& prefix_tree::operator=(prefix_tree&& other) noexcept {
  if (this != &other) {
    clear();
    roots_ = std::move(other.roots_);
    entries_ = std::exchange(other.entries_, 0);
    nodes_ = std::exchange(other.nodes_, 0);
    tokens_ = std::exchange(other.tokens_, 0);
    clock_ = other.clock_;
  }
  return *this;
}

void prefix_tree::clear() {
  std::vector<node*> todo;
  for (auto& [ns, r] : roots_)
    for (auto& [t, c] : r->children)
      todo.push_back(c);
  while (!todo.empty()) {
    auto n = todo.back();
    todo.pop_back();
    for (auto& [t, c] : n->children)
      todo.push_back(c);
    delete n;
  }
  roots_.clear();
  entries_ = 0;
  nodes_ = 0;
  tokens_ = 0;
}

node* prefix_tree::split(node* c, uint32_t at) {
  KVTIER_ASSERT(at > 0 && at < c->run_len);
  auto x = new node;
  x->parent = c->parent;
  x->run = copy_run(c->run.get(), at);
  x->run_len = at;
  x->depth = c->depth - c->run_len + at;
  c->run = copy_run(c->run.get() + at, c->run_len - at);
  c->run_len -= at;
  c->parent = x;
  x->children.emplace_back(c->run[0], c);
  x->below_min = c->total_min();
  x->below_count = (c->trimmable() && c->floor == x->below_min ? 1 : 0)
                   + (c->below_min == x->below_min ? c->below_count : 0);
  x->below_best = c->total_best();
  x->parent->child_at(x->run[0])->second = x;
  ++nodes_;
  return x;
}

void prefix_tree::add_up(node* e) {
  auto f = e->floor;
  for (auto a = e->parent; a; a = a->parent) {
    if (f < a->below_min) {
      a->below_min = f;
      a->below_count = 1;
    } else if (f == a->below_min) {
      ++a->below_count;
    }
    a->below_best = e; // e carries the highest stamp
  }
}

void prefix_tree::remove_up(node* e, uint32_t f) {
  for (auto a = e->parent; a; a = a->parent) {
    bool hit_min = f == a->below_min;
    bool hit_best = a->below_best == e;
    if (!hit_min && !hit_best)
      break; // every ancestor above is unaffected too
    if (hit_min && !hit_best && a->below_count > 1)
      --a->below_count;
    else
      a->recompute();
  }
}

node* prefix_tree::make_path(std::string_view ns, std::span<const token> key) {
  auto it = roots_.find(ns);
  if (it == roots_.end()) {
    auto r = std::make_unique<root_node>();
    r->ns = std::string{ns};
    it = roots_.emplace(r->ns, std::move(r)).first;
    ++nodes_;
  }
  node* n = it->second.get();
  size_t i = 0;
  while (i < key.size()) {
    auto c = n->child(key[i]);
    if (!c) { // the rest of the key becomes one new leaf
      auto leaf = new node;
      leaf->parent = n;
      leaf->run = copy_run(key.data() + i, key.size() - i);
      leaf->run_len = static_cast<uint32_t>(key.size() - i);
      leaf->depth = static_cast<uint32_t>(key.size());
      n->children.emplace(n->child_at(key[i]), key[i], leaf);
      ++nodes_;
      tokens_ += leaf->run_len;
      return leaf;
    }
    auto l = lcp(c->run.get(), key.data() + i,
                 std::min<size_t>(c->run_len, key.size() - i));
    n = l < c->run_len ? split(c, static_cast<uint32_t>(l)) : c;
    i += l;
  }
  return n;
}

prefix_tree::insert_result prefix_tree::insert(std::string_view ns,
                                               std::span<const token> key,
                                               uint64_t value, uint64_t floor) {
  KVTIER_ASSERT(!key.empty() && key.size() < no_floor);
  auto n = make_path(ns, key);
  insert_result out{entry_ref{n}, std::nullopt};
  if (n->has_entry) {
    out.replaced = n->value;
    bool was = n->trimmable();
    n->has_entry = false;
    if (was)
      remove_up(n, n->floor);
  } else {
    ++entries_;
  }
  n->has_entry = true;
  n->value = value;
  n->floor = static_cast<uint32_t>(std::min<uint64_t>(floor, key.size()));
  n->stamp = ++clock_;
  if (n->trimmable())
    add_up(n);
  return out;
}

void prefix_tree::unlink(node* e) {
  auto p = e->parent;
  p->children.erase(p->child_at(e->run[0]));
  tokens_ -= e->run_len;
  --nodes_;
  delete e;
  if (!p->parent) { // a root: drop its namespace once empty
    if (p->children.empty()) {
      roots_.erase(static_cast<root_node*>(p)->ns);
      --nodes_;
    }
    return;
  }
  if (!p->has_entry && p->children.size() == 1)
    merge_into_child(p);
}

void prefix_tree::merge_into_child(node* n) {
  auto c = n->children.front().second;
  auto run = std::make_unique<token[]>(size_t{n->run_len} + c->run_len);
  std::copy(n->run.get(), n->run.get() + n->run_len, run.get());
  std::copy(c->run.get(), c->run.get() + c->run_len, run.get() + n->run_len);
  c->run = std::move(run);
  c->run_len += n->run_len;
  c->parent = n->parent;
  n->parent->child_at(c->run[0])->second = c;
  --nodes_;
  delete n; // had no entry: nothing refers to it
}

uint64_t prefix_tree::erase(entry_ref ref) {
  auto e = as_node(ref.node_);
  KVTIER_ASSERT(e && e->has_entry);
  auto v = e->value;
  bool was = e->trimmable();
  e->has_entry = false;
  --entries_;
  if (was)
    remove_up(e, e->floor);
  if (e->children.empty())
    unlink(e);
  else if (e->children.size() == 1)
    merge_into_child(e);
  return v;
}

node* prefix_tree::walk_to(std::string_view ns,
                           std::span<const token> key) const {
  auto it = roots_.find(ns);
  if (it == roots_.end())
    return nullptr;
  node* n = it->second.get();
  size_t i = 0;
  while (i < key.size()) {
    auto c = n->child(key[i]);
    if (!c || c->run_len > key.size() - i
        || lcp(c->run.get(), key.data() + i, c->run_len) != c->run_len)
      return nullptr;
    n = c;
    i += c->run_len;
  }
  return n;
}

entry_ref prefix_tree::find(std::string_view ns,
                            std::span<const token> key) const {
  auto n = walk_to(ns, key);
  return n && n->has_entry ? entry_ref{n} : entry_ref{};
}

std::optional<usable_match>
prefix_tree::longest_usable(std::string_view ns,
                            std::span<const token> pr) const {
  if (pr.size() < 2)
    return std::nullopt;
  auto it = roots_.find(ns);
  if (it == roots_.end())
    return std::nullopt;
  auto [y, m] = descend(it->second.get(), pr);
  auto q = static_cast<uint32_t>(std::min(m, pr.size() - 1));
  if (q == 0)
    return std::nullopt;
  while (y->parent->depth >= q)
    y = y->parent;
  // At depth q every entry below is usable if it trims to q; above it,
  // only entries that branch off the path at a node can be.
  if (q < y->depth) {
    if (y->total_min() <= q)
      return usable_match{entry_ref{pick(y, true, q)}, q, true};
  } else if (y->has_entry) {
    return usable_match{entry_ref{y}, q, false};
  } else if (y->below_min <= q) {
    return usable_match{entry_ref{pick(y, false, q)}, q, true};
  }
  for (auto z = y->parent; z->parent; z = z->parent) {
    if (z->has_entry)
      return usable_match{entry_ref{z}, z->depth, false};
    // Entries below z on the prompt's path have floors above their own
    // usable lengths (else the deeper levels would have answered), so
    // below_min <= depth means an entry branching off right here.
    if (z->below_min <= z->depth)
      return usable_match{entry_ref{pick(z, false, z->depth)}, z->depth, true};
  }
  return std::nullopt;
}

void prefix_tree::touch(entry_ref ref) {
  auto e = as_node(ref.node_);
  KVTIER_ASSERT(e && e->has_entry);
  e->stamp = ++clock_;
  if (e->trimmable())
    for (auto a = e->parent; a; a = a->parent)
      a->below_best = e;
}

std::vector<entry_ref> prefix_tree::ancestors(entry_ref ref) const {
  std::vector<entry_ref> out;
  for (auto a = as_node(ref.node_)->parent; a; a = a->parent)
    if (a->has_entry)
      out.push_back(entry_ref{a});
  return out;
}

std::vector<entry_ref> prefix_tree::prefixes(std::string_view ns,
                                             std::span<const token> key) const {
  std::vector<entry_ref> out;
  auto it = roots_.find(ns);
  if (it == roots_.end())
    return out;
  node* n = it->second.get();
  size_t i = 0;
  while (i < key.size()) { // whole edges only: an entry ends at a node
    auto c = n->child(key[i]);
    if (!c || c->run_len > key.size() - i
        || lcp(c->run.get(), key.data() + i, c->run_len) != c->run_len)
      break;
    n = c;
    i += c->run_len;
    if (n->has_entry)
      out.push_back(entry_ref{n});
  }
  return out;
}

std::vector<entry_ref>
prefix_tree::descendants(std::string_view ns,
                         std::span<const token> key) const {
  std::vector<entry_ref> out;
  auto it = roots_.find(ns);
  if (it == roots_.end())
    return out;
  node* n = it->second.get();
  size_t i = 0;
  while (i < key.size()) { // the point at depth len(key), maybe mid-edge
    auto c = n->child(key[i]);
    auto want = std::min<size_t>(c ? c->run_len : 0, key.size() - i);
    if (!c || lcp(c->run.get(), key.data() + i, want) != want)
      return out;
    n = c;
    i += want;
  }
  std::vector<node*> todo;
  if (n->depth > key.size())
    todo.push_back(n);
  else
    for (auto& [t, c] : n->children)
      todo.push_back(c);
  while (!todo.empty()) {
    auto d = todo.back();
    todo.pop_back();
    if (d->has_entry)
      out.push_back(entry_ref{d});
    for (auto& [t, c] : d->children)
      todo.push_back(c);
  }
  return out;
}

token_seq prefix_tree::key(entry_ref ref) const {
  auto e = as_node(ref.node_);
  token_seq out(e->depth);
  for (auto n = e; n->parent; n = n->parent)
    std::copy(n->run.get(), n->run.get() + n->run_len,
              out.begin() + (n->depth - n->run_len));
  return out;
}

const std::string& prefix_tree::ns(entry_ref ref) const {
  auto n = as_node(ref.node_);
  while (n->parent)
    n = n->parent;
  return static_cast<root_node*>(n)->ns;
}

uint64_t prefix_tree::length(entry_ref ref) const {
  return as_node(ref.node_)->depth;
}

uint64_t prefix_tree::floor(entry_ref ref) const {
  return as_node(ref.node_)->floor;
}

uint64_t prefix_tree::stamp(entry_ref ref) const {
  return as_node(ref.node_)->stamp;
}

uint64_t prefix_tree::value(entry_ref ref) const {
  return as_node(ref.node_)->value;
}

uint64_t prefix_tree::memory_bytes() const {
  uint64_t n = 0;
  std::vector<const node*> todo;
  for (auto& [ns, r] : roots_) {
    // A std::map node: three pointers, a colour word, key and value.
    n += sizeof(root_node) + 4 * sizeof(void*) + sizeof(std::string)
         + sizeof(void*) + r->ns.capacity();
    todo.push_back(r.get());
  }
  while (!todo.empty()) {
    auto d = todo.back();
    todo.pop_back();
    if (d->parent)
      n += sizeof(node) + d->run_len * sizeof(token);
    n += d->children.capacity() * sizeof(d->children[0]);
    for (auto& [t, c] : d->children)
      todo.push_back(c);
  }
  return n;
}

} // namespace kvtier::tiers
