#define BOOST_TEST_MODULE ssd_faults
#include "tests/ssd/ssd_fixture.hpp"

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{every_kind(), 40};
  return o;
}

entry version(const char* session) {
  auto e = oracle().prefill("ns", tokens(30));
  e.session = session;
  return e;
}

/// The session of what the tier serves for the entry, verified byte for
/// byte; "" when it serves nothing.
std::string served(world& w) {
  auto m = w.tier->find(tokens(31), "ns");
  if (!m)
    return "";
  auto e = w.restore(*m);
  if (!e)
    BOOST_FAIL(describe(e.error()));
  auto err = oracle().verify(*e);
  BOOST_TEST(!err, describe(err));
  return e->session.value_or("?");
}

bool has_temp(world& w) {
  for (auto& n : w.files())
    if (n.ends_with(".tmp"))
      return true;
  return false;
}

struct step {
  fs_op op;
  uint64_t nth;
};

// Six writes per entry file: the header, four layers, one attachment.
const std::vector<step> write_steps{
  {fs_op::create, 1}, {fs_op::write, 1},   {fs_op::write, 2}, {fs_op::write, 3},
  {fs_op::write, 4},  {fs_op::write, 5},   {fs_op::write, 6}, {fs_op::sync, 1},
  {fs_op::rename, 1}, {fs_op::sync_dir, 1}};

/// An in-memory disk behind a fault injector, with the tier's log lines.
struct faulty_world {
  explicit faulty_world(engine_choice e)
    : faulty{mem}
    , w{{fs_kind::memory, e}, dir.path, logging(), &faulty} {}

  ssd_config logging() {
    ssd_config cfg;
    cfg.log = [this](const std::string& l) { lines.push_back(l); };
    cfg.on_write = [this](const write_event& ev) { events.push_back(ev); };
    return cfg;
  }

  scratch_dir dir;
  memory_file_system mem;
  faulty_file_system faulty;
  std::vector<std::string> lines;
  std::vector<write_event> events;
  world w;
};

} // namespace

BOOST_AUTO_TEST_CASE(every_failing_write_step_keeps_old_or_new_state) {
  for (auto engine : all_engines())
    for (auto s : write_steps)
      for (auto kind :
           {fault_kind::eio, fault_kind::enospc, fault_kind::short_write}) {
        if (kind == fault_kind::short_write && s.op != fs_op::write)
          continue;
        BOOST_TEST_CONTEXT(to_string(s.op)
                           << " #" << s.nth << " " << to_string(kind)) {
          faulty_world fw{engine};
          auto& w = fw.w;
          auto& lines = fw.lines;
          auto& faulty = fw.faulty;
          w.store(version("old"));
          faulty.inject(s.op, s.nth, kind);
          BOOST_REQUIRE(w.tier->enqueue(version("new"), write_reason::spill));
          auto ev = w.flush();
          BOOST_TEST(!ev.durable);
          BOOST_TEST(ev.failed == 1u);
          BOOST_TEST(ev.pending == 1u);
          BOOST_TEST(lines.size() == 1u); // one clear line per failure
          BOOST_TEST(w.tier->stats().write_no_space
                     == (kind == fault_kind::enospc ? 1u : 0u));
          BOOST_TEST(!w.tier->contains("ns", tokens(30))); // not durable
          auto now = served(w);
          BOOST_TEST((now == (s.op == fs_op::sync_dir ? "new" : "old")));
          BOOST_TEST(!has_temp(w));
          // The failed item is retryable: the next flush stores it.
          BOOST_TEST(w.flush().durable);
          BOOST_TEST(served(w) == "new");
          w.reopen();
          BOOST_TEST(served(w) == "new");
        }
      }
}

BOOST_AUTO_TEST_CASE(a_crash_at_any_write_step_leaves_no_torn_entry) {
  for (auto engine : all_engines())
    for (auto s : write_steps) {
      BOOST_TEST_CONTEXT(to_string(s.op) << " #" << s.nth) {
        faulty_world fw{engine};
        auto& w = fw.w;
        auto& mem = fw.mem;
        auto& faulty = fw.faulty;
        w.store(version("old"));
        faulty.inject(s.op, s.nth, fault_kind::crash);
        BOOST_REQUIRE(w.tier->enqueue(version("new"), write_reason::spill));
        w.flush();
        BOOST_TEST(faulty.crashed());
        // The process died here; its successor scans what is on "disk".
        faulty.clear();
        w.reopen(&mem);
        BOOST_TEST(!has_temp(w));
        auto after = served(w);
        BOOST_TEST((after == "old" || after == "new"));
        // And after a power loss only what was made durable remains: the
        // new file's name was never synced, so the old entry serves.
        mem.power_loss();
        w.reopen(&mem);
        BOOST_TEST(!has_temp(w));
        BOOST_TEST(served(w) == "old");
      }
    }
}

BOOST_AUTO_TEST_CASE(a_failed_read_is_a_miss_and_keeps_the_file) {
  for (auto engine : all_engines()) {
    faulty_world fw{engine};
    auto& w = fw.w;
    auto& faulty = fw.faulty;
    w.store(version("old"));
    faulty.inject(fs_op::read, 3, fault_kind::eio); // a payload read
    auto m = w.tier->find(tokens(31), "ns");
    BOOST_REQUIRE(m);
    auto e = w.restore(*m);
    BOOST_REQUIRE(!e);
    BOOST_TEST((e.error() == ec::io_error));
    BOOST_TEST(served(w) == "old");
    BOOST_TEST(w.tier->stats().restores_failed == 1u);
  }
}

BOOST_AUTO_TEST_CASE(disk_full_degrades_to_not_stored) {
  faulty_world fw{engine_choice::threads};
  auto& w = fw.w;
  auto& lines = fw.lines;
  fw.faulty.inject(fs_op::write, 2, fault_kind::enospc);
  BOOST_REQUIRE(w.tier->enqueue(version("x"), write_reason::demotion));
  auto ev = w.flush();
  BOOST_TEST(!ev.durable);
  BOOST_TEST(ev.entries == 0u);
  BOOST_TEST(!w.tier->contains("ns", tokens(30)));
  BOOST_TEST(!w.tier->find(tokens(31), "ns"));
  BOOST_TEST(w.tier->stats().write_no_space == 1u);
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].find("no_space") != std::string::npos, lines[0]);
  BOOST_REQUIRE(fw.events.size() == 1u);
  BOOST_TEST((fw.events[0].outcome == write_outcome::failed));
  BOOST_TEST((fw.events[0].err == ec::no_space));
  BOOST_TEST(w.files().empty());
}

BOOST_AUTO_TEST_CASE(an_erased_write_that_fails_is_cancelled_not_retried) {
  for (auto engine : all_engines())
    for (auto s : write_steps)
      BOOST_TEST_CONTEXT(to_string(s.op) << " #" << s.nth) {
        faulty_world fw{engine};
        auto& w = fw.w;
        fw.faulty.inject(s.op, s.nth, fault_kind::eio);
        BOOST_REQUIRE(w.tier->enqueue(version("new"), write_reason::snapshot));
        BOOST_TEST(w.tier->erase("ns", tokens(30))); // in flight
        auto ev = w.flush();
        BOOST_TEST(ev.durable); // nothing failed stays: it was cancelled
        BOOST_TEST(ev.pending == 0u);
        BOOST_TEST(ev.failed == 0u);
        BOOST_TEST(ev.entries == 0u);
        drive(*w.tier, w.queue);
        BOOST_REQUIRE(fw.events.size() == 1u);
        BOOST_TEST((fw.events[0].outcome == write_outcome::cancelled));
        BOOST_TEST(w.tier->stats().writes_cancelled == 1u);
        BOOST_TEST(w.tier->stats().writes_failed == 1u);
        BOOST_TEST(served(w) == ""); // a whole file renamed in is removed
        BOOST_TEST(w.files().empty());
        BOOST_TEST(w.flush().durable);
      }
}

BOOST_AUTO_TEST_CASE(a_write_failing_every_attempt_is_given_up_and_reported) {
  for (auto engine : all_engines()) {
    BOOST_TEST_CONTEXT((engine == engine_choice::uring ? "uring" : "threads")) {
      scratch_dir dir;
      memory_file_system mem;
      faulty_file_system faulty{mem};
      std::vector<write_event> events;
      std::vector<std::weak_ptr<const buffer>> bufs;
      ssd_config cfg;
      cfg.max_attempts = 3;
      cfg.log = [](const std::string&) {};
      cfg.on_write = [&](const write_event& ev) {
        events.push_back(ev);
        if (ev.outcome != write_outcome::failed)
          for (auto& b : bufs)
            BOOST_TEST(b.expired(), "a final report follows the release");
      };
      world w{{fs_kind::memory, engine}, dir.path, cfg, &faulty};
      auto e = version("v1");
      std::vector<buffer_ref> refs;
      collect_buffers(e, refs);
      for (auto& b : refs)
        bufs.push_back(b);
      refs.clear();
      auto id = w.tier->enqueue(std::move(e), write_reason::spill);
      BOOST_REQUIRE(id);
      faulty.inject(fs_op::sync, 1, fault_kind::crash); // every later one too
      drive(*w.tier, w.queue);
      BOOST_REQUIRE(events.size() == 1u);
      BOOST_TEST((events[0].outcome == write_outcome::failed));
      BOOST_TEST(events[0].attempts == 1u);
      BOOST_TEST(describe(events[0].err).find("write failed at fsync")
                   != std::string::npos,
                 describe(events[0].err));
      BOOST_TEST(w.tier->retry(*id), "the owner's timer fired");
      BOOST_TEST(!w.tier->retry(*id), "it is being written again");
      drive(*w.tier, w.queue);
      BOOST_REQUIRE(events.size() == 2u);
      BOOST_TEST(events[1].attempts == 2u);
      auto ev = w.flush(); // the third and last attempt
      BOOST_REQUIRE(events.size() == 3u);
      BOOST_TEST((events[2].outcome == write_outcome::given_up));
      BOOST_TEST(events[2].attempts == 3u);
      BOOST_TEST(!ev.durable);
      BOOST_TEST(ev.given_up == 1u);
      BOOST_TEST(ev.pending == 0u);
      BOOST_TEST(w.tier->stats().writes_given_up == 1u);
      BOOST_TEST(w.tier->stats().writes_failed == 3u);
      BOOST_TEST(w.tier->stats().queue_items == 0u);
      BOOST_TEST(!w.tier->retry(*id));
      BOOST_TEST(w.flush().durable, "reported once");
      faulty.clear();
    }
  }
}

BOOST_AUTO_TEST_CASE(a_durable_report_follows_the_release_of_its_buffers) {
  scratch_dir dir;
  std::vector<std::weak_ptr<const buffer>> bufs;
  int durable = 0;
  ssd_config cfg;
  cfg.on_write = [&](const write_event& ev) {
    if (ev.outcome != write_outcome::durable)
      return;
    ++durable;
    for (auto& b : bufs)
      BOOST_TEST(b.expired(), "nothing of the write holds them any more");
  };
  for (auto b : all_backends()) {
    world w{b, dir.path + "/" + b.name(), cfg};
    auto e = version("v1");
    std::vector<buffer_ref> refs;
    collect_buffers(e, refs);
    bufs.assign(refs.begin(), refs.end());
    refs.clear();
    BOOST_REQUIRE(w.tier->enqueue(std::move(e), write_reason::spill));
    BOOST_TEST(w.flush().durable);
  }
  BOOST_TEST(durable == static_cast<int>(all_backends().size()));
}

BOOST_AUTO_TEST_CASE(a_stalled_operation_blocks_until_released) {
  memory_file_system mem;
  faulty_file_system faulty{mem};
  BOOST_REQUIRE(!faulty.make_dirs("/d"));
  faulty.inject_any(2, fault_kind::stall);
  BOOST_REQUIRE(faulty.open("/d/a", open_mode::create)); // op 1
  std::atomic<bool> done{false};
  std::thread t{[&] {
    auto f = faulty.open("/d/b", open_mode::create); // op 2: stalls
    BOOST_TEST(static_cast<bool>(f), "then it runs normally");
    done = true;
  }};
  while (faulty.stalled() == 0)
    std::this_thread::yield();
  BOOST_TEST(!done.load());
  BOOST_TEST(faulty.fired() == 1u);
  faulty.release();
  t.join();
  BOOST_TEST(done.load());
  BOOST_TEST(faulty.total() == 2u);
  BOOST_TEST(!faulty.rename("/d/a", "/d/c"), "nothing else is armed");
}
