// bench_start_scan: an SSD tier's start over many entry files (issue #32
// item 2): how soon it answers a lookup and how long until every file is
// indexed, beside the floor of the blocking start (every header scanned
// before the first lookup, `ssd_config::index_at_open`).
//
// Generator: `--files N` (default 100000; `make bench-start` runs 1000000)
// small valid entry files, written directly with the tier's own format
// functions (`layout`, `compute_checksums`, `encode`, `payload_segments`)
// into a fresh directory under --dir (default /tmp), one pwrite each, no
// fsync (a bench, not state to keep), then one syncfs. Each file is one
// kv layer of 16 bytes a token, 8 tokens, alignment 512: about 1 KiB of
// data, one 4 KiB block. The free space is checked first (8 KiB a file
// asked for); the directory is removed at the end, timed (on a file
// system mounted with `discard`, as this machine's root is, each unlink
// costs about 3 ms: a million files take most of an hour to delete, so
// `--dir /dev/shm` is the quicker way to a million).
//
// Runs, on the same files, page cache as the generator and the runs left
// it (say so with the figures):
//   background  `open` (lock, MODEL, listing, removal records), then the
//               first `--first` names indexed (default 10000, as the
//               service's `ssd-tier.index-before-serving` does before it
//               serves), then one lookup of a random generated key (the
//               first served request: a miss or a hit), then
//               `index_step` batches of `--batch` files (default 1024,
//               `ssd-tier.index-batch`) with a lookup between batches, as
//               the SSD actor interleaves its mailbox: the worst batch is
//               the longest a request waits behind the scan.
//   blocking    `open` with `index_at_open`: the first lookup after it.
// Printed per run: time to `open`'s end, to the first answered lookup,
// to fully indexed, files indexed, the first hit's time, the worst batch, the
// process's RSS after the run (VmRSS) and the load average.
#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/file_system.hpp"
#include "tiers/ssd/io_engine.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <sys/statvfs.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using clk = std::chrono::steady_clock;

namespace {

const std::string fingerprint = "bench-start";
constexpr uint32_t alignment = 512;

model_geometry geometry() {
  return {"bench-start", {{layer_kind::kv, 16, 0, 0}}};
}

token_seq key_tokens(uint64_t i) {
  token_seq t(8);
  for (size_t k = 0; k < t.size(); ++k)
    t[k] = static_cast<token>(i * 8 + k + 1);
  return t;
}

double ms_since(clk::time_point t) {
  return std::chrono::duration<double, std::milli>(clk::now() - t).count();
}

std::string status_line(const char* key) {
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0)
      return line.substr(std::strlen(key));
  return "?";
}

std::string load_average() {
  std::ifstream in{"/proc/loadavg"};
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

/// Writes `n` entry files into `root`; false on a failure (printed).
bool generate(const std::string& root, uint64_t n) {
  runtime::oracle_engine oracle{geometry()};
  std::vector<std::byte> image;
  for (uint64_t i = 0; i < n; ++i) {
    auto e = oracle.prefill("ns", key_tokens(i));
    auto h = layout(e, fingerprint, alignment, alignment);
    h.write_id = i + 1;
    compute_checksums(h, e);
    auto head = encode(h);
    image.assign(h.file_length, std::byte{0});
    std::memcpy(image.data(), head->data(), head->size());
    for (size_t l = 0; l < e.layers.size(); ++l) {
      auto off = h.layers[l].payload.offset;
      for (auto& s : payload_segments(h, e, l)) {
        std::memcpy(image.data() + off, s.bytes().data(), s.length);
        off += s.length;
      }
    }
    auto path = root + "/" + file_name("ns", e.tokens);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0
        || ::pwrite(fd, image.data(), image.size(), 0)
             != static_cast<ssize_t>(image.size())) {
      std::perror(path.c_str());
      return false;
    }
    ::close(fd);
    if ((i + 1) % 100000 == 0)
      std::fprintf(stderr, "  generated %llu\n",
                   static_cast<unsigned long long>(i + 1));
  }
  int dfd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::syncfs(dfd);
    ::close(dfd);
  }
  return true;
}

struct run_result {
  double open_ms = 0;
  double first_answer_ms = 0;
  double first_hit_ms = -1;
  double indexed_ms = 0;
  double worst_batch_ms = 0;
  uint64_t files = 0;
  uint64_t lookups = 0;
};

/// One start of the tier over `dir`; lookups of random generated keys.
run_result start(const std::string& dir, uint64_t n, bool background,
                 size_t first, size_t batch) {
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::threads, q.sink());
  if (!engine) {
    std::fprintf(stderr, "no engine: %s\n", describe(engine.error()).c_str());
    std::exit(1);
  }
  ssd_config cfg;
  cfg.dir = dir;
  cfg.fingerprint = fingerprint;
  cfg.byte_cap = uint64_t{1} << 50;
  cfg.alignment = alignment;
  cfg.checksum_chunk = alignment;
  cfg.index_at_open = !background;
  std::mt19937_64 rng{42};
  run_result r;
  auto t0 = clk::now();
  ssd_tier tier{cfg, fs, **engine};
  auto opened = tier.open();
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", describe(opened.error()).c_str());
    std::exit(1);
  }
  r.open_ms = ms_since(t0);
  bool done = background && tier.index_step(first);
  auto lookup = [&] {
    auto hit = tier.find(storage_key::prefix("ns", key_tokens(rng() % n)));
    ++r.lookups;
    if (hit && r.first_hit_ms < 0)
      r.first_hit_ms = ms_since(t0);
  };
  lookup();
  r.first_answer_ms = ms_since(t0);
  while (background && !done) {
    auto b = clk::now();
    done = tier.index_step(batch);
    r.worst_batch_ms = std::max(r.worst_batch_ms, ms_since(b));
    if (done)
      break;
    lookup();
  }
  r.indexed_ms = ms_since(t0);
  r.files = tier.stats().files;
  while (r.first_hit_ms < 0 && r.lookups < 1000)
    lookup();
  return r;
}

void print(const char* name, const run_result& r) {
  std::printf("%-10s open %9.1f ms  first answer %9.1f ms  "
              "first hit %9.1f ms  fully indexed %9.1f ms  files %8llu  "
              "worst batch %6.1f ms  RSS%s  load %s\n",
              name, r.open_ms, r.first_answer_ms, r.first_hit_ms, r.indexed_ms,
              static_cast<unsigned long long>(r.files), r.worst_batch_ms,
              status_line("VmRSS:").c_str(), load_average().c_str());
  std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
  uint64_t files = 100000;
  size_t batch = 1024;
  size_t first = 10000;
  std::string base = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--files")
      files = std::stoull(argv[i + 1]);
    else if (a == "--batch")
      batch = std::stoul(argv[i + 1]);
    else if (a == "--first")
      first = std::stoul(argv[i + 1]);
    else if (a == "--dir")
      base = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--files N] [--first F] [--batch B] "
                   "[--dir PARENT]\n",
                   argv[0]);
      return 2;
    }
  }
  if (files == 0 || batch == 0) {
    std::fprintf(stderr, "--files and --batch must be at least 1\n");
    return 2;
  }
  struct statvfs fsinfo {};
  if (::statvfs(base.c_str(), &fsinfo) != 0) {
    std::perror(base.c_str());
    return 1;
  }
  auto free_bytes = uint64_t{fsinfo.f_bavail} * fsinfo.f_frsize;
  if (free_bytes < files * 8192) {
    std::fprintf(stderr, "%s has %llu bytes free; %llu files want %llu\n",
                 base.c_str(), static_cast<unsigned long long>(free_bytes),
                 static_cast<unsigned long long>(files),
                 static_cast<unsigned long long>(files * 8192));
    return 1;
  }
  auto tmpl = base + "/kvtier-start-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    std::perror(tmpl.c_str());
    return 1;
  }
  std::string dir = buf.data();
  auto root = dir + "/" + fingerprint;
  std::filesystem::create_directories(root);
  std::printf("bench_start_scan: %llu entry files in %s, first %zu, "
              "batch %zu, load %s\n",
              static_cast<unsigned long long>(files), dir.c_str(), first, batch,
              load_average().c_str());
  auto g = clk::now();
  bool ok = generate(root, files);
  if (ok) {
    std::printf("generated in %.1f s\n", ms_since(g) / 1000);
    print("background", start(dir, files, true, first, batch));
    print("blocking", start(dir, files, false, first, batch));
    print("background", start(dir, files, true, first, batch));
  }
  auto rm = clk::now();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("removed the files in %.1f s\n", ms_since(rm) / 1000);
  return ok ? 0 : 1;
}
