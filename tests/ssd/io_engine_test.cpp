#define BOOST_TEST_MODULE ssd_io_engine
#include "tests/ssd/ssd_fixture.hpp"

#include <thread>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

std::vector<io_completion> wait_for(completion_queue& q, size_t n) {
  std::vector<io_completion> out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (out.size() < n && std::chrono::steady_clock::now() < deadline)
    for (auto& c : q.wait(std::chrono::milliseconds(50)))
      out.push_back(std::move(c));
  BOOST_REQUIRE(out.size() == n);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(engines_write_sync_and_read_off_the_caller_thread) {
  for (auto choice : all_engines()) {
    scratch_dir dir;
    posix_file_system fs;
    completion_queue q;
    auto caller = std::this_thread::get_id();
    std::atomic<int> on_caller{0};
    auto e = make_io_engine(choice, [&](io_completion c) {
      if (std::this_thread::get_id() == caller)
        ++on_caller;
      q.push(std::move(c));
    });
    BOOST_REQUIRE(e);
    BOOST_TEST_CONTEXT((*e)->name()) {
      auto f = fs.open(dir.path + "/f", open_mode::create);
      BOOST_REQUIRE(f);
      constexpr size_t n = 64, len = 64 * 1024;
      buffer_builder src(n * len);
      for (size_t i = 0; i < src.size(); ++i)
        src.data()[i] = std::byte(i * 7 % 251);
      for (size_t i = 0; i < n; ++i)
        (*e)->submit(io_op{io_kind::write,
                           *f,
                           i * len,
                           src.data() + i * len,
                           len,
                           {},
                           {},
                           i,
                           {}});
      for (auto& c : wait_for(q, n)) {
        BOOST_TEST(!static_cast<bool>(c.err));
        BOOST_TEST(c.bytes == len);
      }
      (*e)->submit(io_op{io_kind::sync, *f, 0, nullptr, 0, {}, {}, 99, {}});
      BOOST_TEST(!static_cast<bool>(wait_for(q, 1)[0].err));
      auto r = fs.open(dir.path + "/f", open_mode::read);
      BOOST_REQUIRE(r);
      auto dst = std::make_shared<buffer_builder>(n * len + 100);
      // Ask past the end: a short read, not an error.
      (*e)->submit(io_op{
        io_kind::read, *r, 0, dst->data(), n * len + 100, {}, dst, 7, {}});
      auto c = wait_for(q, 1)[0];
      BOOST_TEST(!static_cast<bool>(c.err));
      BOOST_TEST(c.tag == 7u);
      BOOST_TEST(c.bytes == n * len);
      BOOST_TEST(std::memcmp(dst->data(), src.data(), n * len) == 0);
      (*e)->submit(io_op{io_kind::call,
                         nullptr,
                         0,
                         nullptr,
                         0,
                         [] { return make_error(ec::io_error, "x"); },
                         {},
                         8,
                         {}});
      BOOST_TEST((wait_for(q, 1)[0].err == ec::io_error));
      BOOST_TEST(on_caller.load() == 0);
    }
  }
}

namespace {

/// A gathered write of pieces of `sizes` (cut from one pattern buffer,
/// in order) at `offset` through `e` onto `f`; its completion.
io_completion write_gathered(io_engine& e, completion_queue& q,
                             const file_ref& f, uint64_t offset,
                             const std::vector<size_t>& sizes,
                             std::vector<std::byte>& expected) {
  size_t total = 0;
  for (auto n : sizes)
    total += n;
  auto src = std::make_shared<std::vector<std::byte>>(total);
  for (size_t i = 0; i < total; ++i)
    (*src)[i] = std::byte((i * 13 + offset) % 251);
  io_op op{io_kind::write, f, offset, nullptr, total, {}, src, 5, {}};
  for (size_t at = 0; auto n : sizes) {
    op.pieces.push_back({src->data() + at, n});
    at += n;
  }
  expected = *src;
  e.submit(std::move(op));
  return wait_for(q, 1)[0];
}

} // namespace

BOOST_AUTO_TEST_CASE(gathered_writes_are_one_op_and_byte_exact_on_every_file) {
  // Pieces of odd sizes, an empty one, and more than IOV_MAX of them (the
  // engine then writes in several parts); on a native file (io_uring's
  // writev, the threads engine's pwritev) and an in-memory one (piece by
  // piece through write_at).
  std::vector<size_t> sizes{4096, 1, 0, 65536, 333};
  for (int i = 0; i < 1500; ++i)
    sizes.push_back(17 + i % 5);
  for (auto choice : all_engines())
    for (bool native : {true, false}) {
      scratch_dir dir;
      posix_file_system posix;
      memory_file_system memory;
      file_system& fs = native ? static_cast<file_system&>(posix) : memory;
      completion_queue q;
      auto e = make_io_engine(choice, q.sink());
      BOOST_REQUIRE(e);
      BOOST_TEST_CONTEXT((*e)->name() << (native ? " posix" : " memory")) {
        auto f = fs.open(dir.path + "/g", open_mode::create);
        BOOST_REQUIRE(f);
        std::vector<std::byte> want;
        auto c = write_gathered(**e, q, *f, 8192, sizes, want);
        BOOST_TEST(!static_cast<bool>(c.err));
        BOOST_TEST(c.tag == 5u);
        BOOST_TEST(c.bytes == want.size());
        auto r = fs.open(dir.path + "/g", open_mode::read);
        BOOST_REQUIRE(r);
        std::vector<std::byte> got(want.size());
        auto n = (*r)->read_at(8192, got);
        BOOST_REQUIRE(n);
        BOOST_TEST(*n == want.size());
        BOOST_TEST(std::memcmp(got.data(), want.data(), want.size()) == 0);
      }
    }
}

BOOST_AUTO_TEST_CASE(a_gathered_write_cut_short_reports_what_it_wrote) {
  // A short write inside the third piece: the op reports the bytes before
  // it plus the half the fault let through, and nothing after it.
  memory_file_system memory;
  faulty_file_system faulty{memory};
  completion_queue q;
  auto e = make_io_engine(engine_choice::threads, q.sink());
  BOOST_REQUIRE(e);
  auto f = faulty.open("/s", open_mode::create);
  BOOST_REQUIRE(f);
  faulty.inject(fs_op::write, 3, fault_kind::short_write);
  std::vector<std::byte> want;
  auto c = write_gathered(**e, q, *f, 0, {100, 200, 300, 400}, want);
  BOOST_TEST(!static_cast<bool>(c.err));
  BOOST_TEST(c.bytes == 100u + 200u + 150u);
  auto size = (*f)->size();
  BOOST_REQUIRE(size);
  BOOST_TEST(*size == 450u);
}

BOOST_AUTO_TEST_CASE(destroying_an_engine_delivers_every_completion) {
  for (auto choice : all_engines()) {
    scratch_dir dir;
    posix_file_system fs;
    completion_queue q;
    auto f = fs.open(dir.path + "/f", open_mode::create);
    BOOST_REQUIRE(f);
    auto data = std::make_shared<buffer_builder>(4096);
    std::memset(data->data(), 1, 4096);
    std::weak_ptr<buffer_builder> watch = data;
    {
      auto e = make_io_engine(choice, q.sink());
      BOOST_REQUIRE(e);
      for (uint64_t i = 0; i < 100; ++i)
        (*e)->submit(io_op{
          io_kind::write, *f, i * 4096, data->data(), 4096, {}, data, i, {}});
      data.reset(); // only the engine keeps it now
    }
    BOOST_TEST(q.wait(std::chrono::milliseconds(0)).size() == 100u);
    BOOST_TEST(watch.expired()); // released with the last completion
  }
}

BOOST_AUTO_TEST_CASE(engine_choice_parses_and_reports) {
  BOOST_TEST((*parse_engine_choice("auto") == engine_choice::automatic));
  BOOST_TEST((*parse_engine_choice("threads") == engine_choice::threads));
  BOOST_TEST(!parse_engine_choice("fast"));
  completion_queue q;
  auto e = make_io_engine(engine_choice::automatic, q.sink());
  BOOST_REQUIRE(e);
#ifdef KVTIER_HAVE_URING
  BOOST_TEST(std::string{(*e)->name()} == "io_uring");
#else
  BOOST_TEST(std::string{(*e)->name()} == "threads");
#endif
}
