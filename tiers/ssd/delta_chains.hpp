// The SSD tier's delta chains (docs/ssd-format.md, "Delta files"): which
// indexed files are delta children of which, which parents a delta write in
// flight pins, where the rows of live buffers came from, and the rules
// that follow from these.
//
// Owned by the coordinator (`ssd_tier`); single-owner, on the owner's
// thread; no I/O. It reads the index the coordinator passes (`ssd_index`)
// and never changes it. Policy:
//   - A prefix entry may be written as a delta of the file sharing its
//     longest prefix (`choose`) when every layer is kv and the chain it
//     would make is at most `max_chain` files; its shared rows must be
//     proven to be that chain's, by origin (`proven_by_origin`: the very
//     buffers a restore read from, or a durable write wrote, each link)
//     or by checksums (the write's prepare op).
//   - A parent with an indexed child, or pinned by a delta write in
//     flight, is `held`: never evicted or superseded meanwhile. A parent
//     that leaves takes its children along (`take_children`).
//   - A restore reads the chain root first (`chain_of`), up to the link
//     that serves its last row (`serving_below`).
#pragma once

#include "tiers/ssd/file_set.hpp"

#include <map>
#include <set>
#include <unordered_map>

namespace kvtier::tiers::ssd {

class delta_chains {
public:
  /// `enabled`: `ssd_config::delta_files`; `max_chain`: its bound.
  delta_chains(bool enabled, uint32_t max_chain)
    : enabled_(enabled)
    , max_chain_(max_chain) {}

  bool enabled() const noexcept {
    return enabled_;
  }

  /// The scan's last pass: resolves the delta files it found against
  /// their parents in `index` (tokens, write ids), parents first whatever
  /// the listing's order (write ids strictly fall along a chain); each
  /// resolved one goes to `good` (which indexes it, so its children find
  /// it); one whose parent is missing, unusable or rewritten is removed
  /// (blocking), counted (`broken_chains`, and no longer `loaded`).
  static void resolve(std::vector<scanned_file>& deltas, const ssd_index& index,
                      scan_report& r, tier_io& io,
                      const std::function<void(scanned_file&)>& good);

  /// The files a restore of `name` reads, root first (itself last).
  static std::vector<const ssd_file*> chain_of(const ssd_index& index,
                                               const std::string& name);

  /// The first links of `chain` (root first) that serve rows below `p`: up
  /// to the link holding row p - 1, the root at least.
  static std::vector<const ssd_file*>
  serving_below(std::vector<const ssd_file*> chain, uint64_t p);

  /// `f` was indexed: links it to its parent.
  void link(const ssd_file& f);

  /// `name` (of header `h`) left the index: unlinks it from its parent.
  void unlink(const std::string& name, const entry_header& h);

  /// The indexed children of `name`, no longer linked to it.
  std::set<std::string> take_children(const std::string& name);

  /// Whether `name` may not leave for the cap or a supersession: a live
  /// delta child or a delta write in flight depends on it.
  bool held(const std::string& name) const {
    return children_.count(name) > 0 || pins_.count(name) > 0;
  }

  void pin(const std::string& parent) {
    ++pins_[parent];
  }

  void unpin(const std::string& parent);

  /// A delta's parent and how many of its rows the child leaves to its
  /// chain.
  struct choice {
    const ssd_file* parent = nullptr;
    uint64_t tokens = 0;
    /// The chain root..parent as the child would read it.
    std::vector<const ssd_file*> chain;
  };

  /// The file sharing the longest prefix with `e` and its chain, when a
  /// delta may be cut from it (no parent: written whole).
  choice choose(const ssd_index& index, const entry& e) const;

  /// Whether every kv row [0, c.tokens) of `e` is a view of a buffer a
  /// restore read from the very link of `c.chain` that serves that row.
  bool proven_by_origin(const entry& e, const choice& c) const;

  /// Records that byte 0 of `buf` is row `first_row` of layer `layer` of
  /// the file `name` written with `write_id`.
  void remember_origin(const buffer_ref& buf, const std::string& name,
                       uint64_t write_id, size_t layer, uint64_t first_row);

  /// `remember_origin` for every kv row a durable write put in its file.
  void remember_written(const std::string& name, const entry_header& h,
                        const entry& e);

private:
  struct row_origin {
    std::string name;
    uint64_t write_id = 0;
    size_t layer = 0;
    uint64_t first_row = 0;
    std::weak_ptr<const buffer> buf;
  };

  bool enabled_;
  uint32_t max_chain_;
  /// Indexed children by parent name.
  std::map<std::string, std::set<std::string>> children_;
  /// Parents of delta writes in flight.
  std::map<std::string, unsigned> pins_;
  /// Buffers restores read or writes wrote from, by buffer id (ids are
  /// never reused): which file (name and write id), layer and first row
  /// they hold. Pruned as the buffers die.
  std::unordered_map<uint64_t, std::vector<row_origin>> origins_;
  size_t origins_pruned_at_ = 0;
};

} // namespace kvtier::tiers::ssd
