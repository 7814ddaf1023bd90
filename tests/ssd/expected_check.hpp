// Checks an SSD tier against the expected state of a crash loop
// (expected_state.hpp) and tallies what it found; the figures the loops
// print. `check_expected` opens nothing itself: its caller opened the tier.
// Tests only.
#pragma once

#include "tests/ssd/expected_state.hpp"
#include "tests/ssd/ssd_fixture.hpp"

namespace kvtier::tiers::ssd::expected {

/// The loop's length: the first command-line argument after `--` (the
/// soak runs pass one), else `fallback`.
inline int iterations(int fallback) {
  auto& m = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i < m.argc; ++i)
    if (auto n = std::atoi(m.argv[i]); n > 0)
      return n;
  return fallback;
}

/// What the checks found, summed over rounds.
struct tally {
  uint64_t rounds = 0;
  /// Rounds that ended in a kill (a kill point or a SIGKILL), and rounds
  /// whose writer finished before its kill came.
  uint64_t kills = 0;
  uint64_t finished = 0;
  /// Expected entries checked present and byte-exact.
  uint64_t checked = 0;
  /// Saved prefixes restored and verified (everything the tier serves).
  uint64_t served = 0;
  /// Checkpoints reported durable and not completed: found under exactly
  /// their key, restored and byte-exact (what a restart resumes).
  uint64_t checkpoints = 0;
  /// Checkpoint files the tier holds (restored and verified): the ones a
  /// start hands to the checkpoints actor.
  uint64_t checkpoint_files = 0;
  /// Completed generations checked absent after a restart (each counted
  /// at every check).
  uint64_t removals = 0;
  /// Removal records found at open (`.kvr` files a crash left).
  uint64_t records = 0;
  /// Expected entries missing or unreadable: must stay 0.
  uint64_t lost = 0;
  /// Restores that served bytes the oracle refuses, an indexed file that
  /// failed to restore, a checkpoint file of a completed generation, or a
  /// removal left pending after a flush: must stay 0.
  uint64_t wrong = 0;

  /// Checks the loop's verdict: it checked something, lost and served
  /// wrong nothing.
  void expect_clean() const {
    BOOST_TEST(checked > 0u);
    BOOST_TEST(lost == 0u);
    BOOST_TEST(wrong == 0u);
  }

  std::string figures() const {
    return std::to_string(rounds) + " rounds, " + std::to_string(kills)
           + " kills, " + std::to_string(finished) + " finished, "
           + std::to_string(checked) + " expected entries checked, "
           + std::to_string(served) + " served entries verified, "
           + std::to_string(checkpoints) + " expected checkpoints resumed, "
           + std::to_string(checkpoint_files) + " checkpoint files verified, "
           + std::to_string(removals)
           + " completed generations checked absent, " + std::to_string(records)
           + " removal records found at open, " + std::to_string(lost)
           + " lost, " + std::to_string(wrong) + " wrong";
  }
};

/// Restores `m` synchronously.
inline caf::expected<entry> restore_now(ssd_tier& tier, completion_queue& q,
                                        const ssd_match& m) {
  std::optional<caf::expected<entry>> out;
  tier.restore(m, [&](caf::expected<entry> e) { out = std::move(e); });
  test::drive(tier, q);
  if (!out)
    return make_error(ec::io_error, "the restore never answered");
  return std::move(*out);
}

/// Restores checkpoint `key` (attempt `attempt`) from `tier` and verifies
/// it; the error, if any ("" when it is exact).
inline std::string checkpoint_error(ssd_tier& tier, completion_queue& q,
                                    const runtime::oracle_engine& oracle,
                                    const storage_key& key, bool& missing) {
  missing = false;
  auto m = tier.find(key);
  if (!m) {
    missing = true;
    return "not on SSD";
  }
  auto held = tier.key_of(*m);
  if (held.attempt != key.attempt)
    return "written by attempt " + std::to_string(held.attempt);
  auto e = restore_now(tier, q, *m);
  if (!e) {
    missing = true;
    return "unreadable: " + describe(e.error());
  }
  if (auto err = oracle.verify(*e))
    return describe(err);
  if (e->ns != key.ns || e->tokens != key.tokens)
    return "another key's state";
  return {};
}

/// The checkpoint half of `check_expected`: every checkpoint of `want`
/// is resumed exactly (attempt and bytes); every checkpoint file the tier
/// holds verifies and belongs to no completed generation.
inline void check_checkpoints(ssd_tier& tier, completion_queue& q,
                              const runtime::oracle_engine& oracle,
                              const state& want, tally& t) {
  for (auto& [k, attempt] : want.checkpoints) {
    bool missing = false;
    auto key = storage_key::checkpoint(k.request, attempt, k.ns, k.tokens);
    auto err = checkpoint_error(tier, q, oracle, key, missing);
    if (err.empty()) {
      ++t.checkpoints;
      continue;
    }
    ++(missing ? t.lost : t.wrong);
    BOOST_ERROR((missing ? "lost" : "wrong")
                << ": checkpoint of request " << k.request << " ("
                << k.tokens.size() << " tokens), reported durable: " << err);
  }
  for (auto& f : tier.checkpoint_files()) {
    auto& k = f.key;
    if (want.dead(k.request, k.ns, k.attempt)) {
      ++t.wrong;
      BOOST_ERROR("wrong: a checkpoint of the completed generation "
                  << k.request << " (attempt " << k.attempt << ", "
                  << k.tokens.size() << " tokens) came back");
      continue;
    }
    bool missing = false;
    auto err = checkpoint_error(tier, q, oracle, k, missing);
    if (!err.empty()) {
      ++t.wrong;
      BOOST_ERROR("wrong: checkpoint file of request " << k.request << " ("
                                                       << k.tokens.size()
                                                       << " tokens): " << err);
      continue;
    }
    ++t.checkpoint_files;
  }
  t.removals += want.completed.size();
}

/// Checks an opened `tier`: every prefix key of `want` is on SSD under
/// exactly its key, restores, is state for exactly its key and verifies
/// byte for byte; every saved prefix restores and verifies; then the
/// checkpoints (`check_checkpoints`).
inline void check_expected(ssd_tier& tier, completion_queue& q,
                           const runtime::oracle_engine& oracle,
                           const state& want, tally& t) {
  for (auto& [ns, tokens] : want.prefixes) {
    auto m = tier.find(storage_key::prefix(ns, tokens));
    if (!m) {
      ++t.lost;
      BOOST_ERROR("lost: " << ns << " " << tokens.size()
                           << " tokens, reported durable, not on SSD");
      continue;
    }
    auto e = restore_now(tier, q, *m);
    if (!e) {
      ++t.lost;
      BOOST_ERROR("lost: " << ns << " " << tokens.size()
                           << " tokens, reported durable, unreadable: "
                           << describe(e.error()));
      continue;
    }
    auto err = oracle.verify(*e);
    if (err || e->ns != ns || e->tokens != tokens) {
      ++t.wrong;
      BOOST_ERROR("wrong: " << ns << " " << tokens.size() << " tokens: "
                            << (err ? describe(err) : "another key's state"));
      continue;
    }
    ++t.checked;
  }
  for (auto& p : tier.saved_prefixes()) {
    auto m = tier.find(storage_key::prefix(p.ns, p.tokens));
    if (!m) {
      ++t.wrong;
      BOOST_ERROR("a saved prefix has no file: " << p.tokens.size());
      continue;
    }
    auto e = restore_now(tier, q, *m);
    caf::error err = e ? oracle.verify(*e) : e.error();
    if (!err && e->tokens != p.tokens)
      err = make_error(ec::corrupt_data, "another key's state");
    if (err) {
      ++t.wrong;
      BOOST_ERROR("wrong: saved prefix of " << p.tokens.size()
                                            << " tokens: " << describe(err));
      continue;
    }
    ++t.served;
  }
  check_checkpoints(tier, q, oracle, want, t);
}

/// After a check: a flush leaves no removal pending and no removal record
/// on disk (a record a crash left is applied and then deleted, never in
/// the way); counts `records` (found at open, from `opened`) and a failure
/// as wrong. `fs` is the file system the tier runs on.
inline void settle(ssd_tier& tier, completion_queue& q, file_system& fs,
                   const scan_report& opened, tally& t) {
  t.records += opened.records;
  std::optional<durability_evidence> ev;
  tier.flush([&](const durability_evidence& e) { ev = e; });
  test::drive(tier, q);
  BOOST_REQUIRE(ev);
  if (ev->removals_pending != 0) {
    ++t.wrong;
    BOOST_ERROR("a flush after the restart left " << ev->removals_pending
                                                  << " removals pending");
  }
  auto names = fs.list(tier.root());
  BOOST_REQUIRE(names);
  auto left = std::count_if(names->begin(), names->end(),
                            [](auto& n) { return n.ends_with(".kvr"); });
  if (left != 0) {
    ++t.wrong;
    BOOST_ERROR(left << " removal records left after a flush");
  }
}

} // namespace kvtier::tiers::ssd::expected
