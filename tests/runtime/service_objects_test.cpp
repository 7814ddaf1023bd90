// objects() through the embedded API: objects evicted over the RAM cap are
// spilled and found again, every object is restored bit-exact after a
// restart (in-memory file system, and real files on both I/O engines), a
// replaced object never comes back from an older file, and a service built
// without objects has no object port. Every object served is compared byte
// for byte with the one put.
#define BOOST_TEST_MODULE runtime_service_objects
#include "tests/runtime/service_fixture.hpp"
#include "tests/ssd/ssd_fixture.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

using namespace kvtier;
using kvtier::testing::why;

namespace {

using tensors = std::vector<tiers::attachment>;

/// `n` bytes, byte i = (i * 5 + salt) mod 253.
view pattern(size_t n, uint8_t salt) {
  buffer_builder b(n);
  for (size_t i = 0; i < n; ++i)
    b.data()[i] = std::byte(static_cast<uint8_t>((i * 5 + salt) % 253));
  auto buf = std::move(b).freeze();
  return view{buf, 0, n};
}

/// About 300 KiB: an encoder output and a small pooled vector.
tensors object(uint8_t salt) {
  return {{"vision", {pattern(300 << 10, salt)}},
          {"pooled", {pattern(100, static_cast<uint8_t>(salt + 1))}}};
}

bool same(const tensors& a, const tensors& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name
        || flatten(a[i].segments) != flatten(b[i].segments))
      return false;
  return true;
}

struct fixture : kvtier::testing::service_fixture {
  void put_object(const std::string& key, const tensors& t) {
    auto r = svc->objects()->put(key, t);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    BOOST_REQUIRE(*r);
  }

  std::optional<tensors> get_object(const std::string& key) {
    auto r = svc->objects()->get(key);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    return *r;
  }

  /// Puts eight objects (2.4 MiB, over the 1 MiB RAM cap), checks each
  /// served byte-exact (most from SSD), closes, restarts, checks again.
  void survives_a_restart() {
    start();
    std::vector<tensors> all;
    for (uint8_t i = 0; i < 8; ++i) {
      all.push_back(object(i));
      put_object("image-" + std::to_string(i), all.back());
      BOOST_CHECK_LE(report().ram.bytes, opts.ram_cap_bytes);
    }
    // Durable first: an object whose write still waits is answered from
    // the write queue, not read, and real files take their time.
    BOOST_REQUIRE(svc->flush()->durable);
    for (uint8_t i = 0; i < 8; ++i) {
      auto got = get_object("image-" + std::to_string(i));
      BOOST_REQUIRE_MESSAGE(got, "image-" << int{i});
      BOOST_CHECK(same(*got, all[i]));
    }
    BOOST_CHECK_GT(report().ssd.restores_ok, 0u);
    auto closed = svc->close();
    BOOST_REQUIRE(closed);
    BOOST_CHECK(closed->durable);
    start();
    for (uint8_t i = 8; i-- > 0;) {
      auto got = get_object("image-" + std::to_string(i));
      BOOST_REQUIRE_MESSAGE(got, "image-" << int{i} << " after the restart");
      BOOST_CHECK(same(*got, all[i]));
    }
    BOOST_CHECK(!get_object("image-8"));
    // Not prefixes: no saved prefix lists them.
    BOOST_CHECK(svc->saved_prefixes()->empty());
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(service_objects, fixture)

BOOST_AUTO_TEST_CASE(objects_survive_a_restart_bit_exact_in_memory) {
  survives_a_restart();
}

BOOST_AUTO_TEST_CASE(objects_survive_a_restart_bit_exact_on_real_files) {
  for (auto engine : tiers::ssd::test::all_engines()) {
    auto name =
      engine == tiers::ssd::engine_choice::uring ? "uring" : "threads";
    BOOST_TEST_CONTEXT(name) {
      tiers::ssd::test::scratch_dir dir;
      fs = nullptr; // POSIX
      opts.ssd_dir = dir.path;
      opts.io_engine = name;
      survives_a_restart();
      svc.reset();
    }
  }
}

BOOST_AUTO_TEST_CASE(a_replaced_object_never_comes_back_after_a_restart) {
  tiers::ssd::faulty_file_system faulty{memory};
  fs = &faulty;
  start();
  auto v1 = object(1), v2 = object(2);
  put_object("image", v1);
  BOOST_REQUIRE(svc->flush()->durable); // v1's file is durable
  put_object("image", v2);              // v1's file is erased first
  // The process "dies" writing v2: its file never exists.
  faulty.inject(tiers::ssd::fs_op::create, 1, tiers::ssd::fault_kind::crash);
  BOOST_CHECK(!svc->close()->durable);
  faulty.clear();
  start();
  BOOST_CHECK(!get_object("image")); // neither v2 (lost) nor v1 (replaced)
  put_object("image", v2);
  BOOST_REQUIRE(svc->close());
  start();
  auto got = get_object("image");
  BOOST_REQUIRE(got);
  BOOST_CHECK(same(*got, v2));
}

BOOST_AUTO_TEST_CASE(an_object_put_again_replaces_the_one_on_ssd) {
  start();
  auto v1 = object(1), v2 = object(2);
  put_object("image", v1);
  for (uint8_t i = 0; i < 4; ++i) // pushes image out to SSD
    put_object("other-" + std::to_string(i), object(10 + i));
  BOOST_REQUIRE(same(*get_object("image"), v1)); // back from SSD
  put_object("image", v2);
  for (uint8_t i = 0; i < 4; ++i)
    put_object("other-" + std::to_string(i), object(20 + i));
  BOOST_CHECK(same(*get_object("image"), v2));
  BOOST_REQUIRE(svc->close());
  start();
  BOOST_CHECK(same(*get_object("image"), v2));
}

BOOST_AUTO_TEST_CASE(without_objects_there_is_no_object_port) {
  opts.objects = false;
  start();
  BOOST_CHECK(svc->objects() == nullptr);
  put("ns", seq(100)); // prefixes as ever
  BOOST_CHECK_EQUAL(report().objects.entries, 0u);
}

BOOST_AUTO_TEST_SUITE_END()
