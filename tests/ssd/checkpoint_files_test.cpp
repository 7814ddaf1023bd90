// Checkpoint files in the SSD tier (tiers/ssd/ssd_tier.hpp): their own kind
// of key, kept out of the prefix index (no prompt lookup or saved-prefix
// listing sees one, whatever namespace a prefix uses), handed back by
// header after a restart; and durable removal (`remove_checkpoints`): a
// removal record made durable before the removal answers, applied by the
// start-up scan before anything is indexed, so a completed checkpoint
// never comes back after a failed unlink, a crash or a power loss, while
// a later checkpoint of a reused request id survives. Every restored state
// is checked byte for byte with the oracle.
#define BOOST_TEST_MODULE ssd_checkpoint_files
#include "tests/ssd/ssd_fixture.hpp"
#include "tests/tiers/check_helpers.hpp"
#include "tiers/ssd/ssd_jobs.hpp"

#include <algorithm>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;
using kvtier::testing::ok;

namespace {

const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{every_kind(), 40};
  return o;
}

storage_key checkpoint(uint64_t request, uint32_t attempt, std::string ns,
                       token_seq t) {
  return storage_key::checkpoint(request, attempt, std::move(ns), std::move(t));
}

/// Queues `key`'s state (an oracle prefill) as a checkpoint write.
void queue(world& w, const storage_key& key) {
  auto e = oracle().prefill(key.ns, key.tokens);
  BOOST_REQUIRE(w.tier->enqueue(std::move(e), write_reason::checkpoint, key));
}

/// Writes `key`'s state and flushes until it is durable.
void store(world& w, const storage_key& key) {
  queue(w, key);
  BOOST_REQUIRE(w.flush().durable);
}

/// `remove_checkpoints`, driven until the tier is idle; the answer.
caf::error remove(world& w, uint64_t request, const std::string& ns) {
  std::optional<caf::error> out;
  w.tier->remove_checkpoints(request, ns,
                             [&](const caf::error& err) { out = err; });
  drive(*w.tier, w.queue);
  BOOST_REQUIRE(out.has_value());
  return *out;
}

/// The restored state of `key`'s file, verified byte for byte; false when
/// the tier holds no file of it.
bool restores(world& w, const storage_key& key) {
  auto m = w.tier->find(key);
  if (!m)
    return false;
  auto e = w.restore(*m);
  BOOST_REQUIRE_MESSAGE(e, (e ? std::string{} : describe(e.error())));
  BOOST_TEST(ok(oracle().verify(*e)));
  BOOST_TEST((e->tokens == key.tokens));
  BOOST_TEST(e->ns == key.ns);
  return true;
}

size_t count_suffix(world& w, std::string_view suffix) {
  auto names = w.files();
  return static_cast<size_t>(std::count_if(
    names.begin(), names.end(), [&](auto& n) { return n.ends_with(suffix); }));
}

/// The header of the file `name` in the tier's directory.
entry_header header_of(world& w, file_system& fs, const std::string& name) {
  auto f = fs.open(join_path(w.tier->root(), name), open_mode::read);
  BOOST_REQUIRE(f);
  auto h = read_header(**f);
  BOOST_REQUIRE(h);
  return *h;
}

/// An in-memory disk behind a fault injector.
struct faulty_world {
  faulty_world()
    : faulty{mem}
    , w{{fs_kind::memory, engine_choice::threads}, dir.path, quiet(), &faulty} {
  }

  static ssd_config quiet() {
    ssd_config cfg;
    cfg.log = [](const std::string&) {};
    return cfg;
  }

  scratch_dir dir;
  memory_file_system mem;
  faulty_file_system faulty;
  world w;
};

} // namespace

BOOST_AUTO_TEST_CASE(a_prompt_lookup_never_returns_a_checkpoint_file) {
  auto t = tokens(30);
  auto prompt = tokens(31);
  // A checkpoint of request 7 in "ns", and prefixes that try to pass for
  // it: the same tokens in "ns" under another key kind, and in the
  // namespace the old convention gave checkpoints.
  auto cp = checkpoint(7, 0, "ns", t);
  const std::string hostile = "kvtier.checkpoint/7/ns";
  on_every_backend([&](world& w) {
    store(w, cp);
    for (int pass = 0; pass < 2; ++pass) { // before and after a restart
      BOOST_TEST_CONTEXT((pass == 0 ? "written" : "reopened")) {
        BOOST_TEST(!w.tier->find(prompt, "ns"));
        BOOST_TEST(!w.tier->find(prompt, hostile));
        BOOST_TEST(!w.tier->contains("ns", t));
        BOOST_TEST(w.tier->contains(cp));
        // Under another owner it is not "on SSD": a retry that adopted it
        // writes it again, so the header names the retry.
        BOOST_TEST(!w.tier->contains(checkpoint(7, 1, "ns", t)));
        BOOST_TEST(w.tier->saved_prefixes().empty());
        auto files = w.tier->checkpoint_files();
        BOOST_REQUIRE(files.size() == 1u);
        BOOST_TEST((files[0].key == cp)); // kind, request, attempt, ns, tokens
        BOOST_TEST(restores(w, cp));
      }
      w.reopen();
    }
    // The hostile prefix is a prefix: its own file, listed, found in its
    // own namespace only, and no checkpoint.
    w.store(oracle().prefill(hostile, t));
    w.store(oracle().prefill("ns", t));
    BOOST_TEST(w.files().size() == 3u);
    w.reopen();
    BOOST_TEST(w.tier->checkpoint_files().size() == 1u);
    BOOST_TEST(w.tier->saved_prefixes().size() == 2u);
    auto m = w.tier->find(prompt, hostile);
    BOOST_REQUIRE(m);
    BOOST_TEST((m->header->kind == key_kind::prefix));
    auto e = w.restore(*m);
    BOOST_REQUIRE(e);
    BOOST_TEST(ok(oracle().verify(*e)));
    BOOST_TEST(e->ns == hostile);
    BOOST_TEST(restores(w, cp)); // the checkpoint is untouched by both
  });
}

BOOST_AUTO_TEST_CASE(file_names_cover_the_key_kind_and_request) {
  auto t = tokens(10);
  auto prefix = file_name("ns", t);
  BOOST_TEST(prefix == file_name(storage_key::prefix("ns", t)));
  BOOST_TEST(file_name(checkpoint(7, 0, "ns", t)) != prefix);
  BOOST_TEST(file_name(checkpoint(7, 0, "ns", t))
             != file_name(checkpoint(8, 0, "ns", t)));
  // The attempt is not part of the key: a retry rewrites the same file.
  BOOST_TEST(file_name(checkpoint(7, 0, "ns", t))
             == file_name(checkpoint(7, 3, "ns", t)));
  BOOST_TEST(file_name(checkpoint(7, 0, "ns", t))
             != file_name("kvtier.checkpoint/7/ns", t));
}

BOOST_AUTO_TEST_CASE(a_removal_answers_once_its_record_is_durable) {
  on_every_backend([&](world& w) {
    auto a = checkpoint(7, 0, "ns", tokens(20));
    auto b = checkpoint(7, 0, "ns", tokens(30));
    auto other = checkpoint(8, 0, "ns", tokens(20));
    store(w, a);
    store(w, b);
    store(w, other);
    std::vector<std::string> at_answer;
    std::optional<caf::error> answer;
    w.tier->remove_checkpoints(7, "ns", [&](const caf::error& err) {
      answer = err;
      at_answer = w.files();
    });
    drive(*w.tier, w.queue);
    BOOST_REQUIRE(answer.has_value());
    BOOST_TEST(!*answer);
    // When it answered, the record was there (or the files were gone).
    auto records = std::count_if(at_answer.begin(), at_answer.end(),
                                 [](auto& n) { return n.ends_with(".kvr"); });
    BOOST_TEST(records == 1);
    // Both files of the identity went, then the record; 8 is untouched.
    BOOST_TEST(w.files().size() == 1u);
    BOOST_TEST(!w.tier->find(a));
    BOOST_TEST(!w.tier->find(b));
    BOOST_TEST(restores(w, other));
    auto s = w.tier->stats();
    BOOST_TEST(s.removal_records == 1u);
    BOOST_TEST(s.removals_pending == 0u);
    BOOST_TEST(w.flush().durable);
    // Nothing left to remove: answered at once, no record.
    BOOST_TEST(!remove(w, 7, "ns"));
    BOOST_TEST(w.tier->stats().removal_records == 1u);
    w.reopen();
    BOOST_TEST(w.tier->checkpoint_files().size() == 1u);
  });
}

BOOST_AUTO_TEST_CASE(a_removal_cancels_queued_writes_and_covers_one_in_flight) {
  on_every_backend(
    [&](world& w) {
      // One write at a time: the first is in flight, the second queued.
      auto a = checkpoint(7, 0, "ns", tokens(20));
      auto b = checkpoint(7, 1, "ns", tokens(40));
      queue(w, a);
      queue(w, b);
      BOOST_TEST(w.tier->stats().queue_items == 2u);
      BOOST_TEST(!remove(w, 7, "ns"));
      auto s = w.tier->stats();
      BOOST_TEST(s.writes_cancelled == 1u); // b: never written
      BOOST_TEST(s.writes_ok == 1u);        // a: written, then removed
      BOOST_TEST(s.queue_items == 0u);
      BOOST_TEST(w.files().empty());
      BOOST_TEST(w.flush().durable);
      w.reopen();
      BOOST_TEST(w.tier->checkpoint_files().empty());
    },
    [] {
      ssd_config cfg;
      cfg.writes_in_flight = 1;
      return cfg;
    }());
}

BOOST_AUTO_TEST_CASE(a_failed_unlink_stays_pending_and_a_restart_applies_it) {
  faulty_world fw;
  auto& w = fw.w;
  auto cp = checkpoint(7, 0, "ns", tokens(20));
  store(w, cp);
  // The record is written; the unlink fails.
  fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
  BOOST_TEST(!remove(w, 7, "ns")); // durable: the record answers
  BOOST_TEST(!w.tier->find(cp));   // never served again
  BOOST_TEST(count_suffix(w, ".kvt") == 1u);
  BOOST_TEST(count_suffix(w, ".kvr") == 1u);
  BOOST_TEST(w.tier->stats().removals_pending == 1u);
  // The flush retries it; failing again, it is not durable and says why.
  fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
  auto ev = w.flush();
  BOOST_TEST(!ev.durable);
  BOOST_TEST(ev.removals_pending == 1u);
  BOOST_TEST(!ev.removal_error.empty());
  // A restart with the file still there: the scan applies the record.
  auto r = w.reopen();
  BOOST_TEST(r.records == 1u);
  BOOST_TEST(r.removed_by_record == 1u);
  BOOST_TEST(r.loaded == 0u);
  BOOST_TEST(w.tier->checkpoint_files().empty());
  BOOST_TEST(w.files().empty()); // the file, then the record
  BOOST_TEST(w.flush().durable);
}

BOOST_AUTO_TEST_CASE(a_failed_unlink_is_retried_by_the_next_flush) {
  faulty_world fw;
  auto& w = fw.w;
  store(w, checkpoint(7, 0, "ns", tokens(20)));
  fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
  BOOST_TEST(!remove(w, 7, "ns"));
  BOOST_TEST(w.tier->stats().removal_failures == 1u);
  auto ev = w.flush(); // the retry succeeds
  BOOST_TEST(ev.durable);
  BOOST_TEST(ev.removals_pending == 0u);
  BOOST_TEST(w.files().empty());
  BOOST_TEST(w.tier->stats().removals_pending == 0u);
}

BOOST_AUTO_TEST_CASE(a_crash_before_the_unlink_is_durable_never_resurrects) {
  // The unlink ran, its directory fsync crashed; the power goes: the file
  // is back on "disk" under its name, and so is the record.
  faulty_world fw;
  auto& w = fw.w;
  auto cp = checkpoint(7, 0, "ns", tokens(20));
  store(w, cp);
  auto syncs = fw.faulty.count(fs_op::sync_dir);
  fw.faulty.inject(fs_op::sync_dir, 2, fault_kind::crash); // after the unlink
  BOOST_TEST(!remove(w, 7, "ns"));
  BOOST_TEST(fw.faulty.crashed());
  BOOST_TEST(fw.faulty.count(fs_op::sync_dir) == syncs + 2);
  fw.faulty.clear();
  fw.mem.power_loss();
  BOOST_TEST(count_suffix(w, ".kvt") == 1u); // rolled back
  auto r = w.reopen(&fw.mem);
  BOOST_TEST(r.removed_by_record == 1u);
  BOOST_TEST(w.tier->checkpoint_files().empty());
  BOOST_TEST(!w.tier->find(cp));
  BOOST_TEST(w.files().empty());
}

BOOST_AUTO_TEST_CASE(a_write_renamed_after_the_removal_is_covered) {
  // The write is in flight when the removal comes; it renames its file
  // afterwards; the unlink of that file fails and the power goes.
  faulty_world fw;
  auto& w = fw.w;
  auto cp = checkpoint(7, 0, "ns", tokens(20));
  fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
  queue(w, cp); // in flight at once
  BOOST_TEST(!remove(w, 7, "ns"));
  BOOST_TEST(w.tier->stats().writes_ok == 1u);
  BOOST_TEST(!w.tier->find(cp));
  BOOST_TEST(count_suffix(w, ".kvt") == 1u); // renamed, unlink failed
  fw.mem.power_loss();
  auto r = w.reopen(&fw.mem);
  BOOST_TEST(r.removed_by_record == 1u);
  BOOST_TEST(w.tier->checkpoint_files().empty());
  BOOST_TEST(w.files().empty());
}

BOOST_AUTO_TEST_CASE(a_later_checkpoint_of_a_reused_request_id_survives) {
  for (bool same_tokens : {false, true}) {
    BOOST_TEST_CONTEXT((same_tokens ? "same key" : "other tokens")) {
      faulty_world fw;
      auto& w = fw.w;
      auto old = checkpoint(7, 0, "ns", tokens(20));
      auto later =
        checkpoint(7, 0, "ns", same_tokens ? tokens(20) : tokens(25));
      store(w, old);
      fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
      BOOST_TEST(!remove(w, 7, "ns")); // record durable, unlink failed
      // The request id is reused: a new generation's checkpoint, written
      // after the record (no flush: the failed removal stays pending
      // unless the new file replaced the old one by rename).
      queue(w, later);
      drive(*w.tier, w.queue);
      BOOST_TEST(w.tier->stats().removals_pending == (same_tokens ? 0u : 1u));
      auto names = w.files();
      auto mine = file_name(later);
      BOOST_REQUIRE(std::find(names.begin(), names.end(), mine) != names.end());
      auto wid = header_of(w, fw.mem, mine).write_id;
      fw.mem.power_loss();
      auto r = w.reopen(&fw.mem);
      BOOST_TEST(r.removed_by_record == (same_tokens ? 0u : 1u));
      auto files = w.tier->checkpoint_files();
      BOOST_REQUIRE(files.size() == 1u);
      BOOST_TEST((files[0].key == later));
      BOOST_TEST(restores(w, later));
      BOOST_TEST(header_of(w, fw.mem, mine).write_id == wid);
    }
  }
}

BOOST_AUTO_TEST_CASE(write_ids_grow_across_restarts) {
  on_every_backend([&](world& w) {
    auto& fs = w.fs();
    w.store(oracle().prefill("ns", tokens(10)));
    auto first = header_of(w, fs, file_name("ns", tokens(10))).write_id;
    w.reopen();
    store(w, checkpoint(7, 0, "ns", tokens(12)));
    auto second =
      header_of(w, fs, file_name(checkpoint(7, 0, "ns", tokens(12)))).write_id;
    BOOST_TEST(first > 0u);
    BOOST_TEST(second > first);
    // A removal record's write id counts too: after it (and its files)
    // went, a restart still issues ids above every one seen.
    BOOST_TEST(!remove(w, 7, "ns"));
    w.reopen();
    w.store(oracle().prefill("ns", tokens(14)));
    auto third = header_of(w, fs, file_name("ns", tokens(14))).write_id;
    BOOST_TEST(third > first);
  });
}

BOOST_AUTO_TEST_CASE(a_failed_record_falls_back_to_durable_unlinks) {
  faulty_world fw;
  auto& w = fw.w;
  store(w, checkpoint(7, 0, "ns", tokens(20)));
  // No record (create fails): the unlink and its directory fsync alone
  // make the removal durable.
  fw.faulty.inject(fs_op::create, 1, fault_kind::eio);
  BOOST_TEST(!remove(w, 7, "ns"));
  BOOST_TEST(w.files().empty());
  BOOST_TEST(w.tier->stats().removals_pending == 0u);
  // Neither: the answer is the error, the removal stays pending.
  store(w, checkpoint(7, 0, "ns", tokens(30)));
  fw.faulty.inject(fs_op::create, 1, fault_kind::eio);
  fw.faulty.inject(fs_op::remove, 1, fault_kind::eio);
  auto err = remove(w, 7, "ns");
  BOOST_TEST(static_cast<bool>(err));
  BOOST_TEST(w.tier->stats().removals_pending == 1u);
  BOOST_TEST(!w.tier->find(checkpoint(7, 0, "ns", tokens(30))));
  auto ev = w.flush(); // record and unlink retried: done
  BOOST_TEST(ev.durable);
  BOOST_TEST(w.files().empty());
}

BOOST_AUTO_TEST_CASE(an_unlink_not_yet_durable_is_covered_by_a_removal) {
  // A checkpoint file is erased (a newer one made it redundant; an
  // eviction is the same): its unlink ran, but no directory fsync
  // followed. The generation then completes with no file left to cover,
  // and the power goes, rolling the unlink back: the completed checkpoint
  // must not come back. (The crash loops found it: such a removal used to
  // answer at once, with no record.)
  faulty_world fw;
  auto& w = fw.w;
  auto cp = checkpoint(7, 0, "ns", tokens(20));
  store(w, cp);
  BOOST_REQUIRE(w.tier->erase(cp));
  drive(*w.tier, w.queue);
  BOOST_TEST(count_suffix(w, ".kvt") == 0u); // unlinked, not synced
  auto records = w.tier->stats().removal_records;
  BOOST_TEST(!remove(w, 7, "ns"));
  BOOST_TEST(w.tier->stats().removal_records == records + 1);
  // The record's directory fsync made the unlink durable too.
  fw.mem.power_loss();
  BOOST_TEST(count_suffix(w, ".kvt") == 0u);
  w.reopen(&fw.mem);
  BOOST_TEST(w.tier->checkpoint_files().empty());
  BOOST_TEST(!w.tier->find(cp));
  BOOST_TEST(w.files().empty());
  // Once a later directory fsync made such an unlink durable, a removal
  // with nothing left answers at once, writing nothing.
  auto other = checkpoint(8, 0, "ns", tokens(20));
  store(w, other);
  BOOST_REQUIRE(w.tier->erase(other));
  drive(*w.tier, w.queue);
  store(w, checkpoint(9, 0, "ns", tokens(21))); // its rename's fsync
  records = w.tier->stats().removal_records;
  BOOST_TEST(!remove(w, 8, "ns"));
  BOOST_TEST(w.tier->stats().removal_records == records);
}
