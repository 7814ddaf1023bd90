// bench_ssd: SSD tier throughput next to the raw disk, on one directory.
//
//   spill    enqueue one entry + flush until durable (checksums, temp file,
//            writes, fsync, rename, directory fsync), vs. raw sequential
//            pwrite of the same bytes + fsync.
//   restore  cold restore of that entry (page cache dropped for the file
//            with posix_fadvise DONTNEED, read into fresh buffers, chunk
//            checksums verified), vs. raw sequential pread of the same
//            bytes into a fresh buffer, cache dropped the same way.
//   coalesce 64 concurrent identical cold restores: read ops the I/O
//            engine was handed and their bytes (a counting engine wrapped
//            around the real one, `counted_engine`), and what the kernel
//            says the process read (/proc/self/io read_bytes, syscr).
//
// Beside the raw floor, each spill and restore runs against fio (Debian's
// `fio`, .ci/packages.txt) on the same directory in the same run, at the
// tier's own queue depth and block size (`--window`, `--op-mib`; defaults
// 1 and 8 MiB), buffered like the tier, io_uring (psync for the threads
// engine): a write of the same bytes to a new file with a final fsync, a
// read of them after the page cache was dropped. Targets (PASS / FAIL
// lines, exit status 1 on a FAIL with --check): spill and restore >= 90 %
// of fio's figure, and the 64 restores reading the entry once.
//
// Entries have the llama-3.1-8b shape (32 kv layers, 128 KiB per token):
// 64 MiB = 512 tokens, 1 GiB = 8192 tokens. Each figure is the best of
// `--reps` runs (both sides alike, interleaved, alternating which goes
// first, each after a sync() so earlier writeback stays outside the timed
// region).
// `--trace` prints each timed spill's completions as they arrive (data
// writes, checksums, the prepare/fsync/rename/directory-fsync steps), to
// see where a spill's time goes. Usage:
//   bench_ssd [--quick] [--json] [--check] [--trace] [--dir DIR]
//             [--engine auto|uring|threads] [--reps N] [--window OPS]
//             [--op-mib MIB]
#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/counted_engine.hpp"
#include "tiers/ssd/ssd_jobs.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using clk = std::chrono::steady_clock;

namespace {

struct options {
  bool quick = false;
  bool json = false;
  bool check = false;
  bool trace = false;
  std::string dir;
  std::string engine = "auto";
  int reps = 5;
  /// ssd_config::ops_per_entry and max_op_bytes (MiB); 0 keeps the default.
  uint32_t window = 0;
  uint32_t op_mib = 0;
};

struct row {
  std::string op;
  uint64_t bytes = 0;
  double kvtier_gbps = 0;
  double raw_gbps = 0;
  double fio_gbps = 0; // 0: fio did not run
};

double gbps(uint64_t bytes, clk::duration d) {
  return static_cast<double>(bytes) / std::chrono::duration<double>(d).count()
         / 1e9;
}

void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Raw floor: the entry's bytes written sequentially, then fsync.
clk::duration raw_write(const std::string& path, const entry& e) {
  ::unlink(path.c_str());
  ::sync(); // settle earlier writes and frees outside the timed region
  auto t0 = clk::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path);
  uint64_t off = 0;
  for (auto& l : e.layers)
    for (auto& s : l.segments)
      for (uint64_t done = 0; done < s.length;) {
        auto n = std::min<uint64_t>(s.length - done, 8u << 20);
        auto w =
          ::pwrite(fd, s.bytes().data() + done, n, static_cast<off_t>(off));
        if (w <= 0)
          throw std::runtime_error("raw write failed");
        done += static_cast<uint64_t>(w);
        off += static_cast<uint64_t>(w);
      }
  ::fsync(fd);
  ::close(fd);
  auto d = clk::now() - t0;
  drop_cache(path); // keep the page cache from growing run after run
  return d;
}

/// Raw floor: the same bytes read back sequentially into one buffer.
clk::duration raw_read(const std::string& path, uint64_t bytes) {
  drop_cache(path);
  ::sync();
  auto t0 = clk::now();
  buffer_builder b(bytes);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path);
  for (uint64_t off = 0; off < bytes;) {
    auto n = std::min<uint64_t>(bytes - off, 8u << 20);
    auto r = ::pread(fd, b.data() + off, n, static_cast<off_t>(off));
    if (r <= 0)
      throw std::runtime_error("raw read failed");
    off += static_cast<uint64_t>(r);
  }
  auto d = clk::now() - t0;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return d;
}

/// The tier and its engine on `dir`.
struct bench_tier {
  bench_tier(const options& o, const std::string& dir) {
    auto choice = parse_engine_choice(o.engine);
    if (!choice)
      throw std::runtime_error(describe(choice.error()));
    auto e = make_io_engine(*choice, q.sink());
    if (!e)
      throw std::runtime_error(describe(e.error()));
    auto c = std::make_unique<counted_engine>(std::move(*e));
    counted = c.get();
    engine = std::move(c);
    ssd_config cfg;
    cfg.dir = dir;
    cfg.fingerprint = "bench";
    if (o.window > 0)
      cfg.ops_per_entry = o.window;
    if (o.op_mib > 0)
      cfg.max_op_bytes = o.op_mib << 20;
    tier = std::make_unique<ssd_tier>(cfg, fs, *engine);
    if (!tier->open())
      throw std::runtime_error("scan failed");
  }
  ~bench_tier() {
    drive();
  }
  void drive() {
    while (tier->busy())
      for (auto& c : q.wait(std::chrono::milliseconds(50))) {
        if (trace_from)
          trace(c);
        tier->handle(std::move(c));
      }
  }
  /// --trace: one line per completion of a timed spill, since its start
  /// (the low bits of a write's tag say what it was: ssd_jobs.hpp).
  void trace(const io_completion& c) const {
    auto sub = c.tag & ((uint64_t{1} << sub_bits) - 1);
    auto ms =
      std::chrono::duration<double, std::milli>(clk::now() - *trace_from);
    std::printf("  %8.3f ms  %s %zu B\n", ms.count(),
                sub == 3   ? "writeback "
                : sub == 2 ? "data write"
                : sub == 1 ? "checksums "
                           : "step      ",
                c.bytes);
  }
  std::optional<clk::time_point> trace_from;
  posix_file_system fs;
  completion_queue q;
  std::unique_ptr<io_engine> engine;
  counted_engine* counted = nullptr; // `engine`, counting what it is handed
  std::unique_ptr<ssd_tier> tier;
};

/// The tier's queue depth and bytes per op, as fio is to use them.
uint32_t queue_depth(const options& o) {
  return o.window > 0 ? o.window : ssd_config{}.ops_per_entry;
}
uint64_t block_bytes(const options& o) {
  return o.op_mib > 0 ? uint64_t{o.op_mib} << 20 : ssd_config{}.max_op_bytes;
}

/// fio writing `bytes` to a new file (then fsync) or reading them back
/// cold: its bandwidth in GB/s, or 0 when fio is not there or failed.
double run_fio(const options& o, const std::string& path, bool write,
               uint64_t bytes, const char* engine) {
  if (write)
    ::unlink(path.c_str());
  else
    drop_cache(path);
  ::sync();
  std::string cmd =
    "fio --name=kvtier --filename=" + path + " --rw="
    + (write ? "write" : "read") + " --bs=" + std::to_string(block_bytes(o))
    + " --iodepth=" + std::to_string(queue_depth(o))
    + " --ioengine=" + (std::string{engine} == "threads" ? "psync" : "io_uring")
    + " --size=" + std::to_string(bytes)
    + " --direct=0 --invalidate=1 --end_fsync=1 --output-format=json"
    + " 2>/dev/null";
  auto* p = ::popen(cmd.c_str(), "r");
  if (!p)
    return 0;
  std::string out;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, p)) > 0;)
    out.append(chunk, n);
  if (::pclose(p) != 0)
    return 0;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty())
    return 0;
  double bw = j["jobs"][0][write ? "write" : "read"].value("bw_bytes", 0.0);
  drop_cache(path);
  return bw / 1e9;
}

/// This process's /proc/self/io `field` (0 when unreadable).
uint64_t proc_io(const std::string& field) {
  std::ifstream in("/proc/self/io");
  std::string name;
  uint64_t v = 0;
  while (in >> name >> v)
    if (name == field + ":")
      return v;
  return 0;
}

clk::duration spill(bench_tier& b, const entry& e, bool trace) {
  ::sync();
  auto t0 = clk::now();
  if (trace)
    b.trace_from = t0;
  bool durable = false;
  if (!b.tier->enqueue(e, write_reason::spill))
    throw std::runtime_error("enqueue refused");
  b.tier->flush([&](const durability_evidence& ev) { durable = ev.durable; });
  b.drive();
  auto d = clk::now() - t0;
  b.trace_from.reset();
  if (trace)
    std::printf("  spill of %llu bytes durable after %.3f ms\n",
                static_cast<unsigned long long>(e.byte_length()),
                std::chrono::duration<double, std::milli>(d).count());
  if (!durable)
    throw std::runtime_error("spill was not durable");
  auto prompt = e.tokens;
  prompt.push_back(1);
  if (auto m = b.tier->find(prompt, e.ns))
    drop_cache(join_path(b.tier->root(), m->name));
  return d;
}

clk::duration restore(bench_tier& b, std::string_view ns,
                      const token_seq& tokens, int waiters) {
  auto prompt = tokens;
  prompt.push_back(1);
  auto m = b.tier->find(prompt, ns);
  if (!m)
    throw std::runtime_error("entry not found");
  drop_cache(join_path(b.tier->root(), m->name));
  ::sync();
  // Restored entries live until after the clock stops, as the raw side's
  // buffer does: freeing 1 GiB is not part of either read.
  std::vector<entry> got;
  auto t0 = clk::now();
  for (int i = 0; i < waiters; ++i)
    b.tier->restore(*m, [&](caf::expected<entry> r) {
      if (r)
        got.push_back(std::move(*r));
    });
  b.drive();
  auto d = clk::now() - t0;
  if (got.size() != static_cast<size_t>(waiters))
    throw std::runtime_error("restore failed");
  drop_cache(join_path(b.tier->root(), m->name));
  return d;
}

token_seq bench_tokens(uint64_t n) {
  token_seq t(n);
  for (uint64_t i = 0; i < n; ++i)
    t[i] = static_cast<token>(i * 31 + n);
  return t;
}

/// Spill and restore of one entry of `tokens` tokens, each next to raw.
std::vector<row> measure(const options& o, bench_tier& b,
                         const std::string& dir, uint64_t tokens) {
  auto g = *model_geometry::preset("llama-3.1-8b");
  auto e = runtime::oracle_engine{g}.prefill("bench", bench_tokens(tokens));
  auto bytes = e.byte_length();
  auto raw_path = join_path(dir, "raw.bin");
  auto fio_path = join_path(dir, "fio.bin");
  auto inf = clk::duration::max();
  auto spill_t = inf, raw_w = inf, restore_t = inf, raw_r = inf;
  double fio_w = 0, fio_r = 0;
  auto engine = b.tier->engine_name();
  for (int rep = 0; rep < o.reps; ++rep) {
    // A new key per run (same bytes): every spill writes a new file, as the
    // raw side does, instead of replacing (and freeing) the previous one.
    e.tokens[0] = static_cast<token>(rep);
    // Alternate which side goes first, so neither always inherits the
    // other's writeback or cache state.
    bool raw_first = rep % 2 == 0;
    if (raw_first)
      raw_w = std::min(raw_w, raw_write(raw_path, e));
    spill_t = std::min(spill_t, spill(b, e, o.trace));
    if (!raw_first)
      raw_w = std::min(raw_w, raw_write(raw_path, e));
    if (raw_first)
      raw_r = std::min(raw_r, raw_read(raw_path, bytes));
    restore_t = std::min(restore_t, restore(b, e.ns, e.tokens, 1));
    if (!raw_first)
      raw_r = std::min(raw_r, raw_read(raw_path, bytes));
    fio_w = std::max(fio_w, run_fio(o, fio_path, true, bytes, engine));
    fio_r = std::max(fio_r, run_fio(o, fio_path, false, bytes, engine));
  }
  ::unlink(raw_path.c_str());
  ::unlink(fio_path.c_str());
  return {
    {"spill", bytes, gbps(bytes, spill_t), gbps(bytes, raw_w), fio_w},
    {"restore", bytes, gbps(bytes, restore_t), gbps(bytes, raw_r), fio_r}};
}

bool enough_space(const std::string& dir, uint64_t need) {
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0)
    return false;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize > need;
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      o.quick = true;
    else if (a == "--trace")
      o.trace = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--check")
      o.check = true;
    else if (a == "--dir" && i + 1 < argc)
      o.dir = argv[++i];
    else if (a == "--engine" && i + 1 < argc)
      o.engine = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      o.reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--window" && i + 1 < argc)
      o.window = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else if (a == "--op-mib" && i + 1 < argc)
      o.op_mib = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else
      return std::nullopt;
  }
  return o;
}

/// The 1-minute load average: the disk and CPU are shared, so a figure
/// taken under load is printed with the load it was taken under.
double load_now() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : 0.0;
}

/// What the 64 identical cold restores cost the engine and the kernel.
struct coalesce_counts {
  uint64_t waiters = 0;
  uint64_t file_bytes = 0;   // the entry's file
  uint64_t engine_reads = 0; // read ops handed to the I/O engine
  uint64_t engine_bytes = 0; // their bytes
  uint64_t kernel_bytes = 0; // /proc/self/io read_bytes
  uint64_t kernel_syscr = 0; // /proc/self/io syscr
  uint64_t tier_reads = 0;   // the tier's own counter, for comparison
};

int failures = 0;

void verdict(const std::string& what, double got, double floor) {
  bool ok = got >= floor;
  failures += ok ? 0 : 1;
  std::printf("%s %s: %.2fx (floor %.2fx)\n", ok ? "PASS" : "FAIL",
              what.c_str(), got, floor);
}

void print(const options& o, const std::vector<row>& rows,
           const coalesce_counts& c, const char* engine, double load_before) {
  if (o.json) {
    std::printf("[\n");
    for (auto& r : rows)
      std::printf("  {\"op\": \"%s\", \"bytes\": %llu, \"kvtier_gbps\": %.3f, "
                  "\"raw_gbps\": %.3f, \"fio_gbps\": %.3f},\n",
                  r.op.c_str(), static_cast<unsigned long long>(r.bytes),
                  r.kvtier_gbps, r.raw_gbps, r.fio_gbps);
    std::printf("  {\"op\": \"coalesce\", \"waiters\": %llu, \"reads\": "
                "%llu, \"engine_bytes\": %llu, \"file_bytes\": %llu, "
                "\"kernel_read_bytes\": %llu}\n]\n",
                static_cast<unsigned long long>(c.waiters),
                static_cast<unsigned long long>(c.engine_reads),
                static_cast<unsigned long long>(c.engine_bytes),
                static_cast<unsigned long long>(c.file_bytes),
                static_cast<unsigned long long>(c.kernel_bytes));
  } else {
    std::printf("bench_ssd (engine %s, best of %d, queue depth %u, %llu MiB "
                "per op, load average %.2f before, %.2f after)\n",
                engine, o.reps, queue_depth(o),
                static_cast<unsigned long long>(block_bytes(o) >> 20),
                load_before, load_now());
    std::printf("%-8s %12s %12s %12s %8s %12s %8s\n", "op", "bytes",
                "kvtier GB/s", "raw GB/s", "ratio", "fio GB/s", "/ fio");
    for (auto& r : rows)
      std::printf("%-8s %12llu %12.3f %12.3f %7.0f%% %12.3f %7.0f%%\n",
                  r.op.c_str(), static_cast<unsigned long long>(r.bytes),
                  r.kvtier_gbps, r.raw_gbps, 100.0 * r.kvtier_gbps / r.raw_gbps,
                  r.fio_gbps,
                  r.fio_gbps > 0 ? 100.0 * r.kvtier_gbps / r.fio_gbps : 0.0);
    std::printf("coalesce: %llu concurrent identical cold restores of a "
                "%.1f MiB file -> %llu engine read op(s) of %.1f MiB; "
                "kernel: %.1f MiB read from storage, %llu read syscalls; "
                "the tier counted %llu read(s)\n",
                static_cast<unsigned long long>(c.waiters),
                static_cast<double>(c.file_bytes) / (1 << 20),
                static_cast<unsigned long long>(c.engine_reads),
                static_cast<double>(c.engine_bytes) / (1 << 20),
                static_cast<double>(c.kernel_bytes) / (1 << 20),
                static_cast<unsigned long long>(c.kernel_syscr),
                static_cast<unsigned long long>(c.tier_reads));
  }
  for (auto& r : rows) {
    auto what = r.op + " " + std::to_string(r.bytes >> 20) + " MiB / fio";
    if (r.fio_gbps > 0) {
      verdict(what, r.kvtier_gbps / r.fio_gbps, 0.9);
    } else {
      ++failures;
      std::printf("FAIL %s: fio did not run (is it installed?)\n",
                  what.c_str());
    }
  }
  // Read once: the engine moved the file's bytes once for all waiters.
  verdict("coalesce: file bytes / bytes the engine read for 64 restores",
          static_cast<double>(c.file_bytes)
            / static_cast<double>(std::max<uint64_t>(1, c.engine_bytes)),
          1.0 / 1.05);
}

int run(options& o) {
  auto load_before = load_now();
  bench_tier b{o, o.dir};
  std::vector<row> rows;
  std::vector<uint64_t> sizes{512};
  if (!o.quick)
    sizes.push_back(8192);
  for (auto tokens : sizes) {
    uint64_t bytes = tokens * (128u << 10);
    if (!enough_space(o.dir, 4 * bytes + (1ull << 30))) {
      std::fprintf(stderr,
                   "bench_ssd: skipped %llu bytes: not enough free "
                   "space in %s\n",
                   static_cast<unsigned long long>(bytes), o.dir.c_str());
      continue;
    }
    for (auto& r : measure(o, b, o.dir, tokens))
      rows.push_back(r);
  }
  // 64 identical cold restores of the 64 MiB entry at once.
  auto first = bench_tokens(512);
  first[0] = 0; // the 64 MiB entry of the first run
  auto prompt = first;
  prompt.push_back(1);
  coalesce_counts c;
  c.waiters = 64;
  if (auto m = b.tier->find(prompt, "bench"))
    c.file_bytes =
      std::filesystem::file_size(join_path(b.tier->root(), m->name));
  auto tier_before = b.tier->stats().reads;
  auto engine_before = b.counted->counts();
  auto kernel_before = proc_io("read_bytes");
  auto syscr_before = proc_io("syscr");
  restore(b, "bench", first, 64);
  c.engine_reads = b.counted->counts().reads - engine_before.reads;
  c.engine_bytes = b.counted->counts().bytes_read - engine_before.bytes_read;
  c.kernel_bytes = proc_io("read_bytes") - kernel_before;
  c.kernel_syscr = proc_io("syscr") - syscr_before;
  c.tier_reads = b.tier->stats().reads - tier_before;
  print(o, rows, c, b.tier->engine_name(), load_before);
  return o.check && failures > 0 ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  if (!o) {
    std::fprintf(stderr, "usage: bench_ssd [--quick] [--json] [--check] "
                         "[--dir DIR] [--engine auto|uring|threads] "
                         "[--reps N] [--window OPS] [--op-mib MIB]\n");
    return 2;
  }
  bool own_dir = o->dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/kvtier-bench-ssd-XXXXXX";
    o->dir = ::mkdtemp(tmpl);
  }
  int rc = 1;
  try {
    rc = run(*o);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_ssd: %s\n", ex.what());
  }
  if (own_dir)
    std::filesystem::remove_all(o->dir);
  return rc;
}
