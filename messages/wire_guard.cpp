#include "messages/wire_guard.hpp"
#include "messages/log.hpp"
#include "messages/sealed.hpp"

#include <cstdio>

#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>

#include <map>
#include <mutex>

namespace kvtier::msg {

namespace {

struct registry {
  std::mutex mtx;
  /// Guards by system, with their scope count.
  std::map<const caf::actor_system*,
           std::pair<std::shared_ptr<wire_guard>, int>>
    by_system;
  wire_guard fallback;
  std::shared_ptr<const std::function<void(std::string&)>> mutator;
  std::atomic<bool> mutating{false};
};

registry& reg() {
  static registry r;
  return r;
}

} // namespace

wire_guard& guard_of(caf::execution_unit* ctx) {
  auto& r = reg();
  if (ctx) {
    auto* sys = &ctx->system();
    std::lock_guard<std::mutex> guard{r.mtx};
    if (auto i = r.by_system.find(sys); i != r.by_system.end())
      return *i->second.first;
  }
  return r.fallback;
}

guard_scope::guard_scope(caf::actor_system& sys, uint64_t max_bytes)
  : sys_(&sys) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  auto& slot = r.by_system[sys_];
  if (!slot.first)
    slot.first = std::make_shared<wire_guard>();
  ++slot.second;
  guard_ = slot.first;
  guard_->max_bytes = max_bytes;
}

guard_scope::~guard_scope() {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  if (auto i = r.by_system.find(sys_);
      i != r.by_system.end() && --i->second.second == 0)
    r.by_system.erase(i);
}

void set_wire_mutator(std::function<void(std::string&)> f) {
  auto& r = reg();
  std::lock_guard<std::mutex> guard{r.mtx};
  r.mutator =
    f ? std::make_shared<const std::function<void(std::string&)>>(std::move(f))
      : nullptr;
  r.mutating = static_cast<bool>(r.mutator);
}

void mutate_wire(std::string& bytes) {
  auto& r = reg();
  if (!r.mutating.load(std::memory_order_relaxed))
    return;
  std::shared_ptr<const std::function<void(std::string&)>> f;
  {
    std::lock_guard<std::mutex> guard{r.mtx};
    f = r.mutator;
  }
  if (f)
    (*f)(bytes);
}

void count_refusal(wire_guard& g, bool oversized, const caf::error& why) {
  auto n = (oversized ? g.oversized : g.undecodable)
             .fetch_add(1, std::memory_order_relaxed)
           + 1;
  if ((n & (n - 1)) == 0)
    log::warn(std::string{"kvtier: refused a message from a peer ("}
              + (oversized ? "oversized" : "undecodable") + " #"
              + std::to_string(n) + "): " + reason(why));
}

} // namespace kvtier::msg
