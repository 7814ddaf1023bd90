// The fuzz targets (targets.hpp); docs/testing.md "Fuzzing" says what each
// one covers and how its input is laid out.
#include "tests/fuzz/targets.hpp"

#include "messages/block_hash.hpp"
#include "messages/bulk_lane.hpp"
#include "messages/error.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config.hpp"
#include "runtime/http/endpoint.hpp"
#include "runtime/http/source.hpp"
#include "runtime/tools/trace.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/entry_format.hpp"

#include <capnp/message.h>
#include <xxhash.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::fuzz {

namespace {

/// A broken property: named on stderr, then a crash libFuzzer records.
[[noreturn]] void fail(const char* target, const std::string& what) {
  std::fprintf(stderr, "fuzz target %s: %s\n", target, what.c_str());
  std::abort();
}

ec code_of(const caf::error& err) {
  if (!err || err.category() != caf::atom("kvtier"))
    return ec::none;
  return static_cast<ec>(err.code());
}

/// `err` must be a kvtier error of one of the `allowed` codes with a
/// context saying what was wrong.
void expect_error(const char* target, const caf::error& err,
                  std::initializer_list<ec> allowed) {
  auto code = code_of(err);
  if (std::find(allowed.begin(), allowed.end(), code) == allowed.end())
    fail(target, "unexpected error: " + describe(err));
  if (reason(err).size() <= std::strlen(to_string(code)) + 2)
    fail(target, "an error without a context: " + describe(err));
}

std::span<const std::byte> bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

uint64_t le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= uint64_t{p[i]} << (8 * i);
  return v;
}

void put_le(std::byte* p, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<std::byte>(v >> (8 * i));
}

// --- entry_format: the SSD entry file's header (tiers/ssd/entry_format) ---

/// What a reader does with a decoded header and the file's bytes: every
/// payload's chunks verified as far as the bytes reach, restore sizes.
void use_header(const tiers::ssd::entry_header& h,
                std::span<const std::byte> file) {
  using namespace tiers::ssd;
  auto check = [&](const payload_info& p) {
    auto n = read_length(h, p, p.length);
    if (n > p.length)
      fail("entry_format", "read_length past the payload");
    if (p.offset <= file.size() && n <= file.size() - p.offset)
      if (auto err = verify(h, p, file.subspan(p.offset, n)))
        expect_error("entry_format", err, {ec::corrupt_data});
  };
  for (auto& l : h.layers) {
    check(l.payload);
    restore_bytes(l, h.token_count);
    restore_bytes(l, h.token_count / 2);
  }
  for (auto& a : h.attachments)
    check(a.payload);
  can_restore(h, h.token_count);
  can_restore(h, h.token_count / 2);
}

/// Decodes `file`; a header of this version must encode back to its bytes
/// (the decoder accepts one encoding per header).
void decode_entry(std::span<const std::byte> file) {
  using namespace tiers::ssd;
  auto h = decode(file);
  if (!h) {
    expect_error("entry_format", h.error(),
                 {ec::corrupt_data, ec::incompatible_format});
    return;
  }
  use_header(*h, file);
  if (h->version != format_version)
    return;
  auto copy = *h;
  auto again = encode(copy);
  if (again->size() < h->header_length
      || std::memcmp(again->data(), file.data(), h->header_length) != 0)
    fail("entry_format", "a decoded header encodes to other bytes");
}

/// The input as an entry file, then the same bytes with the header length
/// field set to the input's length and the trailing checksum made right, so
/// that mutations reach the fields behind the checksum.
int entry_format(const uint8_t* data, size_t size) {
  using namespace tiers::ssd;
  if (auto len = decode_header_length(bytes_of(data, size)); !len)
    expect_error("entry_format", len.error(),
                 {ec::corrupt_data, ec::incompatible_format});
  decode_entry(bytes_of(data, size));
  if (size < fixed_header_size + 8 || size > (1u << 20))
    return 0;
  // The header is the bytes up to the first whole payload alignment the
  // input names, or all of it.
  std::vector<std::byte> fixed(bytes_of(data, size).begin(),
                               bytes_of(data, size).end());
  auto len = static_cast<uint32_t>(le(data + 16, 4));
  if (len < fixed_header_size + 8 || len > size)
    len = static_cast<uint32_t>(size);
  put_le(fixed.data() + 16, len, 4);
  put_le(fixed.data() + len - 8, XXH3_64bits(fixed.data(), len - 8), 8);
  decode_entry(fixed);
  return 0;
}

// --- messages: Cap'n Proto flat bytes from a peer (messages/sealed.hpp) ---

template <class Root>
void decode_message(std::span<const std::byte> flat) {
  auto m = msg::sealed<Root>::from_flat(buffer::copy_of(flat));
  if (!m) {
    expect_error("messages", m.error(),
                 {ec::malformed_message, ec::message_limit_exceeded,
                  ec::incompatible_format});
    return;
  }
  // What handlers read: an entry (every root that carries one), when it
  // is the active member of its union (as handlers check: an inactive
  // member's pointer is never validated, and reading it is a bug).
  if constexpr (requires(typename Root::Reader r) {
                  { r.getEntry() } -> std::same_as<msg::Entry::Reader>;
                }) {
    bool active = true;
    if constexpr (requires(typename Root::Reader r) { r.isEntry(); })
      active = m->root().isEntry();
    auto e = active ? tiers::read_entry(*m, m->root().getEntry())
                    : caf::expected<tiers::entry>{tiers::entry{}};
    if (!e)
      expect_error("messages", e.error(),
                   {ec::malformed_message, ec::invalid_argument});
  }
  msg::to_string(*m);
  // A message that decoded re-encodes, and its bytes decode again.
  auto again = m->to_flat();
  if (!again) {
    expect_error("messages", again.error(), {ec::message_limit_exceeded});
    return;
  }
  auto twice = msg::sealed<Root>::from_flat(*again);
  if (!twice)
    fail("messages", "re-encoded " + m->root_name()
                       + " does not decode: " + describe(twice.error()));
}

using decoder = void (*)(std::span<const std::byte>);

constexpr decoder message_decoders[] = {
#define KVTIER_FUZZ_DECODER(name) &decode_message<msg::name>,
  KVTIER_MESSAGE_ROOTS(KVTIER_FUZZ_DECODER)
#undef KVTIER_FUZZ_DECODER
};

/// First byte: the root type (an index into KVTIER_MESSAGE_ROOTS, modulo
/// their number); the rest: the flat bytes.
int messages(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  constexpr size_t n = std::size(message_decoders);
  message_decoders[data[0] % n](bytes_of(data + 1, size - 1));
  return 0;
}

// --- bulk_lane: a lane transfer's header and reply (messages/bulk_lane) ---

/// Input: flags (bit 0: laneChecksum; bit 1: the reply's checksums made
/// right, bytes zero-padded to the length), totalLength (u64), a piece
/// count (u8) and that many piece lengths (u64), then the reply as the
/// lane sends it (status word, bytes, trailer), or with bit 1 the bytes
/// only. What verifies is decoded as the peer tier does: a
/// RestoreEntryReply and its entry.
int bulk_lane(const uint8_t* data, size_t size) {
  if (size < 10)
    return 0;
  uint8_t flags = data[0];
  uint64_t total = le(data + 1, 8);
  size_t count = data[9];
  size_t at = 10;
  if (size - at < 8 * count)
    return 0;
  capnp::MallocMessageBuilder b;
  auto h = b.initRoot<msg::TransferHeader>();
  h.setTransferId(7);
  h.setTotalLength(total);
  h.setBulkPort(9);
  h.setBulkToken(11);
  h.setLaneChecksum(flags & 1);
  auto pieces = h.initLanePieces(static_cast<unsigned>(count));
  for (size_t i = 0; i < count; ++i, at += 8)
    pieces.set(static_cast<unsigned>(i), le(data + at, 8));
  auto header = h.asReader();
  if (auto err = msg::check_lane_header(header, uint64_t{1} << 20)) {
    expect_error("bulk_lane", err,
                 {ec::invalid_argument, ec::malformed_message,
                  ec::message_limit_exceeded, ec::corrupt_data});
    return 0;
  }
  std::vector<std::byte> reply;
  auto rest = bytes_of(data + at, size - at);
  if (flags & 2) {
    // status ok, the bytes, the lane checksum over the pieces' blocks.
    reply.resize(8);
    auto bytes = rest.first(std::min<size_t>(rest.size(), total));
    buffer_builder flat{total};
    std::memset(flat.data(), 0, total);
    std::memcpy(flat.data(), bytes.data(), bytes.size());
    auto frozen = std::move(flat).freeze();
    reply.insert(reply.end(), frozen->data(), frozen->data() + total);
    std::vector<view> piece_views;
    uint64_t off = 0;
    for (auto n : header.getLanePieces()) {
      piece_views.push_back(view{frozen, off, n});
      off += n;
    }
    reply.resize(reply.size() + 8);
    put_le(reply.data() + reply.size() - 8, lane_checksum_of(piece_views), 8);
    h.setChecksum(XXH3_64bits(frozen->data(), total));
  } else {
    reply.assign(rest.begin(), rest.end());
  }
  size_t pos = 0;
  auto read = [&](std::byte* out, uint64_t n,
                  const msg::lane_landed& landed) -> caf::error {
    // Delivered in runs of at most 4 KiB, as a socket would.
    uint64_t done = 0;
    while (done < n) {
      if (pos == reply.size())
        return make_error(ec::io_error, "the reply ends after "
                                          + std::to_string(pos) + " bytes");
      auto k = std::min<uint64_t>({n - done, reply.size() - pos, 4096});
      std::memcpy(out + done, reply.data() + pos, k);
      landed(out + done, k);
      pos += k;
      done += k;
    }
    return {};
  };
  auto flat = msg::receive_lane(h.asReader(), read);
  if (!flat) {
    expect_error("bulk_lane", flat.error(),
                 {ec::invalid_argument, ec::corrupt_data, ec::io_error});
    if ((flags & 2) && code_of(flat.error()) == ec::corrupt_data)
      fail("bulk_lane", "right checksums refused: " + describe(flat.error()));
    return 0;
  }
  if ((*flat)->size() != total)
    fail("bulk_lane", "verified bytes of another length");
  decode_message<msg::RestoreEntryReply>((*flat)->bytes());
  return 0;
}

// --- config: the INI file and the command line (runtime/config) ---------

/// Input: the configuration file's text up to the first NUL, then
/// NUL-separated command-line arguments.
int config(const uint8_t* data, size_t size) {
  std::string_view in{reinterpret_cast<const char*>(data), size};
  auto nul = in.find('\0');
  std::string text{in.substr(0, nul)};
  std::vector<std::string> args{"kvtier"};
  while (nul != std::string_view::npos) {
    in.remove_prefix(nul + 1);
    nul = in.find('\0');
    args.emplace_back(in.substr(0, nul));
  }
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  runtime::kvtier_config cfg;
  if (auto err = cfg.load(static_cast<int>(argv.size()), argv.data(), text,
                          "fuzz.conf")) {
    expect_error("config", err, {ec::invalid_config});
    return 0;
  }
  if (auto m = runtime::running_model(cfg.options); !m)
    expect_error("config", m.error(), {ec::invalid_config});
  return 0;
}

// --- trace: the replay's trace reader (runtime/tools/trace) -------------

/// Input: a mode byte (0: the bytes as a plain trace; 1: as a `.gz` file;
/// 2: compressed by the target into a `.gz` file), then the file's bytes.
int trace(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  int mode = data[0] % 3;
  static const auto base =
    (std::filesystem::temp_directory_path()
     / ("kvtier-fuzz-trace-" + std::to_string(::getpid())))
      .string();
  auto path = mode == 0 ? base + ".jsonl" : base + ".jsonl.gz";
  if (mode == 2) {
    auto* f = gzopen(path.c_str(), "wb");
    if (!f)
      fail("trace", "cannot write " + path);
    if (size > 1)
      gzwrite(f, data + 1, static_cast<unsigned>(size - 1));
    gzclose(f);
  } else {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out.write(reinterpret_cast<const char*>(data + 1),
              static_cast<std::streamsize>(size - 1));
    if (!out)
      fail("trace", "cannot write " + path);
  }
  auto t = runtime::load_trace(path);
  std::filesystem::remove(path);
  if (!t) {
    expect_error("trace", t.error(), {ec::invalid_argument});
    return 0;
  }
  double last = 0;
  for (auto& r : t->requests) {
    if (r.arrival_s < last || !(r.arrival_s >= 0))
      fail("trace", "requests out of arrival order");
    last = r.arrival_s;
    if (r.input_tokens > runtime::max_trace_tokens
        || r.output_tokens > runtime::max_trace_tokens)
      fail("trace", "a length past max_trace_tokens");
    if (r.input_tokens <= 4096)
      runtime::prompt_tokens(r, t->block_size);
  }
  runtime::infinite_cache_hits(*t);
  return 0;
}

// --- http: the operator's endpoint (runtime/http) -----------------------

/// A service that answers with fixed values, or fails every call.
class fixed_source : public http::source {
public:
  explicit fixed_source(bool failing, bool with_node)
    : failing_(failing)
    , with_node_(with_node) {}

  caf::expected<runtime::service_report> report() override {
    if (failing_)
      return make_error(ec::closed, "the service is closed");
    return runtime::service_report{};
  }
  caf::expected<runtime::persistence_stats> stats() override {
    if (failing_)
      return make_error(ec::timeout, "no answer");
    return runtime::persistence_stats{};
  }
  runtime::latency_report latency() const override {
    return {};
  }
  std::optional<http::node_health> node() const override {
    if (!with_node_)
      return std::nullopt;
    return http::node_health{"n1", "127.0.0.1:4242",
                             std::chrono::milliseconds{10},
                             std::chrono::milliseconds{1000}};
  }
  caf::expected<runtime::durability_result> flush() override {
    if (failing_)
      return make_error(ec::io_error, "the disk failed");
    return runtime::durability_result{};
  }
  caf::expected<uint32_t> close_session(const std::string& id) override {
    if (failing_ || id.empty())
      return make_error(ec::invalid_argument, "no session '" + id + "'");
    return static_cast<uint32_t>(id.size());
  }
  caf::expected<runtime::reclaim_result> boundary(uint64_t want) override {
    if (failing_)
      return make_error(ec::queue_full, "busy");
    runtime::reclaim_result r;
    r.released_bytes = want / 2;
    return r;
  }

private:
  bool failing_;
  bool with_node_;
};

/// Input: flags (bit 0: the service fails every call; bit 1: it is a
/// cluster node; bit 2: an admin token "s3cret" is configured), then the
/// request's bytes as a client sends them.
int http_request(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t flags = data[0];
  fixed_source svc{(flags & 1) != 0, (flags & 2) != 0};
  http::endpoint_options opts;
  if (flags & 4)
    opts.admin_token = "s3cret";
  http::endpoint_counters counters;
  auto out = http::answer(
    svc, opts,
    std::string_view{reinterpret_cast<const char*>(data + 1), size - 1},
    &counters);
  unsigned status = 0;
  if (out.rfind("HTTP/1.", 0) != 0 || out.size() < 12
      || std::sscanf(out.c_str() + 9, "%3u", &status) != 1)
    fail("http", "not an HTTP response: " + out.substr(0, 80));
  if (status < 200 || status > 599)
    fail("http", "status " + std::to_string(status));
  // A healthy service never answers 500.
  if (!(flags & 1) && status == 500)
    fail("http", "500 from a healthy service: " + out.substr(0, 200));
  if (counters.requests.load() != 1)
    fail("http", "the request was not counted once");
  return 0;
}

constexpr target all[] = {
  {"entry_format", &entry_format},
  {"messages", &messages},
  {"bulk_lane", &bulk_lane},
  {"config", &config},
  {"trace", &trace},
  {"http", &http_request},
};

} // namespace

std::span<const target> targets() {
  return all;
}

const target* find_target(const char* name) {
  for (auto& t : all)
    if (std::strcmp(t.name, name) == 0)
      return &t;
  return nullptr;
}

} // namespace kvtier::fuzz
