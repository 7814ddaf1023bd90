// The SSD tier's index: which entry files exist, what each holds (its
// decoded header), their recency and their bytes. Built on the shared
// `prefix_index` (tiers/prefix_index.hpp), so the longest usable prefix is
// found in O(len(prompt)) with the same rules as the RAM tier, and an
// untrimmable entry with a divergent tail is never an answer.
//
// Prefix files are kept apart from checkpoint and object files by their
// header's key kind: only prefix files enter the prefix index, so a prompt
// lookup (`find`), `contains` of a prefix key and `saved` structurally
// cannot return a checkpoint or an object; those are found by exact key
// only. All share the LRU list and the byte count (the cap covers every
// file).
//
// A prefix file's key is held once, on the prefix index's edges: the header
// kept for it has no copy of its tokens (issue #15 item 2, as the RAM tier
// does), and `key` rebuilds them where they are needed (removal events,
// `saved`, the restored entry, a delta's proof).
//
// Only files that are durable (renamed into place) are indexed: a pending
// write is not "on SSD". The byte-cap eviction order is kept here, in the
// RAM tier's `entry_ranking` (tiers/entry_ranking.hpp; a dense id per
// indexed file, reused after erase): ascending (priority, rank, last use),
// the priority the file's header carries, the rank by `ssd-tier.policy`:
//   lru   least recently used first (`insert` and `touch` make a file the
//         most recently used; `find` changes nothing);
//   gdsf  rank = L + min(uses, 16) × (1 + tokens / 65536), L rising to
//         each victim's rank: a file restored often outlasts one written
//         once. A new file carries on the count of the file its key
//         replaced or of the ancestors it supersedes, or the count an
//         evicted file of its key left (a bounded ghost list).
// Owned by the SSD tier; single-threaded; no I/O.
#pragma once

#include "tiers/entry_ranking.hpp"
#include "tiers/prefix_index.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <functional>
#include <memory>
#include <unordered_map>

namespace kvtier::tiers::ssd {

/// One indexed entry file.
struct ssd_file {
  std::string name;
  /// Its header. A prefix file's, as the index holds it, has no tokens
  /// (`entry_header::keyed` is false): its key is the index's
  /// (`ssd_index::key`). A file leaving the index (`erase`, a replaced
  /// one) comes back keyed.
  std::shared_ptr<const entry_header> header;
  /// Bytes the file occupies (its file length).
  uint64_t bytes = 0;
};

/// A usable file for a prompt.
struct ssd_match {
  std::string name;
  std::shared_ptr<const entry_header> header;
  /// Usable prefix p the file serves.
  uint64_t length = 0;
  bool needs_trim = false;
};

/// A prefix saved on SSD, as its header says.
struct saved_prefix {
  std::string ns;
  token_seq tokens;
};

class ssd_index {
public:
  /// `policy`: the order within a priority (`ssd-tier.policy`).
  explicit ssd_index(ram_policy policy = ram_policy::lru);

  ram_policy policy() const noexcept {
    return rank_.policy();
  }

  /// Indexes `f` as the most recently used file of its header's priority
  /// (`coldest`: the first of its priority to go, as `make_coldest`), by
  /// its header's key kind; returns a file it replaced (same key).
  /// `carried`: the uses of an older file of its name that already left
  /// (a rewrite's rename replaced it), carried on under gdsf like those of
  /// a file it replaces here.
  std::optional<ssd_file> insert(ssd_file f, bool coldest = false,
                                 uint32_t carried = 0);

  /// Forgets the file `name`; returns it (keyed). `evicted`: it leaves by
  /// the cap (gdsf's clock rises to its rank, its count is remembered).
  std::optional<ssd_file> erase(const std::string& name, bool evicted = false);

  /// The key tokens of the indexed file `name` (rebuilt from the index's
  /// edges for a prefix file: O(length)).
  token_seq key(const std::string& name) const;

  /// The best usable prefix file for `prompt` in `ns` (no recency change).
  /// Never a checkpoint file.
  std::optional<ssd_match> find(std::span<const token> prompt,
                                std::string_view ns) const;

  /// The file of exactly `key` (any kind), or nullptr.
  const ssd_file* file(const storage_key& key) const;

  /// The file `name`, or nullptr.
  const ssd_file* file(const std::string& name) const;

  /// Whether the prefix key (ns, tokens) has a file.
  bool contains(std::string_view ns, std::span<const token> tokens) const;

  /// Whether `key` (any kind) has a file.
  bool contains(const storage_key& key) const;

  /// `name` served a restore or a prefetch: the most recently used file
  /// (gdsf: its count rises).
  void touch(const std::string& name);

  /// Makes `name` the first of its priority to go (the start-up scan's
  /// rebuild of the order its files' mtimes record; gdsf: rank 0 until its
  /// next use).
  void make_coldest(const std::string& name);

  /// `name`'s count of uses (gdsf's frequency; 0 when not indexed).
  uint32_t uses(const std::string& name) const;

  /// The prefix files the prefix file `name` supersedes, as the RAM tier
  /// supersedes entries (docs/ram-tier.md): when its entry is trimmable
  /// (trim floor below its length), its strict prefix-ancestors in the
  /// same namespace at least as long as that floor, nearest first; none
  /// for an untrimmable file (shorter ancestors must survive), a
  /// checkpoint or an object.
  std::vector<std::string> superseded_by(const std::string& name) const;

  /// The first files in eviction order whose removal brings the bytes to
  /// at most `cap`, first to go first, never `keep`.
  std::vector<std::string> over_cap(uint64_t cap,
                                    const std::string& keep) const;

  /// The same, skipping files `held` says may not go (delta parents).
  std::vector<std::string>
  over_cap(uint64_t cap, const std::string& keep,
           const std::function<bool(const std::string&)>& held) const;

  /// The first of `over_cap(cap, keep, held)` (nullopt when the bytes are
  /// within `cap` or nothing may go): O(files skipped) under lru, O(k log
  /// k) for k skipped under gdsf.
  std::optional<std::string>
  victim(uint64_t cap, const std::string& keep,
         const std::function<bool(const std::string&)>& held) const;

  /// Prefix files of `ns` whose tokens are a prefix of `tokens` (itself
  /// included when indexed), longest first.
  std::vector<const ssd_file*>
  prefix_files(std::string_view ns, std::span<const token> tokens) const;

  /// Every indexed prefix file (no checkpoint or object file), in
  /// eviction order.
  std::vector<saved_prefix> saved() const;

  /// Every indexed checkpoint file, as its header names it, in eviction
  /// order.
  std::vector<const ssd_file*> checkpoints() const;

  /// The longest indexed prefix file, in tokens.
  uint64_t longest() const;

  uint64_t bytes() const noexcept {
    return bytes_;
  }

  size_t size() const noexcept {
    return by_name_.size();
  }

  /// What the index holds in RAM, estimated in O(1): the prefix tree's
  /// `approx_bytes` (each key's tokens once, on its edges) and, per file,
  /// its name (two copies: the record, the by-name table), its header
  /// without its key (layers, attachments, strings), the table's node, its
  /// ranking slot (`entry_ranking::item_bytes`) and its entry in the
  /// by-id table, each allocation with the allocator's 16 bytes; and gdsf's
  /// ghosts. What the report shows as `ssd.index_bytes`.
  uint64_t approx_bytes() const noexcept {
    return index_.approx_bytes() + meta_bytes_
           + by_name_.size()
               * (entry_ranking::item_bytes(rank_.policy()) + sizeof(void*))
           + rank_.ghosts() * entry_ranking::ghost_bytes;
  }

private:
  struct slot {
    /// Prefix files: where the prefix index holds it.
    entry_ref ref;
    /// Checkpoint and object files: the file itself (not in the prefix
    /// index).
    std::optional<ssd_file> exact;
    /// Its id in the eviction order.
    entry_ranking::id rid = entry_ranking::none;
  };
  using named = std::unordered_map<std::string, slot>::value_type;

  /// Ranks the file just put at `at` in `by_name_` (a new id), carrying on
  /// `inherited` uses.
  void rank(named& at, const entry_header& h, std::span<const token> key,
            uint32_t inherited, bool coldest);
  /// What a new prefix file at `ref` takes over under gdsf: the most uses
  /// of the ancestors it supersedes.
  uint32_t ancestors_uses(entry_ref ref) const;
  /// Takes `s` out of the eviction order (`evicted`: as a victim) and
  /// frees its id.
  void unrank(const slot& s, bool evicted = false);
  /// Calls `f(name, slot)` for every file in eviction order.
  template <class F>
  void in_order(F&& f) const;

  prefix_index<ssd_file> index_;
  std::unordered_map<std::string, slot> by_name_;
  /// The eviction order over ids; `by_id_[id]` names the file.
  entry_ranking rank_;
  std::vector<const named*> by_id_;
  std::vector<entry_ranking::id> free_ids_;
  uint64_t bytes_ = 0;
  /// The per-file part of `approx_bytes`.
  uint64_t meta_bytes_ = 0;
};

/// The trim floor of the entry a header describes (see `trim_floor`).
uint64_t header_floor(const entry_header& h);

} // namespace kvtier::tiers::ssd
