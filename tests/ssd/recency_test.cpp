// The SSD tier's order across restarts and its live limit: each file's
// last use is recorded in its mtime (on the engine), the start-up scan
// orders the index by it, so eviction after a restart removes the least
// recently used file, not the first by name; a trimmable longer file
// supersedes its stored ancestors' files (reported `superseded`); a
// lowered byte cap evicts at once. Every test runs on every backend.
#define BOOST_TEST_MODULE ssd_recency
#include "tests/ssd/ssd_fixture.hpp"

#include <algorithm>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

runtime::oracle_engine dense() {
  return runtime::oracle_engine{*model_geometry::preset("tiny-dense")};
}

/// Bytes of one 20-token tiny-dense file.
uint64_t file_bytes(const ssd_config& cfg) {
  auto e = dense().prefill("ns", tokens(20));
  return layout(e, cfg.fingerprint, cfg.alignment, cfg.checksum_chunk)
    .file_length;
}

/// Keys 20 tokens long that share no prefix, one per salt.
token_seq key(token salt) {
  return tokens(20, 1000 * salt);
}

std::string name(token salt) {
  return file_name("ns", key(salt));
}

bool held(world& w, token salt) {
  return w.tier->contains("ns", key(salt));
}

/// A test clock: 1 s, 2 s, ... in nanoseconds.
std::function<uint64_t()> ticking(std::shared_ptr<uint64_t> t) {
  return [t] { return ++*t * 1000000000ull; };
}

} // namespace

BOOST_AUTO_TEST_CASE(eviction_after_a_restart_removes_the_least_recently_used) {
  auto o = dense();
  ssd_config cfg;
  cfg.byte_cap = file_bytes(cfg) * 3; // three files
  cfg.clock = ticking(std::make_shared<uint64_t>(0));
  on_every_backend(
    [&](world& w) {
      for (token s : {1, 2, 3})
        w.store(o.prefill("ns", key(s)));
      // Use order is neither name order nor write order: the least
      // recently used is a file that is neither first by name (what a scan
      // by name would evict) nor first written (key 1); the others are
      // used after it.
      auto first_by_name =
        std::min({1, 2, 3}, [](token a, token b) { return name(a) < name(b); });
      token lru = first_by_name == 2 ? 3 : 2;
      std::vector<token> others;
      for (token s : {1, 2, 3})
        if (s != lru)
          others.push_back(s);
      for (auto s : others) {
        auto m = w.tier->find(tokens(21, 1000 * s), "ns");
        BOOST_REQUIRE(m);
        BOOST_REQUIRE(w.restore(*m));
      }
      for (int restart = 0; restart < 2; ++restart)
        w.reopen(); // twice: reading the order does not change it
      w.store(o.prefill("ns", key(4))); // over the cap: one file goes
      drive(*w.tier, w.queue);
      BOOST_TEST(!held(w, lru));
      for (auto s : others)
        BOOST_TEST(held(w, s));
      BOOST_TEST(held(w, 4));
      BOOST_TEST(w.files().size() == 3u);
      BOOST_TEST(w.tier->stats().evicted == 1u);
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(
  the_scan_evicts_in_recorded_use_order_under_a_smaller_cap) {
  auto o = dense();
  ssd_config cfg;
  auto t = std::make_shared<uint64_t>(0);
  cfg.clock = ticking(t);
  on_every_backend(
    [&](world& w) {
      for (token s = 1; s <= 5; ++s)
        w.store(o.prefill("ns", key(s)));
      // Use order 4, 1, 5, 2, 3: the stamps say so, not names or writes.
      for (token s : {4, 1, 5, 2, 3})
        BOOST_REQUIRE(w.restore(*w.tier->find(tokens(21, 1000 * s), "ns")));
      auto small = cfg;
      small.byte_cap = file_bytes(cfg) * 2; // the two most recently used
      w.configure(small);
      auto r = w.reopen();
      BOOST_TEST(r.evicted == 3u);
      for (token s = 1; s <= 5; ++s)
        BOOST_TEST(held(w, s) == (s == 2 || s == 3), "key " << s);
      BOOST_TEST(w.files().size() == 2u);
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(stamps_increase_across_restarts_whatever_the_clock_does) {
  // The clock goes back after the restart: new files are still newer than
  // every file found at start.
  auto o = dense();
  ssd_config cfg;
  cfg.byte_cap = file_bytes(cfg) * 2;
  auto t = std::make_shared<uint64_t>(1000);
  cfg.clock = ticking(t);
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", key(1)));
      w.store(o.prefill("ns", key(2)));
      *t = 0; // back to 1 s
      w.reopen();
      w.store(o.prefill("ns", key(3))); // evicts 1, the oldest
      drive(*w.tier, w.queue);
      w.reopen();
      w.store(o.prefill("ns", key(4))); // evicts 2, not 3
      drive(*w.tier, w.queue);
      BOOST_TEST(!held(w, 1));
      BOOST_TEST(!held(w, 2));
      BOOST_TEST(held(w, 3));
      BOOST_TEST(held(w, 4));
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(a_failed_recency_stamp_fails_nothing) {
  auto o = dense();
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      memory_file_system memory;
      posix_file_system posix;
      file_system& inner = b.kind == fs_kind::memory
                             ? static_cast<file_system&>(memory)
                             : static_cast<file_system&>(posix);
      faulty_file_system faulty{inner};
      ssd_config cfg;
      std::vector<std::string> lines;
      cfg.log = [&](const std::string& l) { lines.push_back(l); };
      world w{b, dir.path, cfg, &faulty};
      faulty.inject(fs_op::set_mtime, 1, fault_kind::eio); // the write's
      auto e = o.prefill("ns", key(1));
      w.store(e);
      faulty.inject(fs_op::set_mtime, 1, fault_kind::eio); // the restore's
      auto r = w.restore(*w.tier->find(tokens(21, 1000), "ns"));
      BOOST_REQUIRE(r);
      BOOST_TEST(!o.verify(*r));
      drive(*w.tier, w.queue);
      BOOST_TEST(faulty.count(fs_op::set_mtime) == 2u);
      BOOST_TEST(lines.size() == 2u); // one line each, nothing else
      BOOST_TEST(w.tier->stats().writes_failed == 0u);
      BOOST_TEST(w.tier->stats().restores_failed == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_trimmable_longer_file_supersedes_its_stored_ancestors) {
  auto o = dense();
  ssd_config cfg;
  std::vector<std::pair<token_seq, removal_reason>> events;
  cfg.on_remove = [&](const remove_event& ev) {
    events.emplace_back(ev.tokens, ev.reason);
  };
  on_every_backend(
    [&](world& w) {
      events.clear();
      w.store(o.prefill("ns", tokens(8)));
      w.store(o.prefill("ns", tokens(12)));
      w.store(o.prefill("other", tokens(8)));  // another namespace: stays
      w.store(o.prefill("ns", tokens(8, 50))); // no common prefix: stays
      BOOST_TEST((events
                  == std::vector<std::pair<token_seq, removal_reason>>{
                    {tokens(8), removal_reason::superseded}}));
      // 20 supersedes 12 in turn.
      w.store(o.prefill("ns", tokens(20)));
      drive(*w.tier, w.queue);
      BOOST_TEST(events.size() == 2u);
      BOOST_TEST(
        (events.back() == std::pair{tokens(12), removal_reason::superseded}));
      BOOST_TEST(w.tier->stats().files_superseded == 2u);
      BOOST_TEST(w.tier->stats().files == 3u);
      BOOST_TEST(w.files().size() == 3u);
      // Every prompt the removed files served, the longer one serves.
      for (size_t n : {8u, 12u}) {
        auto prompt = tokens(n);
        prompt.push_back(777777);
        auto m = w.tier->find(prompt, "ns");
        BOOST_REQUIRE(m);
        BOOST_TEST(m->length == n);
        auto e = w.restore(*m);
        BOOST_REQUIRE(e);
        BOOST_TEST(!o.verify(*e));
      }
      auto saved = w.tier->saved_prefixes();
      BOOST_TEST(saved.size() == 3u);
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(an_untrimmable_longer_file_supersedes_nothing) {
  // tiny-hybrid has recurrent layers: a longer file cannot serve a shorter
  // prompt, so the shorter files must survive.
  runtime::oracle_engine o{*model_geometry::preset("tiny-hybrid")};
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(8)));
    w.store(o.prefill("ns", tokens(12)));
    BOOST_TEST(w.tier->stats().files == 2u);
    BOOST_TEST(w.tier->stats().files_superseded == 0u);
    auto prompt = tokens(8);
    prompt.push_back(777777);
    auto m = w.tier->find(prompt, "ns");
    BOOST_REQUIRE(m);
    BOOST_TEST(m->length == 8u);
  });
}

BOOST_AUTO_TEST_CASE(a_lowered_byte_cap_evicts_least_recently_used_at_once) {
  auto o = dense();
  ssd_config cfg;
  std::vector<std::pair<token_seq, removal_reason>> events;
  cfg.on_remove = [&](const remove_event& ev) {
    events.emplace_back(ev.tokens, ev.reason);
  };
  auto one = file_bytes(cfg);
  on_every_backend(
    [&](world& w) {
      events.clear();
      for (token s = 1; s <= 4; ++s)
        w.store(o.prefill("ns", key(s)));
      BOOST_REQUIRE(w.restore(*w.tier->find(tokens(21, 1000), "ns")));
      // Two files' worth: 2 and 3 go (1 was used last but for 4).
      BOOST_TEST(w.tier->set_byte_cap(one * 2) == 2u);
      BOOST_TEST(w.tier->byte_cap() == one * 2);
      BOOST_TEST(w.tier->stats().file_bytes <= one * 2);
      BOOST_TEST((events
                  == std::vector<std::pair<token_seq, removal_reason>>{
                    {key(2), removal_reason::evicted},
                    {key(3), removal_reason::evicted}}));
      drive(*w.tier, w.queue);
      BOOST_TEST(w.files().size() == 2u); // the unlinks ran
      BOOST_TEST(held(w, 1));
      BOOST_TEST(held(w, 4));
      // Entries larger than the cap now are refused; raising it is fine.
      BOOST_TEST(w.tier->set_byte_cap(one / 2) == 2u);
      BOOST_TEST(w.tier->stats().files == 0u);
      auto r = w.tier->enqueue(o.prefill("ns", key(5)), write_reason::spill);
      BOOST_REQUIRE(!r);
      BOOST_TEST((r.error() == ec::no_space));
      BOOST_TEST(w.tier->set_byte_cap(one * 8) == 0u);
      w.store(o.prefill("ns", key(5)));
      BOOST_TEST(held(w, 5));
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(
  a_write_queued_before_the_cap_shrank_does_not_stay_over_it) {
  auto o = dense();
  ssd_config cfg;
  auto one = file_bytes(cfg);
  on_every_backend(
    [&](world& w) {
      BOOST_REQUIRE(
        w.tier->enqueue(o.prefill("ns", key(1)), write_reason::spill));
      w.tier->set_byte_cap(one / 2); // while it is queued or running
      w.flush();
      BOOST_TEST(w.tier->stats().files == 0u);
      BOOST_TEST(w.files().empty());
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(under_gdsf_a_rewritten_file_keeps_its_uses) {
  // A rewrite's rename drops the older file of its name before the new one
  // is indexed; the new file still carries on the uses of the old, so a
  // key restored often is not the first to go after it is written again.
  auto o = dense();
  ssd_config cfg;
  cfg.byte_cap = file_bytes(cfg) * 3; // three files
  cfg.policy = ram_policy::gdsf;
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", key(1)));
      for (int i = 0; i < 3; ++i)
        BOOST_REQUIRE(w.restore(*w.tier->find(tokens(21, 1000), "ns")));
      w.store(o.prefill("ns", key(1))); // written again: 5 uses
      BOOST_TEST(w.tier->stats().writes_ok == 2u);
      for (token s : {2, 3, 4}) // one use each; the fourth file is over
        w.store(o.prefill("ns", key(s)));
      drive(*w.tier, w.queue);
      BOOST_TEST(held(w, 1)); // were its uses lost, it would go first
      BOOST_TEST(!held(w, 2));
      BOOST_TEST(held(w, 3));
      BOOST_TEST(held(w, 4));
      BOOST_TEST(w.tier->stats().evicted == 1u);
    },
    cfg);
}
