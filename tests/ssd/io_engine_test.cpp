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
        (*e)->submit(io_op{
          io_kind::write, *f, i * len, src.data() + i * len, len, {}, {}, i});
      for (auto& c : wait_for(q, n)) {
        BOOST_TEST(!static_cast<bool>(c.err));
        BOOST_TEST(c.bytes == len);
      }
      (*e)->submit(io_op{io_kind::sync, *f, 0, nullptr, 0, {}, {}, 99});
      BOOST_TEST(!static_cast<bool>(wait_for(q, 1)[0].err));
      auto r = fs.open(dir.path + "/f", open_mode::read);
      BOOST_REQUIRE(r);
      auto dst = std::make_shared<buffer_builder>(n * len + 100);
      // Ask past the end: a short read, not an error.
      (*e)->submit(
        io_op{io_kind::read, *r, 0, dst->data(), n * len + 100, {}, dst, 7});
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
                         8});
      BOOST_TEST((wait_for(q, 1)[0].err == ec::io_error));
      BOOST_TEST(on_caller.load() == 0);
    }
  }
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
        (*e)->submit(
          io_op{io_kind::write, *f, i * 4096, data->data(), 4096, {}, data, i});
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
