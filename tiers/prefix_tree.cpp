#include "tiers/prefix_tree.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
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

using node = prefix_tree::node;

/// What a subtree holds of trimmable entries: the least floor, how many
/// share it, and the most recently stamped one.
struct summary {
  uint32_t min = no_floor;
  uint32_t count = 0;
  node* best = nullptr;
};

/// Summary of `c`'s subtree, `c` included (empty for no child).
summary of(const node* c) noexcept;

/// A node's children by the first token of their edge. Up to `max_sorted`
/// children sit in a sorted array (a binary search, as cheap as it gets at
/// small fan-out); past that they move to an open-addressing hash table
/// (linear probing, at most 70 % full, backward-shift erase), so adding or
/// removing a child never shifts more than `max_sorted` siblings however
/// wide the node is. A table also keeps a summary tree over its slots
/// (leaves: each slot's subtree summary; above them cells that combine 16
/// cells each), so a wide node answers what is left below it after an
/// erase in O(log fan-out) instead of a pass over its children. An insert
/// updates one cell per level without reading siblings (the newcomer is
/// the most recent); an erase recombines one group per level. 16 bytes in
/// a node either way.
class child_set {
public:
  using item = std::pair<token, node*>;

  /// Sorted up to this many children; a table above.
  static constexpr uint32_t max_sorted = 32;

  child_set() = default;
  child_set(const child_set&) = delete;
  child_set& operator=(const child_set&) = delete;
  ~child_set() {
    release();
  }

  uint32_t size() const noexcept {
    return count_;
  }
  bool empty() const noexcept {
    return count_ == 0;
  }
  /// Held in a table (with a summary tree).
  bool wide() const noexcept {
    return cap_ > max_sorted;
  }

  node* find(token t) const noexcept {
    if (!wide()) {
      auto it = lower(t);
      return it != data_ + count_ && it->first == t ? it->second : nullptr;
    }
    for (auto i = home(t);; i = (i + 1) & (cap_ - 1)) {
      auto& s = data_[i];
      if (!s.second)
        return nullptr;
      if (s.first == t)
        return s.second;
    }
  }

  /// The child under `t` becomes `n` (one must be there) whose subtree
  /// summary is the same (a split or merge of its edge).
  void replace(token t, node* n) noexcept {
    slot_of(t)->second = n;
  }

  /// Adds `n` under `t` (none there yet).
  void insert(token t, node* n) {
    if (!wide()) {
      if (count_ < max_sorted) {
        if (count_ == cap_)
          reshape(std::max<uint32_t>(1, 2 * cap_), false);
        auto it = lower(t);
        std::move_backward(it, data_ + count_, data_ + count_ + 1);
        *it = item{t, n};
        ++count_;
        return;
      }
      reshape(2 * max_sorted, true);
    } else if (10 * (count_ + 1) > 7 * cap_) {
      reshape(2 * cap_, true);
    }
    auto i = put(t, n);
    ++count_;
    // A new child holds nothing yet (a fresh leaf, before its entry is
    // added): its empty slot's cell already says so.
    if (auto sum = of(n); sum.min != no_floor || sum.best) {
      sums()[i] = sum;
      refresh_path(i);
    }
  }

  /// Removes the child under `t` (one must be there).
  void erase(token t) {
    if (!wide()) {
      auto it = lower(t);
      std::move(it + 1, data_ + count_, it);
      --count_;
      return;
    }
    auto mask = cap_ - 1;
    auto i = index_of(t);
    auto c = sums();
    // Backward shift: pull later members of the probe run into the hole
    // unless their home lies cyclically in (hole, them]. A group's sum
    // does not depend on where in it a cell sits, so only a move across
    // groups (and a leaving child that still held something, which the
    // tree never erases) needs its paths recombined.
    bool dirty = c[i].min != no_floor || c[i].best;
    uint32_t touched[64];
    uint32_t n_touched = 0;
    auto mark = [&](uint32_t k) {
      if (n_touched < 64)
        touched[n_touched++] = k;
      else
        dirty = true;
    };
    if (dirty)
      mark(i);
    for (auto j = (i + 1) & mask; data_[j].second; j = (j + 1) & mask) {
      auto h = home(data_[j].first);
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!stays) {
        data_[i] = data_[j];
        c[i] = c[j];
        if (i / fan_in != j / fan_in) {
          mark(i);
          mark(j);
        }
        i = j;
      }
    }
    data_[i] = item{0, nullptr};
    c[i] = summary{};
    --count_;
    if (count_ <= max_sorted / 2) {
      reshape(max_sorted, false);
    } else if (cap_ > 2 * max_sorted && 8 * count_ < cap_) {
      reshape(cap_ / 2, true);
    } else if (n_touched == 64) {
      rebuild();
    } else {
      for (uint32_t k = 0; k < n_touched; ++k)
        refresh_path(touched[k]);
    }
  }

  /// Calls f(token, node*) for every child, in no set order.
  template <class F>
  void for_each(F&& f) const {
    auto n = wide() ? cap_ : count_;
    for (uint32_t i = 0; i < n; ++i)
      if (data_[i].second)
        f(data_[i].first, data_[i].second);
  }

  /// Some child (the only one, when there is one).
  node* any() const noexcept {
    node* out = nullptr;
    for_each([&out](token, node* c) { out = c; });
    return out;
  }

  // Wide only: the summary tree.

  /// Over every child's subtree.
  const summary& total() const noexcept {
    return sums()[cells_for(cap_) - 1];
  }
  /// The child under `t` now also holds trimmable entry `e` (floor `f`),
  /// stamped above everything: no sibling needs reading.
  void added(token t, uint32_t f, node* e) noexcept;
  /// Trimmable entry `e` under `t` got the highest stamp.
  void touched(token t, node* e) noexcept;
  /// Trimmable entry `e` (floor `f`) left the subtree under `t`: its
  /// leaf anew, and up the path only the cells `e` counted in (a count
  /// less where others share the floor, a group recombined where `e` was
  /// the least floor alone or the most recent).
  void removed(token t, uint32_t f, const node* e) noexcept;

  /// Heap bytes held.
  uint64_t memory_bytes() const noexcept {
    return uint64_t{cap_} * sizeof(item)
           + (wide() ? cells_for(cap_) * sizeof(summary) : 0);
  }

private:
  uint32_t home(token t) const noexcept {
    // Fibonacci hashing: the top bits of t * 2^64 / phi.
    auto bits = static_cast<uint32_t>(std::countr_zero(cap_));
    return static_cast<uint32_t>((uint64_t{t} * 0x9E3779B97F4A7C15ull)
                                 >> (64 - bits));
  }

  item* lower(token t) const noexcept {
    return std::lower_bound(data_, data_ + count_, t,
                            [](const item& c, token v) { return c.first < v; });
  }

  uint32_t index_of(token t) const noexcept {
    auto i = home(t);
    while (data_[i].first != t || !data_[i].second)
      i = (i + 1) & (cap_ - 1);
    return i;
  }

  item* slot_of(token t) const noexcept {
    return wide() ? data_ + index_of(t) : lower(t);
  }

  /// Places (t, n) in the table (room guaranteed); its slot.
  uint32_t put(token t, node* n) noexcept {
    auto i = home(t);
    while (data_[i].second)
      i = (i + 1) & (cap_ - 1);
    data_[i] = item{t, n};
    return i;
  }

  /// The cells above slot `i`'s leaf.
  void refresh_path(uint32_t i) noexcept;
  /// Every leaf and cell.
  void rebuild() noexcept;
  template <class F>
  void up_from(uint32_t i, F&& f) noexcept;

  /// Moves every child into a new array of `cap` items: a table when
  /// `table`, else sorted.
  void reshape(uint32_t cap, bool table) {
    auto old = data_;
    auto old_n = wide() ? cap_ : count_;
    data_ = allocate(cap, table);
    cap_ = cap;
    if (table) {
      for (uint32_t i = 0; i < old_n; ++i)
        if (old[i].second)
          put(old[i].first, old[i].second);
    } else {
      uint32_t k = 0;
      for (uint32_t i = 0; i < old_n; ++i)
        if (old[i].second)
          data_[k++] = old[i];
      std::sort(data_, data_ + k,
                [](const item& a, const item& b) { return a.first < b.first; });
    }
    ::operator delete(old);
    if (table)
      rebuild();
  }

  /// `cap` empty items, followed by a table's summary cells, in one block
  /// (the items and cells are trivially destructible).
  static item* allocate(uint32_t cap, bool table) {
    static_assert(sizeof(item) % alignof(summary) == 0);
    size_t n = size_t{cap} * sizeof(item)
               + (table ? cells_for(cap) * sizeof(summary) : 0);
    auto raw = static_cast<item*>(::operator new(n));
    std::uninitialized_value_construct_n(raw, cap);
    if (table)
      std::uninitialized_value_construct_n(
        reinterpret_cast<summary*>(raw + cap), cells_for(cap));
    return raw;
  }

  /// Summary cells of a table: level by level, each cell combining
  /// `fan_in` cells of the level below (16 cells are 4 cache lines, so a
  /// path from a leaf to the root touches few lines); level 0 is a leaf
  /// per slot, the last cell the whole.
  static constexpr size_t fan_in = 16;
  static size_t cells_for(uint32_t cap) noexcept {
    size_t n = 0;
    for (size_t level = cap;; level = (level + fan_in - 1) / fan_in) {
      n += level;
      if (level == 1)
        return n;
    }
  }
  summary* sums() const noexcept {
    return reinterpret_cast<summary*>(data_ + cap_);
  }

  void release() noexcept {
    ::operator delete(data_);
    data_ = nullptr;
    count_ = cap_ = 0;
  }

  item* data_ = nullptr;
  uint32_t count_ = 0;
  uint32_t cap_ = 0;
};

} // namespace

/// A tree node: the edge into it (`run`), its children by first token, an
/// optional entry, and aggregates over the trimmable entries strictly below.
struct prefix_tree::node {
  node* parent = nullptr;
  std::unique_ptr<token[]> run;
  uint32_t run_len = 0;
  /// Tokens from the root to the end of this node's edge.
  uint32_t depth = 0;
  /// By first token; the tree owns the children.
  child_set children;
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

  node* child(token t) const noexcept {
    return children.find(t);
  }

  /// Recomputes the below-aggregates from the children (a wide node: from
  /// its summary tree, kept current by the callers).
  void recompute() noexcept {
    if (children.wide()) {
      auto& s = children.total();
      below_min = s.min;
      below_count = s.count;
      below_best = s.best;
      return;
    }
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
    children.for_each([&](token, node* c) {
      if (c->trimmable())
        add(c->floor, 1);
      add(c->below_min, c->below_count);
      auto b = c->total_best();
      if (b && (!below_best || b->stamp > below_best->stamp))
        below_best = b;
    });
  }
};

struct prefix_tree::root_node : prefix_tree::node {
  std::string ns;
};

namespace {

summary of(const node* c) noexcept {
  if (!c)
    return {};
  auto n = const_cast<node*>(c);
  summary s{n->total_min(), 0, n->total_best()};
  if (s.min != no_floor)
    s.count = (n->trimmable() && n->floor == s.min ? 1 : 0)
              + (n->below_min == s.min ? n->below_count : 0);
  return s;
}

summary combine(const summary& a, const summary& b) noexcept {
  summary s{std::min(a.min, b.min), 0, a.best};
  if (s.min != no_floor)
    s.count = (a.min == s.min ? a.count : 0) + (b.min == s.min ? b.count : 0);
  if (b.best && (!s.best || b.best->stamp > s.best->stamp))
    s.best = b.best;
  return s;
}

} // namespace

void child_set::refresh_path(uint32_t i) noexcept {
  auto c = sums();
  size_t off = 0, k = i;
  for (size_t level = cap_; level > 1;) {
    auto up = (level + fan_in - 1) / fan_in;
    auto g = k / fan_in * fan_in;
    auto end = std::min(g + fan_in, level);
    auto sum = c[off + g];
    for (auto j = g + 1; j < end; ++j)
      sum = combine(sum, c[off + j]);
    c[off + level + k / fan_in] = sum;
    off += level;
    level = up;
    k /= fan_in;
  }
}

void child_set::rebuild() noexcept {
  auto c = sums();
  for (uint32_t i = 0; i < cap_; ++i)
    c[i] = of(data_[i].second);
  size_t off = 0;
  for (size_t level = cap_; level > 1;) {
    auto up = (level + fan_in - 1) / fan_in;
    for (size_t k = 0; k < up; ++k) {
      auto end = std::min((k + 1) * fan_in, level);
      auto sum = c[off + k * fan_in];
      for (auto j = k * fan_in + 1; j < end; ++j)
        sum = combine(sum, c[off + j]);
      c[off + level + k] = sum;
    }
    off += level;
    level = up;
  }
}

/// Calls f(cell) for slot `i`'s leaf and every cell above it.
template <class F>
void child_set::up_from(uint32_t i, F&& f) noexcept {
  auto c = sums();
  size_t off = 0, k = i;
  for (size_t level = cap_;; level = (level + fan_in - 1) / fan_in) {
    f(c[off + k]);
    if (level == 1)
      return;
    off += level;
    k /= fan_in;
  }
}

void child_set::added(token t, uint32_t f, node* e) noexcept {
  up_from(index_of(t), [f, e](summary& s) {
    if (f < s.min) {
      s.min = f;
      s.count = 1;
    } else if (f == s.min) {
      ++s.count;
    }
    s.best = e;
  });
}

void child_set::removed(token t, uint32_t f, const node* e) noexcept {
  auto c = sums();
  auto k = index_of(t);
  c[k] = of(data_[k].second);
  size_t off = 0;
  for (size_t level = cap_; level > 1;) {
    auto up = (level + fan_in - 1) / fan_in;
    auto& cell = c[off + level + k / fan_in];
    bool hit_min = cell.min == f, hit_best = cell.best == e;
    if (!hit_min && !hit_best)
      return; // no cell above counted e either
    if (hit_min && !hit_best && cell.count > 1) {
      --cell.count;
    } else {
      auto g = k / fan_in * fan_in;
      auto end = std::min(g + fan_in, level);
      auto sum = c[off + g];
      for (auto j = g + 1; j < end; ++j)
        sum = combine(sum, c[off + j]);
      cell = sum;
    }
    off += level;
    level = up;
    k /= fan_in;
  }
}

void child_set::touched(token t, node* e) noexcept {
  up_from(index_of(t), [e](summary& s) { s.best = e; });
}

namespace {

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
    n->children.for_each([&](token, node* c) {
      if (c->total_min() > k)
        return;
      if (c->trimmable() && c->floor <= k)
        offer(c);
      todo.push_back(c);
    });
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
  auto push = [&todo](token, node* c) { todo.push_back(c); };
  for (auto& [ns, r] : roots_)
    r->children.for_each(push);
  while (!todo.empty()) {
    auto n = todo.back();
    todo.pop_back();
    n->children.for_each(push);
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
  x->children.insert(c->run[0], c);
  x->below_min = c->total_min();
  x->below_count = (c->trimmable() && c->floor == x->below_min ? 1 : 0)
                   + (c->below_min == x->below_min ? c->below_count : 0);
  x->below_best = c->total_best();
  x->parent->children.replace(x->run[0], x);
  ++nodes_;
  return x;
}

void prefix_tree::add_up(node* e) {
  auto f = e->floor;
  for (node *a = e->parent, *c = e; a; c = a, a = a->parent) {
    if (a->children.wide())
      a->children.added(c->run[0], f, e);
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
  for (node *a = e->parent, *c = e; a; c = a, a = a->parent) {
    bool hit_min = f == a->below_min;
    bool hit_best = a->below_best == e;
    if (a->children.wide()) // c's subtree lost e: its leaf and path
      a->children.removed(c->run[0], f, e);
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
      n->children.insert(key[i], leaf);
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
                                               uint64_t value, uint64_t floor,
                                               uint64_t at) {
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
  n->stamp = next_stamp(at);
  if (n->trimmable())
    add_up(n);
  return out;
}

void prefix_tree::unlink(node* e) {
  auto p = e->parent;
  p->children.erase(e->run[0]);
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
  auto c = n->children.any();
  auto run = std::make_unique<token[]>(size_t{n->run_len} + c->run_len);
  std::copy(n->run.get(), n->run.get() + n->run_len, run.get());
  std::copy(c->run.get(), c->run.get() + c->run_len, run.get() + n->run_len);
  c->run = std::move(run);
  c->run_len += n->run_len;
  c->parent = n->parent;
  n->parent->children.replace(c->run[0], c);
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

uint64_t prefix_tree::next_stamp(uint64_t at) noexcept {
  clock_ = std::max(clock_ + 1, at);
  return clock_;
}

void prefix_tree::touch(entry_ref ref, uint64_t at) {
  auto e = as_node(ref.node_);
  KVTIER_ASSERT(e && e->has_entry);
  e->stamp = next_stamp(at);
  if (e->trimmable())
    for (node *a = e->parent, *c = e; a; c = a, a = a->parent) {
      if (a->children.wide())
        a->children.touched(c->run[0], e);
      a->below_best = e;
    }
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
    n->children.for_each([&todo](token, node* c) { todo.push_back(c); });
  while (!todo.empty()) {
    auto d = todo.back();
    todo.pop_back();
    if (d->has_entry)
      out.push_back(entry_ref{d});
    d->children.for_each([&todo](token, node* c) { todo.push_back(c); });
  }
  return out;
}

std::vector<entry_ref> prefix_tree::entries() const {
  // Keys are never empty: every entry lies strictly below its root.
  std::vector<entry_ref> out;
  out.reserve(entries_);
  for (auto& [ns, r] : roots_) {
    auto below = descendants(ns, {});
    out.insert(out.end(), below.begin(), below.end());
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

void prefix_tree::set_value(entry_ref ref, uint64_t v) {
  as_node(ref.node_)->value = v;
}

uint64_t prefix_tree::approx_bytes() const noexcept {
  // Per node: the node and its edge run, each one allocation (16 bytes of
  // the allocator's each), and its (token, node*) item in the parent's
  // children, whose arrays and tables run about half empty.
  constexpr uint64_t per_node =
    sizeof(node) + 2 * 16 + 2 * sizeof(child_set::item);
  return nodes_ * per_node + tokens_ * sizeof(token);
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
    n += d->children.memory_bytes();
    d->children.for_each([&todo](token, node* c) { todo.push_back(c); });
  }
  return n;
}

} // namespace kvtier::tiers
