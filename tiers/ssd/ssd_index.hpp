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
// write is not "on SSD". Recency for byte-cap eviction is an LRU list kept
// here: `insert` and `touch` make a file the most recently used; `find`
// changes nothing. Owned by the SSD tier; single-threaded; no I/O.
#pragma once

#include "tiers/prefix_index.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <functional>
#include <list>
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
  /// Indexes `f` as the most recently used file (`coldest`: the least),
  /// by its header's key kind; returns a file it replaced (same key).
  std::optional<ssd_file> insert(ssd_file f, bool coldest = false);

  /// Forgets the file `name`; returns it (keyed).
  std::optional<ssd_file> erase(const std::string& name);

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

  /// Makes `name` the most recently used file.
  void touch(const std::string& name);

  /// Makes `name` the least recently used file (the start-up scan's
  /// rebuild of the order its files' mtimes record).
  void make_coldest(const std::string& name);

  /// The prefix files the prefix file `name` supersedes, as the RAM tier
  /// supersedes entries (docs/ram-tier.md): when its entry is trimmable
  /// (trim floor below its length), its strict prefix-ancestors in the
  /// same namespace at least as long as that floor, nearest first; none
  /// for an untrimmable file (shorter ancestors must survive), a
  /// checkpoint or an object.
  std::vector<std::string> superseded_by(const std::string& name) const;

  /// Least recently used files whose removal brings the bytes to at most
  /// `cap`, oldest first, never `keep`.
  std::vector<std::string> over_cap(uint64_t cap,
                                    const std::string& keep) const;

  /// The same, skipping files `held` says may not go (delta parents).
  std::vector<std::string>
  over_cap(uint64_t cap, const std::string& keep,
           const std::function<bool(const std::string&)>& held) const;

  /// Prefix files of `ns` whose tokens are a prefix of `tokens` (itself
  /// included when indexed), longest first.
  std::vector<const ssd_file*>
  prefix_files(std::string_view ns, std::span<const token> tokens) const;

  /// Every indexed prefix file (no checkpoint or object file).
  std::vector<saved_prefix> saved() const;

  /// Every indexed checkpoint file, as its header names it.
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
  /// its name (three copies: the record, the by-name table, the LRU list),
  /// its header without its key (layers, attachments, strings) and the
  /// table's and list's nodes, each allocation with the allocator's 16
  /// bytes. What the report shows as `ssd.index_bytes`.
  uint64_t approx_bytes() const noexcept {
    return index_.approx_bytes() + meta_bytes_;
  }

private:
  struct slot {
    /// Prefix files: where the prefix index holds it.
    entry_ref ref;
    /// Checkpoint and object files: the file itself (not in the prefix
    /// index).
    std::optional<ssd_file> exact;
    std::list<std::string>::iterator lru;
  };

  /// Puts `name` at the LRU list's back (front: `coldest`).
  std::list<std::string>::iterator place(const std::string& name, bool coldest);

  prefix_index<ssd_file> index_;
  std::unordered_map<std::string, slot> by_name_;
  /// Front: least recently used.
  std::list<std::string> lru_;
  uint64_t bytes_ = 0;
  /// The per-file part of `approx_bytes`.
  uint64_t meta_bytes_ = 0;
};

/// The trim floor of the entry a header describes (see `trim_floor`).
uint64_t header_floor(const entry_header& h);

} // namespace kvtier::tiers::ssd
