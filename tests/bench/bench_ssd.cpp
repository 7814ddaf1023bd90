// bench_ssd: SSD tier throughput beside like-for-like floors, on one
// directory, in one run.
//
//   spill         enqueue one entry + flush until durable (checksums, temp
//                 file, writes with writeback started after each, fsync,
//                 rename, directory fsync).
//   restore cold  restore of that entry with none of its file's pages in
//                 the page cache (posix_fadvise DONTNEED after fdatasync;
//                 no root needed), read into the tier's own buffers (from
//                 the process's buffer pool, or fresh past it), chunk
//                 checksums verified.
//   restore warm  the same with every page of the file resident (a warm-up
//                 read first; pages the kernel drops after it, as it now
//                 and then does with no reclaim counted, are read back in
//                 just before the timed read, and the row says so): the
//                 copy out of the page cache and the tier's own work, no
//                 disk.
//   coalesce      64 concurrent identical cold restores: read ops the I/O
//                 engine was handed and their bytes (a counting engine
//                 wrapped around the real one, `counted_engine`), and what
//                 the kernel says the process read (/proc/self/io
//                 read_bytes, syscr).
//
// Each row has two floors measured in the same run, interleaved with the
// tier (reads alternate which side goes first; the tier's spill and raw's
// two ways of writing take turns, so --reps is best a multiple of three,
// the default 6), at the tier's queue depth
// (`--window`, default 1), buffered I/O like the tier's; each row prints
// every raw way's figure, so the reader sees which one made the floor:
//   raw  this process's own loops over the same bytes. A restore's: the
//        tier's own entry file read into new memory as the tier's restore
//        must fill it: buffers of the sizes the tier's restore filled (one
//        per payload; msg::buffer_builder, mapped unpopulated, from the
//        process's buffer pool or fresh past it), in ops of at most
//        `--op-mib` (default 8 MiB) per buffer, with pread alone, with
//        pread and a helper thread populating the buffers ahead of the
//        reads (the tier's way), and through an I/O engine of the tier's
//        kind (its own, not the tier's) with that helper as a call op;
//        the best of them is the floor. Beside it, as a reference and no
//        floor, the same file read into one buffer touched once before
//        any clock (huge pages), with pread and the engine, in ops of
//        `--op-mib` and of the size the tier handed its engine: on this VM
//        memory the guest kernel has given back to the host (free page
//        reporting) faults in at 0.4-2.5 GB/s, so for an entry past the
//        buffer pool (512 MiB) a read into resident memory can run several
//        times as fast as a read into new memory; each restore row says
//        how many of its buffers the pool served. So that every side's new
//        memory is in the same state, each timed restore, the tier's and
//        raw's, begins right after the entry's size of memory was
//        populated and freed (memory the guest holds, not handed back). A
//        spill's: the entry's own buffers written to a new file in ops of
//        `--op-mib` (gathered across buffers, as the tier does), writeback
//        started after each (sync_file_range WRITE) while the next is
//        written, as the tier does on its engine's call thread, fsync,
//        directory fsync (the tier's durability); with pwritev (writeback
//        on a second thread) and through an engine of the tier's kind
//        (writeback as call ops); the better of the two. Every side
//        writes a new file each run and keeps it to the end, as the tier
//        does.
//        mincore checks the cache state before every timed read, on every
//        side: none of the file's pages resident (cold), all (warm), to
//        within one page in a thousand.
//   fio  Debian's `fio` (.ci/packages.txt), io_uring (psync for the threads
//        engine), `--op-mib` ops: reads of the tier's entry file,
//        --invalidate=1 (cold) or --invalidate=0 after a warm-up read
//        (warm); a write of the same bytes to a new file with
//        --sync_file_range=write:1 and --end_fsync=1 (fio has no
//        directory fsync).
// The floor of a spill is the faster of the two; a restore's is raw's
// (fio reads into one buffer it reuses, not into new memory). fio's I/O buffer
// is 4 KiB pages (its malloc; transparent huge pages are madvise-only on many
// systems, this VM's included, and fio's huge-page modes need hugetlbfs
// pages reserved by root); on this VM touching 8 MiB of fresh 4 KiB pages
// takes tens of milliseconds, which a read job's first op pays inside
// fio's timed region, so on 64 MiB fio is no floor, and the program
// prints that reason (with the figure measured in the run) wherever raw
// beats fio. Targets (PASS / FAIL lines, exit status 1 on a FAIL with
// --check): spill and cold restore >= 90 % of their floor; no row above
// its floor (that floor would be no floor: FAIL, reason not known); every
// timed read in the cache state its row names; and the 64 restores
// reading the entry once. The warm restore has no target: it is the
// tier's own work (checksums, parsing) beside a bare copy.
//
// Entries have the llama-3.1-8b shape (32 kv layers, 128 KiB per token):
// 64 MiB = 512 tokens, 1 GiB = 8192 tokens. Each figure is the best of
// `--reps` runs, each after a sync() so earlier writeback stays outside the
// timed region. GB/s are of the bytes each side moved: the tier's whole
// file (header, checksums, alignment) for its spill and for every read of
// it, the entry's bytes for raw's and fio's writes.
// `--trace` prints each timed spill's and restore's completions as they
// arrive (data writes, checksums, the prepare/fsync/rename/directory-fsync
// steps; reads by payload, the open, populate and check calls), to see
// where the time goes. Usage:
//   bench_ssd [--quick] [--json] [--check] [--trace] [--dir DIR]
//             [--engine auto|uring|threads] [--reps N] [--window OPS]
//             [--op-mib MIB]
#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/counted_engine.hpp"
#include "tiers/ssd/ssd_jobs.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
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
  int reps = 6; // a multiple of 3: the writers' turns (measure)
  /// ssd_config::ops_per_entry and max_op_bytes (MiB); 0 keeps the default.
  uint32_t window = 0;
  uint32_t op_mib = 0;
};

struct row {
  std::string op; // "spill", "restore cold", "restore warm"
  uint64_t bytes = 0;
  double kvtier_gbps = 0;
  double raw_gbps = 0;
  double fio_gbps = 0;  // 0: fio did not run
  bool target = false;  // checked against the 90 % target
  std::string cache;    // the cache state every timed read began in
  bool cache_ok = true; // every timed read began in the state named
  std::string raw_ways; // raw's ways of reading and their figures
  /// A restore's: raw into memory resident before the clock (no floor: a
  /// restore fills new memory), its ways, and what new memory the tier's
  /// best run and raw's took.
  double resident_gbps = 0;
  std::string resident_ways;
  std::string memory;
  /// A spill's: the tier's own work beside its writes, measured here.
  std::string own_work;
  /// The faster of the two floors; a restore's is raw's alone (fio reads
  /// into one buffer it reuses, not into new memory).
  double floor() const {
    return resident_gbps > 0 ? raw_gbps : std::max(raw_gbps, fio_gbps);
  }
};

double gbps(uint64_t bytes, clk::duration d) {
  return static_cast<double>(bytes) / std::chrono::duration<double>(d).count()
         / 1e9;
}

/// Writes back `path`'s dirty pages and drops all of its pages from the
/// page cache (no root needed, unlike /proc/sys/vm/drop_caches).
void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Pages of `path` in the page cache now, and its pages in all (mincore).
std::pair<uint64_t, uint64_t> resident_pages(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path);
  struct stat st {};
  ::fstat(fd, &st);
  auto size = static_cast<uint64_t>(st.st_size);
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto pages = (size + page - 1) / page;
  uint64_t in = 0;
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error("cannot map " + path);
    }
    std::vector<unsigned char> v(pages);
    if (::mincore(m, size, v.data()) == 0)
      for (auto c : v)
        in += c & 1;
    ::munmap(m, size);
  }
  ::close(fd);
  return {in, pages};
}

/// Reads `path` whole (untimed), bringing every page into the page cache.
void read_whole(const std::string& path) {
  static std::vector<std::byte> scratch(8u << 20);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path);
  off_t at = 0;
  for (ssize_t n; (n = ::pread(fd, scratch.data(), scratch.size(), at)) > 0;)
    at += n;
  ::close(fd);
}

/// The cache state a row's timed reads must begin in, checked (mincore)
/// before every one of them, on every side.
struct cache_check {
  bool cold = true;
  uint64_t pages = 0; // the file's pages (the last one checked)
  uint64_t worst = 0; // most pages resident (cold) or missing (warm)
  /// Warm reads re-read before timing when pages went missing since the
  /// warm-up (how many times, to say so).
  uint64_t rewarmed = 0;
  void before(const std::string& path) {
    auto [in, all] = resident_pages(path);
    // Warm: pages the kernel dropped since the warm-up (it does, a few
    // hundred to a few thousand of a 1 GiB file now and then, with no
    // reclaim counted) are read back in, up to three times, so the timed
    // read begins warm; the check below still counts what is left.
    for (int tries = 0; !cold && in < all && tries < 3; ++tries) {
      read_whole(path);
      ++rewarmed;
      std::tie(in, all) = resident_pages(path);
    }
    pages = all;
    worst = std::max(worst, cold ? in : all - in);
  }
  /// At most one page in a thousand off: the kernel may reclaim a few
  /// cached pages at any time (compaction for huge pages does), which
  /// changes no figure.
  bool ok() const {
    return worst * 1000 <= pages;
  }
  std::string describe() const {
    char out[260];
    if (worst == 0)
      std::snprintf(out, sizeof out,
                    cold ? "every timed read began with none of %llu pages "
                           "resident"
                         : "every timed read began with all %llu pages "
                           "resident",
                    static_cast<unsigned long long>(pages));
    else
      std::snprintf(out, sizeof out,
                    cold ? "a timed read began with %llu of %llu pages "
                           "resident%s"
                         : "a timed read began with %llu of %llu pages "
                           "missing%s",
                    static_cast<unsigned long long>(worst),
                    static_cast<unsigned long long>(pages),
                    ok()   ? " (within 0.1 %)"
                    : cold ? ": not cold"
                           : ": not warm");
    std::string text = out;
    if (rewarmed > 0)
      text += "; pages had gone since the warm-up " + std::to_string(rewarmed)
              + " time(s) and were read back before the timed read";
    return text;
  }
};

/// Runs `op(offset, length)` over [0, size) in ops of `block` bytes,
/// `depth` at once (one stream per op in flight, op i on stream
/// i % depth, as many ops in flight as the tier keeps); false when an op
/// failed.
template <class Op>
bool run_ops(uint64_t size, uint64_t block, uint32_t depth, Op op) {
  std::atomic<bool> ok{true};
  auto stream = [&](uint32_t k) {
    for (uint64_t off = k * block; off < size && ok;
         off += block * std::max<uint32_t>(depth, 1))
      if (!op(off, std::min(block, size - off)))
        ok = false;
  };
  if (depth <= 1) {
    stream(0);
  } else {
    std::vector<std::thread> streams;
    for (uint32_t k = 0; k < depth; ++k)
      streams.emplace_back(stream, k);
    for (auto& t : streams)
      t.join();
  }
  return ok;
}

/// Raw spill floor: the entry's own buffers written to a new file in ops
/// of the tier's size and depth (pwritev gathering across buffers, as the
/// tier does), writeback started after each on another thread while the
/// next op is written (sync_file_range, as the tier does on its engine's
/// call thread), then fsync and a directory fsync (the tier's durability).
clk::duration raw_write(const options& o, const std::string& path,
                        const entry& e);

/// The same spill through an I/O engine of the tier's kind (its own
/// engine): gathered writes at the tier's depth, a writeback call after
/// each as the tier submits it, the fsync on the engine, then the
/// directory fsync; without the tier's work (checksums, header, rename).
clk::duration engine_write(const options& o, const std::string& path,
                           const entry& e);

/// Raw restore floor: `path` read into `into`, a buffer of the tier's
/// kind (huge pages) allocated and touched once, before any clock starts
/// (the read alone), in ops of `op_bytes` at the tier's depth. Cold: the
/// file's pages dropped first.
clk::duration raw_read(const options& o, const std::string& path,
                       cache_check& cache, uint64_t op_bytes,
                       buffer_builder& into);

/// The same read through an I/O engine of the tier's kind (its own
/// engine and queue, not the tier's): the ops as the tier hands them to
/// its engine, without the tier's work (no index, header, checksums).
clk::duration engine_read(const options& o, const std::string& path,
                          cache_check& cache, uint64_t op_bytes,
                          buffer_builder& into);

/// How long a loop waits with no completion before it gives up.
constexpr auto stall_limit = std::chrono::minutes(2);

/// The completions `q` has within 50 ms. Throws, naming `what`, once none
/// came for `stall_limit` since `last` (which it moves on each arrival): a
/// wedged disk or engine ends the bench with a reason, never hangs it.
std::vector<io_completion> next_completions(completion_queue& q,
                                            clk::time_point& last,
                                            const std::string& what) {
  auto got = q.wait(std::chrono::milliseconds(50));
  auto now = clk::now();
  if (!got.empty())
    last = now;
  else if (now - last > stall_limit)
    throw std::runtime_error(what + ": no I/O completion for two minutes");
  return got;
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
    try {
      drive();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_ssd: %s\n", e.what());
    }
  }
  void drive() {
    auto last = clk::now();
    while (tier->busy())
      for (auto& c : next_completions(q, last, "the SSD tier")) {
        if (trace_from)
          trace(c);
        tier->handle(std::move(c));
      }
  }
  /// --trace: one line per completion of a timed spill or restore, since
  /// its start (the low bits of a tag say what it was: ssd_jobs.hpp; a
  /// restore's reads carry their payload's number, its calls 0).
  void trace(const io_completion& c) const {
    auto sub = c.tag & ((uint64_t{1} << sub_bits) - 1);
    auto ms =
      std::chrono::duration<double, std::milli>(clk::now() - *trace_from);
    if (reading)
      std::printf("  %8.3f ms  %s %llu: %zu B\n", ms.count(),
                  sub > 0 ? "read of payload" : "call (open, populate, check)",
                  static_cast<unsigned long long>(sub), c.bytes);
    else
      std::printf("  %8.3f ms  %s %zu B\n", ms.count(),
                  sub == 3   ? "writeback "
                  : sub == 2 ? "data write"
                  : sub == 1 ? "checksums "
                             : "step      ",
                  c.bytes);
  }
  std::optional<clk::time_point> trace_from;
  bool trace_restores = false; // --trace
  bool reading = false;        // the timed op traced is a restore
  posix_file_system fs;
  completion_queue q;
  std::unique_ptr<io_engine> engine;
  counted_engine* counted = nullptr; // `engine`, counting what it is handed
  std::unique_ptr<ssd_tier> tier;
};

/// The tier's queue depth and bytes per op, as the floors are to use them.
uint32_t queue_depth(const options& o) {
  return o.window > 0 ? o.window : ssd_config{}.ops_per_entry;
}
uint64_t block_bytes(const options& o) {
  return o.op_mib > 0 ? uint64_t{o.op_mib} << 20 : ssd_config{}.max_op_bytes;
}

/// The entry's bytes as pieces at their offsets in a flat file.
struct piece {
  uint64_t at;
  const std::byte* data;
  uint64_t length;
};
std::vector<piece> pieces_of(const entry& e, uint64_t& size) {
  std::vector<piece> out;
  size = 0;
  for (auto& l : e.layers)
    for (auto& s : l.segments) {
      out.push_back({size, s.bytes().data(), s.length});
      size += s.length;
    }
  return out;
}

/// The pieces' bytes in [off, off + len), in order: one gathered op.
std::vector<std::span<const std::byte>> gather(const std::vector<piece>& pieces,
                                               uint64_t off, uint64_t len) {
  std::vector<std::span<const std::byte>> out;
  for (auto& p : pieces)
    if (p.at < off + len && p.at + p.length > off) {
      auto from = std::max(p.at, off);
      auto to = std::min(p.at + p.length, off + len);
      out.emplace_back(p.data + (from - p.at), to - from);
    }
  return out;
}

/// A new engine of the tier's kind (`--engine`) for a floor, reporting
/// into `q`.
std::unique_ptr<io_engine> floor_engine(const options& o, completion_queue& q) {
  auto choice = parse_engine_choice(o.engine);
  if (!choice)
    throw std::runtime_error(describe(choice.error()));
  auto engine = make_io_engine(*choice, q.sink());
  if (!engine)
    throw std::runtime_error(describe(engine.error()));
  return std::move(*engine);
}

clk::duration engine_write(const options& o, const std::string& path,
                           const entry& e) {
  uint64_t size = 0;
  auto pieces = pieces_of(e, size);
  completion_queue q;
  auto engine = floor_engine(o, q);
  posix_file_system fs;
  ::unlink(path.c_str());
  ::sync(); // settle earlier writes and frees outside the timed region
  auto t0 = clk::now();
  auto f = fs.open(path, open_mode::create);
  if (!f)
    throw std::runtime_error(describe(f.error()));
  // Data writes (tag 1) at the tier's depth, each followed by a writeback
  // call (tag 2) as the tier submits them; then the fsync (tag 3).
  constexpr uint64_t synced = ~uint64_t{0};
  uint64_t next = 0, written = 0, calls = 0;
  uint32_t running = 0;
  auto feed = [&] {
    for (; running < queue_depth(o) && next < size; ++running) {
      io_op op;
      op.kind = io_kind::write;
      op.target = *f;
      op.offset = next;
      op.length = std::min<uint64_t>(block_bytes(o), size - next);
      op.pieces = gather(pieces, next, op.length);
      op.tag = 1;
      next += op.length;
      engine->submit(std::move(op));
    }
  };
  auto drive = [&](auto done) {
    auto last = clk::now();
    while (!done())
      for (auto& c : next_completions(q, last, "engine write of " + path)) {
        if (c.err)
          throw std::runtime_error("engine write of " + path + " failed");
        if (c.tag == 1) {
          written += c.bytes;
          --running;
          feed();
          ++calls;
          io_op wb;
          wb.kind = io_kind::call;
          wb.call = [file = *f] {
            file->start_writeback();
            return caf::error{};
          };
          wb.tag = 2;
          engine->submit(std::move(wb));
        } else if (c.tag == 2) {
          --calls;
        } else {
          written = synced;
        }
      }
  };
  feed();
  drive([&] { return written >= size && calls == 0; });
  io_op sync;
  sync.kind = io_kind::sync;
  sync.target = *f;
  sync.tag = 3;
  engine->submit(std::move(sync));
  drive([&] { return written == synced; });
  if (auto err = fs.sync_dir(std::filesystem::path(path).parent_path()))
    throw std::runtime_error(describe(err));
  auto d = clk::now() - t0;
  engine.reset();
  drop_cache(path); // keep the page cache from growing run after run
  return d;
}

clk::duration raw_write(const options& o, const std::string& path,
                        const entry& e) {
  uint64_t size = 0;
  auto pieces = pieces_of(e, size);
  ::unlink(path.c_str());
  ::sync(); // settle earlier writes and frees outside the timed region
  auto t0 = clk::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path);
  // Writeback asked for after each op, started by this helper thread.
  std::mutex mtx;
  std::condition_variable cv;
  uint64_t asked = 0;
  bool done_writing = false;
  std::thread writeback([&] {
    uint64_t started = 0;
    std::unique_lock<std::mutex> lock{mtx};
    for (;;) {
      cv.wait(lock, [&] { return asked > started || done_writing; });
      if (asked == started)
        return;
      started = asked;
      lock.unlock();
      ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
      lock.lock();
    }
  });
  bool ok = run_ops(
    size, block_bytes(o), queue_depth(o), [&](uint64_t off, uint64_t len) {
      std::vector<iovec> iov;
      for (auto& g : gather(pieces, off, len))
        iov.push_back({const_cast<std::byte*>(g.data()), g.size()});
      for (uint64_t done = 0; done < len;) {
        auto w = ::pwritev(fd, iov.data(), static_cast<int>(iov.size()),
                           static_cast<off_t>(off + done));
        if (w <= 0)
          return false;
        done += static_cast<uint64_t>(w);
        // Skip what was written.
        auto left = static_cast<uint64_t>(w);
        while (left > 0 && !iov.empty()) {
          auto n = std::min<uint64_t>(left, iov[0].iov_len);
          iov[0].iov_base = static_cast<char*>(iov[0].iov_base) + n;
          iov[0].iov_len -= n;
          left -= n;
          if (iov[0].iov_len == 0)
            iov.erase(iov.begin());
        }
      }
      {
        std::lock_guard<std::mutex> g{mtx};
        ++asked;
      }
      cv.notify_one();
      return true;
    });
  {
    std::lock_guard<std::mutex> g{mtx};
    done_writing = true;
  }
  cv.notify_one();
  writeback.join();
  if (!ok || ::fsync(fd) != 0)
    throw std::runtime_error("raw write of " + path + " failed");
  ::close(fd);
  auto dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0 || ::fsync(dfd) != 0)
    throw std::runtime_error("directory fsync of " + dir + " failed");
  ::close(dfd);
  auto d = clk::now() - t0;
  drop_cache(path); // keep the page cache from growing run after run
  return d;
}

/// Before a floor's timed read of `path` into `b`: the cache state set
/// up and checked, earlier writeback settled. Returns the file's size.
uint64_t before_read(const std::string& path, cache_check& cache,
                     const buffer_builder& b) {
  auto size = std::filesystem::file_size(path);
  if (b.size() < size)
    throw std::runtime_error("read buffer smaller than " + path);
  if (cache.cold)
    drop_cache(path);
  ::sync();
  cache.before(path);
  return size;
}

clk::duration raw_read(const options& o, const std::string& path,
                       cache_check& cache, uint64_t op_bytes,
                       buffer_builder& b) {
  auto size = before_read(path, cache, b);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path);
  auto t0 = clk::now();
  bool ok =
    run_ops(size, op_bytes, queue_depth(o), [&](uint64_t off, uint64_t len) {
      for (uint64_t done = 0; done < len;) {
        auto r = ::pread(fd, b.data() + off + done, len - done,
                         static_cast<off_t>(off + done));
        if (r <= 0)
          return false;
        done += static_cast<uint64_t>(r);
      }
      return true;
    });
  auto d = clk::now() - t0;
  ::close(fd);
  if (!ok)
    throw std::runtime_error("raw read of " + path + " failed");
  return d;
}

clk::duration engine_read(const options& o, const std::string& path,
                          cache_check& cache, uint64_t op_bytes,
                          buffer_builder& b) {
  completion_queue q;
  auto engine = floor_engine(o, q);
  posix_file_system fs;
  auto size = before_read(path, cache, b);
  auto t0 = clk::now();
  auto f = fs.open(path, open_mode::read);
  if (!f)
    throw std::runtime_error(describe(f.error()));
  uint64_t next = 0, done = 0;
  uint32_t running = 0;
  auto feed = [&] {
    for (; running < queue_depth(o) && next < size; ++running) {
      io_op op;
      op.kind = io_kind::read;
      op.target = *f;
      op.offset = next;
      op.data = b.data() + next;
      op.length = std::min<uint64_t>(op_bytes, size - next);
      next += op.length;
      engine->submit(std::move(op));
    }
  };
  feed();
  auto last = clk::now();
  while (done < size) {
    for (auto& c : next_completions(q, last, "engine read of " + path)) {
      if (c.err || c.bytes == 0)
        throw std::runtime_error("engine read of " + path + " failed");
      done += c.bytes;
      --running;
    }
    feed();
  }
  auto d = clk::now() - t0;
  engine.reset(); // waits for every op, as the tier's owner does
  return d;
}

/// Populates `bytes` of new memory and gives it back, just before a timed
/// restore on every side: each side's new buffers then come from memory
/// the guest holds now. On this VM the kernel hands free memory back to
/// the host a few seconds after it is freed (free page reporting), and
/// memory handed back faults in several times slower (`new_memory_ms`
/// measures it), so without this a side's figure would depend on how long
/// ago the side before it freed its memory.
void settle_memory(uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return;
  ::madvise(p, bytes, MADV_HUGEPAGE);
  prefault({static_cast<std::byte*>(p), bytes});
  ::munmap(p, bytes);
}

/// A raw restore into new memory, as the tier's restore must fill it: one
/// buffer per size in `sizes` (the buffers the tier's restore filled, one
/// per payload: msg::buffer_builder, mapped unpopulated, from the
/// process's buffer pool or fresh past it), the file read into them in
/// order, in ops of at most `op_bytes` per buffer, at the tier's depth.
/// `engine`: through an I/O engine of the tier's kind, else pread.
/// `ahead`: the buffers populated in read order by one helper (a thread,
/// or a call op on the engine), as the tier does (cold_reads.cpp,
/// `prefault_buffers`); without it the reads fault the pages in. The
/// buffers live until after the clock stops, as the tier's restored entry
/// does, then go back to the pool.
struct new_memory {
  uint64_t from_pool = 0; // buffers the pool served
  uint64_t buffers = 0;
  clk::duration populate{}; // the helper's populating, when `ahead`
};
clk::duration fresh_read(const options& o, const std::string& path,
                         cache_check& cache, const std::vector<uint64_t>& sizes,
                         uint64_t op_bytes, bool engine, bool ahead,
                         new_memory& mem) {
  auto size = std::filesystem::file_size(path);
  uint64_t payloads = 0;
  for (auto n : sizes)
    payloads += n;
  if (payloads > size)
    throw std::runtime_error("buffers larger than " + path);
  if (cache.cold)
    drop_cache(path);
  ::sync();
  cache.before(path);
  settle_memory(size);
  completion_queue q;
  std::unique_ptr<io_engine> eng;
  if (engine)
    eng = floor_engine(o, q);
  // The header and checksums before the payloads: small, heap memory.
  std::vector<std::byte> head(size - payloads);
  struct part {
    uint64_t at;
    std::byte* dst;
    uint64_t length;
  };
  auto reused = populated_pool_now().reused;
  auto t0 = clk::now();
  std::vector<buffer_builder> bufs;
  bufs.reserve(sizes.size());
  for (auto n : sizes)
    bufs.emplace_back(n, 4096, populate_when::later);
  mem.from_pool = populated_pool_now().reused - reused;
  mem.buffers = sizes.size();
  std::vector<part> parts;
  uint64_t at = 0;
  auto cut = [&](std::byte* dst, uint64_t length) {
    for (uint64_t done = 0; done < length;) {
      auto n = std::min(op_bytes, length - done);
      parts.push_back({at, dst + done, n});
      at += n;
      done += n;
    }
  };
  cut(head.data(), head.size());
  for (auto& b : bufs)
    cut(b.data(), b.size());
  std::atomic<bool> stop{false};
  auto populate = [&bufs, &stop, &mem] {
    auto p0 = clk::now();
    for (auto& b : bufs) {
      if (b.size() < populated_threshold)
        continue;
      for (size_t off = 0; off < b.size() && !stop; off += 8u << 20)
        prefault(
          b.bytes().subspan(off, std::min<size_t>(8u << 20, b.size() - off)));
    }
    mem.populate = clk::now() - p0;
    return caf::error{};
  };
  bool ok = true;
  std::thread helper;
  if (engine) {
    auto f = posix_file_system{}.open(path, open_mode::read);
    if (!f)
      throw std::runtime_error(describe(f.error()));
    uint64_t running = 0, next = 0, done = 0, calls = 0;
    if (ahead) {
      io_op op;
      op.kind = io_kind::call;
      op.call = populate;
      op.tag = 1;
      ++calls;
      eng->submit(std::move(op));
    }
    auto feed = [&] {
      for (; running < queue_depth(o) && next < parts.size(); ++running) {
        io_op op;
        op.kind = io_kind::read;
        op.target = *f;
        op.offset = parts[next].at;
        op.data = parts[next].dst;
        op.length = parts[next].length;
        ++next;
        eng->submit(std::move(op));
      }
    };
    feed();
    auto last = clk::now();
    while (done < parts.size() || calls > 0) {
      for (auto& c : next_completions(q, last, "engine read of " + path)) {
        if (c.tag == 1) {
          --calls;
          continue;
        }
        if (c.err || c.bytes == 0)
          ok = false;
        ++done;
        --running;
      }
      if (ok)
        feed();
      else
        stop = true;
      if (!ok && running == 0 && calls == 0)
        break;
    }
  } else {
    if (ahead)
      helper = std::thread{populate};
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      throw std::runtime_error("cannot open " + path);
    ok = run_ops(parts.size(), 1, queue_depth(o), [&](uint64_t i, uint64_t) {
      auto& p = parts[i];
      for (uint64_t done = 0; done < p.length;) {
        auto r = ::pread(fd, p.dst + done, p.length - done,
                         static_cast<off_t>(p.at + done));
        if (r <= 0)
          return false;
        done += static_cast<uint64_t>(r);
      }
      return true;
    });
    if (helper.joinable())
      helper.join(); // as the tier's restore waits for its helper's call
    ::close(fd);
  }
  auto d = clk::now() - t0;
  eng.reset();
  if (!ok)
    throw std::runtime_error("read of " + path + " into new memory failed");
  return d;
}

/// fio writing `bytes` to a new file (writeback started after each op,
/// then fsync) or reading `path` cold or warm: its bandwidth in GB/s, or 0
/// when fio is not there or failed.
enum class fio_job { write, read_cold, read_warm };
double run_fio(const options& o, const std::string& path, fio_job job,
               uint64_t bytes, const char* engine, cache_check* cache) {
  if (job == fio_job::write)
    ::unlink(path.c_str());
  else if (job == fio_job::read_cold)
    drop_cache(path);
  ::sync();
  if (cache)
    cache->before(path);
  bool write = job == fio_job::write;
  std::string cmd =
    "fio --name=kvtier --filename=" + path + " --rw="
    + (write ? "write" : "read") + " --bs=" + std::to_string(block_bytes(o))
    + " --iodepth=" + std::to_string(queue_depth(o))
    + " --ioengine=" + (std::string{engine} == "threads" ? "psync" : "io_uring")
    + " --size=" + std::to_string(bytes) + " --direct=0 --output-format=json"
    + (write                       ? " --sync_file_range=write:1 --end_fsync=1"
       : job == fio_job::read_cold ? " --readonly --invalidate=1"
                                   : " --readonly --invalidate=0")
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
  if (write)
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

/// The file the tier holds the entry of `tokens` in.
std::string entry_path(bench_tier& b, std::string_view ns,
                       const token_seq& tokens) {
  auto prompt = tokens;
  prompt.push_back(1);
  auto m = b.tier->find(prompt, ns);
  if (!m)
    throw std::runtime_error("entry not found");
  return join_path(b.tier->root(), m->name);
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
  drop_cache(entry_path(b, e.ns, e.tokens));
  return d;
}

/// `waiters` concurrent restores of the entry of `tokens`, its file's
/// pages dropped first (cold) or left resident (warm), as `cache` says
/// (and checks); cold without one.
/// `mem`: the sizes of the buffers the restore filled and how many of them
/// the process's buffer pool served.
clk::duration restore(bench_tier& b, std::string_view ns,
                      const token_seq& tokens, int waiters,
                      cache_check* cache = nullptr,
                      std::vector<uint64_t>* sizes = nullptr,
                      new_memory* mem = nullptr) {
  auto prompt = tokens;
  prompt.push_back(1);
  auto m = b.tier->find(prompt, ns);
  if (!m)
    throw std::runtime_error("entry not found");
  auto path = join_path(b.tier->root(), m->name);
  if (!cache || cache->cold)
    drop_cache(path);
  ::sync();
  if (cache) {
    cache->before(path);
    settle_memory(std::filesystem::file_size(path));
  }
  // Restored entries live until after the clock stops, as the raw side's
  // buffer does: freeing 1 GiB is not part of either read.
  std::vector<entry> got;
  auto reused = populated_pool_now().reused;
  auto t0 = clk::now();
  if (b.trace_restores && waiters == 1) {
    b.trace_from = t0;
    b.reading = true;
  }
  for (int i = 0; i < waiters; ++i)
    b.tier->restore(*m, [&](caf::expected<entry> r) {
      if (r)
        got.push_back(std::move(*r));
    });
  b.drive();
  auto d = clk::now() - t0;
  if (b.trace_from) {
    std::printf("  %s restore of %s done after %.3f ms\n",
                cache && !cache->cold ? "warm" : "cold", path.c_str(),
                std::chrono::duration<double, std::milli>(d).count());
    b.trace_from.reset();
    b.reading = false;
  }
  if (got.size() != static_cast<size_t>(waiters))
    throw std::runtime_error("restore failed");
  std::vector<uint64_t> filled;
  for (auto& l : got[0].layers)
    for (auto& v : l.segments)
      filled.push_back(v.buf->size());
  for (auto& a : got[0].attachments)
    for (auto& v : a.segments)
      filled.push_back(v.buf->size());
  if (mem) {
    mem->from_pool = populated_pool_now().reused - reused;
    mem->buffers = filled.size();
  }
  if (sizes)
    *sizes = std::move(filled);
  return d;
}

token_seq bench_tokens(uint64_t n) {
  token_seq t(n);
  for (uint64_t i = 0; i < n; ++i)
    t[i] = static_cast<token>(i * 31 + n);
  return t;
}

/// Spill, cold restore and warm restore of one entry of `tokens` tokens,
/// each beside its floors.
std::vector<row> measure(const options& o, bench_tier& b,
                         const std::string& dir, uint64_t tokens) {
  auto g = *model_geometry::preset("llama-3.1-8b");
  auto e = runtime::oracle_engine{g}.prefill("bench", bench_tokens(tokens));
  auto bytes = e.byte_length();
  // Every write of every side makes a new file and keeps it until the
  // end, as the tier keeps its files: deleting the last run's file first
  // would free its blocks (and, mounted with -o discard, trim them) while
  // the next write runs.
  std::vector<std::string> written;
  auto inf = clk::duration::max();
  auto spill_t = inf, raw_w = inf;
  auto cold_t = inf, raw_cold = inf, warm_t = inf, raw_warm = inf;
  // Raw into memory resident before the clock (a reference, no floor).
  auto res_cold = inf, res_warm = inf;
  // New memory in the best run of the tier and of raw's best way.
  new_memory tier_cold_mem, tier_warm_mem, raw_cold_mem, raw_warm_mem;
  // The buffers the tier's restore fills (one per payload): the entry's
  // layers until the tier's first restore says.
  std::vector<uint64_t> tier_bufs;
  for (auto& l : e.layers)
    tier_bufs.push_back(total_length(l.segments));
  double fio_w = 0, fio_cold = 0, fio_warm = 0;
  cache_check cold{true}, warm{false};
  uint64_t file_bytes = 0;
  uint64_t tier_op = 0; // mean bytes per read op of the tier's restore
  std::optional<buffer_builder> dest; // where the raw reads land
  // Raw's ways of writing and reading, each way's best.
  std::map<std::string, clk::duration> write_ways, cold_ways, warm_ways,
    cold_resident, warm_resident;
  auto engine = b.tier->engine_name();
  for (int rep = 0; rep < o.reps; ++rep) {
    // A new key per run (same bytes): every spill writes a new file, as the
    // raw side does, instead of replacing (and freeing) the previous one.
    e.tokens[0] = static_cast<token>(rep);
    // Alternate which side reads first, so neither always inherits the
    // other's cache state.
    bool raw_first = rep % 2 == 0;
    auto raw_path = join_path(dir, "raw." + std::to_string(rep) + ".bin");
    auto engine_path = join_path(dir, "engine." + std::to_string(rep) + ".bin");
    written.push_back(engine_path);
    auto fio_path = join_path(dir, "fio." + std::to_string(rep) + ".bin");
    written.push_back(raw_path);
    written.push_back(fio_path);
    // Raw spills: pwritev from this process and writes through an engine
    // of the tier's kind; the better is the floor. The three writers take
    // turns: a write right after the reads meets another disk than one
    // right after another write (the engine's way used to follow pwritev
    // every time, the tier only every other run), so with --reps a
    // multiple of three each goes first, second and third equally often.
    auto way = [&](const std::string& name, auto write) {
      auto& w = write_ways.try_emplace(name, inf).first->second;
      w = std::min(w, write());
      raw_w = std::min(raw_w, w);
    };
    for (int k = 0; k < 3; ++k)
      switch ((rep + k) % 3) {
        case 0:
          way("pwritev", [&] { return raw_write(o, raw_path, e); });
          break;
        case 1:
          way(std::string{engine},
              [&] { return engine_write(o, engine_path, e); });
          break;
        default: spill_t = std::min(spill_t, spill(b, e, o.trace));
      }
    fio_w = std::max(
      fio_w, run_fio(o, fio_path, fio_job::write, bytes, engine, nullptr));
    // Both reads of the tier's own file, the same bytes. Raw reads in ops
    // of --op-mib and in ops of the size the tier handed its engine
    // (counted during its cold restore: one op per payload, so smaller
    // than --op-mib when a layer's payload is), each with pread and with
    // an engine of the tier's kind: the best of them is the floor.
    auto path = entry_path(b, e.ns, e.tokens);
    file_bytes = std::filesystem::file_size(path);
    // One destination for every raw read of this size, touched once: a
    // fresh mapping per read (1 GiB is past the buffer pool) would ask the
    // kernel for huge pages each time, and when it cannot find them at
    // once the read lands in 4 KiB pages, which copy slower here.
    if (!dest || dest->size() < file_bytes) {
      dest.emplace(file_bytes);
      std::memset(dest->data(), 0, file_bytes);
    }
    // Raw reads into new memory (the floor: a restore fills new memory),
    // and into one buffer resident before the clock (a reference).
    auto raw_reads = [&](cache_check& cache, clk::duration& best,
                         clk::duration& resident, new_memory& best_mem) {
      auto& ways = cache.cold ? cold_ways : warm_ways;
      auto fresh = [&](const std::string& way, bool eng, bool ahead) {
        new_memory m;
        auto d =
          fresh_read(o, path, cache, tier_bufs, block_bytes(o), eng, ahead, m);
        auto& w = ways.try_emplace(way, inf).first->second;
        w = std::min(w, d);
        if (d < best) {
          best = d;
          best_mem = m;
        }
      };
      fresh("pread", false, false);
      fresh("pread+prefault", false, true);
      fresh(std::string{engine} + "+prefault", true, true);
      std::vector<uint64_t> ops{block_bytes(o)};
      if (tier_op > 0 && tier_op != block_bytes(o))
        ops.push_back(tier_op);
      auto& res = cache.cold ? cold_resident : warm_resident;
      for (auto op : ops) {
        auto mib = std::to_string(op >> 20) + " MiB";
        auto& p = res.try_emplace("pread " + mib, inf).first->second;
        p = std::min(p, raw_read(o, path, cache, op, *dest));
        auto& q =
          res.try_emplace(std::string{engine} + " " + mib, inf).first->second;
        q = std::min(q, engine_read(o, path, cache, op, *dest));
        resident = std::min({resident, p, q});
      }
    };
    // The tier's op size and buffers are known after its first restore:
    // raw reads with them then too, even on a run where raw went first.
    bool knew_op = tier_op > 0;
    if (raw_first)
      raw_reads(cold, raw_cold, res_cold, raw_cold_mem);
    auto before = b.counted->counts();
    new_memory m;
    auto d = restore(b, e.ns, e.tokens, 1, &cold, &tier_bufs, &m);
    if (d < cold_t) {
      cold_t = d;
      tier_cold_mem = m;
    }
    auto after = b.counted->counts();
    if (after.reads > before.reads)
      tier_op = (after.bytes_read - before.bytes_read)
                / (after.reads - before.reads) / 4096 * 4096;
    if (!raw_first || !knew_op)
      raw_reads(cold, raw_cold, res_cold, raw_cold_mem);
    fio_cold = std::max(fio_cold, run_fio(o, path, fio_job::read_cold,
                                          file_bytes, engine, &cold));
    // Warm: a read (untimed) brings every page in; each timed read checks.
    read_whole(path);
    if (raw_first)
      raw_reads(warm, raw_warm, res_warm, raw_warm_mem);
    d = restore(b, e.ns, e.tokens, 1, &warm, nullptr, &m);
    if (d < warm_t) {
      warm_t = d;
      tier_warm_mem = m;
    }
    if (!raw_first)
      raw_reads(warm, raw_warm, res_warm, raw_warm_mem);
    fio_warm = std::max(fio_warm, run_fio(o, path, fio_job::read_warm,
                                          file_bytes, engine, &warm));
    drop_cache(path);
  }
  for (auto& f : written)
    ::unlink(f.c_str());
  // Each raw way of reading, best of the runs: which one made the floor.
  auto ways = [&](const std::map<std::string, clk::duration>& m,
                  uint64_t moved) {
    std::string out;
    for (auto& [way, d] : m) {
      char f[64];
      std::snprintf(f, sizeof f, "%s%s %.3f", out.empty() ? "" : ", ",
                    way.c_str(), gbps(moved, d));
      out += f;
    }
    return out + " GB/s";
  };
  // Each side's GB/s over the bytes it moved: the tier writes and reads
  // its whole file (header, checksums, alignment), raw and fio the entry's
  // bytes when writing and the tier's file when reading.
  auto memory = [&](const new_memory& tier, const new_memory& raw) {
    char out[200];
    std::snprintf(
      out, sizeof out,
      "the buffer pool served %llu of the tier's %llu buffers "
      "and %llu of raw's; raw's helper populated the rest in "
      "%.1f ms",
      static_cast<unsigned long long>(tier.from_pool),
      static_cast<unsigned long long>(tier.buffers),
      static_cast<unsigned long long>(raw.from_pool),
      std::chrono::duration<double, std::milli>(raw.populate).count());
    return std::string{out};
  };
  row s{"spill",
        file_bytes,
        gbps(file_bytes, spill_t),
        gbps(bytes, raw_w),
        fio_w,
        true,
        "(a write: new file, durable)",
        true,
        ways(write_ways, bytes),
        0,
        {},
        {},
        {}};
  row c{"restore cold",
        file_bytes,
        gbps(file_bytes, cold_t),
        gbps(file_bytes, raw_cold),
        fio_cold,
        true,
        cold.describe(),
        cold.ok(),
        ways(cold_ways, file_bytes),
        gbps(file_bytes, res_cold),
        ways(cold_resident, file_bytes),
        memory(tier_cold_mem, raw_cold_mem),
        {}};
  row w{"restore warm",
        file_bytes,
        gbps(file_bytes, warm_t),
        gbps(file_bytes, raw_warm),
        fio_warm,
        false,
        warm.describe(),
        warm.ok(),
        ways(warm_ways, file_bytes),
        gbps(file_bytes, res_warm),
        ways(warm_resident, file_bytes),
        memory(tier_warm_mem, raw_warm_mem),
        {}};
  // The tier's own work a spill does beside its writes and raw does not:
  // the chunk checksums of every byte (on a helper thread, beside the
  // writes), best of three, here and now.
  auto sums = inf;
  ssd_config defaults;
  for (int i = 0; i < 3; ++i) {
    auto h = layout(e, "bench", defaults.alignment, defaults.checksum_chunk);
    auto t0 = clk::now();
    compute_checksums(h, e);
    sums = std::min(sums, clk::now() - t0);
  }
  char own[160];
  std::snprintf(own, sizeof own,
                "the chunk checksums of its %.0f MiB took %.1f ms of CPU here "
                "(best of 3), beside raw's %.1f ms for the whole write",
                static_cast<double>(bytes) / (1 << 20),
                std::chrono::duration<double, std::milli>(sums).count(),
                std::chrono::duration<double, std::milli>(raw_w).count());
  s.own_work = std::string{"the tier creates a temporary file on a helper "
                           "thread, writes the header once the checksums "
                           "are known, renames; "}
               + own;
  std::snprintf(own, sizeof own,
                "its chunk checksums of every byte (the same XXH3 pass as a "
                "spill's: %.1f ms of CPU here, best of 3)",
                std::chrono::duration<double, std::milli>(sums).count());
  c.own_work = w.own_work =
    std::string{"the tier opens the file and checks its header on a helper "
                "thread before its first read, and verifies, beside its "
                "reads, "}
    + own;
  return {s, c, w};
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

/// The system's transparent huge page mode for anonymous memory (the
/// bracketed word of /sys/kernel/mm/transparent_hugepage/enabled), or
/// "unknown".
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  auto a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a
           ? line.substr(a + 1, b - a - 1)
           : "unknown";
}

/// Milliseconds to fault in `bytes` of fresh 4 KiB pages: what a buffer
/// like fio's costs on this machine (a read job's first op pays it inside
/// fio's timed region; its other copies pay the 4 KiB pages' TLB misses).
double fresh_small_pages_ms(uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return 0;
  ::madvise(p, bytes, MADV_NOHUGEPAGE);
  auto t0 = clk::now();
  for (uint64_t at = 0; at < bytes; at += 4096)
    static_cast<volatile char*>(p)[at] = 1;
  auto d = clk::now() - t0;
  ::munmap(p, bytes);
  return std::chrono::duration<double, std::milli>(d).count();
}

/// Milliseconds to populate `bytes` of new memory of the tier's kind (a
/// fresh mapping, not the buffer pool's; huge pages asked for, populated
/// as `prefault` does): what a restore's buffers cost past the pool, here
/// and now.
double new_memory_ms(uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return 0;
  ::madvise(p, bytes, MADV_HUGEPAGE);
  auto t0 = clk::now();
  prefault({static_cast<std::byte*>(p), bytes});
  auto d = clk::now() - t0;
  ::munmap(p, bytes);
  return std::chrono::duration<double, std::milli>(d).count();
}

void print(const options& o, const std::vector<row>& rows,
           const coalesce_counts& c, const char* engine, double load_before) {
  if (o.json) {
    std::printf("[\n");
    for (auto& r : rows)
      std::printf("  {\"op\": \"%s\", \"bytes\": %llu, \"kvtier_gbps\": %.3f, "
                  "\"raw_gbps\": %.3f, \"fio_gbps\": %.3f, \"floor_gbps\": "
                  "%.3f, \"cache_as_named\": %s},\n",
                  r.op.c_str(), static_cast<unsigned long long>(r.bytes),
                  r.kvtier_gbps, r.raw_gbps, r.fio_gbps, r.floor(),
                  r.cache_ok ? "true" : "false");
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
                "per op on every side, load average %.2f before, %.2f "
                "after)\n",
                engine, o.reps, queue_depth(o),
                static_cast<unsigned long long>(block_bytes(o) >> 20),
                load_before, load_now());
    std::printf("%-13s %11s %8s %8s %8s %8s %7s %7s\n", "op", "bytes", "kvtier",
                "raw", "fio", "floor", "/raw", "/fio");
    std::printf("%-13s %11s %8s %8s %8s %8s\n", "", "", "GB/s", "GB/s", "GB/s",
                "GB/s");
    for (auto& r : rows) {
      std::printf("%-13s %11llu %8.3f %8.3f %8.3f %8.3f %6.2fx %6.2fx\n",
                  r.op.c_str(), static_cast<unsigned long long>(r.bytes),
                  r.kvtier_gbps, r.raw_gbps, r.fio_gbps, r.floor(),
                  r.kvtier_gbps / r.raw_gbps,
                  r.fio_gbps > 0 ? r.kvtier_gbps / r.fio_gbps : 0.0);
      std::printf("%-13s   cache: %s\n", "", r.cache.c_str());
      if (r.resident_gbps > 0) {
        std::printf("%-13s   raw into new memory (the floor): %s\n", "",
                    r.raw_ways.c_str());
        std::printf("%-13s   raw into memory resident before the clock: "
                    "%s\n",
                    "", r.resident_ways.c_str());
        std::printf("%-13s   memory: %s\n", "", r.memory.c_str());
      } else if (!r.raw_ways.empty()) {
        std::printf("%-13s   raw: %s\n", "", r.raw_ways.c_str());
      }
    }
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
  auto thp = thp_mode();
  for (auto& r : rows) {
    auto what = r.op + " " + std::to_string(r.bytes >> 20) + " MiB";
    if (r.fio_gbps <= 0) {
      ++failures;
      std::printf("FAIL %s: fio did not run (is it installed?)\n",
                  what.c_str());
    }
    if (!r.cache_ok) {
      ++failures;
      std::printf("FAIL %s: %s\n", what.c_str(), r.cache.c_str());
    }
    // fio below raw: name why it is no floor here.
    if (r.fio_gbps > 0 && r.raw_gbps > r.fio_gbps)
      std::printf("NOTE %s: fio is no floor here (raw %.2fx fio, kvtier "
                  "%.2fx fio): its %llu MiB I/O buffer is 4 KiB pages "
                  "(transparent huge pages: %s), the tier's and raw's are "
                  "huge pages; touching that many fresh 4 KiB pages took "
                  "%.1f ms here just now, against %.1f ms for fio's whole "
                  "job\n",
                  what.c_str(), r.raw_gbps / r.fio_gbps,
                  r.kvtier_gbps / r.fio_gbps,
                  static_cast<unsigned long long>(block_bytes(o) >> 20),
                  thp.c_str(), fresh_small_pages_ms(block_bytes(o)),
                  static_cast<double>(r.bytes) / r.fio_gbps / 1e6);
    // A restore fills new memory; fio and raw's resident buffer do not.
    if (r.resident_gbps > 0 && r.resident_gbps > r.raw_gbps * 1.1)
      std::printf("NOTE %s: into memory resident before the clock raw read "
                  "%.2fx as fast (%.3f GB/s; fio, reusing one %llu MiB "
                  "buffer, %.3f): a restore fills new memory (%s), and "
                  "populating that much new memory took %.1f ms here just "
                  "now, against %.1f ms for raw's read into resident "
                  "memory: no floor for a restore\n",
                  what.c_str(), r.resident_gbps / r.raw_gbps, r.resident_gbps,
                  static_cast<unsigned long long>(block_bytes(o) >> 20),
                  r.fio_gbps, r.memory.c_str(), new_memory_ms(r.bytes),
                  static_cast<double>(r.bytes) / r.resident_gbps / 1e6);
    // A floor kvtier beats is no floor, and no reason is known for it.
    // Above it as printed (two decimals): equal is no finding.
    if (r.kvtier_gbps > r.floor() * 1.005) {
      ++failures;
      std::printf("FAIL %s: kvtier %.2fx its floor (%s): above a floor, "
                  "reason not known\n",
                  what.c_str(), r.kvtier_gbps / r.floor(),
                  r.resident_gbps > 0 || r.raw_gbps >= r.fio_gbps ? "raw"
                                                                  : "fio");
    }
    if (!r.own_work.empty() && r.kvtier_gbps < r.floor() * 0.995)
      std::printf("NOTE %s: kvtier does more than raw: %s\n", what.c_str(),
                  r.own_work.c_str());
    if (r.target)
      verdict(what + " / floor", r.kvtier_gbps / r.floor(), 0.9);
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
  b.trace_restores = o.trace;
  std::vector<row> rows;
  std::vector<uint64_t> sizes{512};
  if (!o.quick)
    sizes.push_back(8192);
  for (auto tokens : sizes) {
    uint64_t bytes = tokens * (128u << 10);
    // Each run keeps its tier, raw and fio files until the end.
    if (!enough_space(o.dir, (3 * static_cast<uint64_t>(o.reps) + 1) * bytes
                               + (1ull << 30))) {
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
