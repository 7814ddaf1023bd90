#define BOOST_TEST_MODULE runtime_affine_sharing
#include <boost/test/unit_test.hpp>

#include "runtime/affine_sharing.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scoped_actor.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

// kvtier's scheduler policy (runtime/affine_sharing.hpp): every message
// is delivered however the work arrives (engine threads, chains and fan-outs
// inside the workers, timers, shutdown), and a worker busy with one actor
// does not hold up work sent from outside while the other worker sleeps.

namespace {

using namespace std::chrono_literals;

struct affine_config : caf::actor_system_config {
  affine_config() {
    load<caf::scheduler::coordinator<kvtier::runtime::affine_sharing>>();
    set("scheduler.max-threads", 2);
  }
};

// Spawned with an argument: CAF 0.17 binds a null tuple otherwise.
caf::behavior leaf(caf::event_based_actor*, int) {
  return {[](int x) { return x + 1; }};
}

/// Asks every actor of `next` (a chain link or a fan-out) and answers the
/// sum of their answers.
caf::behavior fan(caf::event_based_actor* self, std::vector<caf::actor> next) {
  return {[self, next](int x) -> caf::result<int> {
    auto rp = self->make_response_promise<int>();
    auto left = std::make_shared<size_t>(next.size());
    auto sum = std::make_shared<int>(0);
    for (auto& a : next)
      self->request(a, caf::infinite, x).then([rp, left, sum](int y) mutable {
        *sum += y;
        if (--*left == 0)
          rp.deliver(*sum);
      });
    return rp;
  }};
}

} // namespace

BOOST_AUTO_TEST_CASE(chains_and_fan_outs_from_many_threads_all_answer) {
  affine_config cfg;
  caf::actor_system sys{cfg};
  auto a = sys.spawn(leaf, 0);
  auto b = sys.spawn(leaf, 0);
  auto c = sys.spawn(leaf, 0);
  auto wide = sys.spawn(fan, std::vector<caf::actor>{a, b, c}); // 3x(x+1)
  auto chain = sys.spawn(fan, std::vector<caf::actor>{wide});
  std::atomic<int> wrong{0}, answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      caf::scoped_actor self{sys};
      for (int i = 0; i < 2000; ++i) {
        int x = t * 10000 + i;
        self->request(chain, 10s, x)
          .receive(
            [&](int y) {
              ++answered;
              if (y != 3 * (x + 1))
                ++wrong;
            },
            [&](caf::error&) { ++wrong; });
      }
    });
  for (auto& c : clients)
    c.join();
  BOOST_TEST(answered.load() == 8000);
  BOOST_TEST(wrong.load() == 0);
}

BOOST_AUTO_TEST_CASE(delayed_messages_arrive) {
  affine_config cfg;
  caf::actor_system sys{cfg};
  auto got = std::make_shared<std::promise<int>>();
  auto f = got->get_future();
  sys.spawn(
    [](caf::event_based_actor* self, std::shared_ptr<std::promise<int>> p) {
      self->delayed_send(self, 20ms, 7);
      return caf::behavior{[self, p](int x) {
        p->set_value(x);
        self->quit();
      }};
    },
    got);
  BOOST_REQUIRE(f.wait_for(60s) == std::future_status::ready);
  BOOST_TEST(f.get() == 7);
}

BOOST_AUTO_TEST_CASE(a_busy_worker_does_not_hold_up_outside_work) {
  affine_config cfg;
  caf::actor_system sys{cfg};
  // `busy` occupies one worker until the test lets it go; a request from
  // this thread to another actor must be answered meanwhile (the sleeping
  // worker is woken for work that comes from outside the workers).
  auto release = std::make_shared<std::promise<void>>();
  auto started = std::make_shared<std::promise<void>>();
  auto busy = sys.spawn(
    [](caf::event_based_actor*, std::shared_ptr<std::promise<void>> go,
       std::shared_ptr<std::promise<void>> in) {
      return caf::behavior{[go, in](int x) {
        in->set_value();
        go->get_future().wait_for(60s);
        return x;
      }};
    },
    release, started);
  auto quick = sys.spawn(leaf, 0);
  caf::anon_send(busy, 1);
  BOOST_REQUIRE(started->get_future().wait_for(60s)
                == std::future_status::ready);
  caf::scoped_actor self{sys};
  bool answered = false;
  self->request(quick, 5s, 41)
    .receive([&](int y) { answered = y == 42; }, [](caf::error&) {});
  release->set_value();
  BOOST_TEST(answered);
}
