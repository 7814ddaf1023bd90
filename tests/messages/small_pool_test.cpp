// The small block pool (messages/small_pool.hpp): blocks of every class
// are distinct, aligned and reused once freed; a block freed on another
// thread goes back to its class; larger requests pass through.
#define BOOST_TEST_MODULE messages_small_pool
#include <boost/test/unit_test.hpp>

#include "messages/small_pool.hpp"

#include <cstring>
#include <set>
#include <thread>
#include <vector>

using namespace kvtier;

BOOST_AUTO_TEST_CASE(blocks_are_distinct_aligned_and_hold_their_bytes) {
  std::vector<std::pair<std::byte*, size_t>> held;
  for (size_t size = 1; size <= small_pool_max + 64; size += 7)
    for (int i = 0; i < 20; ++i) {
      auto* p = static_cast<std::byte*>(small_allocate(size));
      BOOST_TEST(reinterpret_cast<uintptr_t>(p) % 8 == 0u);
      std::memset(p, static_cast<int>(size % 251), size);
      held.emplace_back(p, size);
    }
  std::set<std::byte*> distinct;
  for (auto [p, size] : held) {
    distinct.insert(p);
    for (size_t i = 0; i < size; ++i)
      BOOST_REQUIRE(p[i] == static_cast<std::byte>(size % 251));
  }
  BOOST_TEST(distinct.size() == held.size());
  for (auto [p, size] : held)
    small_free(p, size);
}

BOOST_AUTO_TEST_CASE(a_freed_block_is_reused_in_its_class) {
  if (!small_pool_enabled())
    return; // an ASan build gives every block to the heap
  auto before = small_pool_now();
  auto* a = small_allocate(40);
  BOOST_TEST(small_pool_now().blocks == before.blocks + 1);
  small_free(a, 40);
  BOOST_TEST(small_pool_now().blocks == before.blocks);
  auto* b = small_allocate(37); // the same 40-byte class
  BOOST_TEST(b == a, "the freed block comes back");
  auto* c = small_allocate(48); // another class
  BOOST_TEST(c != a);
  small_free(b, 37);
  small_free(c, 48);
}

BOOST_AUTO_TEST_CASE(blocks_freed_on_other_threads_go_back) {
  // What a lent body does: made on the tier's thread, freed by whoever
  // holds it last.
  constexpr int per_thread = 20000;
  auto before = small_pool_now();
  std::vector<std::vector<void*>> made(4);
  for (auto& m : made)
    for (int i = 0; i < per_thread; ++i)
      m.push_back(small_allocate(8 + 8 * (i % 8)));
  std::vector<std::thread> threads;
  for (auto& m : made)
    threads.emplace_back([&m] {
      for (int i = 0; i < per_thread; ++i) {
        small_free(m[i], 8 + 8 * (i % 8));
        // and some churn of its own meanwhile
        small_free(small_allocate(24), 24);
      }
    });
  for (auto& t : threads)
    t.join();
  BOOST_TEST(small_pool_now().blocks == before.blocks);
  if (small_pool_enabled()) {
    // Everything freed is reused: making as many again carves no slab.
    auto slabs = small_pool_now().slab_bytes;
    std::vector<void*> again;
    for (int i = 0; i < 4 * per_thread; ++i)
      again.push_back(small_allocate(8 + 8 * (i % 8)));
    BOOST_TEST(small_pool_now().slab_bytes == slabs);
    for (int i = 0; i < 4 * per_thread; ++i)
      small_free(again[i], 8 + 8 * (i % 8));
  }
}
