// The SSD tier's removal log on its own, over the in-memory file system
// and an engine that runs each op at once: records, the unlinks they cover,
// their fallback, and the start-up scan's part.
#define BOOST_TEST_MODULE ssd_removal_log
#include "tests/actors/inline_engine.hpp"
#include "tiers/ssd/faulty_file_system.hpp"
#include "tiers/ssd/memory_file_system.hpp"
#include "tiers/ssd/removal_log.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>

using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

constexpr const char* root = "/ssd/fp";

/// A removal log over `fs`, its completions queued until `drive`.
struct log_world {
  explicit log_world(file_system& fs)
    : fs(fs)
    , engine([this](io_completion c) { done.push_back(std::move(c)); })
    , io(fs, engine, root, [this](const std::string& l) { lines.push_back(l); })
    , removals(io, stats) {
    BOOST_REQUIRE(!fs.make_dirs(root));
  }

  /// Feeds the completions until none is left, as the coordinator does.
  void drive() {
    while (!done.empty()) {
      auto c = std::move(done.front());
      done.pop_front();
      bool unlinked = false;
      auto tag = c.tag >> sub_bits;
      BOOST_REQUIRE(removals.owns(tag));
      if (auto id = removals.on_completion(tag, c, unlinked))
        removals.step(*id, nothing_busy);
    }
  }

  /// Creates an empty durable file `name` in the directory.
  void create(const std::string& name) {
    auto f = fs.open(join_path(root, name), open_mode::create);
    BOOST_REQUIRE(f);
    BOOST_REQUIRE(!(*f)->sync());
    BOOST_REQUIRE(!fs.sync_dir(root));
  }

  std::vector<std::string> names() {
    auto l = fs.list(root);
    BOOST_REQUIRE(l);
    std::sort(l->begin(), l->end());
    return *l;
  }

  bool has(const std::string& name) {
    auto n = names();
    return std::find(n.begin(), n.end(), name) != n.end();
  }

  file_system& fs;
  std::deque<io_completion> done;
  kvtier::testing::inline_engine engine;
  std::vector<std::string> lines;
  ssd_stats stats;
  tier_io io;
  removal_log removals;
  busy_name nothing_busy = [](const std::string&) { return false; };
};

std::string record_of(uint64_t request, std::string_view ns, uint64_t through) {
  char id[24];
  std::snprintf(id, sizeof id, ".%016llx",
                static_cast<unsigned long long>(through));
  return identity_hash(request, ns) + id + ".kvr";
}

entry_header checkpoint_header(uint64_t request, std::string ns,
                               uint64_t write_id) {
  entry_header h;
  h.kind = key_kind::checkpoint;
  h.request = request;
  h.ns = std::move(ns);
  h.write_id = write_id;
  return h;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_removal_answers_once_its_record_is_durable) {
  memory_file_system mem;
  log_world w{mem};
  w.create("a.kvt");
  std::vector<caf::error> answers;
  removal_log::cover c;
  c.files.insert("a.kvt");
  bool at_once = w.removals.start(
    7, "ns", 5, std::move(c),
    [&](const caf::error& err) { answers.push_back(err); }, w.nothing_busy);
  BOOST_TEST(!at_once);
  BOOST_TEST(answers.empty()); // the record is being written
  // The record step alone: durable even if the machine loses power now.
  auto record_step = std::move(w.done.front());
  w.done.pop_front();
  bool unlinked = false;
  auto id = w.removals.on_completion(record_step.tag >> sub_bits, record_step,
                                     unlinked);
  BOOST_REQUIRE(id);
  BOOST_REQUIRE(answers.size() == 1u);
  BOOST_TEST(!answers[0]);
  BOOST_TEST(w.stats.removal_records == 1u);
  mem.power_loss();
  BOOST_TEST(w.has(record_of(7, "ns", 5)));
  BOOST_TEST(w.has("a.kvt")); // not unlinked yet: the record covers it
  // The rest: the covered file goes, then the record.
  w.removals.step(*id, w.nothing_busy);
  w.drive();
  BOOST_TEST(!w.has("a.kvt"));
  BOOST_TEST(!w.has(record_of(7, "ns", 5)));
  BOOST_TEST(w.removals.pending() == 0u);
  BOOST_TEST(answers.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_removal_covering_nothing_answers_inside_the_call) {
  memory_file_system mem;
  log_world w{mem};
  std::optional<caf::error> answer;
  bool at_once = w.removals.start(
    7, "ns", 5, {}, [&](const caf::error& err) { answer = err; },
    w.nothing_busy);
  BOOST_TEST(at_once);
  BOOST_REQUIRE(answer);
  BOOST_TEST(!*answer);
  BOOST_TEST(w.done.empty()); // no record for nothing
  BOOST_TEST(w.removals.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_unwritable_record_falls_back_to_durable_unlinks) {
  memory_file_system mem;
  faulty_file_system faulty{mem};
  log_world w{faulty};
  w.create("a.kvt");
  faulty.inject(fs_op::create, 1, fault_kind::eio); // the record's temp
  std::vector<caf::error> answers;
  removal_log::cover c;
  c.files.insert("a.kvt");
  w.removals.start(
    7, "ns", 5, std::move(c),
    [&](const caf::error& err) { answers.push_back(err); }, w.nothing_busy);
  w.drive();
  // Answered once the covered file was durably gone, without a record.
  BOOST_REQUIRE(answers.size() == 1u);
  BOOST_TEST(!answers[0]);
  BOOST_TEST(w.stats.removal_failures == 1u);
  BOOST_TEST(w.stats.removal_records == 0u);
  mem.power_loss();
  BOOST_TEST(!w.has("a.kvt"));
  BOOST_TEST(w.removals.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(a_name_being_written_is_left_to_its_write) {
  memory_file_system mem;
  log_world w{mem};
  w.create("a.kvt");
  bool writing = true;
  busy_name busy = [&](const std::string& n) {
    return writing && n == "a.kvt";
  };
  removal_log::cover c;
  c.files.insert("a.kvt");
  c.waiting.insert(42); // the write of it in flight
  int answers = 0;
  w.removals.start(
    7, "ns", 5, std::move(c), [&](const caf::error&) { ++answers; }, busy);
  auto record = std::move(w.done.front());
  w.done.pop_front();
  bool unlinked = false;
  auto id = w.removals.on_completion(record.tag >> sub_bits, record, unlinked);
  BOOST_REQUIRE(id);
  w.removals.step(*id, busy);
  BOOST_TEST(w.done.empty()); // waits for the write
  BOOST_TEST(w.has("a.kvt"));
  // The write finishes and leaves its file: the removal takes it.
  writing = false;
  BOOST_TEST(w.removals.write_finished(42, "a.kvt", true));
  BOOST_TEST(!w.removals.write_finished(43, "b.kvt", true));
  w.removals.resume(busy);
  w.drive();
  BOOST_TEST(!w.has("a.kvt"));
  BOOST_TEST(w.removals.pending() == 0u);
  BOOST_TEST(answers == 1);
}

BOOST_AUTO_TEST_CASE(
  a_forgotten_checkpoint_file_is_covered_by_a_later_removal) {
  memory_file_system mem;
  log_world w{mem};
  w.create("a.kvt");
  auto h = std::make_shared<const entry_header>(checkpoint_header(7, "ns", 3));
  w.removals.forgot("a.kvt", h); // its unlink failed, say
  bool at_once = w.removals.start(
    7, "ns", 5, {}, [](const caf::error&) {}, w.nothing_busy);
  BOOST_TEST(!at_once); // the forgotten file is covered
  w.drive();
  BOOST_TEST(!w.has("a.kvt"));
  // Another identity's forgotten file is not.
  w.create("b.kvt");
  w.removals.forgot("b.kvt", std::make_shared<const entry_header>(
                               checkpoint_header(8, "ns", 4)));
  BOOST_TEST(w.removals.start(
    7, "ns", 6, {}, [](const caf::error&) {}, w.nothing_busy));
  BOOST_TEST(w.has("b.kvt"));
}

BOOST_AUTO_TEST_CASE(a_record_covers_checkpoint_files_up_to_its_write_id) {
  memory_file_system mem;
  log_world w{mem};
  auto record = record_of(7, "ns", 5);
  w.create(record);
  w.create("old.kvt");
  w.create("new.kvt");
  scan_report r;
  uint64_t max_write_id = 0;
  w.removals.load_records(w.names(), r, max_write_id);
  BOOST_TEST(r.records == 1u);
  BOOST_TEST(max_write_id == 5u); // later writes get later ids
  BOOST_TEST(
    w.removals.covered_at_scan("old.kvt", checkpoint_header(7, "ns", 5), r));
  BOOST_TEST(
    !w.removals.covered_at_scan("new.kvt", checkpoint_header(7, "ns", 6), r));
  BOOST_TEST(
    !w.removals.covered_at_scan("new.kvt", checkpoint_header(8, "ns", 1), r));
  auto prefix = checkpoint_header(7, "ns", 1);
  prefix.kind = key_kind::prefix;
  BOOST_TEST(!w.removals.covered_at_scan("new.kvt", prefix, r));
  BOOST_TEST(r.removed_by_record == 1u);
  w.removals.finish_records(r);
  // The covered file is durably gone, so is the record; the rest stays.
  mem.power_loss();
  BOOST_TEST(!w.has("old.kvt"));
  BOOST_TEST(!w.has(record));
  BOOST_TEST(w.has("new.kvt"));
  BOOST_TEST(w.removals.pending() == 0u);
}
