// The start-up scan in steps (`ssd_config::index_at_open` false,
// `ssd_tier::index_step`): lookups answered while it runs see only whole,
// right files; a write, an erase or a checkpoint removal made meanwhile is
// not undone by the scan finding the older file; the cap and the LRU order
// hold at its end; and a process killed while it indexes (and writes)
// loses nothing it reported durable. Each step is one file, so "while it
// runs" is a count of steps, never a time.
#define BOOST_TEST_MODULE ssd_start_scan
#include "tests/ssd/ssd_fixture.hpp"

#include <csignal>
#include <cstdio>
#include <random>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

runtime::oracle_engine oracle(uint64_t salt = 0) {
  return runtime::oracle_engine{every_kind(), 40, salt};
}

ssd_config background() {
  ssd_config c;
  c.index_at_open = false;
  return c;
}

/// Entry `i`'s tokens: no two entries share a first token.
token_seq key_tokens(uint64_t i) {
  return tokens(12, static_cast<token>(100 * i));
}

storage_key key_of(uint64_t i) {
  return storage_key::prefix("ns", key_tokens(i));
}

/// Stores entries [0, n) durably with the tier indexed at open.
void store_all(world& w, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", key_tokens(i)),
                                  write_reason::spill));
  BOOST_REQUIRE(w.flush().durable);
}

/// Whether entry `i` is served, and then by the bytes `o` makes for it.
bool served_right(world& w, uint64_t i,
                  const runtime::oracle_engine& o = oracle()) {
  auto m = w.tier->find(key_of(i));
  if (!m)
    return false;
  auto e = w.restore(*m);
  BOOST_REQUIRE(e);
  BOOST_TEST(e->tokens == key_tokens(i));
  BOOST_TEST(!o.verify(*e));
  return true;
}

void index_all(world& w) {
  while (!w.tier->index_step(1))
    ;
  drive(*w.tier, w.queue);
}

} // namespace

BOOST_AUTO_TEST_CASE(lookups_are_answered_from_what_is_indexed_so_far) {
  on_every_backend([&](world& w) {
    const uint64_t n = 24;
    store_all(w, n);
    w.configure(background());
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 0u);
    BOOST_TEST(w.tier->indexing());
    BOOST_TEST(w.tier->stats().indexing == 1u);
    std::set<uint64_t> hits;
    for (size_t step = 0; w.tier->indexing(); ++step) {
      BOOST_REQUIRE(step <= n + 4); // LOCK, MODEL: every name is one step
      // Every lookup is a miss or the entry's own bytes.
      for (uint64_t i = 0; i < n; ++i)
        if (!hits.count(i) && served_right(w, i))
          hits.insert(i);
      BOOST_TEST(hits.size() == w.tier->stats().files);
      BOOST_TEST(w.tier->stats().index_files == w.tier->stats().files);
      w.tier->index_step(1);
    }
    BOOST_TEST(hits.size() < n); // some lookups came before their file
    for (uint64_t i = 0; i < n; ++i)
      BOOST_TEST(served_right(w, i));
    auto s = w.tier->stats();
    BOOST_TEST(s.indexing == 0u);
    BOOST_TEST(s.index_files == n);
    BOOST_TEST(w.tier->scan_result().loaded == n);
  });
}

BOOST_AUTO_TEST_CASE(a_write_made_while_indexing_wins_over_the_scanned_file) {
  on_every_backend([&](world& w) {
    store_all(w, 6);
    w.configure(background());
    w.reopen();
    // A newer state of entry 3 (other bytes, same key) before the scan
    // reached it: queued, not started while the scan runs.
    auto newer = oracle(1);
    BOOST_REQUIRE(w.tier->enqueue(newer.prefill("ns", key_tokens(3)),
                                  write_reason::snapshot));
    std::optional<durability_evidence> ev;
    w.tier->flush([&](const durability_evidence& e) { ev = e; });
    drive(*w.tier, w.queue);
    BOOST_TEST(!ev.has_value()); // nothing written while indexing
    BOOST_TEST(!w.tier->contains(key_of(3)));
    index_all(w);
    BOOST_REQUIRE(ev.has_value());
    BOOST_TEST(ev->durable);
    BOOST_TEST(served_right(w, 3, newer));
    BOOST_TEST(served_right(w, 2));
    w.configure({});
    w.reopen();
    BOOST_TEST(served_right(w, 3, newer));
  });
}

BOOST_AUTO_TEST_CASE(an_erase_made_while_indexing_is_not_resurrected) {
  on_every_backend([&](world& w) {
    store_all(w, 6);
    w.configure(background());
    w.reopen();
    auto gone = file_name(key_of(4));
    BOOST_TEST(w.tier->erase(key_of(4)));
    index_all(w);
    BOOST_TEST(!w.tier->find(key_of(4)));
    auto files = w.files();
    BOOST_TEST(std::count(files.begin(), files.end(), gone) == 0);
    BOOST_TEST(served_right(w, 5));
    BOOST_TEST(w.tier->stats().files == 5u);
    w.reopen();
    index_all(w);
    BOOST_TEST(!w.tier->find(key_of(4)));
    BOOST_TEST(w.tier->stats().files == 5u);
  });
}

BOOST_AUTO_TEST_CASE(a_checkpoint_removal_made_while_indexing_waits_for_it) {
  on_every_backend([&](world& w) {
    store_all(w, 4);
    auto ck = storage_key::checkpoint(7, 1, "ns", key_tokens(9));
    BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", key_tokens(9)),
                                  write_reason::checkpoint, ck));
    BOOST_REQUIRE(w.flush().durable);
    w.configure(background());
    w.reopen();
    // Half the names scanned: the checkpoint file may be indexed or not.
    w.tier->index_step(3);
    std::optional<caf::error> removed;
    w.tier->remove_checkpoints(7, "ns",
                               [&](const caf::error& e) { removed = e; });
    BOOST_TEST(!removed.has_value());
    BOOST_TEST(!w.tier->find(ck));
    BOOST_TEST(!w.tier->contains(ck));
    while (w.tier->indexing()) {
      BOOST_TEST(!w.tier->find(ck)); // hidden however far the scan got
      BOOST_TEST(w.tier->checkpoint_files().empty());
      w.tier->index_step(1);
    }
    drive(*w.tier, w.queue);
    BOOST_REQUIRE(removed.has_value());
    BOOST_TEST(!*removed);
    BOOST_TEST(!w.tier->find(ck));
    w.configure({});
    w.reopen();
    BOOST_TEST(!w.tier->find(ck));
    BOOST_TEST(w.tier->checkpoint_files().empty());
    BOOST_TEST(served_right(w, 3));
  });
}

BOOST_AUTO_TEST_CASE(the_cap_and_the_lru_order_hold_at_the_end) {
  on_every_backend([&](world& w) {
    store_all(w, 1);
    auto bytes = w.tier->stats().file_bytes;
    // One write per flush: each file's mtime records its own write.
    for (uint64_t i = 1; i < 6; ++i) {
      BOOST_REQUIRE(w.tier->enqueue(oracle().prefill("ns", key_tokens(i)),
                                    write_reason::spill));
      BOOST_REQUIRE(w.flush().durable);
    }
    // Entry 0, the oldest write, is the most recently used.
    BOOST_TEST(served_right(w, 0));
    drive(*w.tier, w.queue);
    auto cfg = background();
    cfg.byte_cap = 3 * bytes;
    w.configure(cfg);
    w.reopen();
    index_all(w);
    BOOST_TEST(w.tier->scan_result().evicted == 3u);
    for (uint64_t i : {0, 4, 5})
      BOOST_TEST(served_right(w, i));
    for (uint64_t i : {1, 2, 3})
      BOOST_TEST(!w.tier->find(key_of(i)));
  });
}

BOOST_AUTO_TEST_CASE(delta_files_are_indexed_once_their_parents_are) {
  // Kv layers only: every layer can be a delta.
  runtime::oracle_engine o{
    {"kv-only", {{layer_kind::kv, 64, 0, 0}, {layer_kind::kv, 32, 0, 0}}}};
  ssd_config cfg;
  cfg.delta_files = true;
  cfg.alignment = 512;
  cfg.checksum_chunk = 1024;
  on_every_backend(
    [&](world& w) {
      // A chain of three: 40 tokens whole, 64 and 90 as deltas.
      for (size_t n : {40, 64, 90})
        w.store(o.prefill("ns", tokens(n)));
      BOOST_REQUIRE(w.tier->stats().delta_files == 2u);
      auto bg = cfg;
      bg.index_at_open = false;
      w.configure(bg);
      w.reopen();
      // The deltas wait for the end, whatever the listing's order.
      while (!w.tier->index_step(1))
        for (size_t n : {64, 90})
          BOOST_TEST(!w.tier->find(storage_key::prefix("ns", tokens(n))));
      drive(*w.tier, w.queue);
      for (size_t n : {40, 64, 90}) {
        auto m = w.tier->find(storage_key::prefix("ns", tokens(n)));
        BOOST_REQUIRE(m);
        auto e = w.restore(*m);
        BOOST_REQUIRE(e);
        BOOST_TEST(e->tokens.size() == n);
        BOOST_TEST(!o.verify(*e));
      }
      BOOST_TEST(w.tier->scan_result().loaded == 3u);
      BOOST_TEST(w.tier->scan_result().broken_chains == 0u);
    },
    cfg);
}

namespace {

/// The crash loop's victim, in a forked child: opens the tier without
/// indexing, then per step indexes one file, queues one new entry (the
/// first 120 steps) and, every 5 steps, flushes (answered once the scan is over
/// and the writes ran); prints "durable i" for every entry a durable flush
/// covered.
[[noreturn]] void victim(const std::string& dir, uint64_t round, int out) {
  std::FILE* lines = ::fdopen(out, "w");
  posix_file_system fs;
  completion_queue q;
  auto engine = make_io_engine(engine_choice::threads, q.sink());
  if (!engine)
    ::_exit(3);
  auto cfg = background();
  cfg.dir = dir;
  ssd_tier tier{cfg, fs, **engine};
  if (!tier.open())
    ::_exit(4);
  std::vector<uint64_t> queued;
  bool flushing = false;
  size_t reported = 0;
  for (uint64_t j = 0; j < 100000; ++j) {
    if (j >= 120 && reported == 120)
      break; // every entry reported durable
    tier.index_step(1);
    uint64_t i = 1000 * (round + 1) + j;
    if (j < 120
        && tier.enqueue(oracle().prefill("ns", key_tokens(i)),
                        write_reason::spill))
      queued.push_back(i);
    std::fprintf(lines, "step %llu\n", static_cast<unsigned long long>(j));
    std::fflush(lines);
    if (j % 5 == 4 && !flushing) {
      flushing = true;
      tier.flush([&, covered = queued](const durability_evidence& ev) {
        flushing = false;
        if (!ev.durable)
          return;
        for (auto c : covered)
          std::fprintf(lines, "durable %llu\n",
                       static_cast<unsigned long long>(c));
        reported = covered.size();
        std::fflush(lines);
      });
    }
    for (auto& c : q.wait(std::chrono::milliseconds(1)))
      tier.handle(std::move(c));
  }
  ::_exit(0);
}

} // namespace

BOOST_AUTO_TEST_CASE(kills_while_indexing_lose_nothing_reported_durable) {
  scratch_dir dir;
  const uint64_t base = 150;
  {
    world w{{fs_kind::posix, engine_choice::threads}, dir.path};
    store_all(w, base);
  }
  std::set<uint64_t> durable;
  std::mt19937_64 rng{20261207};
  for (uint64_t round = 0; round < 6; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      int fds[2];
      BOOST_REQUIRE(::pipe(fds) == 0);
      auto pid = ::fork();
      BOOST_REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(fds[0]);
        victim(dir.path, round, fds[1]);
      }
      ::close(fds[1]);
      // Even rounds: killed while indexing (the first ~150 steps); odd
      // ones: while writing, after some durable reports (or never, when
      // the victim is done first).
      bool while_indexing = round % 2 == 0;
      auto kill_after = while_indexing ? 10 + rng() % 130 : 1 + rng() % 110;
      std::FILE* in = ::fdopen(fds[0], "r");
      char line[128];
      uint64_t steps = 0, reports = 0;
      bool killed = false;
      while (std::fgets(line, sizeof line, in)) {
        unsigned long long i = 0;
        if (std::sscanf(line, "durable %llu", &i) == 1) {
          durable.insert(i);
          ++reports;
        } else {
          ++steps;
        }
        if ((while_indexing ? steps : reports) == kill_after) {
          ::kill(pid, SIGKILL);
          killed = true;
          break;
        }
      }
      std::fclose(in);
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (while_indexing)
        BOOST_TEST(killed);
      // Indexed at open: everything reported durable is served, right.
      world w{{fs_kind::posix, engine_choice::threads}, dir.path};
      for (uint64_t i = 0; i < base; ++i)
        BOOST_TEST(served_right(w, i), "entry " << i);
      for (auto i : durable)
        BOOST_TEST(served_right(w, i), "entry " << i);
      BOOST_TEST(w.tier->stats().files >= base + durable.size());
    }
  }
  BOOST_TEST_MESSAGE(durable.size() << " entries reported durable");
  BOOST_TEST(!durable.empty());
}
