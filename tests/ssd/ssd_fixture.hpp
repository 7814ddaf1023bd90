// Test helpers for tests/ssd: scratch directories, backends (file system x
// I/O engine), a loop that feeds engine completions back to the tier, and
// synchronous wrappers for restore and flush. Tests only.
#pragma once

#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/counted_engine.hpp"
#include "tiers/ssd/faulty_file_system.hpp"
#include "tiers/ssd/memory_file_system.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

namespace kvtier::tiers::ssd::test {

/// A fresh directory under /tmp, removed with everything in it.
struct scratch_dir {
  scratch_dir() {
    char tmpl[] = "/tmp/kvtier-ssd-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

enum class fs_kind { posix, memory };

/// One backend: a file system and an engine feeding a completion queue.
struct backend {
  fs_kind kind;
  engine_choice engine;

  std::string name() const {
    return std::string{kind == fs_kind::posix ? "posix" : "memory"} + "+"
           + (engine == engine_choice::uring ? "uring" : "threads");
  }
};

/// Every backend a behaviour must hold on.
inline std::vector<backend> all_backends() {
  std::vector<backend> out{{fs_kind::posix, engine_choice::threads},
                           {fs_kind::memory, engine_choice::threads}};
#ifdef KVTIER_HAVE_URING
  out.push_back({fs_kind::posix, engine_choice::uring});
#endif
  return out;
}

/// Every engine that can start here.
inline std::vector<engine_choice> all_engines() {
  std::vector<engine_choice> out{engine_choice::threads};
#ifdef KVTIER_HAVE_URING
  out.push_back(engine_choice::uring);
#endif
  return out;
}

/// Feeds completions to `tier` until it is idle (fails the test after 60 s).
inline void drive(ssd_tier& tier, completion_queue& q) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (tier.busy()) {
    for (auto& c : q.wait(std::chrono::milliseconds(50)))
      tier.handle(std::move(c));
    if (std::chrono::steady_clock::now() > deadline) {
      BOOST_FAIL("the SSD tier did not become idle");
      return;
    }
  }
}

/// A world of one backend: file system, engine, tier.
class world {
public:
  world(backend b, std::string dir, ssd_config cfg = {},
        file_system* fs = nullptr)
    : b_(b)
    , dir_(std::move(dir)) {
    if (fs == nullptr)
      fs = b.kind == fs_kind::posix ? static_cast<file_system*>(&posix_)
                                    : static_cast<file_system*>(&memory_);
    fs_ = fs;
    auto e = make_io_engine(b.engine, queue.sink());
    BOOST_REQUIRE(e);
    auto c = std::make_unique<counted_engine>(std::move(*e));
    counted = c.get();
    engine = std::move(c);
    cfg.dir = dir_;
    cfg_ = cfg;
    reopen();
  }

  /// Drops the tier (as a restart would) and scans again.
  scan_report reopen(file_system* fs = nullptr) {
    if (tier)
      drive(*tier, queue);
    tier.reset();
    if (fs != nullptr)
      fs_ = fs;
    tier = std::make_unique<ssd_tier>(cfg_, *fs_, *engine);
    auto r = tier->open();
    if (!r)
      BOOST_FAIL(describe(r.error()));
    return *r;
  }

  /// The configuration of the next `reopen` (the directory stays).
  void configure(ssd_config cfg) {
    cfg.dir = dir_;
    cfg_ = std::move(cfg);
  }

  caf::expected<entry> restore(const ssd_match& m) {
    std::optional<caf::expected<entry>> out;
    tier->restore(m, [&](caf::expected<entry> e) { out = std::move(e); });
    drive(*tier, queue);
    BOOST_REQUIRE(out.has_value());
    return std::move(*out);
  }

  /// Queues `e` as a spill and flushes until it is durable.
  void store(entry e) {
    BOOST_REQUIRE(tier->enqueue(std::move(e), write_reason::spill));
    BOOST_REQUIRE(flush().durable);
  }

  durability_evidence flush() {
    std::optional<durability_evidence> out;
    tier->flush([&](const durability_evidence& ev) { out = ev; });
    drive(*tier, queue);
    BOOST_REQUIRE(out.has_value());
    return *out;
  }

  /// Reads, changes and writes back the bytes of `name` in the tier's dir.
  void mutate(const std::string& name,
              const std::function<void(std::vector<std::byte>&)>& fn) {
    auto p = join_path(tier->root(), name);
    std::vector<std::byte> bytes;
    if (b_.kind == fs_kind::memory) {
      auto c = memory_.contents(p);
      BOOST_REQUIRE(c);
      bytes = std::move(*c);
    } else {
      std::ifstream in{p, std::ios::binary};
      std::vector<char> raw{std::istreambuf_iterator<char>{in}, {}};
      bytes.resize(raw.size());
      std::memcpy(bytes.data(), raw.data(), raw.size());
    }
    fn(bytes);
    if (b_.kind == fs_kind::memory) {
      BOOST_REQUIRE(!memory_.overwrite(p, std::move(bytes)));
    } else {
      std::ofstream out{p, std::ios::binary | std::ios::trunc};
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
  }

  /// Deletes `name` from the tier's directory behind the tier's back.
  void remove(const std::string& name) {
    BOOST_REQUIRE(!fs_->remove(join_path(tier->root(), name)));
  }

  /// The file system the tier runs on.
  file_system& fs() {
    return *fs_;
  }

  /// Names of the files in the tier's directory, but for the tier's own
  /// LOCK and MODEL files.
  std::vector<std::string> files() {
    auto l = fs_->list(tier->root());
    std::vector<std::string> out;
    for (auto& n : l ? *l : std::vector<std::string>{})
      if (n != lock_file_name && n != model_file_name)
        out.push_back(n);
    return out;
  }

  ~world() {
    if (tier)
      drive(*tier, queue);
  }

  // Declared first: destroyed after the engine that may still touch them.
  memory_file_system memory_;
  posix_file_system posix_;
  completion_queue queue;
  std::unique_ptr<io_engine> engine;
  /// `engine`, counting the ops the tier hands it.
  counted_engine* counted = nullptr;
  std::unique_ptr<ssd_tier> tier;

private:
  backend b_;
  std::string dir_;
  ssd_config cfg_;
  file_system* fs_ = nullptr;
};

/// Runs `body` once per backend, each on a fresh directory: one test body
/// for every file system and engine.
template <class Body>
void on_every_backend(Body&& body, const ssd_config& cfg = {}) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      world w{b, dir.path, cfg};
      body(w);
    }
  }
}

/// A geometry with every layer kind: kv, ring (window 16), recurrent,
/// object.
inline model_geometry every_kind() {
  model_geometry g{"every-kind", {}};
  g.layers.push_back({layer_kind::kv, 64, 0, 0});
  g.layers.push_back({layer_kind::ring, 32, 16, 0});
  g.layers.push_back({layer_kind::recurrent, 0, 0, 256});
  g.layers.push_back({layer_kind::object, 0, 0, 128});
  return g;
}

/// Tokens 1..n shifted by `salt`.
inline token_seq tokens(size_t n, token salt = 0) {
  token_seq t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<token>(i + 1 + salt);
  return t;
}

} // namespace kvtier::tiers::ssd::test
