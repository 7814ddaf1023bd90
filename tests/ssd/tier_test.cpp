#define BOOST_TEST_MODULE ssd_tier
#include "tests/ssd/ssd_fixture.hpp"

#include <malloc.h>
#include <map>
#include <set>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

runtime::oracle_engine every_kind_oracle() {
  return runtime::oracle_engine{every_kind(), 40};
}

void check_verified(const runtime::oracle_engine& o, const entry& e) {
  auto err = o.verify(e);
  BOOST_TEST(!err, describe(err));
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trip_of_every_kind_is_byte_exact) {
  auto o = every_kind_oracle();
  auto window = runtime::oracle_engine{*model_geometry::preset("tiny-window")};
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      auto live_before = buffer::live_count();
      {
        world w{b, dir.path};
        auto wrapped = o.prefill("ns", tokens(40)); // ring has wrapped
        auto unwrapped = window.prefill("w", tokens(10));
        BOOST_REQUIRE(w.tier->enqueue(wrapped, write_reason::spill));
        BOOST_REQUIRE(w.tier->enqueue(unwrapped, write_reason::snapshot));
        // A pending write is not on SSD.
        BOOST_TEST(!w.tier->contains("ns", wrapped.tokens));
        auto ev = w.flush();
        BOOST_TEST(w.tier->contains("ns", wrapped.tokens));
        BOOST_TEST(ev.durable);
        BOOST_TEST(ev.entries == 2u);
        BOOST_TEST(ev.longest_durable_prefix == 40u);
        auto prompt = tokens(41);
        auto m = w.tier->find(prompt, "ns");
        BOOST_REQUIRE(m);
        BOOST_TEST(m->length == 40u);
        auto e = w.restore(*m);
        BOOST_REQUIRE(e);
        BOOST_TEST(e->attachments.size() == 1u);
        BOOST_TEST(e->layers.size() == 4u);
        check_verified(o, *e);
        auto m2 = w.tier->find(tokens(11), "w");
        BOOST_REQUIRE(m2);
        auto e2 = w.restore(*m2);
        BOOST_REQUIRE(e2);
        check_verified(window, *e2);
        BOOST_TEST(w.tier->stats().writes_ok == 2u);
      }
      BOOST_TEST(buffer::live_count() == live_before);
    }
  }
}

BOOST_AUTO_TEST_CASE(restored_small_rows_hold_no_padding_pages) {
  // tiny-dense at 16 tokens: four 1 KiB rows per entry. Buffers padded to
  // a 4 KiB page each (the file's alignment) would hold 16 KiB of heap
  // per entry where the RAM ledger counts 4 KiB.
  auto o = runtime::oracle_engine{*model_geometry::preset("tiny-dense")};
  constexpr int n = 64;
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      world w{b, dir.path};
      uint64_t state = 0;
      for (int i = 0; i < n; ++i) {
        auto e = o.prefill("ns", tokens(16, token(1000 * i)));
        state += e.byte_length();
        BOOST_REQUIRE(w.tier->enqueue(std::move(e), write_reason::spill));
      }
      BOOST_REQUIRE(w.flush().durable);
      std::vector<entry> held;
      auto before = ::mallinfo2().uordblks;
      for (int i = 0; i < n; ++i) {
        auto m = w.tier->find(tokens(17, token(1000 * i)), "ns");
        BOOST_REQUIRE(m);
        auto e = w.restore(*m);
        BOOST_REQUIRE(e);
        held.push_back(std::move(*e));
      }
      // The rows, plus the entries' own bookkeeping; padded rows would be
      // four times the state.
      auto grown = ::mallinfo2().uordblks - before;
      BOOST_TEST(state == n * 4096u);
      BOOST_TEST(grown < 2 * state, grown << " bytes held for " << state);
    }
  }
}

BOOST_AUTO_TEST_CASE(large_payloads_read_in_many_ops_are_byte_exact) {
  // Payloads above the populated-buffer threshold are restored into
  // buffers mapped but not yet populated, a helper thread populating them
  // ahead of the reads: whatever order those two meet in, the restored
  // state is the one written (full and partial restores, every backend).
  model_geometry g{"large-kv", {}};
  g.layers.push_back({layer_kind::kv, 32768, 0, 0}); // 32 KiB per token
  g.layers.push_back({layer_kind::kv, 16384, 0, 0});
  runtime::oracle_engine o{g};
  ssd_config cfg;
  cfg.max_op_bytes = 256 << 10; // many reads per payload
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(200))); // 6.25 MiB and 3.1 MiB
      for (uint64_t p : {200u, 150u}) {
        auto prompt = tokens(p);
        prompt.push_back(999999); // diverges after p tokens
        auto m = w.tier->find(prompt, "ns");
        BOOST_REQUIRE(m);
        BOOST_TEST(m->length == p);
        auto e = w.restore(*m);
        BOOST_REQUIRE(e);
        BOOST_TEST(e->tokens.size() == p);
        check_verified(o, *e);
      }
    },
    cfg);
}

/// 32 kv layers of 1 KiB per token (64 KiB each at 64 tokens).
model_geometry many_layers() {
  model_geometry g{"many-layers", {}};
  for (int i = 0; i < 32; ++i)
    g.layers.push_back({layer_kind::kv, 1024, 0, 0});
  return g;
}

/// The entry of the first `n` tokens in "ns" restores whole and verified.
void reads_back_whole(world& w, const runtime::oracle_engine& o, size_t n) {
  auto prompt = tokens(n);
  prompt.push_back(999999);
  auto m = w.tier->find(prompt, "ns");
  BOOST_REQUIRE(m);
  auto e = w.restore(*m);
  BOOST_REQUIRE(e);
  check_verified(o, *e);
}

BOOST_AUTO_TEST_CASE(layers_in_separate_buffers_are_written_in_full_ops) {
  // 32 layers of 64 KiB, each in a buffer of its own but next to each
  // other in the file: the tier writes them as ops of its op size
  // (gathered from several buffers), not an op a layer, and the file
  // reads back as written.
  runtime::oracle_engine o{many_layers()};
  ssd_config cfg;
  cfg.max_op_bytes = 512 << 10;
  on_every_backend(
    [&](world& w) {
      auto before = w.counted->counts();
      w.store(o.prefill("ns", tokens(64)));
      auto c = w.counted->counts();
      auto written = c.bytes_written - before.bytes_written;
      // 2 MiB of payload in 512 KiB ops, the header in one more and
      // padding (if any) joining the last run.
      BOOST_TEST(written >= (2u << 20));
      BOOST_TEST(c.writes - before.writes
                 <= (written + cfg.max_op_bytes - 1) / cfg.max_op_bytes + 1);
      reads_back_whole(w, o, 64);
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(every_data_write_starts_the_writeback_of_its_file) {
  // After each data write the tier asks the OS to start writing the file
  // back (a hint, so the final fsync waits for less); off, it never does.
  // The memory file system counts the hints per file; the file still
  // reads back as written either way.
  runtime::oracle_engine o{many_layers()};
  for (bool on : {true, false}) {
    BOOST_TEST_CONTEXT("start_writeback " << on) {
      scratch_dir dir;
      ssd_config cfg;
      cfg.max_op_bytes = 512 << 10;
      cfg.start_writeback = on;
      world w{{fs_kind::memory, engine_choice::threads}, dir.path, cfg};
      auto before = w.counted->counts();
      w.store(o.prefill("ns", tokens(64)));
      auto writes = w.counted->counts().writes - before.writes;
      BOOST_TEST(writes >= 5u); // 2 MiB in 512 KiB ops, and the header
      auto names = w.files();
      BOOST_REQUIRE_EQUAL(names.size(), 1u);
      auto hints =
        w.memory_.writebacks_started(join_path(w.tier->root(), names[0]));
      BOOST_TEST(hints == (on ? writes : 0u));
      reads_back_whole(w, o, 64);
    }
  }
}

BOOST_AUTO_TEST_CASE(partial_restore_reads_only_the_prefix_chunks) {
  model_geometry g{
    "wide", {{layer_kind::kv, 1024, 0, 0}, {layer_kind::ring, 1024, 128, 0}}};
  runtime::oracle_engine o{g};
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      ssd_config cfg;
      cfg.checksum_chunk = 4096;
      world w{b, dir.path, cfg};
      w.store(o.prefill("ns", tokens(64)));
      auto prompt = tokens(20);
      prompt.push_back(999999); // diverges after 20 tokens
      auto m = w.tier->find(prompt, "ns");
      BOOST_REQUIRE(m);
      BOOST_TEST(m->length == 20u);
      BOOST_TEST(m->needs_trim);
      auto e = w.restore(*m);
      BOOST_REQUIRE(e);
      BOOST_TEST(e->tokens.size() == 20u);
      check_verified(o, *e);
      // 20 rows of 1 KiB = 5 whole chunks per layer; the file holds 64.
      BOOST_TEST(w.tier->stats().bytes_read == 2u * 20480u);
    }
  }
}

BOOST_AUTO_TEST_CASE(untrimmable_entry_with_divergent_tail_is_never_found) {
  auto o = every_kind_oracle();
  scratch_dir dir;
  world w{all_backends().front(), dir.path};
  w.store(o.prefill("ns", tokens(30)));
  auto prompt = tokens(20);
  prompt.push_back(424242);
  BOOST_TEST(!w.tier->find(prompt, "ns"));
  BOOST_TEST(!w.tier->find(tokens(31), "other-ns"));
  BOOST_TEST(w.tier->find(tokens(31), "ns").has_value());
}

BOOST_AUTO_TEST_CASE(identical_concurrent_restores_issue_one_read) {
  auto o = every_kind_oracle();
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(24)));
    auto m = w.tier->find(tokens(25), "ns");
    BOOST_REQUIRE(m);
    int served = 0;
    int started = 0;
    int joined = 0;
    for (int i = 0; i < 16; ++i) {
      auto how = w.tier->restore(*m, [&](caf::expected<entry> e) {
        BOOST_REQUIRE(e);
        check_verified(o, *e);
        ++served;
      });
      started += how.started ? 1 : 0;
      joined += how.joined ? 1 : 0;
      BOOST_TEST(how.started != how.joined);
      BOOST_TEST(how.started == (i == 0)); // the first starts, the rest join
    }
    BOOST_TEST(started == 1);
    BOOST_TEST(joined == 15);
    drive(*w.tier, w.queue);
    BOOST_TEST(served == 16);
    BOOST_TEST(w.tier->stats().reads == 1u);
    BOOST_TEST(w.tier->stats().coalesced == 15u);
  });
}

BOOST_AUTO_TEST_CASE(prefetch_lease_keeps_the_restored_donor_until_release) {
  auto o = every_kind_oracle();
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(24)));
    auto lease = w.tier->prefetch(tokens(25), "ns");
    BOOST_REQUIRE(lease);
    BOOST_TEST(lease->read.started);
    BOOST_TEST(!lease->read.joined);
    drive(*w.tier, w.queue);
    auto m = w.tier->find(tokens(25), "ns");
    bool served = false;
    auto how = w.tier->restore(*m, [&](caf::expected<entry> e) {
      BOOST_REQUIRE(e);
      check_verified(o, *e);
      served = true;
    });
    BOOST_TEST(served); // held: answered inside the call, no new read
    BOOST_TEST(how.joined);
    BOOST_TEST(!how.started);
    BOOST_TEST(w.tier->stats().reads == 1u);
    w.tier->release(lease->id);
    BOOST_REQUIRE(w.restore(*m));
    BOOST_TEST(w.tier->stats().reads == 2u);
  });
}

BOOST_AUTO_TEST_CASE(prefetch_reads_only_what_is_longer_than_better_than) {
  auto o = every_kind_oracle();
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(24)));
    auto m = w.tier->find(tokens(25), "ns");
    BOOST_REQUIRE(m);
    BOOST_TEST(m->length == 24u);
    // A faster tier holds as much or more: no read, no lease.
    BOOST_TEST(!w.tier->prefetch(tokens(25), "ns", 24));
    BOOST_TEST(!w.tier->prefetch(tokens(25), "ns", 30));
    BOOST_TEST(!w.tier->busy());
    drive(*w.tier, w.queue);
    BOOST_TEST(w.tier->stats().reads == 0u);
    BOOST_TEST(w.tier->stats().coalesced == 0u);
    // Strictly longer than what it holds: read, held for the lease.
    auto lease = w.tier->prefetch(tokens(25), "ns", 23);
    BOOST_REQUIRE(lease);
    drive(*w.tier, w.queue);
    BOOST_TEST(w.tier->stats().reads == 1u);
    bool served = false;
    w.tier->restore(*m, [&](caf::expected<entry> e) {
      BOOST_REQUIRE(e);
      check_verified(o, *e);
      served = true;
    });
    BOOST_TEST(served); // the held result, no second read
    BOOST_TEST(w.tier->stats().reads == 1u);
    w.tier->release(lease->id);
  });
}

BOOST_AUTO_TEST_CASE(cancelling_the_last_interest_discards_without_leaks) {
  auto o = every_kind_oracle();
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(24)));
    auto live_before = buffer::live_count();
    auto l1 = w.tier->prefetch(tokens(25), "ns");
    auto l2 = w.tier->prefetch(tokens(25), "ns");
    BOOST_REQUIRE(l1 && l2);
    BOOST_TEST(l1->read.started); // the second joins the first's read
    BOOST_TEST(l2->read.joined);
    BOOST_TEST(!l2->read.started);
    BOOST_TEST(l1->id != l2->id);
    w.tier->release(l1->id);
    w.tier->release(l2->id);
    drive(*w.tier, w.queue);
    BOOST_TEST(w.tier->stats().cancelled == 1u);
    BOOST_TEST(w.tier->stats().reads == 1u);
    BOOST_TEST(w.tier->stats().restores_ok == 0u);
    BOOST_TEST(buffer::live_count() == live_before);
  });
}

BOOST_AUTO_TEST_CASE(restart_recovers_the_index_from_headers) {
  auto o = every_kind_oracle();
  on_every_backend([&](world& w) {
    for (token salt = 0; salt < 5; ++salt)
      BOOST_REQUIRE(
        w.tier->enqueue(o.prefill("ns", tokens(10 + salt, salt * 100)),
                        write_reason::demotion));
    BOOST_TEST(w.flush().durable);
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 5u);
    BOOST_TEST(r.corrupt_removed == 0u);
    BOOST_TEST(w.tier->saved_prefixes().size() == 5u);
    auto m = w.tier->find(tokens(15, 400), "ns");
    BOOST_REQUIRE(m);
    auto e = w.restore(*m);
    BOOST_REQUIRE(e);
    BOOST_TEST(e->tokens == tokens(14, 400));
    check_verified(o, *e);
  });
}

// Issue #15 item 2 on SSD: a prefix file's key is held once, by the index;
// the header the index keeps has no tokens, and every place a key leaves
// the tier (a match's storage key, the restored entry, `saved_prefixes`, a
// removal event) rebuilds it from the index, also after a restart and for
// a file a delta stands on.
BOOST_AUTO_TEST_CASE(a_prefix_files_key_is_kept_once_by_the_index) {
  // kv layers: a file serves shorter prompts trimmed.
  runtime::oracle_engine o{
    model_geometry{"kv",
                   {{layer_kind::kv, 16, 0, 0}, {layer_kind::kv, 8, 0, 0}}},
    40};
  std::vector<remove_event> removed;
  ssd_config cfg;
  cfg.on_remove = [&](const remove_event& e) { removed.push_back(e); };
  on_every_backend(
    [&](world& w) {
      removed.clear();
      for (token salt = 0; salt < 3; ++salt)
        w.store(o.prefill("ns", tokens(12 + salt, salt * 100)));
      for (int pass = 0; pass < 2; ++pass) { // as written, then rescanned
        BOOST_TEST_CONTEXT("pass " << pass) {
          for (token salt = 0; salt < 3; ++salt) {
            auto key = tokens(12 + salt, salt * 100);
            auto m = w.tier->find(storage_key::prefix("ns", key));
            BOOST_REQUIRE(m);
            BOOST_TEST(!m->header->keyed(), "the index keeps the key");
            BOOST_TEST(m->header->tokens.empty());
            BOOST_TEST(m->header->token_count == key.size());
            BOOST_TEST(w.tier->key_of(*m).tokens == key);
            auto cut = w.tier->find(tokens(8, salt * 100), "ns");
            BOOST_REQUIRE(cut);
            auto e = w.restore(*cut);
            BOOST_REQUIRE(e);
            BOOST_TEST(e->tokens == tokens(7, salt * 100));
            check_verified(o, *e);
          }
          auto saved = w.tier->saved_prefixes();
          BOOST_REQUIRE(saved.size() == 3u);
          std::set<token_seq> keys;
          for (auto& p : saved)
            keys.insert(p.tokens);
          BOOST_TEST((keys
                      == std::set<token_seq>{tokens(12), tokens(13, 100),
                                             tokens(14, 200)}));
          w.reopen();
        }
      }
      BOOST_REQUIRE(w.tier->erase("ns", tokens(13, 100)));
      w.flush();
      BOOST_REQUIRE(removed.size() == 1u);
      BOOST_TEST(removed[0].ns == "ns");
      BOOST_TEST(removed[0].tokens == tokens(13, 100));
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(the_owner_hears_what_became_of_every_write) {
  auto o = every_kind_oracle();
  std::vector<std::pair<token_seq, write_outcome>> events;
  ssd_config cfg;
  cfg.on_write = [&](const write_event& ev) {
    events.emplace_back(ev.tokens, ev.outcome);
  };
  auto one = o.prefill("ns", tokens(10));
  cfg.queue_cap = one.byte_length() * 2; // room for two entries
  scratch_dir dir;
  world w{all_backends().front(), dir.path, cfg};
  BOOST_REQUIRE(w.tier->enqueue(one, write_reason::spill));
  BOOST_REQUIRE(w.tier->enqueue(one, write_reason::spill));
  BOOST_REQUIRE(
    w.tier->enqueue(o.prefill("ns", tokens(10, 50)), write_reason::demotion));
  BOOST_REQUIRE(
    w.tier->enqueue(o.prefill("ns", tokens(10, 90)), write_reason::snapshot));
  auto ev = w.flush();
  BOOST_TEST(!ev.durable); // a drop since the last flush: not all stored
  BOOST_TEST(ev.dropped == 1u);
  BOOST_TEST(ev.pending == 0u);
  BOOST_TEST(ev.entries == 3u);
  auto again = w.flush();
  BOOST_TEST(again.durable);
  BOOST_TEST(again.dropped == 0u);
  // The first write is in flight at once; the second of the same key waits
  // behind it; the third and fourth overflow the queue: the oldest idle
  // item (the waiting same-key one) is dropped.
  using wo = write_outcome;
  std::map<token, std::vector<wo>> by_salt;
  for (auto& [t, outcome] : events)
    by_salt[t[0]].push_back(outcome);
  BOOST_TEST((by_salt[1] == std::vector<wo>{wo::dropped, wo::durable}));
  BOOST_TEST((by_salt[51] == std::vector<wo>{wo::durable}));
  BOOST_TEST((by_salt[91] == std::vector<wo>{wo::durable}));
  BOOST_TEST(w.tier->stats().dropped == 1u);
}

BOOST_AUTO_TEST_CASE(the_owner_hears_of_every_file_the_tier_removes) {
  auto o = every_kind_oracle();
  auto one = o.prefill("ns", tokens(20));
  using rr = removal_reason;
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      std::vector<std::pair<token_seq, rr>> events;
      ssd_config cfg;
      cfg.on_remove = [&](const remove_event& ev) {
        BOOST_TEST(ev.ns == "ns");
        BOOST_TEST(ev.bytes > 0u);
        events.emplace_back(ev.tokens, ev.reason);
      };
      // Room for three files: every entry below has the same shape.
      cfg.byte_cap =
        layout(one, cfg.fingerprint, cfg.alignment, cfg.checksum_chunk)
          .file_length
        * 3;
      scratch_dir dir;
      world w{b, dir.path, cfg};
      auto store = [&](token salt) {
        w.store(o.prefill("ns", tokens(20, salt)));
        return file_name("ns", tokens(20, salt));
      };
      auto f1 = store(100);
      store(200);
      auto f3 = store(300);
      store(100); // a newer write of f1's key replaces it: not a removal
      BOOST_TEST(events.empty());
      store(400); // over the cap: the least recently used (200) goes
      drive(*w.tier, w.queue);
      // A restore finds 300 corrupt (removed) and 100 gone (forgotten).
      w.mutate(f3, [](auto& bytes) { bytes.back() ^= std::byte{0x80}; });
      BOOST_TEST(!w.restore(*w.tier->find(tokens(21, 300), "ns")));
      w.remove(f1);
      BOOST_TEST(!w.restore(*w.tier->find(tokens(21, 100), "ns")));
      BOOST_TEST(w.tier->erase("ns", tokens(20, 400)));
      BOOST_TEST(!w.tier->erase("ns", tokens(20, 400))); // nothing left
      drive(*w.tier, w.queue);
      std::vector<std::pair<token_seq, rr>> want{{tokens(20, 200), rr::evicted},
                                                 {tokens(20, 300), rr::corrupt},
                                                 {tokens(20, 100), rr::gone},
                                                 {tokens(20, 400), rr::erased}};
      BOOST_TEST((events == want));
      BOOST_TEST(w.tier->stats().files == 0u);
      BOOST_TEST(w.files().empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(the_scan_reports_what_it_evicts_over_the_cap) {
  auto o = every_kind_oracle();
  scratch_dir dir;
  backend b{fs_kind::posix, engine_choice::threads};
  {
    world w{b, dir.path};
    for (token salt : {100, 200, 300})
      w.store(o.prefill("ns", tokens(20, salt)));
  }
  // The scan's recency follows file names, not the history above: only
  // the number of reports and their keys are checked.
  std::vector<remove_event> events;
  ssd_config cfg;
  cfg.on_remove = [&](const remove_event& ev) { events.push_back(ev); };
  auto one = o.prefill("ns", tokens(20));
  cfg.byte_cap =
    layout(one, cfg.fingerprint, cfg.alignment, cfg.checksum_chunk).file_length;
  world w{b, dir.path, cfg}; // opens: one file fits
  BOOST_TEST(w.tier->stats().files == 1u);
  BOOST_REQUIRE_EQUAL(events.size(), 2u);
  for (auto& ev : events) {
    BOOST_TEST((ev.reason == removal_reason::evicted));
    BOOST_TEST(!w.tier->contains(ev.ns, ev.tokens));
  }
  BOOST_TEST(events[0].tokens != events[1].tokens);
}

BOOST_AUTO_TEST_CASE(erase_cancels_a_queued_write_and_removes_one_in_flight) {
  auto o = every_kind_oracle();
  auto live = buffer::live_count();
  using wo = write_outcome;
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      std::vector<std::pair<token, wo>> writes;
      std::vector<std::pair<token, removal_reason>> removals;
      ssd_config cfg;
      cfg.writes_in_flight = 1; // the second write waits in the queue
      cfg.on_write = [&](const write_event& ev) {
        writes.emplace_back(ev.tokens[0], ev.outcome);
      };
      cfg.on_remove = [&](const remove_event& ev) {
        removals.emplace_back(ev.tokens[0], ev.reason);
      };
      scratch_dir dir;
      world w{b, dir.path, cfg};
      auto a = tokens(20, 100), q = tokens(20, 200);
      BOOST_REQUIRE(w.tier->enqueue(o.prefill("ns", a), write_reason::spill));
      BOOST_REQUIRE(
        w.tier->enqueue(o.prefill("ns", q), write_reason::snapshot));
      // The queued one is taken back at once, its buffers with it.
      BOOST_TEST(w.tier->erase("ns", q));
      BOOST_TEST(
        (writes == std::vector<std::pair<token, wo>>{{201, wo::cancelled}}));
      BOOST_TEST(w.tier->stats().queue_items == 1u);
      // The one in flight finishes, then its file goes.
      BOOST_TEST(w.tier->erase("ns", a));
      auto ev = w.flush();
      BOOST_TEST(ev.durable); // a cancel is not a drop
      BOOST_TEST(ev.dropped == 0u);
      BOOST_TEST(ev.pending == 0u);
      BOOST_TEST(ev.entries == 0u);
      drive(*w.tier, w.queue);
      BOOST_TEST((writes
                  == std::vector<std::pair<token, wo>>{{201, wo::cancelled},
                                                       {101, wo::durable}}));
      BOOST_TEST((removals
                  == std::vector<std::pair<token, removal_reason>>{
                    {101, removal_reason::erased}}));
      BOOST_TEST(!w.tier->contains("ns", a));
      BOOST_TEST(!w.tier->find(tokens(21, 100), "ns"));
      BOOST_TEST(w.files().empty());
      auto s = w.tier->stats();
      BOOST_TEST(s.writes_cancelled == 1u);
      BOOST_TEST(s.dropped == 0u);
      BOOST_TEST(s.writes_ok == 1u);
      BOOST_TEST(s.queue_bytes == 0u);
      // Nothing left of either key; a write queued after an erase stays.
      BOOST_TEST(!w.tier->erase("ns", q));
      w.store(o.prefill("ns", q));
      BOOST_TEST(w.tier->contains("ns", q));
      BOOST_TEST(w.files().size() == 1u);
    }
  }
  BOOST_TEST(buffer::live_count() == live);
}
