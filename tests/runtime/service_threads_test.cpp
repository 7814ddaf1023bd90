// A service may be destroyed on any thread, whichever threads made it and
// called it (runtime/service.hpp): a thread that spawned an actor of its
// system (the constructor, a blocking call's scoped actor) holds no
// reference that keeps `~actor_system` waiting (CAF 0.17 keeps one per
// thread for its logger until the thread ends).
#define BOOST_TEST_MODULE runtime_service_threads
#include "tests/runtime/service_fixture.hpp"

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

using namespace kvtier;
using testing::service_fixture;

BOOST_FIXTURE_TEST_SUITE(service_threads, service_fixture)

BOOST_AUTO_TEST_CASE(
  a_service_is_destroyed_on_another_thread_than_its_callers) {
  start(); // made on this thread, which stays alive
  std::promise<bool> called;
  std::promise<void> leave;
  std::thread engine([&] {
    // an engine thread's first call makes its scoped actor; the thread
    // stays alive while the service goes
    called.set_value(static_cast<bool>(svc->report()));
    leave.get_future().wait();
  });
  BOOST_CHECK(called.get_future().get());
  auto gone = std::async(std::launch::async, [&] { svc.reset(); });
  bool finished =
    gone.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  leave.set_value();
  engine.join();
  if (!finished) {
    // it would wait for this thread to end: fail instead of hanging
    BOOST_ERROR("the service's destruction did not finish in 60 s");
    std::_Exit(1);
  }
}

BOOST_AUTO_TEST_SUITE_END()
