#include "runtime/trace.hpp"

#include "runtime/mix.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <list>
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

caf::error bad(const std::string& file, size_t line, const std::string& what) {
  return make_error(ec::invalid_argument,
                    file + (line ? ":" + std::to_string(line) : "") + ": "
                      + what);
}

caf::error load_mooncake(const std::string& path, std::istream& in,
                         trace& out) {
  out.format = trace_format::mooncake;
  out.block_size = 512;
  auto scope = str_hash(fs::path(path).filename().string());
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    try {
      auto j = json::parse(line);
      trace_request r;
      r.arrival_s = j.at("timestamp").get<double>() / 1000.0;
      r.input_tokens = j.at("input_length").get<uint64_t>();
      r.output_tokens = j.at("output_length").get<uint64_t>();
      for (auto& id : j.at("hash_ids"))
        r.blocks.push_back(block_key(scope, id.get<uint64_t>()));
      r.tail_seed = fmix64(scope + n);
      out.requests.push_back(std::move(r));
    } catch (const std::exception& e) {
      return bad(path, n, std::string{"not a mooncake request: "} + e.what());
    }
  }
  return {};
}

void add_weka_requests(const json& reqs, double start, uint64_t file_scope,
                       const std::string& session, trace& out) {
  for (auto& q : reqs) {
    double t = start + q.at("t").get<double>();
    if (q.value("type", "") == "subagent") {
      add_weka_requests(q.at("requests"), t, file_scope, session, out);
      continue;
    }
    trace_request r;
    r.arrival_s = t;
    r.input_tokens = q.at("in").get<uint64_t>();
    r.output_tokens = q.at("out").get<uint64_t>();
    r.ns = q.value("model", "");
    r.session = session;
    auto scope = fmix64(file_scope ^ str_hash(r.ns));
    for (auto& id : q.at("hash_ids"))
      r.blocks.push_back(block_key(scope, id.get<uint64_t>()));
    r.tail_seed = fmix64(file_scope + out.requests.size() * golden);
    out.requests.push_back(std::move(r));
  }
}

caf::error load_weka(const std::string& path, std::istream& in, double start,
                     trace& out) {
  out.format = trace_format::weka;
  try {
    auto j = json::parse(in);
    auto bs = j.at("block_size").get<uint32_t>();
    if (out.block_size != 0 && out.block_size != bs)
      return bad(path, 0,
                 "block size " + std::to_string(bs) + " differs from "
                   + std::to_string(out.block_size));
    out.block_size = bs;
    auto id = j.value("id", fs::path(path).stem().string());
    add_weka_requests(j.at("requests"), start, str_hash(id), id, out);
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

caf::error load_azure(const std::string& path, std::istream& in, trace& out) {
  out.format = trace_format::azure;
  out.block_size = 512;
  auto scope = str_hash(fs::path(path).filename().string());
  std::string line;
  std::getline(in, line); // header
  size_t n = 1;
  double first = -1;
  while (std::getline(in, line)) {
    ++n;
    int y, mo, d, h, mi;
    double s;
    unsigned long long ctx, gen;
    if (std::sscanf(line.c_str(), "%d-%d-%d %d:%d:%lf,%llu,%llu", &y, &mo, &d,
                    &h, &mi, &s, &ctx, &gen)
        != 8)
      return bad(path, n, "expected TIMESTAMP,ContextTokens,GeneratedTokens");
    double t = static_cast<double>(days_from_civil(y, mo, d)) * 86400.0
               + h * 3600.0 + mi * 60.0 + s;
    if (first < 0)
      first = t;
    trace_request r;
    r.arrival_s = t - first;
    r.input_tokens = ctx;
    r.output_tokens = gen;
    for (uint64_t b = 0; b * 512 < ctx; ++b) // unshared blocks
      r.blocks.push_back(block_key(scope, (uint64_t{n} << 24) + b));
    r.tail_seed = fmix64(scope + n);
    out.requests.push_back(std::move(r));
  }
  return {};
}

caf::error load_file(const std::string& path, double start, trace& out) {
  std::ifstream in(path);
  if (!in)
    return bad(path, 0, "cannot open");
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

} // namespace

caf::expected<trace> load_trace(const std::string& path,
                                const trace_options& opts) {
  trace out;
  out.name = fs::path(path).filename().string();
  std::error_code err;
  if (fs::is_directory(path, err)) {
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".json")
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty())
      return bad(path, 0, "directory holds no .json trace");
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
