// fuzz_seeds DIR: writes the generated seed inputs of every fuzz target
// (targets.hpp) into DIR/<target>/seed-<name>, made by kvtier's own
// encoders (entry files, flat messages, lane replies) or written out as
// the formats' documents say (configuration, traces, HTTP requests). The
// same bytes every run: `make fuzz` regenerates them into
// tests/fuzz/corpus/ and git sees no change unless an encoder changed.
#include "messages/block_hash.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config.hpp"
#include "tests/messages/fixtures.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <xxhash.h>
#include <zlib.h>

#include <concepts>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace fs = std::filesystem;
using namespace kvtier;

namespace {

fs::path root;
int written = 0;

using bytes = std::vector<std::byte>;

bytes of(std::string_view s) {
  auto p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

bytes of(const buffer_ref& b) {
  return {b->data(), b->data() + b->size()};
}

/// Writes DIR/target/seed-name unless it holds these bytes already.
void seed(const char* target, const std::string& name, const bytes& b) {
  auto dir = root / target;
  fs::create_directories(dir);
  auto path = dir / ("seed-" + name);
  if (fs::exists(path) && fs::file_size(path) == b.size()) {
    std::ifstream in{path, std::ios::binary};
    std::string old((std::istreambuf_iterator<char>(in)), {});
    if (old.size() == b.size()
        && std::memcmp(old.data(), b.data(), b.size()) == 0)
      return;
  }
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(reinterpret_cast<const char*>(b.data()),
            static_cast<std::streamsize>(b.size()));
  ++written;
}

bytes with_byte(uint8_t first, const bytes& rest) {
  bytes out{std::byte{first}};
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

void put_le(bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

// --- entry_format ---------------------------------------------------------

/// A whole entry file: the header, then every payload at its offset.
bytes entry_file(tiers::ssd::entry_header& h, const tiers::entry& e) {
  using namespace tiers::ssd;
  compute_checksums(h, e);
  auto head = encode(h);
  bytes out(h.file_length, std::byte{0});
  std::memcpy(out.data(), head->data(), h.header_length);
  auto place = [&](const payload_info& p, const std::vector<view>& segs) {
    uint64_t at = p.offset;
    for (auto& s : segs) {
      std::memcpy(out.data() + at, s.bytes().data(), s.length);
      at += s.length;
    }
  };
  for (size_t i = 0; i < e.layers.size(); ++i)
    place(h.layers[i].payload, payload_segments(h, e, i));
  for (size_t i = 0; i < e.attachments.size(); ++i)
    place(h.attachments[i].payload, e.attachments[i].segments);
  return out;
}

void entry_format_seeds() {
  using namespace tiers::ssd;
  using tiers::layer_kind;
  const char* t = "entry_format";
  for (auto kind : {layer_kind::kv, layer_kind::ring, layer_kind::recurrent,
                    layer_kind::object}) {
    auto e = test::sample_entry(kind, 6, 1);
    auto h = layout(e, "fp", 64, 128);
    h.write_id = 3;
    seed(t, std::string{"prefix-"} + tiers::to_string(kind), entry_file(h, e));
  }
  auto e = test::sample_entry(layer_kind::kv, 6, 2);
  auto cp = layout(e, "fp", 64, 128);
  cp.kind = tiers::key_kind::checkpoint;
  cp.request = 42;
  cp.attempt = 1;
  cp.write_id = 5;
  seed(t, "checkpoint", entry_file(cp, e));
  auto delta =
    layout(e, "fp", 64, 128, "0123456789abcdef0123456789abcdef.kvt", 3);
  delta.parent_write_id = 4;
  delta.write_id = 9;
  seed(t, "delta", entry_file(delta, e));
  // An exact tensor object: no tokens, no layers, tensors as attachments.
  tiers::entry obj;
  obj.ns = "objects";
  obj.attachments.push_back({"weights", {view::of(test::pattern(200, 3))}});
  auto oh = layout(obj, "fp", 64, 128);
  oh.kind = tiers::key_kind::object;
  oh.write_id = 1;
  seed(t, "object", entry_file(oh, obj));
}

// --- messages and bulk_lane ----------------------------------------------

template <class Root>
bytes flat_of(msg::draft<Root>&& d) {
  return of(*std::move(d).seal().to_flat());
}

/// A message of every root: empty, and with an entry where it has one.
template <class Root>
void message_seeds(uint8_t index, const char* name) {
  seed("messages", std::string{name},
       with_byte(index, flat_of(msg::draft<Root>{})));
  if constexpr (requires(typename Root::Builder b) {
                  { b.initEntry() } -> std::same_as<msg::Entry::Builder>;
                }) {
    msg::draft<Root> d;
    auto e = test::sample_entry(tiers::layer_kind::kv, 6, index);
    tiers::write_entry(d, d.root().initEntry(), e);
    seed("messages", std::string{name} + "-entry",
         with_byte(index, flat_of(std::move(d))));
  }
}

void messages_seeds() {
  uint8_t index = 0;
#define KVTIER_FUZZ_SEED(name) message_seeds<msg::name>(index++, #name);
  KVTIER_MESSAGE_ROOTS(KVTIER_FUZZ_SEED)
#undef KVTIER_FUZZ_SEED
}

/// The lane target's input for `flat` cut into `pieces` (flags bit 0:
/// laneChecksum; bit 1: the target makes the checksums; else the reply
/// carries the right ones).
bytes lane_input(uint8_t flags, const bytes& flat,
                 const std::vector<uint64_t>& pieces) {
  bytes out{std::byte{flags}};
  put_le(out, flat.size(), 8);
  out.push_back(static_cast<std::byte>(pieces.size()));
  for (auto n : pieces)
    put_le(out, n, 8);
  if (flags & 2) {
    out.insert(out.end(), flat.begin(), flat.end());
    return out;
  }
  put_le(out, 0, 8); // status ok
  out.insert(out.end(), flat.begin(), flat.end());
  auto buf = buffer::copy_of(flat);
  std::vector<view> views;
  uint64_t at = 0;
  for (auto n : pieces) {
    views.push_back(view{buf, at, n});
    at += n;
  }
  put_le(out, lane_checksum_of(views), 8);
  return out;
}

void bulk_lane_seeds() {
  msg::draft<msg::RestoreEntryReply> d;
  auto e = test::sample_entry(tiers::layer_kind::kv, 6, 7);
  tiers::write_entry(d, d.root().initEntry(), e);
  auto flat = flat_of(std::move(d));
  auto half = flat.size() / 16 * 8;
  seed("bulk_lane", "one-piece", lane_input(3, flat, {flat.size()}));
  seed("bulk_lane", "two-pieces",
       lane_input(3, flat, {half, flat.size() - half}));
  seed("bulk_lane", "sent-checksums", lane_input(1, flat, {flat.size()}));
  seed("bulk_lane", "refused", [] {
    bytes out{std::byte{1}};
    put_le(out, 64, 8);
    out.push_back(std::byte{1});
    put_le(out, 64, 8);
    put_le(out, 1, 8); // status refused
    return out;
  }());
}

// --- config, trace, http --------------------------------------------------

void config_seeds() {
  seed("config", "embedded-default", of(runtime::embedded_default_config()));
  seed("config", "small",
       of("[ram-tier]\ncap-bytes = 64MiB\npolicy = \"gdsf\"\n"
          "[ssd-tier]\ndir = \"/tmp/kvtier-ssd\"\n"
          "[model]\npreset = \"llama-3.1-8b\"\nscale = 0.5\n"));
  std::string args = "[http]\nenabled = true\n";
  args += '\0';
  args += "--ram-tier.cap-bytes=1GiB";
  args += '\0';
  args += "--http.port=0";
  args += '\0';
  args += "--ssd-tier.write-behind";
  seed("config", "command-line", of(args));
  seed("config", "layers",
       of("[model]\nlayers = \"4*(3*ring:64:16,kv:64),recurrent:512\"\n"));
}

bytes gzip(const std::string& text) {
  uLongf n = compressBound(static_cast<uLong>(text.size())) + 32;
  bytes out(n);
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
               Z_DEFAULT_STRATEGY);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void trace_seeds() {
  std::string mooncake =
    "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 50, "
    "\"hash_ids\": [0, 1, 2]}\n"
    "{\"timestamp\": 250, \"input_length\": 700, \"output_length\": 20, "
    "\"hash_ids\": [0, 3]}\n";
  std::string weka =
    "{\"id\":\"t1\",\"block_size\":64,\"requests\":[{\"t\":0.0,\"model\":"
    "\"m\",\"in\":200,\"out\":10,\"hash_ids\":[1,2,3]},{\"t\":1.5,\"model\":"
    "\"m\",\"in\":260,\"out\":5,\"hash_ids\":[1,2,3,4],\"subagent\":{"
    "\"requests\":[{\"t\":2.0,\"model\":\"m\",\"in\":64,\"out\":1,"
    "\"hash_ids\":[9]}]}}]}";
  std::string azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                      "2023-11-16 18:17:03.9799600,4808,10\n"
                      "2023-11-16 18:17:04.0319600,3180,8\n";
  seed("trace", "mooncake", with_byte(0, of(mooncake)));
  seed("trace", "weka", with_byte(0, of(weka)));
  seed("trace", "azure", with_byte(0, of(azure)));
  seed("trace", "mooncake-gz", with_byte(1, gzip(mooncake)));
  seed("trace", "weka-compressed", with_byte(2, of(weka)));
}

void http_seeds() {
  const char* t = "http";
  seed(t, "metrics",
       with_byte(0, of("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")));
  seed(t, "stats", with_byte(2, of("GET /stats HTTP/1.0\r\n\r\n")));
  seed(t, "health-head", with_byte(2, of("HEAD /health HTTP/1.1\r\n\r\n")));
  seed(t, "health-failing", with_byte(1, of("GET /health HTTP/1.1\r\n\r\n")));
  seed(t, "flush",
       with_byte(4, of("POST /admin/cache/flush HTTP/1.1\r\nAuthorization: "
                       "Bearer s3cret\r\nContent-Length: 0\r\n\r\n")));
  seed(t, "drop",
       with_byte(0, of("POST /admin/ram/drop?bytes=1024 HTTP/1.1\r\n"
                       "Content-Length: 0\r\n\r\n")));
  seed(t, "close-session",
       with_byte(0, of("POST /admin/sessions/conv%2D1/close HTTP/1.1\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
                       "\r\n")));
  seed(t, "not-found", with_byte(0, of("DELETE /nothing HTTP/1.1\r\n\r\n")));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  root = argv[1];
  entry_format_seeds();
  messages_seeds();
  bulk_lane_seeds();
  config_seeds();
  trace_seeds();
  http_seeds();
  std::printf("fuzz_seeds: %d seed files written under %s\n", written, argv[1]);
  return 0;
}
