// The checkpoint store (tiers/checkpoints.hpp): the newest checkpoint of an
// identity, its durable mark and files, and how both follow the SSD tier:
// a file that went clears the mark of the checkpoint whose file it was
// (never a newer one's), answers to writes of a released identity change
// nothing, and a release gives back the keys of writes still ordered.
#define BOOST_TEST_MODULE tiers_checkpoints
#include <boost/test/unit_test.hpp>

#include "runtime/oracle.hpp"
#include "tiers/checkpoints.hpp"

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

const runtime::oracle_engine& oracle() {
  static const runtime::oracle_engine o{*model_geometry::preset("tiny-dense")};
  return o;
}

token_seq seq(size_t n) {
  token_seq t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<token>(i + 1);
  return t;
}

entry state(size_t n) {
  return oracle().prefill("ns", seq(n));
}

const checkpoint_id id{7, "ns"};

size_t undurable_count(const checkpoint_store& s) {
  return s.undurable().size();
}

} // namespace

BOOST_AUTO_TEST_CASE(a_removed_file_clears_the_mark_of_its_checkpoint) {
  checkpoint_store s;
  BOOST_REQUIRE(s.save(id, state(20)));
  s.ordered(id, seq(20));
  BOOST_TEST(s.settled(id, seq(20), true).empty());
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
  s.save(id, state(20));
  s.ordered(id, seq(20));
  s.settled(id, seq(20), true);
  s.save(id, state(40));
  s.ordered(id, seq(40));
  // The newer file makes the older one redundant: given back to remove.
  auto old = s.settled(id, seq(40), true);
  BOOST_REQUIRE(old.size() == 1u);
  BOOST_TEST((old[0].tokens == seq(20)));
  BOOST_TEST(old[0].ns == checkpoint_store::storage_ns(id));
  // Its removal (or an eviction of it) is no news for the newer one.
  BOOST_TEST(!s.file_removed(id, seq(20)));
  BOOST_TEST(undurable_count(s) == 0u);
  // A newer checkpoint not written yet keeps the older file to restore;
  // that file going clears no mark, and only memory is left.
  s.save(id, state(60));
  BOOST_TEST(!s.file_removed(id, seq(40)));
  BOOST_TEST(undurable_count(s) == 1u);
  s.clear_memory();
  BOOST_TEST(!s.find(id));
}

BOOST_AUTO_TEST_CASE(a_file_found_at_start_that_goes_is_forgotten) {
  checkpoint_store s;
  BOOST_TEST(s.mark_durable(id, seq(30)).empty()); // from the scan
  auto f = s.find(id);
  BOOST_REQUIRE(f && f->file);
  BOOST_TEST((f->file->tokens == seq(30)));
  // A restore found it corrupt (or the cap evicted it): a miss from now.
  BOOST_TEST(!s.file_removed(id, seq(30)));
  BOOST_TEST(!s.find(id));
  BOOST_TEST(s.size() == 0u);
  // Unknown identities and files are no error.
  BOOST_TEST(!s.file_removed({8, "ns"}, seq(30)));
}

BOOST_AUTO_TEST_CASE(
  a_release_returns_ordered_writes_and_late_answers_do_nothing) {
  checkpoint_store s;
  s.save(id, state(20));
  s.ordered(id, seq(20));
  s.settled(id, seq(20), true);
  s.save(id, state(40));
  s.ordered(id, seq(40)); // queued on SSD, not answered yet
  s.ordered(id, seq(40)); // a second flush ordered it again
  s.save({7, "other"}, oracle().prefill("other", seq(10)));
  auto gone = s.remove(7);
  // Both identities are gone; one key per file or write.
  BOOST_TEST(s.size() == 0u);
  BOOST_REQUIRE(gone.size() == 2u);
  for (auto& f : gone)
    BOOST_TEST(f.ns == checkpoint_store::storage_ns(id));
  BOOST_TEST((gone[0].tokens == seq(20)));
  BOOST_TEST((gone[1].tokens == seq(40)));
  // The answer to the write arrives after the release: no record again.
  BOOST_TEST(s.settled(id, seq(40), true).empty());
  BOOST_TEST(!s.find(id));
  // A reused request id saves anew: an old order's answer is not its own.
  s.save(id, state(40));
  BOOST_TEST(s.settled(id, seq(40), true).empty());
  BOOST_TEST(undurable_count(s) == 1u);
  auto f = s.find(id);
  BOOST_REQUIRE(f);
  BOOST_TEST(!f->file.has_value());
}

BOOST_AUTO_TEST_CASE(an_answer_that_is_not_durable_settles_only) {
  checkpoint_store s;
  s.save(id, state(20));
  s.ordered(id, seq(20));
  BOOST_TEST(s.settled(id, seq(20), false).empty()); // dropped, failed
  BOOST_TEST(undurable_count(s) == 1u);
  // Settled: a release has no write of it left to cancel.
  BOOST_TEST(s.remove(7).empty());
}
