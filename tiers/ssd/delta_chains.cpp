#include "tiers/ssd/delta_chains.hpp"
#include "tiers/ssd/kill_points.hpp"

#include "messages/assert.hpp"

#include <algorithm>
#include <functional>

namespace kvtier::tiers::ssd {

void delta_chains::resolve(std::vector<scanned_file>& deltas,
                           const ssd_index& index, scan_report& r, tier_io& io,
                           const std::function<void(scanned_file&)>& good) {
  // A delta's parent, if it is a delta, has a lower write id (the decoder
  // checks parent write id < write id): in this order it is resolved and
  // indexed first, by name and write id, never by the listing's order.
  std::sort(deltas.begin(), deltas.end(), [](auto& a, auto& b) {
    return a.file.header->write_id < b.file.header->write_id;
  });
  for (auto& d : deltas) {
    auto& f = d.file;
    auto& parent = f.header->parent;
    std::string why;
    auto* p = index.file(parent);
    if (!p) {
      why = "its parent " + parent + " is missing or unusable";
    } else {
      auto ph = p->header;
      if (!ph->keyed()) { // a prefix file's key is the index's
        auto keyed = std::make_shared<entry_header>(*ph);
        keyed->tokens = index.key(parent);
        ph = std::move(keyed);
      }
      auto h = std::make_shared<entry_header>(*f.header);
      if (auto err = resolve_parent(*h, *ph))
        why = context_of(err);
      else if (file_name(h->key()) != f.name)
        why = "misnamed";
      else
        f.header = std::move(h);
    }
    if (why.empty()) {
      good(d);
      continue;
    }
    io.log("ssd: removing delta file " + f.name + ": " + why);
    kill_protocol in{"start-up-scan"};
    --r.loaded;
    if (!io.fs.remove(io.path(f.name)))
      ++r.broken_chains;
  }
  deltas.clear();
}

std::vector<const ssd_file*> delta_chains::chain_of(const ssd_index& index,
                                                    const std::string& name) {
  std::vector<const ssd_file*> out;
  for (auto* f = index.file(name); f != nullptr;) {
    out.push_back(f);
    if (f->header->parent.empty())
      break;
    f = index.file(f->header->parent);
    // An indexed delta's parent is indexed (a parent leaving takes its
    // children along), so the walk ends at a whole file.
    KVTIER_ASSERT(f != nullptr);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<const ssd_file*>
delta_chains::serving_below(std::vector<const ssd_file*> chain, uint64_t p) {
  size_t n = 0;
  while (n < chain.size() && (n == 0 || chain[n]->header->parent_tokens < p))
    ++n;
  chain.resize(n);
  return chain;
}

void delta_chains::link(const ssd_file& f) {
  if (!f.header->parent.empty())
    children_[f.header->parent].insert(f.name);
}

void delta_chains::unlink(const std::string& name, const entry_header& h) {
  if (h.parent.empty())
    return;
  if (auto c = children_.find(h.parent); c != children_.end()) {
    c->second.erase(name);
    if (c->second.empty())
      children_.erase(c);
  }
}

std::set<std::string> delta_chains::take_children(const std::string& name) {
  auto c = children_.extract(name);
  return c ? std::move(c.mapped()) : std::set<std::string>{};
}

void delta_chains::unpin(const std::string& parent) {
  auto p = pins_.find(parent);
  if (p != pins_.end() && --p->second == 0)
    pins_.erase(p);
}

delta_chains::choice delta_chains::choose(const ssd_index& index,
                                          const entry& e) const {
  choice c;
  if (!enabled_ || max_chain_ < 2)
    return c;
  for (auto& l : e.layers)
    if (l.kind != layer_kind::kv)
      return c; // only kv rows can be left to a parent
  // The file sharing the longest prefix with the entry (a strict prefix
  // file, or one the entry branches off inside), and of its chain the
  // links that serve rows below that length.
  auto m = index.find(e.tokens, e.ns);
  auto self = file_name(e.ns, e.tokens);
  if (!m || m->length == 0 || m->length >= e.tokens.size() || m->name == self)
    return c; // nothing shared, or a rewrite of the key itself: whole
  c.chain = serving_below(chain_of(index, m->name), m->length);
  if (c.chain.empty() || c.chain.size() + 1 > max_chain_)
    return {}; // at the chain bound: written whole
  // A rewrite of a key whose older file is a link (the match a longer
  // file trimmed, its chain through the key's own file): the rename
  // replaces that link, so the delta would name itself. Written whole.
  for (auto* link : c.chain)
    if (link->name == self)
      return {};
  c.parent = c.chain.back();
  c.tokens = m->length;
  return c;
}

void delta_chains::remember_origin(const buffer_ref& buf,
                                   const std::string& name, uint64_t write_id,
                                   size_t layer, uint64_t first_row) {
  auto& v = origins_[buf->id()];
  v.push_back(row_origin{name, write_id, layer, first_row, buf});
  if (v.size() > 4)
    v.erase(v.begin()); // the newest files a buffer went to are enough
  // Prune the dead now and then: amortized O(1) per buffer remembered.
  if (origins_.size() >= 2 * origins_pruned_at_ + 64) {
    std::erase_if(origins_, [](auto& kv) {
      return kv.second.empty() || kv.second.front().buf.expired();
    });
    origins_pruned_at_ = origins_.size();
  }
}

void delta_chains::remember_written(const std::string& name,
                                    const entry_header& h, const entry& e) {
  for (size_t l = 0; l < e.layers.size() && l < h.layers.size(); ++l) {
    auto& layer = e.layers[l];
    uint64_t bpt = layer.bytes_per_token;
    if (layer.kind != layer_kind::kv || bpt == 0)
      continue;
    uint64_t row = 0;
    for (auto& seg : layer.segments) {
      if (!seg.buf || seg.offset % bpt != 0 || seg.length % bpt != 0)
        break;
      // Only the rows this file holds (a delta's start past its parent).
      if (row + seg.length / bpt > h.parent_tokens)
        remember_origin(seg.buf, name, h.write_id, l, row - seg.offset / bpt);
      row += seg.length / bpt;
    }
  }
}

bool delta_chains::proven_by_origin(const entry& e, const choice& c) const {
  // Buffers are immutable and their ids never reused: a view of a buffer
  // a restore read from file X at write id W, or a write wrote X's rows
  // from, holds X's bytes. Each row [0, c.tokens) must be one of the link
  // that serves it in the chain the child names (a row of another link,
  // or past a link's cut, could be another branch's bytes).
  for (size_t l = 0; l < e.layers.size(); ++l) {
    auto& layer = e.layers[l];
    uint64_t bpt = layer.bytes_per_token;
    if (bpt == 0)
      return false;
    uint64_t pos = 0;
    for (auto& seg : layer.segments) {
      if (pos >= c.tokens)
        break;
      if (!seg.buf || seg.offset % bpt != 0 || seg.length % bpt != 0)
        return false;
      auto o = origins_.find(seg.buf->id());
      if (o == origins_.end())
        return false;
      // The segment starts at row `seg_row`, byte seg.offset of its buffer.
      auto seg_row = pos;
      auto seg_end = std::min(pos + seg.length / bpt, c.tokens);
      while (pos < seg_end) {
        size_t i = c.chain.size();
        while (i > 0 && c.chain[i - 1]->header->parent_tokens > pos)
          --i;
        if (i == 0)
          return false;
        auto* link = c.chain[i - 1];
        uint64_t cut =
          i < c.chain.size() ? c.chain[i]->header->parent_tokens : c.tokens;
        bool known = std::any_of(
          o->second.begin(), o->second.end(), [&](const row_origin& r) {
            return r.name == link->name && r.write_id == link->header->write_id
                   && r.layer == l && r.first_row + seg.offset / bpt == seg_row;
          });
        if (!known)
          return false;
        pos = std::min(seg_end, cut);
      }
    }
    if (pos < c.tokens)
      return false;
  }
  return true;
}

} // namespace kvtier::tiers::ssd
