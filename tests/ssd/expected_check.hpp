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
  /// Expected entries missing or unreadable: must stay 0.
  uint64_t lost = 0;
  /// Restores that served bytes the oracle refuses, or an indexed file
  /// that failed to restore: must stay 0.
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
           + std::to_string(lost) + " lost, " + std::to_string(wrong)
           + " wrong";
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

/// Checks an opened `tier`: every key of `want` is on SSD under exactly its
/// key, restores, is state for exactly its key and verifies byte for byte;
/// every saved prefix restores and verifies.
inline void check_expected(ssd_tier& tier, completion_queue& q,
                           const runtime::oracle_engine& oracle,
                           const std::set<entry_key>& want, tally& t) {
  for (auto& [ns, tokens] : want) {
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
}

} // namespace kvtier::tiers::ssd::expected
