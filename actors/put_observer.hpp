// The put observer slot: the embedded API sets the engine's observer here;
// a local subscriber of the event feed (actors/feed_actor.hpp, spawned by
// runtime/service/spawn.cpp) calls it for every put event, i.e. after every
// put that stored a prefix, in the feed's order, on that subscriber's
// thread and so after the publish that made it may have returned. Shared
// between the API's threads and that subscriber, so a mutex guards the
// function; the call itself runs outside the lock (an observer may be slow,
// and may even replace itself). An observer that throws is contained
// (counted here, reported as the RAM part's `observer_errors`).
#pragma once

#include "tiers/state.hpp"

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

namespace kvtier::actors {

class put_observer_slot {
public:
  using function =
    std::function<void(const tiers::token_seq& tokens, const std::string& ns)>;

  /// Replaces the observer; null removes it.
  void set(function f) {
    std::lock_guard<std::mutex> guard{mtx_};
    f_ = std::move(f);
  }

  /// Calls the observer, if any.
  void operator()(const tiers::token_seq& tokens, const std::string& ns) {
    function f;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      f = f_;
    }
    if (f)
      f(tokens, ns);
  }

  /// The observer threw once more (the caller contained it).
  void count_error() noexcept {
    ++errors_;
  }

  uint64_t errors() const noexcept {
    return errors_.load();
  }

private:
  std::atomic<uint64_t> errors_{0};
  std::mutex mtx_;
  function f_;
};

} // namespace kvtier::actors
