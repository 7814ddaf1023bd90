// The on-disk format of one SSD entry file (docs/ssd-format.md has it byte
// by byte): a hand-laid little-endian header followed by one payload per
// layer and per attachment at aligned offsets.
//
// Why hand-laid and not Cap'n Proto: the header is a file format that must be
// readable with nothing but its own checksum to trust, must give exact
// payload offsets before any payload is read, and must stay stable across
// schema evolutions of the messages; a fixed 64-byte prefix with a length
// and a trailing XXH3 checksum does that with no decoder to harden.
//
// Payload bytes are checksummed in chunks (XXH3-64 per `checksum_chunk`
// bytes), so a restore of a shorter prefix can read and verify only the
// chunks it needs. A delta file (version 3) names a parent file, its write
// id and the rows it leaves to it, and holds only the rows past them.
// Plain functions on values; safe from any thread.
#pragma once

#include "tiers/state.hpp"
#include "tiers/storage_key.hpp"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers::ssd {

/// The 8 magic bytes that open every entry file.
inline constexpr char file_magic[8] = {'K', 'V', 'T',  'I',
                                       'E', 'R', 0x1a, '\n'};
/// The newest format version this code writes. Version 2 added the key
/// kind (prefix, checkpoint, object), the checkpoint owner (request id,
/// attempt) and the write id; version 3 the parent write id, so a delta
/// file (one that names a parent and holds only rows past the parent's
/// tokens) can name the exact write it was cut from; version 4 the entry's
/// retention priority, written only for an entry whose priority is not
/// `default_priority` (any other is written as version 3, byte for byte as
/// before: `header_version`). Versions 2 to 4 are read; files of version 1
/// are incompatible (ignored, kept).
inline constexpr uint32_t format_version = 4;
/// The version a header with `priority` is written as: 4 when it is not
/// the default, else 3.
constexpr uint32_t header_version(uint8_t priority) noexcept {
  return priority != default_priority ? 4 : 3;
}
/// The oldest format version this code still reads.
inline constexpr uint32_t oldest_format_version = 2;
/// The largest version a file of some (older or newer) format may carry:
/// above it, or 0, the version field is garbage (a header torn or
/// overwritten), so the file is corrupt (removed by the start-up scan,
/// `kvtier inspect --quarantine` moves it aside), not another format's
/// (ignored, kept for ever).
inline constexpr uint32_t max_plausible_format_version = 255;
/// Bytes of the fixed header prefix.
inline constexpr size_t fixed_header_size = 64;
/// Most tokens a delta file may encode (the largest position limit).
inline constexpr uint64_t max_delta_tokens = 1ull << 24;
/// Largest header a reader accepts.
inline constexpr uint32_t max_header_size = 64u << 20;

/// Where a payload lies in the file and its chunk checksums.
struct payload_info {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<uint64_t> chunk_sums;
};

/// One layer as the header describes it.
struct layer_info {
  layer_kind kind = layer_kind::kv;
  uint32_t bytes_per_token = 0;
  uint32_t window = 0;
  uint64_t tokens = 0;
  uint64_t min_offset = 0;
  payload_info payload;
};

/// One method attachment as the header describes it.
struct attachment_info {
  std::string name;
  payload_info payload;
};

/// The decoded header of an entry file: everything but the payload bytes.
struct entry_header {
  uint32_t alignment = 4096;
  uint32_t checksum_chunk = 1u << 20;
  std::string fingerprint;
  /// What the file's key is: a prefix entry, a checkpoint or an exact
  /// tensor object (`ns` holds the object's key; no tokens, no layers, no
  /// session: its tensors are the attachments).
  key_kind kind = key_kind::prefix;
  std::string ns;
  std::optional<std::string> session;
  /// checkpoint: the engine request id and the attempt that wrote it; 0
  /// for a prefix entry.
  uint64_t request = 0;
  uint32_t attempt = 0;
  /// Unique per write in its directory: the SSD tier issues them in
  /// increasing order (from 1) above every id its start-up scan found, so
  /// a removal record covering "this identity's writes up to id W" never
  /// covers a later write.
  uint64_t write_id = 0;
  /// The format version the header was decoded from (`header_version` of
  /// its priority when written by this code).
  uint32_t version = 3;
  /// Delta files (version 3): the file name of the parent holding rows
  /// [0, parent_tokens) of every layer, the write id of the parent's write
  /// this file was cut from, and the parent's token count. Empty / 0 for a
  /// whole file. A delta file's layers are all kv and hold rows
  /// [parent_tokens, N) only; its header lists only those tokens, so a
  /// decoded delta header has `tokens` of the full length N whose first
  /// `parent_tokens` are 0 until `resolve_parent` fills them in from the
  /// parent's header (`tokens_resolved`).
  std::string parent;
  uint64_t parent_write_id = 0;
  uint64_t parent_tokens = 0;
  bool tokens_resolved = true;
  /// Tokens the entry encodes (its length).
  uint64_t token_count = 0;
  /// The key's tokens: `token_count` of them, or none in a prefix file's
  /// header the SSD index holds (the index keeps the key once, on its
  /// edges: `ssd_index::key`). `keyed()` says which.
  token_seq tokens;
  std::vector<layer_info> layers;
  std::vector<attachment_info> attachments;
  /// The retention priority of the entry (0 to `max_priority`, `entry::
  /// priority`; version 4, `default_priority` in older versions): the SSD
  /// tier evicts every file of a lower priority before any of a higher one
  /// (docs/eviction.md "In the SSD tier").
  uint8_t priority = default_priority;
  /// Encoded header bytes (including the trailing checksum).
  uint32_t header_length = 0;
  /// End of the last payload: the least size of a whole file.
  uint64_t file_length = 0;
  /// The header's own checksum (its last 8 bytes), set by `encode` and
  /// `decode`: equal sums mean the same header.
  uint64_t header_sum = 0;

  /// Offset of the first payload (the header padded to the alignment).
  uint64_t payload_start() const noexcept;

  /// Whether `tokens` holds the key (not a header the index keeps).
  bool keyed() const noexcept {
    return tokens.size() == token_count;
  }

  /// The storage key the header names (kind, ns, tokens, owner); the
  /// header must be `keyed()`.
  storage_key key() const;
};

/// The header for writing `e`: geometry, offsets and lengths filled in,
/// checksums empty, a prefix key and write id 0 (the writer sets the key
/// fields and the write id; they do not change the layout). `alignment` is
/// a power of two, `checksum_chunk` a multiple of it. With a `parent`
/// (a delta file: every layer kv, 0 < parent_tokens < len(e)) each payload
/// holds rows [parent_tokens, len(e)) only and the header names the parent
/// (the writer sets `parent_write_id`, which does not change the layout).
entry_header layout(const entry& e, const std::string& fingerprint,
                    uint32_t alignment, uint32_t checksum_chunk,
                    const std::string& parent = {}, uint64_t parent_tokens = 0);

/// The bytes of `e`'s layer `i` that the file `h` holds: all of them, or
/// for a delta file rows [parent_tokens, N) (views, no copy).
std::vector<view> payload_segments(const entry_header& h, const entry& e,
                                   size_t i);

/// Fills every payload's chunk checksums from `e`'s bytes (for a delta
/// file: from the rows it holds).
void compute_checksums(entry_header& h, const entry& e);

/// Whether `e` holds exactly the rows the file `link` keyed by `link_key`
/// holds: same ns, `link_key` (the link's resolved tokens) a prefix of
/// `e`'s, every layer kv with the same bytes per token, and `e`'s rows
/// [link.parent_tokens, len(link)) hashing, in `link`'s checksum chunks,
/// to `link`'s checksum tables. How the writer proves a delta's shared
/// rows are its parent chain's bytes.
bool holds_rows_of(const entry& e, const entry_header& link,
                   std::span<const token> link_key);

/// Fills a delta header's first `parent_tokens` tokens from its parent's
/// (resolved) header, after checking that the parent is the one it names:
/// its write id, fingerprint, namespace, kind (prefix), at least
/// `parent_tokens` tokens (a child may branch off inside its parent) and
/// layers (count, kv, bytes per token). `ec::corrupt_data` naming what
/// differs otherwise (the child is unusable).
caf::error resolve_parent(entry_header& child, const entry_header& parent);

/// The header as bytes, zero-padded to `payload_start()`; sets
/// `h.header_sum`.
buffer_ref encode(entry_header& h);

/// The header length and version read from the fixed prefix. Bad magic,
/// or a version no format has (0, above `max_plausible_format_version`),
/// is `ec::corrupt_data`; another version is `ec::incompatible_format`.
caf::expected<uint32_t> decode_header_length(std::span<const std::byte> p);

/// Decodes and verifies a whole header (`header_length` bytes): every
/// "must be" of docs/ssd-format.md, reserved and padding fields included.
/// `ec::corrupt_data` for anything inconsistent, `ec::incompatible_format`
/// for another version or a parent reference in a version 2 header.
caf::expected<entry_header> decode(std::span<const std::byte> bytes);

/// Whether `e`'s layers can be written as the format says a layer record
/// must be (kv: window 0; recurrent, object: bytes per token and window 0;
/// object: 0 tokens; ring: window > 0; minimum offset within the tokens);
/// `ec::invalid_argument` naming the layer and the rule otherwise. The
/// decoder refuses files that break these rules as corrupt.
caf::error check_storable(const entry& e);

/// Bytes to read from the start of `p` so that its first `need` bytes can
/// be verified: `need` rounded up to whole chunks, at most the payload.
uint64_t read_length(const entry_header& h, const payload_info& p,
                     uint64_t need) noexcept;

/// Verifies `data` (the first bytes of payload `p`, a `read_length`) against
/// the chunk checksums; `ec::corrupt_data` names the first bad chunk.
caf::error verify(const entry_header& h, const payload_info& p,
                  std::span<const std::byte> data);

/// Bytes of layer `l` a restore of `p` tokens needs (kv and unwrapped ring:
/// p rows; recurrent, object, wrapped ring: all).
uint64_t restore_bytes(const layer_info& l, uint64_t p) noexcept;

/// Whether the header's entry can serve exactly `p` tokens.
bool can_restore(const entry_header& h, uint64_t p) noexcept;

/// The file name of a stored key: 32 hex digits of XXH3-128 over (kind,
/// request id, ns, tokens) and ".kvt". Same key, same name, so a rename
/// replaces the older version; keys of different kinds or requests never
/// share a name (the attempt is not hashed).
std::string file_name(const storage_key& key);

/// The file name of the prefix entry (ns, tokens).
std::string file_name(std::string_view ns, std::span<const token> tokens);

/// 32 hex digits of XXH3-128 over (kind checkpoint, request id, ns): the
/// checkpoint identity a removal record names.
std::string identity_hash(uint64_t request, std::string_view ns);

} // namespace kvtier::tiers::ssd
