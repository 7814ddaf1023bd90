#include "runtime/tools/trace.hpp"

#include "runtime/tools/mix.hpp"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <list>
#include <span>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kvtier::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

const char* to_string(trace_format f) {
  switch (f) {
    case trace_format::mooncake: return "mooncake";
    case trace_format::weka: return "weka";
    case trace_format::azure: return "azure";
  }
  return "unknown";
}

namespace {

uint64_t str_hash(std::string_view s) {
  return fmix64(fnv1a(s));
}

/// A block id made unique across scopes (file, model).
uint64_t block_key(uint64_t scope, uint64_t id) {
  return fmix64(scope ^ fmix64(id + golden));
}

bool gzipped(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

/// A trace file's name without a `.gz`: a compressed copy scopes its keys
/// and reports as the original, so both replay the same tokens.
std::string file_name(const std::string& path) {
  auto n = fs::path(path).filename().string();
  if (gzipped(n))
    n.resize(n.size() - 3);
  return n;
}

caf::error bad(const std::string& file, size_t line, const std::string& what) {
  return make_error(ec::invalid_argument,
                    file + (line ? ":" + std::to_string(line) : "") + ": "
                      + what);
}

/// A value a reader refuses, with what is wrong (thrown inside a reader
/// and turned into its `bad` error at the reader's boundary, with the
/// file and the line or record).
struct bad_value : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A `bad_value` that already says where in the file it is.
struct placed_value : bad_value {
  using bad_value::bad_value;
};

/// `v` as a token count: a whole number 0 .. max_trace_tokens.
uint64_t as_count(const json& v, const std::string& name) {
  if (v.is_number_integer() && !v.is_number_unsigned())
    throw bad_value{name + " " + v.dump() + " is negative"};
  if (!v.is_number_unsigned())
    throw bad_value{name + " " + v.dump() + " is not a whole number"};
  auto n = v.get<uint64_t>();
  if (n > max_trace_tokens)
    throw bad_value{name + " " + std::to_string(n) + " is past the limit of "
                    + std::to_string(max_trace_tokens) + " tokens"};
  return n;
}

/// `j[key]`, which must be there.
const json& field(const json& j, const char* key) {
  if (!j.is_object())
    throw bad_value{"not a JSON object"};
  auto i = j.find(key);
  if (i == j.end())
    throw bad_value{std::string{"missing "} + key};
  return *i;
}

double as_time(const json& v, const std::string& name) {
  if (!v.is_number())
    throw bad_value{name + " " + v.dump() + " is not a number"};
  // Before the trace's start: the replay would schedule it in the past.
  if (v.get<double>() < 0)
    throw bad_value{name + " " + v.dump() + " is negative"};
  return v.get<double>();
}

/// A `hash_ids` list: block ids, each a whole number 0 .. 2^64 - 1.
template <class Add>
void for_each_block(const json& v, Add&& add) {
  if (!v.is_array())
    throw bad_value{"hash_ids is not a list"};
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_unsigned())
      throw bad_value{"hash_ids[" + std::to_string(i) + "] " + v[i].dump()
                      + " is not a block id (a whole number >= 0)"};
    add(v[i].get<uint64_t>());
  }
}

caf::error load_mooncake(const std::string& path, std::istream& in,
                         trace& out) {
  out.format = trace_format::mooncake;
  out.block_size = 512;
  auto scope = str_hash(file_name(path));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    try {
      auto j = json::parse(line);
      trace_request r;
      r.arrival_s = as_time(field(j, "timestamp"), "timestamp") / 1000.0;
      r.input_tokens = as_count(field(j, "input_length"), "input_length");
      r.output_tokens = as_count(field(j, "output_length"), "output_length");
      for_each_block(field(j, "hash_ids"), [&](uint64_t id) {
        r.blocks.push_back(block_key(scope, id));
      });
      r.tail_seed = fmix64(scope + n);
      out.requests.push_back(std::move(r));
    } catch (const bad_value& e) {
      return bad(path, n, e.what());
    } catch (const std::exception& e) {
      return bad(path, n, std::string{"not a mooncake request: "} + e.what());
    }
  }
  return {};
}

/// The requests of `reqs` (the list at `where`, e.g. "requests[2].requests").
void add_weka_requests(const json& reqs, const std::string& where, double start,
                       uint64_t file_scope, const std::string& session,
                       trace& out) {
  if (!reqs.is_array())
    throw placed_value{where + ": not a list"};
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& q = reqs[i];
    auto at = where + "[" + std::to_string(i) + "]";
    trace_request r;
    try {
      double t = start + as_time(field(q, "t"), "t");
      if (q.value("type", "") == "subagent") {
        add_weka_requests(field(q, "requests"), at + ".requests", t, file_scope,
                          session, out);
        continue;
      }
      r.arrival_s = t;
      r.input_tokens = as_count(field(q, "in"), "in");
      r.output_tokens = as_count(field(q, "out"), "out");
      r.ns = q.value("model", "");
      r.session = session;
      auto scope = fmix64(file_scope ^ str_hash(r.ns));
      for_each_block(field(q, "hash_ids"), [&](uint64_t id) {
        r.blocks.push_back(block_key(scope, id));
      });
    } catch (const placed_value&) {
      throw; // a nested request's
    } catch (const bad_value& e) {
      throw placed_value{at + ": " + e.what()};
    } catch (const json::exception& e) {
      throw placed_value{at + ": " + e.what()};
    }
    r.tail_seed = fmix64(file_scope + out.requests.size() * golden);
    out.requests.push_back(std::move(r));
  }
}

caf::error load_weka(const std::string& path, std::istream& in, double start,
                     trace& out) {
  out.format = trace_format::weka;
  try {
    auto j = json::parse(in);
    auto& size = field(j, "block_size");
    if (!size.is_number_unsigned() || size.get<uint64_t>() == 0
        || size.get<uint64_t>() > max_trace_tokens)
      throw bad_value{"block_size " + size.dump()
                      + " is not a whole number 1 .. "
                      + std::to_string(max_trace_tokens)};
    auto bs = static_cast<uint32_t>(size.get<uint64_t>());
    if (out.block_size != 0 && out.block_size != bs)
      return bad(path, 0,
                 "block size " + std::to_string(bs) + " differs from "
                   + std::to_string(out.block_size));
    out.block_size = bs;
    auto id = j.value("id", fs::path(file_name(path)).stem().string());
    add_weka_requests(field(j, "requests"), "requests", start, str_hash(id), id,
                      out);
  } catch (const bad_value& e) {
    return bad(path, 0, e.what());
  } catch (const std::exception& e) {
    return bad(path, 0, std::string{"not a weka trace: "} + e.what());
  }
  return {};
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

/// A CSV token count: digits only, 0 .. max_trace_tokens.
uint64_t csv_count(std::string_view text, const char* name) {
  uint64_t n = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || err == std::errc::invalid_argument
      || end != text.data() + text.size()) {
    if (!text.empty() && text[0] == '-')
      throw bad_value{std::string{name} + " " + std::string{text}
                      + " is negative"};
    throw bad_value{std::string{name} + " '" + std::string{text}
                    + "' is not a whole number"};
  }
  if (err == std::errc::result_out_of_range || n > max_trace_tokens)
    throw bad_value{std::string{name} + " " + std::string{text}
                    + " is past the limit of "
                    + std::to_string(max_trace_tokens) + " tokens"};
  return n;
}

/// Seconds since 1970 of "YYYY-MM-DD hh:mm:ss[.fraction]".
double csv_time(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, used = 0;
  double s = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%lf%n", &y, &mo, &d, &h, &mi,
                  &s, &used)
        != 6
      || static_cast<size_t>(used) != text.size() || mo < 1 || mo > 12 || d < 1
      || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || !(s >= 0 && s < 61))
    throw bad_value{"TIMESTAMP '" + text
                    + "' is not a time YYYY-MM-DD hh:mm:ss"};
  return static_cast<double>(days_from_civil(y, static_cast<unsigned>(mo),
                                             static_cast<unsigned>(d)))
           * 86400.0
         + h * 3600.0 + mi * 60.0 + s;
}

caf::error load_azure(const std::string& path, std::istream& in, trace& out) {
  out.format = trace_format::azure;
  out.block_size = 512;
  auto scope = str_hash(file_name(path));
  std::string line;
  std::getline(in, line); // header
  size_t n = 1;
  size_t begin = out.requests.size();
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    auto c1 = line.find(',');
    auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string::npos || line.find(',', c2 + 1) != std::string::npos)
      return bad(path, n, "expected TIMESTAMP,ContextTokens,GeneratedTokens");
    trace_request r;
    double t = 0;
    std::string_view rest{line};
    try {
      t = csv_time(line.substr(0, c1));
      r.input_tokens =
        csv_count(rest.substr(c1 + 1, c2 - c1 - 1), "ContextTokens");
      r.output_tokens = csv_count(rest.substr(c2 + 1), "GeneratedTokens");
    } catch (const bad_value& e) {
      return bad(path, n, e.what());
    }
    r.arrival_s = t; // made relative to the earliest row below
    for (uint64_t b = 0; b * 512 < r.input_tokens; ++b) // unshared blocks
      r.blocks.push_back(block_key(scope, (uint64_t{n} << 24) + b));
    r.tail_seed = fmix64(scope + n);
    out.requests.push_back(std::move(r));
  }
  // Arrivals count from the earliest row, wherever it is in the file (a
  // row earlier than the first would otherwise arrive before the start).
  auto rows = std::span{out.requests}.subspan(begin);
  if (!rows.empty()) {
    auto first =
      std::min_element(rows.begin(), rows.end(), [](auto& a, auto& b) {
        return a.arrival_s < b.arrival_s;
      })->arrival_s;
    for (auto& r : rows)
      r.arrival_s -= first;
  }
  return {};
}

/// The most a compressed trace may inflate to (a corrupt or hostile file
/// is refused past it, not read on until memory runs out).
constexpr uint64_t max_inflated_bytes = uint64_t{1} << 30;

/// The whole of a gzip file, inflated.
caf::expected<std::string> inflate_file(const std::string& path) {
  auto* f = gzopen(path.c_str(), "rb");
  if (!f)
    return bad(path, 0, "cannot open");
  std::string out;
  std::vector<char> buf(1 << 20);
  for (;;) {
    auto n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      return bad(path, 0, "not a readable gzip file: " + why);
    }
    if (n == 0)
      break;
    out.append(buf.data(), static_cast<size_t>(n));
    if (out.size() > max_inflated_bytes) {
      gzclose(f);
      return bad(path, 0, "inflates to more than 1 GiB");
    }
  }
  if (gzclose(f) != Z_OK)
    return bad(path, 0, "not a readable gzip file (truncated?)");
  return out;
}

caf::error load_file(const std::string& path, double start, trace& out) {
  std::ifstream plain;
  std::istringstream inflated;
  if (gzipped(path)) {
    auto text = inflate_file(path);
    if (!text)
      return std::move(text.error());
    inflated.str(std::move(*text));
  } else {
    plain.open(path);
    if (!plain)
      return bad(path, 0, "cannot open");
  }
  std::istream& in = gzipped(path) ? static_cast<std::istream&>(inflated)
                                   : static_cast<std::istream&>(plain);
  std::string first;
  std::getline(in, first);
  in.clear();
  in.seekg(0);
  if (first.rfind("TIMESTAMP", 0) == 0)
    return load_azure(path, in, out);
  if (first.find("\"timestamp\"") != std::string::npos)
    return load_mooncake(path, in, out);
  if (first.find('{') != std::string::npos)
    return load_weka(path, in, start, out);
  return bad(path, 1,
             "unknown trace format (expected mooncake JSONL, "
             "a weka JSON conversation or an azure CSV)");
}

caf::expected<trace> load_all(const std::string& path,
                              const trace_options& opts) {
  trace out;
  out.name = file_name(path);
  std::error_code err;
  if (fs::is_directory(path, err)) {
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(path, err))
      if (auto f = e.path().filename().string();
          f.ends_with(".json") || f.ends_with(".json.gz"))
        files.push_back(e.path().string());
    if (err)
      return bad(path, 0, "cannot list: " + err.message());
    std::sort(files.begin(), files.end());
    if (files.empty())
      return bad(path, 0, "directory holds no .json or .json.gz trace");
    for (size_t i = 0; i < files.size(); ++i)
      if (auto e = load_file(files[i], opts.conv_stagger_s * i, out))
        return e;
  } else if (auto e = load_file(path, 0, out)) {
    return e;
  }
  std::stable_sort(out.requests.begin(), out.requests.end(),
                   [](auto& a, auto& b) { return a.arrival_s < b.arrival_s; });
  if (opts.max_requests > 0 && out.requests.size() > opts.max_requests)
    out.requests.resize(opts.max_requests);
  return out;
}

} // namespace

caf::expected<trace> load_trace(const std::string& path,
                                const trace_options& opts) {
  try {
    return load_all(path, opts);
  } catch (const std::exception& e) { // a file system error, out of memory
    return bad(path, 0, std::string{"cannot read the trace: "} + e.what());
  }
}

tiers::token_seq prompt_tokens(const trace_request& r, uint32_t block_size,
                               uint32_t vocab) {
  tiers::token_seq out;
  out.reserve(r.input_tokens);
  for (auto key : r.blocks) {
    for (uint32_t j = 0; j < block_size && out.size() < r.input_tokens; ++j)
      out.push_back(
        static_cast<tiers::token>(fmix64(key ^ ((j + 1) * golden)) % vocab));
  }
  for (uint64_t k = 0; out.size() < r.input_tokens; ++k)
    out.push_back(static_cast<tiers::token>(
      fmix64(r.tail_seed + (k + 1) * golden) % vocab));
  return out;
}

double block_hits::block_ratio() const {
  return referenced_blocks ? double(hit_blocks) / double(referenced_blocks) : 0;
}

double block_hits::token_ratio() const {
  return input_tokens ? double(hit_tokens) / double(input_tokens) : 0;
}

namespace {

void count(block_hits& s, const trace_request& r, uint64_t hit,
           uint32_t block_size) {
  ++s.requests;
  s.referenced_blocks += r.blocks.size();
  s.hit_blocks += hit;
  s.input_tokens += r.input_tokens;
  s.hit_tokens += std::min<uint64_t>(hit * block_size, r.input_tokens);
}

} // namespace

block_hits infinite_cache_hits(const trace& t) {
  block_hits s;
  std::unordered_set<uint64_t> seen;
  for (auto& r : t.requests) {
    uint64_t hit = 0;
    while (hit < r.blocks.size() && seen.count(r.blocks[hit]))
      ++hit;
    count(s, r, hit, t.block_size);
    seen.insert(r.blocks.begin(), r.blocks.end());
  }
  return s;
}

block_hits lru_block_hits(const trace& t, uint64_t capacity_blocks) {
  block_hits s;
  std::list<uint64_t> lru; // front: most recently used
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  for (auto& r : t.requests) {
    uint64_t hit = 0;
    while (hit < r.blocks.size() && where.count(r.blocks[hit]))
      ++hit;
    count(s, r, hit, t.block_size);
    for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) {
      if (auto i = where.find(*b); i != where.end())
        lru.splice(lru.begin(), lru, i->second);
      else
        where.emplace(*b, lru.insert(lru.begin(), *b));
    }
    while (lru.size() > capacity_blocks) {
      where.erase(lru.back());
      lru.pop_back();
    }
  }
  return s;
}

} // namespace kvtier::runtime
