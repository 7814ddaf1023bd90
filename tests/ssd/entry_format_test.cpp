#define BOOST_TEST_MODULE ssd_entry_format
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <cstring>
#include <random>
#include <tuple>

#include <xxhash.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

entry sample() {
  model_geometry g{"mix",
                   {{layer_kind::kv, 64, 0, 0},
                    {layer_kind::ring, 32, 8, 0},
                    {layer_kind::recurrent, 0, 0, 100},
                    {layer_kind::object, 0, 0, 50}}};
  auto e = runtime::oracle_engine{g, 16}.prefill("ns", token_seq{5, 6, 7});
  e.session = "s1";
  return e;
}

std::vector<std::byte> bytes_of(const buffer_ref& b, size_t n) {
  return {b->data(), b->data() + n};
}

/// The header of `sample()` as bytes, with the offsets of its fields.
struct sample_header {
  entry_header h;
  std::vector<std::byte> bytes;
  size_t session_flag = 0;
  size_t request = 0;
  size_t attempt = 0;
  size_t parent_write_id = 0;
  size_t parent_tokens = 0;
  size_t layer0 = 0;

  sample_header() {
    auto e = sample();
    h = layout(e, "fp", 512, 512);
    compute_checksums(h, e);
    bytes = bytes_of(encode(h), h.header_length);
    size_t at = 64 + 4 + h.fingerprint.size() + 4 + h.ns.size();
    session_flag = at;
    at += 1 + (h.session ? 4 + h.session->size() : 0);
    request = at;
    attempt = at + 8;
    at += 8 + 4;
    at += 4 + h.parent.size();
    parent_write_id = at;
    at += 8;
    parent_tokens = at;
    at += 8 + 4 * h.tokens.size();
    layer0 = at;
  }

  /// Offset of field `off` of layer record `i` (48 bytes each).
  size_t layer(size_t i, size_t off) const {
    return layer0 + 48 * i + off;
  }

  /// The header with `width` bytes at `at` set to `v` (little-endian) and
  /// the checksum recomputed: only the rule under test is broken.
  std::vector<std::byte> with(size_t at, uint64_t v, int width) const {
    return with({{at, v, width}});
  }

  /// The same for several fields at once.
  std::vector<std::byte>
  with(std::initializer_list<std::tuple<size_t, uint64_t, int>> fields) const {
    auto out = bytes;
    for (auto [at, v, width] : fields)
      for (int i = 0; i < width; ++i)
        out[at + i] = std::byte(static_cast<uint8_t>(v >> (8 * i)));
    auto sum = XXH3_64bits(out.data(), out.size() - 8);
    std::memcpy(out.data() + out.size() - 8, &sum, 8);
    return out;
  }
};

/// Whether `bytes` decode to `corrupt_data` naming `rule`.
bool refused_for(const std::vector<std::byte>& bytes, const std::string& rule) {
  auto d = decode(bytes);
  if (d) {
    BOOST_TEST_MESSAGE("decoded, expected a refusal naming: " << rule);
    return false;
  }
  auto text = describe(d.error());
  BOOST_TEST_MESSAGE(text);
  return d.error() == ec::corrupt_data && text.find(rule) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(header_round_trips_and_payloads_are_aligned) {
  auto e = sample();
  auto h = layout(e, "fp", 4096, 8192);
  compute_checksums(h, e);
  auto buf = encode(h);
  BOOST_TEST(buf->size() == h.payload_start());
  BOOST_TEST(h.payload_start() % 4096 == 0u);
  auto d = decode(buf->bytes());
  BOOST_REQUIRE(d);
  BOOST_TEST(d->fingerprint == "fp");
  BOOST_TEST(d->ns == "ns");
  BOOST_TEST(d->session.value_or("") == "s1");
  BOOST_TEST(d->tokens == e.tokens);
  BOOST_TEST(d->header_sum == h.header_sum);
  BOOST_REQUIRE(d->layers.size() == 4u);
  for (size_t i = 0; i < 4; ++i) {
    auto& l = d->layers[i];
    BOOST_TEST(l.payload.offset % 4096 == 0u);
    BOOST_TEST(l.payload.length == e.layers[i].byte_length());
    BOOST_TEST(l.payload.chunk_sums == h.layers[i].payload.chunk_sums);
    BOOST_TEST(static_cast<int>(l.kind) == static_cast<int>(e.layers[i].kind));
  }
  // kv holds 3 rows of its capacity only: 3 x 64 bytes.
  BOOST_TEST(d->layers[0].payload.length == 192u);
  BOOST_TEST(d->attachments.size() == 1u);
  BOOST_TEST(d->file_length == d->attachments[0].payload.offset + 16);
}

BOOST_AUTO_TEST_CASE(every_flipped_header_byte_is_detected) {
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  compute_checksums(h, e);
  auto good = bytes_of(encode(h), h.header_length);
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= std::byte{0x10};
    BOOST_TEST_CONTEXT("byte " << i) {
      BOOST_TEST(!decode(bad));
    }
  }
  for (size_t n = 0; n < good.size(); n += 7) {
    std::vector<std::byte> cut(good.begin(), good.begin() + n);
    BOOST_TEST(!decode(cut));
  }
}

BOOST_AUTO_TEST_CASE(other_versions_are_incompatible) {
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  compute_checksums(h, e);
  // Version 1 (before key kinds and write ids) and a future version 5.
  for (auto version : {1, 5}) {
    auto other = bytes_of(encode(h), h.header_length);
    other[8] = std::byte(version);
    auto r = decode(other);
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error() == ec::incompatible_format));
  }
}

BOOST_AUTO_TEST_CASE(a_version_no_format_has_is_a_corrupt_header) {
  // A version field that is garbage (a torn or overwritten header) is not
  // a newer format to keep for ever: the scan removes it, inspect says
  // corrupt. Up to max_plausible_format_version it is a format's.
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  compute_checksums(h, e);
  for (uint32_t version : {0u, 256u, 1482162179u, 255u}) {
    auto other = bytes_of(encode(h), h.header_length);
    std::memcpy(other.data() + 8, &version, 4);
    auto r = decode(other);
    BOOST_REQUIRE(!r);
    auto want = version == 255u ? ec::incompatible_format : ec::corrupt_data;
    BOOST_TEST((r.error() == want), version << ": " << describe(r.error()));
  }
}

namespace {

/// `s`'s header as version 2 wrote it: no parent write id field.
std::vector<std::byte> as_version_2(const sample_header& s) {
  auto out = s.bytes;
  out.erase(out.begin() + static_cast<ptrdiff_t>(s.parent_write_id),
            out.begin() + static_cast<ptrdiff_t>(s.parent_write_id) + 8);
  out[8] = std::byte{2};
  uint32_t len = static_cast<uint32_t>(out.size());
  std::memcpy(out.data() + 16, &len, 4);
  auto sum = XXH3_64bits(out.data(), out.size() - 8);
  std::memcpy(out.data() + out.size() - 8, &sum, 8);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_version_2_header_is_still_read) {
  sample_header s;
  auto v2 = as_version_2(s);
  auto d = decode(v2);
  BOOST_REQUIRE(d);
  BOOST_TEST(d->version == 2u);
  BOOST_TEST(d->tokens == s.h.tokens);
  BOOST_TEST(d->tokens_resolved);
  BOOST_TEST(d->parent.empty());
  BOOST_REQUIRE(d->layers.size() == s.h.layers.size());
  for (size_t i = 0; i < d->layers.size(); ++i) {
    BOOST_TEST(d->layers[i].payload.offset == s.h.layers[i].payload.offset);
    BOOST_TEST(d->layers[i].payload.chunk_sums
               == s.h.layers[i].payload.chunk_sums);
  }
  BOOST_TEST(d->file_length == s.h.file_length);
  // This code writes version 3.
  BOOST_TEST(static_cast<uint32_t>(s.bytes[8]) == 3u);
}

BOOST_AUTO_TEST_CASE(a_version_2_header_naming_a_parent_is_incompatible) {
  // Version 2 reserved the parent fields: a file naming one is not ours
  // to follow (it has no parent write id).
  sample_header s;
  auto v2 = as_version_2(s);
  // Splice a parent name and parent tokens into the version 2 header.
  std::vector<std::byte> out(
    v2.begin(), v2.begin() + static_cast<ptrdiff_t>(s.parent_write_id) - 4);
  uint32_t n = 8;
  auto put = [&](const void* p, size_t k) {
    auto c = static_cast<const std::byte*>(p);
    out.insert(out.end(), c, c + k);
  };
  put(&n, 4);
  put("0123.kvt", 8);
  uint64_t pt = 2;
  put(&pt, 8);
  out.insert(out.end(),
             v2.begin() + static_cast<ptrdiff_t>(s.parent_write_id) + 8,
             v2.end());
  uint32_t len = static_cast<uint32_t>(out.size());
  std::memcpy(out.data() + 16, &len, 4);
  auto sum = XXH3_64bits(out.data(), out.size() - 8);
  std::memcpy(out.data() + out.size() - 8, &sum, 8);
  auto p = decode(out);
  BOOST_REQUIRE(!p);
  BOOST_TEST((p.error() == ec::incompatible_format));
}

namespace {

model_geometry kv_geometry() {
  return {"kv2", {{layer_kind::kv, 16, 0, 0}, {layer_kind::kv, 8, 0, 0}}};
}

/// A delta header of `child` over `parent` (both prefilled by one oracle),
/// with write ids 5 (parent) and 9 (child).
entry_header delta_of(const entry& child, const entry_header& parent,
                      uint32_t chunk = 64) {
  auto h = layout(child, "fp", 16, chunk, file_name("ns", parent.tokens),
                  parent.tokens.size());
  h.write_id = 9;
  h.parent_write_id = parent.write_id;
  compute_checksums(h, child);
  return h;
}

entry_header whole_of(const entry& e, uint32_t chunk = 64) {
  auto h = layout(e, "fp", 16, chunk);
  h.write_id = 5;
  compute_checksums(h, e);
  return h;
}

token_seq upto(token n) {
  token_seq t;
  for (token i = 1; i <= n; ++i)
    t.push_back(i);
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_delta_header_holds_the_rows_past_its_parent) {
  runtime::oracle_engine o{kv_geometry(), 16};
  auto parent = whole_of(o.prefill("ns", upto(6)));
  auto child = o.prefill("ns", upto(10));
  auto h = delta_of(child, parent);
  BOOST_TEST(h.layers[0].payload.length == 4u * 16);
  BOOST_TEST(h.layers[1].payload.length == 4u * 8);
  auto d = decode(bytes_of(encode(h), h.header_length));
  BOOST_REQUIRE(d);
  BOOST_TEST(d->version == 3u);
  BOOST_TEST(d->parent == file_name("ns", upto(6)));
  BOOST_TEST(d->parent_write_id == 5u);
  BOOST_TEST(d->parent_tokens == 6u);
  BOOST_TEST(!d->tokens_resolved);
  BOOST_TEST(d->tokens.size() == 10u);
  // Only its own tokens are in the header; the parent gives the rest.
  BOOST_TEST((token_seq(d->tokens.begin() + 6, d->tokens.end())
              == token_seq{7, 8, 9, 10}));
  BOOST_TEST(d->layers[0].payload.chunk_sums == h.layers[0].payload.chunk_sums);
  BOOST_REQUIRE(!resolve_parent(*d, parent));
  BOOST_TEST(d->tokens_resolved);
  BOOST_TEST(d->tokens == upto(10));
  BOOST_TEST(file_name(d->key()) == file_name("ns", upto(10)));
  // The payload is rows 6..9 of each layer, hashed on their own.
  auto rows = flatten(payload_segments(h, child, 0));
  auto all = flatten(child.layers[0].segments);
  BOOST_TEST(rows.size() == 4u * 16);
  BOOST_TEST(std::equal(rows.begin(), rows.end(), all.begin() + 6 * 16));
}

BOOST_AUTO_TEST_CASE(
  a_delta_is_resolved_only_against_the_write_it_was_cut_from) {
  runtime::oracle_engine o{kv_geometry(), 16};
  auto parent = whole_of(o.prefill("ns", upto(6)));
  auto h = delta_of(o.prefill("ns", upto(10)), parent);
  auto d = decode(bytes_of(encode(h), h.header_length));
  BOOST_REQUIRE(d);
  auto rewritten = parent;
  rewritten.write_id = 7;
  auto err = resolve_parent(*d, rewritten);
  BOOST_TEST((err == ec::corrupt_data));
  BOOST_TEST(describe(err).find("rewritten") != std::string::npos);
  BOOST_TEST(!d->tokens_resolved);
  auto shorter = whole_of(o.prefill("ns", upto(5)));
  BOOST_TEST((resolve_parent(*d, shorter) == ec::corrupt_data));
  auto other = whole_of(o.prefill("other", upto(6)));
  BOOST_TEST((resolve_parent(*d, other) == ec::corrupt_data));
}

BOOST_AUTO_TEST_CASE(
  an_entry_holds_its_parents_rows_only_when_they_hash_alike) {
  runtime::oracle_engine o{kv_geometry(), 16};
  auto parent = whole_of(o.prefill("ns", upto(6)));
  auto child = o.prefill("ns", upto(10));
  BOOST_TEST(holds_rows_of(child, parent, parent.tokens));
  // A delta link: the child holds rows [6, 10) of a longer entry.
  auto longer = o.prefill("ns", upto(14));
  auto link = delta_of(child, parent);
  BOOST_TEST(holds_rows_of(longer, link, child.tokens));
  // The key comes with the header or from the SSD index (which keeps the
  // key, not the header's copy): another key than the entry's is refused,
  // and so is a key of another length than the header says.
  auto keyless = parent;
  keyless.tokens.clear();
  BOOST_TEST(!keyless.keyed());
  BOOST_TEST(holds_rows_of(child, keyless, parent.tokens));
  auto off_by_one = parent.tokens;
  off_by_one[3] += 1;
  BOOST_TEST(!holds_rows_of(child, keyless, off_by_one));
  BOOST_TEST(!holds_rows_of(child, keyless, std::span{parent.tokens}.first(5)));
  // Other bytes in the shared rows (another namespace's state under the
  // same tokens): refused.
  auto alien = o.prefill("ns2", upto(10));
  alien.ns = "ns";
  BOOST_TEST(!holds_rows_of(alien, parent, parent.tokens));
  // Not a strict prefix, another namespace: refused.
  BOOST_TEST(!holds_rows_of(o.prefill("ns", upto(6)), parent, parent.tokens));
  BOOST_TEST(
    !holds_rows_of(o.prefill("other", upto(10)), parent, parent.tokens));
  // A parent of another geometry: refused.
  runtime::oracle_engine wide{
    model_geometry{"kv2w",
                   {{layer_kind::kv, 32, 0, 0}, {layer_kind::kv, 8, 0, 0}}},
    16};
  BOOST_TEST(
    !holds_rows_of(wide.prefill("ns", upto(10)), parent, parent.tokens));
}

BOOST_AUTO_TEST_CASE(a_delta_header_breaking_a_rule_is_refused) {
  runtime::oracle_engine o{kv_geometry(), 16};
  auto parent = whole_of(o.prefill("ns", upto(6)));
  auto h = delta_of(o.prefill("ns", upto(10)), parent);
  auto bytes = bytes_of(encode(h), h.header_length);
  auto fix = [](std::vector<std::byte> b) {
    auto sum = XXH3_64bits(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &sum, 8);
    return b;
  };
  // Offsets: fingerprint "fp", ns "ns", no session, request, attempt.
  size_t parent_at = 64 + 4 + 2 + 4 + 2 + 1 + 8 + 4; // u32 length, 36 bytes
  size_t pwid = parent_at + 4 + 36;
  size_t ptok = pwid + 8;
  auto set = [&](size_t at, uint64_t v, int width) {
    auto b = bytes;
    for (int i = 0; i < width; ++i)
      b.at(at + i) = std::byte(static_cast<uint8_t>(v >> (8 * i)));
    return fix(b);
  };
  BOOST_TEST(static_cast<bool>(decode(fix(bytes))));
  BOOST_TEST(refused_for(set(pwid, 9, 8), "parent write id 9"));
  BOOST_TEST(refused_for(set(pwid, 0, 8), "parent write id 0"));
  BOOST_TEST(refused_for(set(parent_at + 4, 'X', 1), "parent file name"));
  BOOST_TEST(refused_for(set(ptok, 0, 8), "parent tokens 0"));
  // A checkpoint naming a parent.
  BOOST_TEST(refused_for(set(36, 1, 4), "names a parent"));
  // Only kv layers are deltas: a ring layer record is refused.
  size_t layers = ptok + 8 + 4 * 4;
  BOOST_TEST(refused_for(set(layers + 8, 8, 4), "window 8")); // kv with window
  auto ring = bytes;
  ring[layers] = std::byte{1};     // kind ring
  ring[layers + 8] = std::byte{8}; // window 8
  BOOST_TEST(refused_for(fix(ring), "a delta file with a ring layer"));
  // A whole file naming a parent write id without a parent.
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.parent_write_id, 3, 8),
                         "parent write id without a parent"));
}

BOOST_AUTO_TEST_CASE(chunk_verification_covers_only_what_was_read) {
  auto g = model_geometry{"kv", {{layer_kind::kv, 1000, 0, 0}}};
  auto e = runtime::oracle_engine{g}.prefill("ns", token_seq(40, 3));
  auto h = layout(e, "fp", 4096, 4096);
  compute_checksums(h, e);
  auto& p = h.layers[0].payload;
  BOOST_TEST(p.chunk_sums.size() == 10u); // 40000 bytes in 4 KiB chunks
  BOOST_TEST(read_length(h, p, 5000) == 8192u);
  BOOST_TEST(read_length(h, p, 40000) == 40000u);
  auto all = flatten(e.layers[0].segments);
  BOOST_TEST(!static_cast<bool>(verify(h, p, std::span{all}.first(8192))));
  all[9000] ^= std::byte{1}; // in chunk 2: outside an 8 KiB read
  BOOST_TEST(!static_cast<bool>(verify(h, p, std::span{all}.first(8192))));
  BOOST_TEST(static_cast<bool>(verify(h, p, all)));
}

BOOST_AUTO_TEST_CASE(restorable_prefixes_follow_the_trimming_rules) {
  auto e = sample(); // has recurrent and object layers: exact only
  auto h = layout(e, "fp", 512, 512);
  BOOST_TEST(can_restore(h, 3));
  BOOST_TEST(!can_restore(h, 2));
  auto g = model_geometry{
    "w", {{layer_kind::ring, 8, 4, 0}, {layer_kind::kv, 8, 0, 0}}};
  runtime::oracle_engine o{g};
  auto unwrapped = layout(o.prefill("ns", token_seq{1, 2, 3}), "fp", 512, 512);
  BOOST_TEST(can_restore(unwrapped, 2));
  BOOST_TEST(restore_bytes(unwrapped.layers[0], 2) == 16u);
  auto wrapped =
    layout(o.prefill("ns", token_seq{1, 2, 3, 4, 5}), "fp", 512, 512);
  BOOST_TEST(!can_restore(wrapped, 4));
  BOOST_TEST(file_name("ns", e.tokens) == file_name("ns", e.tokens));
  BOOST_TEST(file_name("ns", e.tokens) != file_name("ns2", e.tokens));
}

BOOST_AUTO_TEST_CASE(decoder_survives_mutations_behind_a_valid_checksum) {
  // The checksum stops accidental damage; the decoder must also refuse
  // inconsistent fields that carry a matching checksum, never reading out
  // of bounds or returning payloads outside the file.
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  compute_checksums(h, e);
  auto good = bytes_of(encode(h), h.header_length);
  std::mt19937_64 rng{42};
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    auto bad = good;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k)
      bad[8 + rng() % (bad.size() - 16)] = std::byte(rng());
    auto sum = XXH3_64bits(bad.data(), bad.size() - 8);
    std::memcpy(bad.data() + bad.size() - 8, &sum, 8);
    auto d = decode(bad);
    if (!d)
      continue;
    ++accepted;
    for (auto& l : d->layers) {
      BOOST_TEST(l.payload.offset % d->alignment == 0u);
      BOOST_TEST(l.payload.offset + l.payload.length <= d->file_length);
      BOOST_TEST(l.payload.offset >= d->payload_start());
    }
  }
  // Mutations of the token ids and names keep a header valid: some pass.
  BOOST_TEST(accepted > 0u);
  BOOST_TEST(accepted < 20000u);
}

// docs/ssd-format.md, "must be" by "must be": each test breaks one rule
// behind a valid checksum and expects `corrupt_data` naming that rule.
// Layers of `sample()`: 0 kv (64 B/token), 1 ring (32 B, window 8),
// 2 recurrent (100 B), 3 object (50 B); 3 tokens.

BOOST_AUTO_TEST_CASE(the_untouched_sample_header_decodes) {
  sample_header s;
  BOOST_TEST(static_cast<bool>(decode(s.bytes)));
}

BOOST_AUTO_TEST_CASE(the_key_kind_and_its_owner_follow_their_rules) {
  // Version 2 uses the fixed prefix's formerly reserved fields: the key
  // kind at 36, the write id at 56.
  sample_header s;
  BOOST_TEST(refused_for(s.with(36, 9, 4), "unknown key kind 9"));
  BOOST_TEST(refused_for(s.with(s.request, 7, 8), "names a request"));
  BOOST_TEST(refused_for(s.with(s.attempt, 1, 4), "names a request"));
  // The object kind holds no tokens (the sample has three).
  BOOST_TEST(refused_for(s.with(36, 2, 4), "an object with 3 tokens"));
  // A checkpoint names its request and attempt; any write id decodes.
  auto cp = decode(s.with({{36, 1, 4},
                           {s.request, 7, 8},
                           {s.attempt, 3, 4},
                           {56, uint64_t{1} << 40, 8}}));
  BOOST_REQUIRE(cp);
  BOOST_TEST((cp->kind == key_kind::checkpoint));
  BOOST_TEST(cp->request == 7u);
  BOOST_TEST(cp->attempt == 3u);
  BOOST_TEST(cp->write_id == uint64_t{1} << 40);
  BOOST_TEST((cp->key() == storage_key::checkpoint(7, 3, "ns", cp->tokens)));
}

BOOST_AUTO_TEST_CASE(the_header_round_trips_its_key) {
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  h.kind = key_kind::checkpoint;
  h.request = 42;
  h.attempt = 2;
  h.write_id = 99;
  compute_checksums(h, e);
  auto d = decode(bytes_of(encode(h), h.header_length));
  BOOST_REQUIRE(d);
  BOOST_TEST((d->key() == storage_key::checkpoint(42, 2, "ns", e.tokens)));
  BOOST_TEST(d->write_id == 99u);
  // Its file name is the checkpoint key's, not the prefix (ns, tokens)'s.
  BOOST_TEST(file_name(d->key()) != file_name("ns", e.tokens));
}

namespace {

/// An object's entry: its tensors as attachments under its key, no tokens.
entry object_entry() {
  auto e = sample();
  entry o;
  o.ns = "image-7";
  o.attachments = {{"pixels", e.layers[0].segments},
                   {"patches", e.layers[2].segments},
                   {"empty", {}}};
  return o;
}

/// `e`'s header as an object file, encoded.
std::vector<std::byte> object_bytes(const entry& e,
                                    entry_header* out = nullptr) {
  auto h = layout(e, "fp", 512, 512);
  h.kind = key_kind::object;
  compute_checksums(h, e);
  auto bytes = bytes_of(encode(h), h.header_length);
  if (out)
    *out = h;
  return bytes;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_object_header_round_trips_its_attachments) {
  auto e = object_entry();
  entry_header h;
  auto d = decode(object_bytes(e, &h));
  BOOST_REQUIRE(d);
  BOOST_TEST((d->key() == storage_key::object("image-7")));
  BOOST_TEST(d->tokens.empty());
  BOOST_TEST(d->layers.empty());
  BOOST_REQUIRE(d->attachments.size() == 3u);
  for (size_t i = 0; i < 3; ++i) {
    BOOST_TEST(d->attachments[i].name == e.attachments[i].name);
    BOOST_TEST(d->attachments[i].payload.length
               == total_length(e.attachments[i].segments));
    BOOST_TEST(d->attachments[i].payload.chunk_sums
               == h.attachments[i].payload.chunk_sums);
  }
  BOOST_TEST(d->file_length == h.file_length);
  // Its own name: neither the prefix (ns, no tokens) nor a checkpoint's.
  BOOST_TEST(file_name(d->key()) != file_name("image-7", {}));
  BOOST_TEST(file_name(d->key())
             != file_name(storage_key::checkpoint(0, 0, "image-7", {})));
}

BOOST_AUTO_TEST_CASE(an_object_header_holds_attachments_only) {
  auto e = object_entry();
  entry_header h;
  auto bytes = object_bytes(e, &h);
  auto with = [&](size_t at, uint64_t v, int width) {
    auto out = bytes;
    for (int i = 0; i < width; ++i)
      out[at + i] = std::byte(static_cast<uint8_t>(v >> (8 * i)));
    auto sum = XXH3_64bits(out.data(), out.size() - 8);
    std::memcpy(out.data() + out.size() - 8, &sum, 8);
    return out;
  };
  BOOST_TEST(refused_for(with(40, 1, 8), "an object with 1 tokens"));
  BOOST_TEST(refused_for(with(28, 1, 4), "an object with 1 layers"));
  // request id: after the fingerprint, the key and the session flag.
  size_t request = 64 + 4 + h.fingerprint.size() + 4 + h.ns.size() + 1;
  BOOST_TEST(refused_for(with(request, 5, 8), "an object names a request"));
  BOOST_TEST(refused_for(with(request + 8, 1, 4), "an object names a request"));
  auto with_session = e;
  with_session.session = "s1";
  BOOST_TEST(
    refused_for(object_bytes(with_session), "an object with a session"));
}

BOOST_AUTO_TEST_CASE(the_session_flag_must_be_zero_or_one) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.session_flag, 2, 1), "session flag 2"));
}

BOOST_AUTO_TEST_CASE(parent_tokens_must_be_zero_without_a_parent_file) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.parent_tokens, 3, 8), "parent tokens 3"));
}

BOOST_AUTO_TEST_CASE(a_layer_records_padding_and_reserved_field_are_zero) {
  sample_header s;
  for (size_t off : {1, 2, 3})
    BOOST_TEST(refused_for(s.with(s.layer(0, off), 1, 1), "padding"));
  BOOST_TEST(refused_for(s.with(s.layer(1, 12), 7, 4), "reserved"));
}

BOOST_AUTO_TEST_CASE(an_unknown_layer_kind_is_refused) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.layer(0, 0), 4, 1), "unknown layer kind"));
}

BOOST_AUTO_TEST_CASE(recurrent_and_object_layers_have_no_bytes_per_token) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.layer(2, 4), 8, 4),
                         "recurrent layer with bytes per token 8"));
  BOOST_TEST(refused_for(s.with(s.layer(3, 4), 8, 4),
                         "object layer with bytes per token 8"));
}

BOOST_AUTO_TEST_CASE(only_a_ring_has_a_window) {
  sample_header s;
  BOOST_TEST(
    refused_for(s.with(s.layer(0, 8), 4, 4), "kv layer with window 4"));
  BOOST_TEST(
    refused_for(s.with(s.layer(2, 8), 4, 4), "recurrent layer with window 4"));
  BOOST_TEST(
    refused_for(s.with(s.layer(3, 8), 4, 4), "object layer with window 4"));
}

BOOST_AUTO_TEST_CASE(a_rings_window_is_positive) {
  sample_header s;
  BOOST_TEST(
    refused_for(s.with(s.layer(1, 8), 0, 4), "ring layer with window 0"));
}

BOOST_AUTO_TEST_CASE(an_object_layer_encodes_no_tokens) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.layer(3, 16), 1, 8),
                         "object layer encoding 1 tokens"));
}

BOOST_AUTO_TEST_CASE(a_non_object_layer_encodes_the_entrys_tokens) {
  sample_header s;
  BOOST_TEST(
    refused_for(s.with(s.layer(2, 16), 2, 8), "encodes 2 tokens, the entry 3"));
}

BOOST_AUTO_TEST_CASE(the_minimum_offset_is_within_the_layers_tokens) {
  sample_header s;
  BOOST_TEST(refused_for(s.with(s.layer(0, 24), 4, 8), "minimum offset 4"));
}

BOOST_AUTO_TEST_CASE(kv_and_ring_payloads_have_their_geometrys_length) {
  sample_header s;
  // kv: 3 tokens x 65 != 192 bytes; ring: min(3, 8) x 33 != 96 bytes.
  BOOST_TEST(refused_for(s.with(s.layer(0, 4), 65, 4),
                         "payload of 192 bytes, its geometry says 195"));
  BOOST_TEST(refused_for(s.with(s.layer(1, 4), 33, 4),
                         "payload of 96 bytes, its geometry says 99"));
  // A ring's rows stop at its window: a window of 2 holds 2 rows, not 3.
  BOOST_TEST(refused_for(s.with(s.layer(1, 8), 2, 4),
                         "payload of 96 bytes, its geometry says 64"));
}

BOOST_AUTO_TEST_CASE(the_writer_refuses_what_the_decoder_would) {
  // An entry the format cannot hold is refused before a byte is written.
  auto e = sample();
  BOOST_TEST(!check_storable(e));
  auto kv_window = e;
  kv_window.layers[0].window = 5;
  auto err = check_storable(kv_window);
  BOOST_TEST((err == ec::invalid_argument));
  BOOST_TEST(describe(err).find("layer 0: kv layer with window 5")
             != std::string::npos);
  auto object_tokens = e;
  object_tokens.layers[3].tokens = 3;
  BOOST_TEST(describe(check_storable(object_tokens))
               .find("layer 3: object layer encoding 3 tokens")
             != std::string::npos);
  auto recurrent_rows = e;
  recurrent_rows.layers[2].bytes_per_token = 4;
  BOOST_TEST((check_storable(recurrent_rows) == ec::invalid_argument));
}

BOOST_AUTO_TEST_CASE(
  a_priority_other_than_the_default_is_written_as_version_4) {
  // Default priority: version 3, byte for byte as before the field.
  sample_header plain;
  BOOST_TEST(static_cast<uint32_t>(plain.bytes[8]) == 3u);
  BOOST_TEST(decode(plain.bytes)->priority == default_priority);
  for (uint8_t p : {uint8_t{0}, uint8_t{36}, max_priority}) {
    auto e = sample();
    e.priority = p;
    auto h = layout(e, "fp", 512, 512);
    compute_checksums(h, e);
    BOOST_TEST(h.version == 4u);
    BOOST_TEST(h.header_length == plain.h.header_length + 1);
    auto bytes = bytes_of(encode(h), h.header_length);
    BOOST_TEST(static_cast<uint32_t>(bytes[8]) == 4u);
    auto d = decode(bytes);
    BOOST_REQUIRE(d);
    BOOST_TEST(d->version == 4u);
    BOOST_TEST(d->priority == p);
    BOOST_TEST(d->tokens == plain.h.tokens);
    BOOST_TEST(d->file_length == h.file_length);
    // The priority byte follows the attempt (offset as in sample_header).
    size_t at = plain.attempt + 4;
    BOOST_TEST(static_cast<uint8_t>(bytes[at]) == p);
    // Out of range, or the default (one encoding per header): corrupt.
    for (uint8_t bad : {uint8_t{101}, uint8_t{255}, default_priority}) {
      auto b = bytes;
      b[at] = std::byte(bad);
      auto sum = XXH3_64bits(b.data(), b.size() - 8);
      std::memcpy(b.data() + b.size() - 8, &sum, 8);
      BOOST_TEST(refused_for(b, "priority"));
    }
  }
}
