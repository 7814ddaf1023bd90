// The put observer slot: the embedded API sets the engine's observer here,
// the RAM tier actor calls it after every put that stored a prefix. Shared
// between the API's threads and the RAM actor, so a mutex guards the
// function; the call itself runs outside the lock (an observer may be slow,
// and may even replace itself). An observer that throws is contained by the
// RAM tier (counted as `observer_errors`).
#pragma once

#include "tiers/state.hpp"

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

private:
  std::mutex mtx_;
  function f_;
};

} // namespace kvtier::actors
