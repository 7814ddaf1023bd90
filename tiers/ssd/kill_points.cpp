#include "tiers/ssd/kill_points.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

namespace kvtier::tiers::ssd {

namespace {

constexpr kill_step all_steps[] = {kill_step::create, kill_step::write,
                                   kill_step::sync,   kill_step::rename,
                                   kill_step::remove, kill_step::sync_dir};

/// The protocol this thread's steps belong to (`kill_protocol`).
thread_local const char* current_protocol = nullptr;

struct kill_state {
  bool armed = false;
  kill_plan plan;
  std::atomic<uint64_t> seen{0};
};

kill_state& state() noexcept {
  static kill_state* s = [] {
    auto* st = new kill_state; // lives until the process ends
    const char* env = std::getenv("KVTIER_KILL_AT");
    if (env == nullptr || *env == 0)
      return st;
    auto plan = parse_kill_plan(env);
    if (!plan) {
      auto line = describe(plan.error()) + "\n";
      [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
      std::_Exit(2);
    }
    st->plan = *plan;
    st->armed = true;
    return st;
  }();
  return *s;
}

void say(kill_step s, const std::string& what) noexcept {
  auto& st = state();
  auto line =
    std::string{"kvtier: kill point: "} + to_string(s) + " #"
    + std::to_string(st.plan.at)
    + (st.plan.only ? " of its kind" : " of any kind")
    + (st.plan.protocol.empty() ? std::string{} : " in " + st.plan.protocol)
    + " on " + what + " (in "
    + (current_protocol ? current_protocol : "no protocol") + ")\n";
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
}

[[noreturn]] void kill_self() noexcept {
  ::raise(SIGKILL);
  std::_Exit(137); // not reached
}

} // namespace

const char* to_string(kill_step s) {
  switch (s) {
    case kill_step::create: return "create";
    case kill_step::write: return "write";
    case kill_step::sync: return "sync";
    case kill_step::rename: return "rename";
    case kill_step::remove: return "remove";
    case kill_step::sync_dir: return "sync_dir";
  }
  return "?";
}

caf::expected<kill_plan> parse_kill_plan(std::string_view text) {
  auto bad = [whole = std::string{text}] {
    return make_error(ec::invalid_config,
                      "KVTIER_KILL_AT=" + whole
                        + " is not N or KIND:N (either followed by @PROTOCOL)"
                          " with N >= 1 and KIND one of "
                          "create, write, sync, rename, remove, sync_dir");
  };
  kill_plan plan;
  if (auto at = text.find('@'); at != std::string_view::npos) {
    plan.protocol = std::string{text.substr(at + 1)};
    if (plan.protocol.empty())
      return bad();
    text = text.substr(0, at);
  }
  auto number = text;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    auto kind = text.substr(0, colon);
    auto k = std::find_if(std::begin(all_steps), std::end(all_steps),
                          [&](kill_step s) { return kind == to_string(s); });
    if (k == std::end(all_steps))
      return bad();
    plan.only = *k;
    number = text.substr(colon + 1);
  }
  auto [end, err] =
    std::from_chars(number.data(), number.data() + number.size(), plan.at);
  if (err != std::errc{} || end != number.data() + number.size()
      || plan.at == 0)
    return bad();
  return plan;
}

kill_protocol::kill_protocol(const char* name) noexcept
  : previous_(current_protocol) {
  current_protocol = name;
}

kill_protocol::~kill_protocol() {
  current_protocol = previous_;
}

uint64_t kill_steps_counted() noexcept {
  return state().seen.load(std::memory_order_relaxed);
}

namespace detail {

bool kill_points_armed() noexcept {
  return state().armed;
}

bool take_kill_step(kill_step s) noexcept {
  auto& st = state();
  if (st.plan.only && *st.plan.only != s)
    return false;
  if (!st.plan.protocol.empty()
      && (current_protocol == nullptr
          || !std::string_view{current_protocol}.starts_with(st.plan.protocol)))
    return false;
  return st.seen.fetch_add(1, std::memory_order_relaxed) + 1 == st.plan.at;
}

void die_at(kill_step s, const std::string& what) noexcept {
  say(s, what);
  kill_self();
}

void die_in_write(int fd, uint64_t offset,
                  std::span<const std::span<const std::byte>> src,
                  const std::string& what) noexcept {
  say(kill_step::write, what);
  uint64_t total = 0;
  for (auto p : src)
    total += p.size();
  // The first half, cut at a sector boundary of the file.
  auto cut = (offset + total / 2) / 512 * 512;
  auto left = cut > offset ? cut - offset : 0;
  std::vector<iovec> iov;
  for (auto p : src) {
    if (left == 0 || iov.size() == IOV_MAX)
      break;
    auto n = std::min<uint64_t>(left, p.size());
    iov.push_back({const_cast<std::byte*>(p.data()), n});
    left -= n;
  }
  if (!iov.empty()) {
    [[maybe_unused]] auto n = ::pwritev(
      fd, iov.data(), static_cast<int>(iov.size()), static_cast<off_t>(offset));
  }
  kill_self();
}

} // namespace detail

} // namespace kvtier::tiers::ssd
