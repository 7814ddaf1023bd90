// The checkpoint store (tiers/checkpoints.hpp): the newest checkpoint of an
// identity, its owner attempt, its durable mark and files, and how both
// follow the SSD tier: a file that went clears the mark of the checkpoint
// whose file it was (never a newer one's), answers to writes of a released
// identity change nothing, a checkpoint resumes only a prompt it extends,
// and an attempt removes only what it owns.
#define BOOST_TEST_MODULE tiers_checkpoints
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/checkpoints.hpp"

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{*model_geometry::preset("tiny-dense")};
  return o;
}

token_seq seq(size_t n, token first = 1) {
  token_seq t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<token>(i + first);
  return t;
}

entry state(size_t n, token first = 1) {
  return oracle().prefill("ns", seq(n, first));
}

const checkpoint_id id{7, "ns"};

size_t undurable_count(const checkpoint_store& s) {
  return s.undurable().size();
}

/// Orders the write of `id`'s undurable checkpoint and answers it.
std::vector<storage_key> written(checkpoint_store& s, bool durable = true) {
  return s.settled(s.ordered(id), durable);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_removed_file_clears_the_mark_of_its_checkpoint) {
  checkpoint_store s;
  BOOST_REQUIRE(s.save(id, 0, state(20)));
  BOOST_TEST(written(s).empty());
  BOOST_TEST(undurable_count(s) == 0u);
  // The SSD tier evicted that file: the next flush writes it again.
  BOOST_TEST(s.file_removed(id, seq(20)));
  BOOST_TEST(undurable_count(s) == 1u);
  auto f = s.find(id);
  BOOST_REQUIRE(f);
  BOOST_TEST(f->state.has_value()); // still held in memory
  // Nothing durable is left to restore once memory is cleared.
  s.clear_memory();
  BOOST_TEST(!s.find(id));
  BOOST_TEST(s.size() == 0u);
}

BOOST_AUTO_TEST_CASE(an_older_file_that_goes_leaves_a_newer_mark_alone) {
  checkpoint_store s;
  s.save(id, 0, state(20));
  written(s);
  s.save(id, 0, state(40));
  // The newer file makes the older one redundant: given back to remove,
  // as a checkpoint key of the identity (never a prefix key).
  auto old = written(s);
  BOOST_REQUIRE(old.size() == 1u);
  BOOST_TEST((old[0].tokens == seq(20)));
  BOOST_TEST((old[0].kind == key_kind::checkpoint));
  BOOST_TEST(old[0].request == 7u);
  BOOST_TEST(old[0].ns == "ns");
  // Its removal (or an eviction of it) is no news for the newer one.
  BOOST_TEST(!s.file_removed(id, seq(20)));
  BOOST_TEST(undurable_count(s) == 0u);
  // A newer checkpoint not written yet keeps the older file to restore;
  // that file going clears no mark, and only memory is left.
  s.save(id, 0, state(60));
  BOOST_TEST(!s.file_removed(id, seq(40)));
  BOOST_TEST(undurable_count(s) == 1u);
  s.clear_memory();
  BOOST_TEST(!s.find(id));
}

BOOST_AUTO_TEST_CASE(a_file_found_at_start_that_goes_is_forgotten) {
  checkpoint_store s;
  BOOST_TEST(s.found_file({storage_key::checkpoint(7, 3, "ns", seq(30)), 1})
               .empty()); // from the scan
  auto f = s.find(id);
  BOOST_REQUIRE(f && f->file);
  BOOST_TEST((f->file->tokens == seq(30)));
  BOOST_TEST(f->owner == 3u); // its writer owns it
  // A restore found it corrupt (or the cap evicted it): a miss from now.
  BOOST_TEST(!s.file_removed(id, seq(30)));
  BOOST_TEST(!s.find(id));
  BOOST_TEST(s.size() == 0u);
  // Unknown identities and files are no error.
  BOOST_TEST(!s.file_removed({8, "ns"}, seq(30)));
}

BOOST_AUTO_TEST_CASE(the_newest_file_found_at_start_is_the_last_written) {
  checkpoint_store s;
  // Written oldest first: a retry (attempt 1) restarted the generation
  // with fewer tokens than attempt 0 had. The newest wins, not the longest.
  BOOST_TEST(
    s.found_file({storage_key::checkpoint(7, 0, "ns", seq(50)), 1}).empty());
  auto old = s.found_file({storage_key::checkpoint(7, 1, "ns", seq(30)), 2});
  BOOST_REQUIRE(old.size() == 1u);
  BOOST_TEST((old[0].tokens == seq(50)));
  BOOST_TEST(old[0].attempt == 0u);
  auto f = s.find(id);
  BOOST_REQUIRE(f && f->file);
  BOOST_TEST((f->tokens == seq(30)));
  BOOST_TEST(f->owner == 1u);
}

BOOST_AUTO_TEST_CASE(files_found_out_of_order_rank_by_their_write_ids) {
  // The start-up scan reaches files in name order, not write order: the
  // newer file (write id 9) first, the older (write id 4) later.
  checkpoint_store s;
  BOOST_TEST(
    s.found_file({storage_key::checkpoint(7, 1, "ns", seq(30)), 9}).empty());
  auto old = s.found_file({storage_key::checkpoint(7, 0, "ns", seq(50)), 4});
  BOOST_REQUIRE(old.size() == 1u); // the late one itself is redundant
  BOOST_TEST((old[0].tokens == seq(50)));
  BOOST_TEST(old[0].attempt == 0u);
  auto f = s.find(id);
  BOOST_REQUIRE(f && f->file);
  BOOST_TEST((f->tokens == seq(30)));
  BOOST_TEST(f->owner == 1u); // the newest file's writer, not the last told
}

BOOST_AUTO_TEST_CASE(a_file_found_late_is_older_than_every_state_since) {
  // A state saved and made durable since the start, then a file the scan
  // reached late (its write id above that state's store order): the file
  // is older, redundant; the state stays the newest, durable.
  checkpoint_store s;
  s.save(id, 2, state(20));
  BOOST_TEST(written(s).empty());
  auto old = s.found_file({storage_key::checkpoint(7, 1, "ns", seq(40)), 99});
  BOOST_REQUIRE(old.size() == 1u);
  BOOST_TEST((old[0].tokens == seq(40)));
  BOOST_TEST(undurable_count(s) == 0u);
  auto f = s.find(id);
  BOOST_REQUIRE(f && f->state);
  BOOST_TEST((f->tokens == seq(20)));
  BOOST_TEST(f->owner == 2u);
  // The same tokens found late: that file name was replaced by the newer
  // write, so there is nothing to remove (it would remove the new file).
  BOOST_TEST(
    s.found_file({storage_key::checkpoint(7, 1, "ns", seq(20)), 98}).empty());
  BOOST_TEST(undurable_count(s) == 0u);
  // Held only in memory, no file yet: a late file is kept beside it (the
  // state is served; its write, when durable, makes the file redundant).
  s.save({8, "ns"}, 0, state(10));
  BOOST_TEST(
    s.found_file({storage_key::checkpoint(8, 0, "ns", seq(5)), 50}).empty());
  BOOST_TEST(s.find({8, "ns"})->state.has_value());
}

BOOST_AUTO_TEST_CASE(
  a_release_returns_ordered_writes_and_late_answers_do_nothing) {
  checkpoint_store s;
  s.save(id, 0, state(20));
  written(s);
  s.save(id, 0, state(40));
  auto first = s.ordered(id);  // queued on SSD, not answered yet
  auto second = s.ordered(id); // a second flush ordered it again
  s.save({7, "other"}, 0, oracle().prefill("other", seq(10)));
  auto gone = s.remove(7, 0);
  // Both identities are gone; only the one whose writes reached the SSD
  // needs a removal there.
  BOOST_TEST(s.size() == 0u);
  BOOST_REQUIRE(gone.size() == 2u);
  BOOST_TEST((gone[0].id == id));
  BOOST_TEST(gone[0].on_ssd);
  BOOST_TEST(gone[1].id.ns == "other");
  BOOST_TEST(!gone[1].on_ssd);
  // The answer to the write arrives after the release: no record again.
  BOOST_TEST(s.settled(first, true).empty());
  BOOST_TEST(!s.find(id));
  // A reused request id saves anew: an old order's answer is not its own.
  s.save(id, 0, state(40));
  BOOST_TEST(s.settled(second, true).empty());
  BOOST_TEST(undurable_count(s) == 1u);
  auto f = s.find(id);
  BOOST_REQUIRE(f);
  BOOST_TEST(!f->file.has_value());
}

BOOST_AUTO_TEST_CASE(an_answer_that_is_not_durable_settles_only) {
  checkpoint_store s;
  s.save(id, 0, state(20));
  BOOST_TEST(written(s, false).empty()); // dropped, failed
  BOOST_TEST(undurable_count(s) == 1u);
  // The write reached the SSD tier: its removal is asked for there.
  auto gone = s.remove(7, 0);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST(gone[0].on_ssd);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_resumes_only_a_prompt_it_extends) {
  auto cp = seq(40);
  BOOST_TEST(checkpoint_store::resumes(cp, seq(25)));
  BOOST_TEST(checkpoint_store::resumes(cp, seq(40))); // at least as long
  BOOST_TEST(!checkpoint_store::resumes(cp, seq(41)));
  BOOST_TEST(!checkpoint_store::resumes(cp, seq(25, 2))); // another prompt
  auto other = seq(25);
  other[24] = 9999; // diverges at its last token
  BOOST_TEST(!checkpoint_store::resumes(cp, other));
  BOOST_TEST(checkpoint_store::resumes(cp, token_seq{}));
}

BOOST_AUTO_TEST_CASE(saves_follow_the_owner_attempt) {
  checkpoint_store s;
  BOOST_REQUIRE(s.save(id, 1, state(40)));
  // The owner: an earlier point of its generation is not newer.
  BOOST_TEST(!s.save(id, 1, state(30)));
  BOOST_TEST(!s.save(id, 1, state(40)));
  BOOST_TEST(s.save(id, 1, state(50)));
  // An older attempt (a stale try still running): disposed.
  BOOST_TEST(!s.save(id, 0, state(60)));
  BOOST_TEST((s.find(id)->tokens == seq(50)));
  // A newer attempt replaces it, even with fewer tokens, and owns it.
  BOOST_TEST(s.save(id, 2, state(20, 500)));
  auto f = s.find(id);
  BOOST_TEST((f->tokens == seq(20, 500)));
  BOOST_TEST(f->owner == 2u);
  // The owner saving another generation (a reused id, another prompt) is
  // newer too, however short.
  BOOST_TEST(s.save(id, 2, state(10, 900)));
  BOOST_TEST((s.find(id)->tokens == seq(10, 900)));
}

BOOST_AUTO_TEST_CASE(an_attempt_releases_only_the_checkpoints_it_owns) {
  checkpoint_store s;
  checkpoint_id a{7, "a"}, b{7, "b"};
  s.save(a, 1, oracle().prefill("a", seq(20)));
  s.save(b, 1, oracle().prefill("b", seq(20)));
  // Attempt 2 resumes b: it owns it from now on.
  s.adopt(b, 2);
  BOOST_TEST(s.count(7, 1) == 1u);
  BOOST_TEST(s.count(7, 2) == 1u);
  // Attempt 1 completes late: only a goes.
  auto gone = s.remove(7, 1);
  BOOST_REQUIRE(gone.size() == 1u);
  BOOST_TEST((gone[0].id == a));
  BOOST_REQUIRE(s.find(b));
  BOOST_TEST(s.find(b)->owner == 2u);
  // An older attempt adopting changes nothing.
  s.adopt(b, 1);
  BOOST_TEST(s.find(b)->owner == 2u);
  BOOST_TEST(s.remove(7, 1).empty());
  BOOST_TEST(s.remove(7, 2).size() == 1u);
  BOOST_TEST(s.size() == 0u);
}

BOOST_AUTO_TEST_CASE(an_adopted_checkpoint_is_written_again_for_its_owner) {
  checkpoint_store s;
  s.save(id, 0, state(40));
  auto before = s.ordered(id); // attempt 0's write, answered late
  s.adopt(id, 1);
  auto p = s.undurable();
  BOOST_REQUIRE(p.size() == 1u);
  BOOST_TEST(p[0].attempt == 1u);
  // The old write's answer does not make it durable under attempt 1.
  BOOST_TEST(s.settled(before, true).empty());
  BOOST_TEST(undurable_count(s) == 1u);
  BOOST_TEST(written(s).empty()); // the same file name: replaced
  BOOST_TEST(undurable_count(s) == 0u);
  // After a restart only the file knows: its writer (now 1) owns it.
  checkpoint_store after;
  after.found_file({storage_key::checkpoint(7, 1, "ns", seq(40)), 5});
  BOOST_TEST(after.find(id)->owner == 1u);
}

BOOST_AUTO_TEST_CASE(a_restored_checkpoint_is_kept_only_when_its_owner_moves) {
  checkpoint_store s;
  s.found_file({storage_key::checkpoint(7, 0, "ns", seq(40)), 1});
  // The same attempt resumes it: the file stays the only copy.
  s.adopt(id, 0, state(40));
  BOOST_TEST(!s.find(id)->state.has_value());
  BOOST_TEST(undurable_count(s) == 0u);
  // A retry resumes it: held, to be written under attempt 1.
  s.adopt(id, 1, state(40));
  auto f = s.find(id);
  BOOST_REQUIRE(f->state.has_value());
  BOOST_TEST(f->owner == 1u);
  auto p = s.undurable();
  BOOST_REQUIRE(p.size() == 1u);
  BOOST_TEST(p[0].attempt == 1u);
  BOOST_TEST((p[0].state.tokens == seq(40)));
}
