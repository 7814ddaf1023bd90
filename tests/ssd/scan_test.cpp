#define BOOST_TEST_MODULE ssd_scan
#include "tests/ssd/ssd_fixture.hpp"

#include <algorithm>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

runtime::oracle_engine oracle() {
  return runtime::oracle_engine{every_kind(), 40};
}

/// Writes one entry of `n` tokens and returns its file name.
std::string write_one(world& w, size_t n, token salt = 0) {
  auto e = oracle().prefill("ns", tokens(n, salt));
  w.store(e);
  return file_name("ns", e.tokens);
}

bool has(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

} // namespace

BOOST_AUTO_TEST_CASE(scan_reads_headers_only) {
  scratch_dir dir;
  memory_file_system mem;
  faulty_file_system counting{mem};
  world w{{fs_kind::memory, engine_choice::threads}, dir.path, {}, &counting};
  write_one(w, 30);
  write_one(w, 12, 7);
  auto reads_before = counting.count(fs_op::read);
  auto r = w.reopen();
  BOOST_TEST(r.loaded == 2u);
  // Two small reads per file: the fixed prefix, then the header (and one
  // of the directory's MODEL file, checked at open).
  BOOST_TEST(counting.count(fs_op::read) - reads_before == 4u + 1u);
}

BOOST_AUTO_TEST_CASE(corrupt_header_is_removed_at_scan) {
  on_every_backend([&](world& w) {
    auto name = write_one(w, 20);
    auto keep = write_one(w, 21, 50);
    w.mutate(name, [](auto& bytes) { bytes[70] ^= std::byte{0x01}; });
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 1u);
    BOOST_TEST(r.corrupt_removed == 1u);
    BOOST_TEST(!has(w.files(), name));
    BOOST_TEST(has(w.files(), keep));
    BOOST_TEST(!w.tier->find(tokens(21), "ns"));
  });
}

BOOST_AUTO_TEST_CASE(corrupt_payload_is_a_miss_and_the_file_goes) {
  on_every_backend([&](world& w) {
    auto name = write_one(w, 20);
    w.mutate(name, [](auto& bytes) { bytes.back() ^= std::byte{0x80}; });
    BOOST_TEST(w.reopen().loaded == 1u); // the header is fine
    auto m = w.tier->find(tokens(21), "ns");
    BOOST_REQUIRE(m);
    auto e = w.restore(*m);
    BOOST_REQUIRE(!e);
    BOOST_TEST((e.error() == ec::corrupt_data));
    drive(*w.tier, w.queue);
    BOOST_TEST(!w.tier->find(tokens(21), "ns"));
    BOOST_TEST(!has(w.files(), name));
    BOOST_TEST(w.tier->stats().corrupt_removed == 1u);
  });
}

BOOST_AUTO_TEST_CASE(truncated_file_is_removed_at_scan) {
  on_every_backend([&](world& w) {
    auto name = write_one(w, 20);
    w.mutate(name, [](auto& bytes) { bytes.resize(bytes.size() - 1); });
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 0u);
    BOOST_TEST(r.corrupt_removed == 1u);
    BOOST_TEST(w.files().empty());
  });
}

BOOST_AUTO_TEST_CASE(orphan_temp_is_removed_at_scan) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      world w{b, dir.path};
      auto name = write_one(w, 20);
      auto temp = name + ".7.9.tmp";
      std::vector<std::byte> half;
      w.mutate(name, [&](auto& bytes) {
        half.assign(bytes.begin(), bytes.begin() + bytes.size() / 2);
      });
      // A temp that a crash left behind: half an entry file.
      file_system* fs = nullptr;
      posix_file_system posix;
      fs = b.kind == fs_kind::posix ? static_cast<file_system*>(&posix)
                                    : &w.memory_;
      auto f = fs->open(join_path(w.tier->root(), temp), open_mode::create);
      BOOST_REQUIRE(f);
      BOOST_REQUIRE((*f)->write_at(0, half));
      f->reset();
      auto r = w.reopen();
      BOOST_TEST(r.temps_removed == 1u);
      BOOST_TEST(r.loaded == 1u);
      BOOST_TEST(w.files() == std::vector<std::string>{name});
    }
  }
}

BOOST_AUTO_TEST_CASE(other_fingerprints_are_ignored_never_deleted) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      ssd_config a;
      a.fingerprint = "model-a";
      world w{b, dir.path, a};
      auto name = write_one(w, 20);
      std::vector<std::byte> bytes;
      w.mutate(name, [&](auto& b2) { bytes = b2; });
      ssd_config bcfg;
      bcfg.fingerprint = "model-b";
      world other{b, dir.path, bcfg};
      if (b.kind == fs_kind::memory) // share the in-memory disk
        other.reopen(&w.memory_);
      BOOST_TEST(other.tier->saved_prefixes().empty());
      // Model A's file copied into B's directory is still A's: ignored.
      auto copy = join_path(other.tier->root(), name);
      file_system& fs = b.kind == fs_kind::memory
                          ? static_cast<file_system&>(w.memory_)
                          : static_cast<file_system&>(w.posix_);
      auto f = fs.open(copy, open_mode::create);
      BOOST_REQUIRE(f);
      BOOST_REQUIRE((*f)->write_at(0, bytes));
      f->reset();
      auto r = other.reopen();
      BOOST_TEST(r.ignored == 1u);
      BOOST_TEST(r.loaded == 0u);
      BOOST_TEST(has(other.files(), name));
      BOOST_TEST(w.reopen().loaded == 1u);
    }
  }
}

BOOST_AUTO_TEST_CASE(byte_cap_evicts_least_recently_used_files) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      ssd_config cfg;
      {
        // Learn one file's size: every entry below has the same shape.
        world probe{b, dir.path};
        write_one(probe, 20);
        cfg.byte_cap = probe.tier->stats().file_bytes * 3;
      }
      scratch_dir dir2;
      world w{b, dir2.path, cfg};
      auto f1 = write_one(w, 20, 100);
      auto f2 = write_one(w, 20, 200);
      auto f3 = write_one(w, 20, 300);
      BOOST_REQUIRE(w.restore(*w.tier->find(tokens(21, 100), "ns")));
      auto f4 = write_one(w, 20, 400); // over the cap: f2 is the LRU
      drive(*w.tier, w.queue);
      auto names = w.files();
      BOOST_TEST(!has(names, f2));
      BOOST_TEST(has(names, f1));
      BOOST_TEST(has(names, f3));
      BOOST_TEST(has(names, f4));
      BOOST_TEST(w.tier->stats().evicted == 1u);
      auto f5 = write_one(w, 20, 500); // next LRU: f3
      drive(*w.tier, w.queue);
      BOOST_TEST(!has(w.files(), f3));
      BOOST_TEST(has(w.files(), f1));
      BOOST_TEST(has(w.files(), f5));
      BOOST_TEST(w.reopen().loaded == 3u);
    }
  }
}
