#include "tiers/ssd/entry_format.hpp"

#include "messages/assert.hpp"
#include "messages/block_hash.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace kvtier::tiers::ssd {

namespace {

uint64_t align_up(uint64_t n, uint64_t a) {
  return (n + a - 1) / a * a;
}

/// Little-endian appends to a byte vector.
class writer {
public:
  void u8(uint8_t v) {
    out.push_back(std::byte{v});
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    auto p = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), p, p + s.size());
  }
  std::vector<std::byte> out;
};

/// Bounds-checked little-endian reads; any overrun sets `bad`.
class reader {
public:
  explicit reader(std::span<const std::byte> in)
    : in_(in) {}
  bool take(size_t n) {
    if (bad || in_.size() - pos_ < n) {
      bad = true;
      return false;
    }
    return true;
  }
  uint64_t uint(int bytes) {
    if (!take(static_cast<size_t>(bytes)))
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += static_cast<size_t>(bytes);
    return v;
  }
  uint8_t u8() {
    return static_cast<uint8_t>(uint(1));
  }
  uint32_t u32() {
    return static_cast<uint32_t>(uint(4));
  }
  uint64_t u64() {
    return uint(8);
  }
  std::string str() {
    auto n = u32();
    if (!take(n))
      return {};
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  size_t pos() const {
    return pos_;
  }
  bool bad = false;

private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

uint64_t chunk_count(uint64_t len, uint64_t chunk) {
  return (len + chunk - 1) / chunk;
}

caf::error corrupt(const std::string& why) {
  return make_error(ec::corrupt_data, "entry header: " + why);
}

void write_payload_sums(writer& w, const payload_info& p) {
  for (auto s : p.chunk_sums)
    w.u64(s);
}

/// Sums over the concatenation of `segs`, `chunk` bytes at a time.
std::vector<uint64_t> sums_of(const std::vector<view>& segs, uint64_t chunk) {
  std::vector<uint64_t> out;
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  uint64_t filled = 0;
  for (auto& s : segs) {
    auto b = s.bytes();
    while (!b.empty()) {
      if (filled == 0 && b.size() >= chunk) {
        // A whole chunk inside one segment: the one-shot hash, AVX2 where
        // the CPU has it (the same value as the streaming one).
        out.push_back(block_hash(b.first(chunk)));
        b = b.subspan(chunk);
        continue;
      }
      auto n = std::min<uint64_t>(b.size(), chunk - filled);
      XXH3_64bits_update(st, b.data(), n);
      filled += n;
      b = b.subspan(n);
      if (filled == chunk) {
        out.push_back(XXH3_64bits_digest(st));
        XXH3_64bits_reset(st);
        filled = 0;
      }
    }
  }
  if (filled > 0)
    out.push_back(XXH3_64bits_digest(st));
  XXH3_freeState(st);
  return out;
}

/// The layer and attachment tables and the checksum tables.
void write_tables(writer& w, const entry_header& h);

} // namespace

uint64_t entry_header::payload_start() const noexcept {
  return align_up(header_length, alignment);
}

storage_key entry_header::key() const {
  KVTIER_ASSERT(keyed());
  return {kind, ns, tokens, request, attempt};
}

entry_header layout(const entry& e, const std::string& fingerprint,
                    uint32_t alignment, uint32_t checksum_chunk,
                    const std::string& parent, uint64_t parent_tokens) {
  KVTIER_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0);
  KVTIER_ASSERT(checksum_chunk % alignment == 0 && checksum_chunk > 0);
  KVTIER_ASSERT(parent.empty() == (parent_tokens == 0));
  KVTIER_ASSERT(parent_tokens < e.tokens.size() || parent.empty());
  entry_header h;
  h.alignment = alignment;
  h.checksum_chunk = checksum_chunk;
  h.fingerprint = fingerprint;
  h.ns = e.ns;
  h.session = e.session;
  h.tokens = e.tokens;
  h.token_count = e.tokens.size();
  h.parent = parent;
  h.parent_tokens = parent_tokens;
  h.priority = std::min(e.priority, max_priority);
  h.version = header_version(h.priority);
  // Bytes of layer `l` this file holds: a delta holds rows past the parent.
  auto held = [&](const layer_state& l) {
    if (parent.empty())
      return l.byte_length();
    KVTIER_ASSERT(l.kind == layer_kind::kv);
    return (l.tokens - parent_tokens) * l.bytes_per_token;
  };
  // Header length is known before offsets: every field has a fixed size.
  uint64_t n = fixed_header_size + 4 + fingerprint.size() + 4 + e.ns.size() + 1
               + (e.session ? 4 + e.session->size() : 0) + 8 + 4
               + (h.version >= 4 ? 1 : 0) + 4 + parent.size() + 8 + 8
               + 4 * (e.tokens.size() - parent_tokens) + 48 * e.layers.size()
               + 8;
  uint64_t sums = 0;
  for (auto& l : e.layers)
    sums += chunk_count(held(l), checksum_chunk);
  for (auto& a : e.attachments) {
    n += 4 + a.name.size() + 16;
    sums += chunk_count(total_length(a.segments), checksum_chunk);
  }
  n += 8 * sums;
  KVTIER_ASSERT(n <= max_header_size);
  h.header_length = static_cast<uint32_t>(n);
  uint64_t at = h.payload_start();
  auto place = [&](uint64_t len) {
    payload_info p{at, len, {}};
    h.file_length = at + len;
    at = align_up(at + len, alignment);
    return p;
  };
  h.file_length = h.header_length;
  for (auto& l : e.layers)
    h.layers.push_back({l.kind, l.bytes_per_token, l.window, l.tokens,
                        l.min_offset, place(held(l))});
  for (auto& a : e.attachments)
    h.attachments.push_back({a.name, place(total_length(a.segments))});
  return h;
}

namespace {

/// Bytes [from, from + len) of the concatenation of `segs`, as views.
std::vector<view> byte_range(const std::vector<view>& segs, uint64_t from,
                             uint64_t len) {
  std::vector<view> out;
  uint64_t at = 0;
  for (auto& s : segs) {
    if (len == 0)
      break;
    if (at + s.length > from) {
      auto off = from > at ? from - at : 0;
      auto n = std::min(s.length - off, len);
      out.push_back(s.sub(off, n));
      from += n;
      len -= n;
    }
    at += s.length;
  }
  return out;
}

} // namespace

std::vector<view> payload_segments(const entry_header& h, const entry& e,
                                   size_t i) {
  auto& l = e.layers[i];
  if (h.parent.empty())
    return l.segments;
  auto skip = h.parent_tokens * l.bytes_per_token;
  return byte_range(l.segments, skip, l.byte_length() - skip);
}

void compute_checksums(entry_header& h, const entry& e) {
  for (size_t i = 0; i < e.layers.size(); ++i)
    h.layers[i].payload.chunk_sums =
      sums_of(payload_segments(h, e, i), h.checksum_chunk);
  for (size_t i = 0; i < e.attachments.size(); ++i)
    h.attachments[i].payload.chunk_sums =
      sums_of(e.attachments[i].segments, h.checksum_chunk);
}

bool holds_rows_of(const entry& e, const entry_header& link,
                   std::span<const token> link_key) {
  auto n = link.token_count;
  if (!link.tokens_resolved || link.kind != key_kind::prefix || e.ns != link.ns
      || link_key.size() != n || n >= e.tokens.size() || link.parent_tokens >= n
      || e.layers.size() != link.layers.size()
      || !std::equal(link_key.begin(), link_key.end(), e.tokens.begin()))
    return false;
  for (size_t i = 0; i < e.layers.size(); ++i) {
    auto& mine = e.layers[i];
    auto& theirs = link.layers[i];
    if (mine.kind != layer_kind::kv || theirs.kind != layer_kind::kv
        || mine.bytes_per_token != theirs.bytes_per_token
        || mine.byte_length() != mine.tokens * mine.bytes_per_token)
      return false;
    auto bpt = uint64_t{mine.bytes_per_token};
    auto rows = byte_range(mine.segments, link.parent_tokens * bpt,
                           (n - link.parent_tokens) * bpt);
    if (total_length(rows) != theirs.payload.length
        || sums_of(rows, link.checksum_chunk) != theirs.payload.chunk_sums)
      return false;
  }
  return true;
}

caf::error resolve_parent(entry_header& child, const entry_header& parent) {
  auto bad = [](const std::string& why) {
    return make_error(ec::corrupt_data, "delta file: " + why);
  };
  if (child.parent.empty())
    return {};
  if (!parent.tokens_resolved)
    return bad("its parent's tokens are not known");
  if (parent.write_id != child.parent_write_id)
    return bad("its parent was rewritten (write id "
               + std::to_string(parent.write_id) + ", the file was cut from "
               + std::to_string(child.parent_write_id) + ")");
  if (parent.fingerprint != child.fingerprint || parent.ns != child.ns
      || parent.kind != key_kind::prefix)
    return bad("its parent holds another namespace or kind");
  KVTIER_ASSERT(parent.keyed() && child.keyed());
  if (parent.token_count < child.parent_tokens)
    return bad("its parent holds " + std::to_string(parent.token_count)
               + " tokens, the file names "
               + std::to_string(child.parent_tokens));
  if (parent.layers.size() != child.layers.size())
    return bad("its parent has another layer count");
  for (size_t i = 0; i < parent.layers.size(); ++i)
    if (parent.layers[i].kind != layer_kind::kv
        || parent.layers[i].bytes_per_token != child.layers[i].bytes_per_token)
      return bad("its parent's layer " + std::to_string(i)
                 + " has another geometry");
  std::copy(parent.tokens.begin(),
            parent.tokens.begin() + static_cast<ptrdiff_t>(child.parent_tokens),
            child.tokens.begin());
  child.tokens_resolved = true;
  return {};
}

buffer_ref encode(entry_header& h) {
  writer w;
  auto m = reinterpret_cast<const std::byte*>(file_magic);
  w.out.assign(m, m + 8);
  w.u32(header_version(h.priority));
  w.u32(0); // flags
  w.u32(h.header_length);
  w.u32(h.alignment);
  w.u32(h.checksum_chunk);
  w.u32(static_cast<uint32_t>(h.layers.size()));
  w.u32(static_cast<uint32_t>(h.attachments.size()));
  w.u32(static_cast<uint32_t>(h.kind));
  KVTIER_ASSERT(h.keyed());
  w.u64(h.tokens.size());
  w.u64(h.file_length);
  w.u64(h.write_id);
  w.str(h.fingerprint);
  w.str(h.ns);
  w.u8(h.session ? 1 : 0);
  if (h.session)
    w.str(*h.session);
  w.u64(h.request);
  w.u32(h.attempt);
  if (header_version(h.priority) >= 4)
    w.u8(h.priority);
  w.str(h.parent);
  w.u64(h.parent_write_id);
  w.u64(h.parent_tokens);
  // A delta file lists only its own tokens: the parent's header has the
  // rest (and the file name, a hash of all of them, checks the join).
  for (size_t i = h.parent_tokens; i < h.tokens.size(); ++i)
    w.u32(h.tokens[i]);
  write_tables(w, h);
  h.header_sum = XXH3_64bits(w.out.data(), w.out.size());
  w.u64(h.header_sum);
  KVTIER_ASSERT(w.out.size() == h.header_length);
  buffer_builder b(h.payload_start(), h.alignment);
  std::memset(b.data(), 0, b.size());
  std::memcpy(b.data(), w.out.data(), w.out.size());
  return std::move(b).freeze();
}

namespace {

void write_tables(writer& w, const entry_header& h) {
  for (auto& l : h.layers) {
    w.u8(static_cast<uint8_t>(l.kind));
    w.u8(0), w.u8(0), w.u8(0);
    w.u32(l.bytes_per_token);
    w.u32(l.window);
    w.u32(0);
    w.u64(l.tokens);
    w.u64(l.min_offset);
    w.u64(l.payload.offset);
    w.u64(l.payload.length);
  }
  for (auto& a : h.attachments) {
    w.str(a.name);
    w.u64(a.payload.offset);
    w.u64(a.payload.length);
  }
  for (auto& l : h.layers)
    write_payload_sums(w, l.payload);
  for (auto& a : h.attachments)
    write_payload_sums(w, a.payload);
}

} // namespace

caf::expected<uint32_t> decode_header_length(std::span<const std::byte> p) {
  if (p.size() < fixed_header_size)
    return corrupt("shorter than the fixed prefix");
  if (std::memcmp(p.data(), file_magic, 8) != 0)
    return corrupt("bad magic");
  reader r{p.subspan(8)};
  auto version = r.u32();
  if (version == 0 || version > max_plausible_format_version)
    return corrupt("entry format version " + std::to_string(version)
                   + " is no format's (a garbled header)");
  if (version < oldest_format_version || version > format_version)
    return make_error(ec::incompatible_format,
                      "entry format version " + std::to_string(version));
  r.u32(); // flags
  auto len = r.u32();
  if (len < fixed_header_size + 8 || len > max_header_size)
    return corrupt("header length " + std::to_string(len));
  return len;
}

namespace {

/// Checks a payload's placement and reads its checksum count from `r`.
caf::error read_sums(reader& r, const entry_header& h, payload_info& p,
                     uint64_t& end) {
  if (p.offset % h.alignment != 0 || p.offset < end || p.length > h.file_length
      || p.offset > h.file_length - p.length)
    return corrupt("payload at " + std::to_string(p.offset) + " of "
                   + std::to_string(p.length) + " bytes is misplaced");
  end = p.offset + p.length;
  auto n = chunk_count(p.length, h.checksum_chunk);
  if (!r.take(8 * n))
    return corrupt("checksum table truncated");
  p.chunk_sums.resize(n);
  for (auto& s : p.chunk_sums)
    s = r.u64();
  return {};
}

/// The rules of a layer record that do not involve its payload's place:
/// what each kind leaves zero, a ring's window, the minimum offset. Empty
/// when they hold, else what is wrong.
std::string record_rule(layer_kind kind, uint32_t bpt, uint32_t window,
                        uint64_t tokens, uint64_t min_offset) {
  if (kind > layer_kind::object)
    return "unknown layer kind";
  bool rows = kind == layer_kind::kv || kind == layer_kind::ring;
  if (!rows && bpt != 0)
    return std::string{to_string(kind)} + " layer with bytes per token "
           + std::to_string(bpt) + " (must be 0)";
  if (kind != layer_kind::ring && window != 0)
    return std::string{to_string(kind)} + " layer with window "
           + std::to_string(window) + " (must be 0)";
  if (kind == layer_kind::ring && window == 0)
    return "ring layer with window 0";
  if (kind == layer_kind::object && tokens != 0)
    return "object layer encoding " + std::to_string(tokens)
           + " tokens (must be 0)";
  if (min_offset > tokens)
    return "minimum offset " + std::to_string(min_offset)
           + " above the layer's " + std::to_string(tokens) + " tokens";
  return {};
}

caf::error check_layer(const layer_info& l, size_t i, uint64_t tokens,
                       uint64_t parent_tokens) {
  auto where = "layer " + std::to_string(i) + ": ";
  auto rule =
    record_rule(l.kind, l.bytes_per_token, l.window, l.tokens, l.min_offset);
  if (!rule.empty())
    return corrupt(where + rule);
  if (l.kind != layer_kind::object && l.tokens != tokens)
    return corrupt(where + "encodes " + std::to_string(l.tokens)
                   + " tokens, the entry " + std::to_string(tokens));
  if (parent_tokens > 0 && l.kind != layer_kind::kv)
    return corrupt(where + "a delta file with a " + to_string(l.kind)
                   + " layer (only kv layers are written as deltas)");
  uint64_t want = l.payload.length;
  if (l.kind == layer_kind::kv)
    want = (l.tokens - parent_tokens) * l.bytes_per_token;
  else if (l.kind == layer_kind::ring)
    want = std::min<uint64_t>(l.tokens, l.window) * l.bytes_per_token;
  if (want != l.payload.length)
    return corrupt(where + "payload of " + std::to_string(l.payload.length)
                   + " bytes, its geometry says " + std::to_string(want));
  return {};
}

/// Reads the layer table; a record's padding and reserved field must be 0.
caf::error read_layers(reader& r, entry_header& h, uint32_t count) {
  for (uint32_t i = 0; i < count && !r.bad; ++i) {
    layer_info l;
    auto kind = r.u8();
    l.kind = static_cast<layer_kind>(kind > 3 ? 255 : kind);
    uint32_t pad = r.u8() | r.u8() | r.u8();
    l.bytes_per_token = r.u32();
    l.window = r.u32();
    pad |= r.u32();
    l.tokens = r.u64();
    l.min_offset = r.u64();
    l.payload.offset = r.u64();
    l.payload.length = r.u64();
    if (pad != 0 && !r.bad)
      return corrupt("layer " + std::to_string(i)
                     + ": non-zero padding or reserved field");
    h.layers.push_back(std::move(l));
  }
  return {};
}

void read_attachments(reader& r, entry_header& h, uint32_t count) {
  for (uint32_t i = 0; i < count && !r.bad; ++i) {
    attachment_info a;
    a.name = r.str();
    a.payload.offset = r.u64();
    a.payload.length = r.u64();
    h.attachments.push_back(std::move(a));
  }
}

/// Reads the checksum tables and checks every payload's place and size.
caf::error read_payloads(reader& r, entry_header& h) {
  uint64_t end = h.payload_start();
  for (size_t i = 0; i < h.layers.size(); ++i) {
    auto& l = h.layers[i];
    if (auto err = read_sums(r, h, l.payload, end))
      return err;
    if (auto err = check_layer(l, i, h.tokens.size(), h.parent_tokens))
      return err;
  }
  for (auto& a : h.attachments)
    if (auto err = read_sums(r, h, a.payload, end))
      return err;
  bool none = h.layers.empty() && h.attachments.empty();
  if (h.file_length != (none ? uint64_t{h.header_length} : end))
    return corrupt("file length does not match the payloads");
  return {};
}

/// The key kind (fixed prefix, offset 36) and the owner fields: a kind
/// this version does not know is corrupt, a prefix or an object naming an
/// owner corrupt, an object with tokens or a session corrupt.
caf::error check_key(const entry_header& h, uint32_t kind, uint64_t ntokens) {
  if (kind > static_cast<uint32_t>(key_kind::object))
    return corrupt("unknown key kind " + std::to_string(kind));
  if (h.kind == key_kind::prefix && (h.request != 0 || h.attempt != 0))
    return corrupt("a prefix entry names a request");
  if (h.kind == key_kind::object) {
    if (h.request != 0 || h.attempt != 0)
      return corrupt("an object names a request");
    if (ntokens != 0)
      return corrupt("an object with " + std::to_string(ntokens)
                     + " tokens (must be 0)");
    if (h.session)
      return corrupt("an object with a session");
  }
  return {};
}

/// The rules of a delta file (version 3, a parent named): a prefix entry,
/// 0 < parent tokens < N, a parent name of the form `<32 hex>.kvt`, a
/// parent write id below its own, every layer kv.
caf::error check_delta(const entry_header& h) {
  if (h.parent.empty())
    return h.parent_write_id != 0
             ? corrupt("a parent write id without a parent file")
             : caf::error{};
  if (h.kind != key_kind::prefix)
    return corrupt("a " + std::string{to_string(h.kind)} + " names a parent");
  if (h.parent_tokens == 0 || h.parent_tokens >= h.tokens.size())
    return corrupt("parent tokens " + std::to_string(h.parent_tokens)
                   + " of an entry of " + std::to_string(h.tokens.size())
                   + " tokens");
  bool named =
    h.parent.size() == 36 && h.parent.ends_with(".kvt")
    && std::all_of(h.parent.begin(), h.parent.begin() + 32, [](char c) {
         return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
       });
  if (!named)
    return corrupt("parent file name is not <32 hex digits>.kvt");
  if (h.parent_write_id == 0 || h.parent_write_id >= h.write_id)
    return corrupt("parent write id " + std::to_string(h.parent_write_id)
                   + " not below the file's " + std::to_string(h.write_id));
  return {};
}

caf::error decode_body(reader& r, entry_header& h, uint32_t len) {
  auto kind = r.u32();
  h.kind = static_cast<key_kind>(std::min<uint32_t>(kind, 255));
  auto ntokens = r.u64();
  h.file_length = r.u64();
  h.write_id = r.u64();
  h.fingerprint = r.str();
  h.ns = r.str();
  auto session = r.u8();
  if (session > 1 && !r.bad)
    return corrupt("session flag " + std::to_string(session)
                   + " (must be 0 or 1)");
  if (session == 1)
    h.session = r.str();
  h.request = r.u64();
  h.attempt = r.u32();
  if (h.version >= 4) {
    // Written only when it is not the default: one encoding per header.
    auto p = r.u8();
    if ((p > max_priority || p == default_priority) && !r.bad)
      return corrupt("priority " + std::to_string(p)
                     + " in a version 4 "
                       "header (0 to 100, not the default 35)");
    h.priority = p;
  }
  h.parent = r.str();
  if (h.version >= 3)
    h.parent_write_id = r.u64();
  h.parent_tokens = r.u64();
  if (h.parent.empty() && h.parent_tokens != 0 && !r.bad)
    return corrupt("parent tokens " + std::to_string(h.parent_tokens)
                   + " without a parent file (must be 0)");
  if (!h.parent.empty() && h.version < 3 && !r.bad)
    return make_error(ec::incompatible_format,
                      "parent files are not supported by format version 2");
  // A delta lists only its own tokens; its length is bounded by the
  // largest position limit (2^24), so a crafted header cannot make the
  // reader allocate more.
  if (r.bad || h.parent_tokens > ntokens || ntokens - h.parent_tokens > len / 4
      || (h.parent_tokens > 0 && ntokens > max_delta_tokens))
    return corrupt("token count " + std::to_string(ntokens));
  if (auto err = check_key(h, kind, ntokens))
    return err;
  h.tokens.resize(ntokens);
  h.token_count = ntokens;
  if (auto err = check_delta(h))
    return err;
  // A delta's first parent_tokens tokens are its parent's: 0 until
  // `resolve_parent` fills them in.
  for (size_t i = h.parent_tokens; i < ntokens; ++i)
    h.tokens[i] = r.u32();
  h.tokens_resolved = h.parent.empty();
  return {};
}

} // namespace

caf::expected<entry_header> decode(std::span<const std::byte> bytes) {
  auto len = decode_header_length(bytes);
  if (!len)
    return len.error();
  if (bytes.size() < *len)
    return corrupt("truncated header");
  reader tail{bytes.subspan(*len - 8, 8)};
  auto sum = tail.u64();
  if (sum != XXH3_64bits(bytes.data(), *len - 8))
    return corrupt("header checksum mismatch");
  reader r{bytes.first(*len - 8)};
  r.uint(8); // magic, checked above
  entry_header h;
  h.version = r.u32(); // checked above
  h.header_length = *len;
  h.header_sum = sum;
  if (r.u32() != 0)
    return make_error(ec::incompatible_format, "unknown header flags");
  r.u32(); // header length
  h.alignment = r.u32();
  h.checksum_chunk = r.u32();
  auto nlayers = r.u32();
  auto nattach = r.u32();
  if (h.alignment == 0 || (h.alignment & (h.alignment - 1)) != 0
      || h.checksum_chunk == 0 || h.checksum_chunk % h.alignment != 0)
    return corrupt("bad alignment or checksum chunk");
  if (auto err = decode_body(r, h, *len))
    return err;
  if (nlayers > *len / 48 || nattach > *len / 20)
    return corrupt("layer or attachment count");
  if (h.kind == key_kind::object && nlayers != 0)
    return corrupt("an object with " + std::to_string(nlayers)
                   + " layers (its tensors are attachments)");
  if (auto err = read_layers(r, h, nlayers))
    return err;
  read_attachments(r, h, nattach);
  if (r.bad)
    return corrupt("truncated layer table");
  if (auto err = read_payloads(r, h))
    return err;
  if (r.bad || r.pos() != *len - 8)
    return corrupt("header length does not match its fields");
  return h;
}

caf::error check_storable(const entry& e) {
  for (size_t i = 0; i < e.layers.size(); ++i) {
    auto& l = e.layers[i];
    auto rule =
      record_rule(l.kind, l.bytes_per_token, l.window, l.tokens, l.min_offset);
    if (!rule.empty())
      return make_error(ec::invalid_argument,
                        "layer " + std::to_string(i) + ": " + rule);
  }
  return {};
}

uint64_t read_length(const entry_header& h, const payload_info& p,
                     uint64_t need) noexcept {
  auto n = align_up(std::min(need, p.length), h.checksum_chunk);
  return std::min(n, p.length);
}

caf::error verify(const entry_header& h, const payload_info& p,
                  std::span<const std::byte> data) {
  uint64_t chunk = h.checksum_chunk;
  for (uint64_t i = 0; i * chunk < data.size(); ++i) {
    auto n = std::min<uint64_t>(chunk, data.size() - i * chunk);
    if (i >= p.chunk_sums.size()
        || block_hash(data.subspan(i * chunk, n)) != p.chunk_sums[i])
      return make_error(ec::corrupt_data, "payload at "
                                            + std::to_string(p.offset)
                                            + ": checksum mismatch in chunk "
                                            + std::to_string(i));
  }
  return {};
}

uint64_t restore_bytes(const layer_info& l, uint64_t p) noexcept {
  if (p == l.tokens || l.kind == layer_kind::recurrent
      || l.kind == layer_kind::object)
    return l.payload.length;
  return p * l.bytes_per_token;
}

bool can_restore(const entry_header& h, uint64_t p) noexcept {
  if (p > h.token_count)
    return false;
  if (p == h.token_count)
    return true;
  for (auto& l : h.layers) {
    layer_state probe{l.kind,   l.bytes_per_token, l.window,
                      l.tokens, l.min_offset,      {}};
    if (!probe.can_trim_to(p))
      return false;
  }
  return true;
}

namespace {

/// 32 hex digits of XXH3-128 over (u8 kind, u64 request, u64 ns length, ns
/// bytes, tokens as little-endian u32).
std::string key_hash(key_kind kind, uint64_t request, std::string_view ns,
                     std::span<const token> tokens) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto k = static_cast<uint8_t>(kind);
  XXH3_128bits_update(st, &k, sizeof k);
  XXH3_128bits_update(st, &request, sizeof request);
  uint64_t n = ns.size();
  XXH3_128bits_update(st, &n, sizeof n);
  XXH3_128bits_update(st, ns.data(), ns.size());
  XXH3_128bits_update(st, tokens.data(), tokens.size_bytes());
  auto h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx",
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

} // namespace

std::string file_name(const storage_key& key) {
  return key_hash(key.kind, key.request, key.ns, key.tokens) + ".kvt";
}

std::string file_name(std::string_view ns, std::span<const token> tokens) {
  return key_hash(key_kind::prefix, 0, ns, tokens) + ".kvt";
}

std::string identity_hash(uint64_t request, std::string_view ns) {
  return key_hash(key_kind::checkpoint, request, ns, {});
}

} // namespace kvtier::tiers::ssd
