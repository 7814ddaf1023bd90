#define BOOST_TEST_MODULE ssd_entry_format
#include <boost/test/unit_test.hpp>

#include "runtime/oracle.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <cstring>
#include <random>

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

BOOST_AUTO_TEST_CASE(other_versions_and_parent_files_are_incompatible) {
  auto e = sample();
  auto h = layout(e, "fp", 512, 512);
  compute_checksums(h, e);
  // Version 1 (before key kinds and write ids) and a future version 3.
  for (auto version : {1, 3}) {
    auto other = bytes_of(encode(h), h.header_length);
    other[8] = std::byte(version);
    auto r = decode(other);
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error() == ec::incompatible_format));
  }
  // A header naming a parent file (reserved for incremental appends).
  h.parent = "0123.kvt";
  h.parent_tokens = 2;
  h.header_length += static_cast<uint32_t>(h.parent.size());
  auto with_parent = encode(h);
  auto p = decode(bytes_of(with_parent, h.header_length));
  BOOST_REQUIRE(!p);
  BOOST_TEST((p.error() == ec::incompatible_format));
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
