// Delta files (docs/ssd-format.md, "Delta files"): a prefix entry that
// extends a durable prefix file is written as a file naming that parent
// and holding only the rows past it; restores read the chain; a parent
// never leaves before its children; a broken link is a miss, never a wrong
// state. Every behaviour on every backend; every served state checked
// byte for byte with the oracle.
#define BOOST_TEST_MODULE ssd_delta
#include "tests/ssd/ssd_fixture.hpp"

#include <cstring>

#include <xxhash.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

/// Two kv layers (64 and 32 bytes per token): every layer can be a delta.
model_geometry kv_only() {
  return {"kv-only", {{layer_kind::kv, 64, 0, 0}, {layer_kind::kv, 32, 0, 0}}};
}

runtime::oracle_engine oracle() {
  return runtime::oracle_engine{kv_only()};
}

/// Deltas on; small alignment and chunks, so payloads span several chunks
/// and a partial restore reads only some.
ssd_config delta_config() {
  ssd_config cfg;
  cfg.delta_files = true;
  cfg.alignment = 512;
  cfg.checksum_chunk = 1024;
  return cfg;
}

/// `tokens(n)` plus one token no key has, so a prompt is served n tokens.
token_seq prompt_of(size_t n) {
  auto p = tokens(n);
  p.push_back(999999);
  return p;
}

/// The indexed header of the prefix file (ns, tokens(n)), or nullptr.
std::shared_ptr<const entry_header> header_of(world& w, size_t n,
                                              const std::string& ns = "ns") {
  auto m = w.tier->find(storage_key::prefix(ns, tokens(n)));
  return m ? m->header : nullptr;
}

/// Restores `n` tokens of the best file for `prompt` and checks them.
void restores_right(world& w, const runtime::oracle_engine& o,
                    const token_seq& prompt, size_t n) {
  auto m = w.tier->find(prompt, "ns");
  BOOST_REQUIRE(m);
  BOOST_TEST(m->length == n);
  auto e = w.restore(*m);
  if (!e)
    BOOST_TEST_MESSAGE("restore: " << describe(e.error()));
  BOOST_REQUIRE(e);
  BOOST_TEST(e->tokens.size() == n);
  BOOST_TEST(!o.verify(*e));
}

using events = std::vector<std::pair<size_t, removal_reason>>;

ssd_config recording(events& ev, ssd_config cfg = delta_config()) {
  cfg.on_remove = [&ev](const remove_event& e) {
    ev.emplace_back(e.tokens.size(), e.reason);
  };
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_entry_extending_a_durable_file_is_written_as_a_delta) {
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      auto child = header_of(w, 160);
      BOOST_REQUIRE(child);
      BOOST_TEST(child->parent == file_name("ns", tokens(100)));
      BOOST_TEST(child->parent_tokens == 100u);
      BOOST_TEST(child->parent_write_id == header_of(w, 100)->write_id);
      // Only the 60 new rows of each layer are in the file.
      BOOST_TEST(child->layers[0].payload.length == 60u * 64);
      BOOST_TEST(child->layers[1].payload.length == 60u * 32);
      auto s = w.tier->stats();
      BOOST_TEST(s.delta_files == 1u);
      BOOST_TEST(s.files == 2u); // the parent is not superseded
      BOOST_TEST(s.files_superseded == 0u);
      // The cap counts each file's own bytes.
      BOOST_TEST(s.file_bytes
                 == header_of(w, 100)->file_length + child->file_length);
      // The ideal: 100 new tokens, then 60, at 96 bytes each.
      BOOST_TEST(s.new_token_bytes == 160u * 96);
      BOOST_TEST(w.files().size() == 2u);
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(a_delta_restores_its_chain_whole_and_in_part) {
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      w.store(o.prefill("ns", tokens(230)));
      BOOST_TEST(w.tier->stats().delta_files == 2u);
      // The whole chain, each link's rows in part, and the root alone.
      for (size_t n : {230u, 200u, 161u, 160u, 130u, 100u, 40u})
        BOOST_TEST_CONTEXT(n) {
          restores_right(w, o, prompt_of(n), n);
        }
      // The same after a restart: the scan resolves the chain.
      w.reopen();
      BOOST_TEST(w.tier->stats().files == 3u);
      for (size_t n : {230u, 170u, 60u})
        restores_right(w, o, prompt_of(n), n);
      // A full restore of the child's key (as a checkpoint restore finds
      // it) carries its tokens.
      auto m = w.tier->find(storage_key::prefix("ns", tokens(230)));
      BOOST_REQUIRE(m);
      auto e = w.restore(*m);
      BOOST_REQUIRE(e);
      BOOST_TEST(e->tokens == tokens(230));
      BOOST_TEST(!o.verify(*e));
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(
  an_entry_extended_from_restored_rows_branches_off_its_parent) {
  // A conversation's next turn shares only part of the stored file (its
  // last block differs): restored to 64 tokens, extended by 56 others, it
  // is written as a delta that names the file and leaves it rows [0, 64),
  // proven by being the very buffers read from it.
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      auto prompt = tokens(64);
      for (token t = 0; t < 56; ++t)
        prompt.push_back(50000 + t);
      auto m = w.tier->find(prompt, "ns");
      BOOST_REQUIRE(m);
      BOOST_TEST(m->length == 64u);
      auto reused = w.restore(*m);
      BOOST_REQUIRE(reused);
      auto next = o.extend(*reused, prompt);
      BOOST_REQUIRE(next);
      w.store(*next);
      auto h = w.tier->find(storage_key::prefix("ns", prompt))->header;
      BOOST_TEST(h->parent == file_name("ns", tokens(100)));
      BOOST_TEST(h->parent_tokens == 64u);
      BOOST_TEST(h->layers[0].payload.length == 56u * 64);
      BOOST_TEST(w.tier->stats().delta_files == 1u);
      auto longer = prompt;
      longer.push_back(999999);
      for (size_t n : {120u, 90u, 64u, 30u}) {
        auto q = token_seq(longer.begin(), longer.begin() + n);
        q.push_back(888888);
        restores_right(w, o, q, n);
      }
      // The parent still serves its own tail, past the branch.
      restores_right(w, o, prompt_of(100), 100);
      w.reopen();
      BOOST_TEST(w.tier->stats().files == 2u);
      restores_right(w, o, longer, 120);
      // The same entry rebuilt from scratch (no restored buffers): its
      // rows cannot be proven against a file it only shares a part of:
      // written whole.
      w.store(o.prefill("ns", prompt));
      BOOST_TEST(w.tier->find(storage_key::prefix("ns", prompt))
                   ->header->parent.empty());
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(
  an_entry_extended_from_the_buffers_a_file_was_written_from_branches_off_it) {
  // The same without a restore: the state still in memory that a file was
  // written from, trimmed and extended (RAM kept the earlier turn).
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      auto first = o.prefill("ns", tokens(100));
      w.store(first);
      auto prompt = tokens(64);
      for (token t = 0; t < 56; ++t)
        prompt.push_back(60000 + t);
      auto trimmed = first.trimmed(64);
      BOOST_REQUIRE(trimmed);
      auto next = o.extend(*trimmed, prompt);
      BOOST_REQUIRE(next);
      w.store(*next);
      auto h = w.tier->find(storage_key::prefix("ns", prompt))->header;
      BOOST_TEST(h->parent == file_name("ns", tokens(100)));
      BOOST_TEST(h->parent_tokens == 64u);
      auto q = prompt;
      q.push_back(999999);
      restores_right(w, o, q, 120);
      // Rows copied into fresh buffers prove nothing: whole.
      auto copy = *next;
      copy.tokens.back() = 777;
      for (auto& l : copy.layers) {
        auto bytes = flatten(l.segments);
        l.segments = {view::of(buffer::copy_of(bytes))};
      }
      w.store(copy);
      BOOST_TEST(w.tier->find(storage_key::prefix("ns", copy.tokens))
                   ->header->parent.empty());
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(files_are_written_whole_when_a_delta_is_not_possible) {
  auto o = oracle();
  // Deltas off: as before format 3, the longer file supersedes.
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(100)));
    w.store(o.prefill("ns", tokens(160)));
    BOOST_TEST(w.tier->stats().delta_files == 0u);
    BOOST_TEST(w.tier->stats().files_superseded == 1u);
    BOOST_TEST(header_of(w, 160)->parent.empty());
  });
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      // Another namespace, a key sharing no stored prefix, a rewrite of
      // the same key: whole.
      w.store(o.prefill("other", tokens(160)));
      w.store(o.prefill("ns", tokens(160, 5000)));
      w.store(o.prefill("ns", tokens(100)));
      BOOST_TEST(w.tier->stats().delta_files == 0u);
      BOOST_TEST(header_of(w, 160, "other")->parent.empty());
    },
    delta_config());
  // Layers other than kv (ring, recurrent, object): whole.
  runtime::oracle_engine mixed{every_kind()};
  on_every_backend(
    [&](world& w) {
      w.store(mixed.prefill("ns", tokens(10)));
      w.store(mixed.prefill("ns", tokens(14)));
      BOOST_TEST(w.tier->stats().delta_files == 0u);
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(a_chain_at_its_bound_is_ended_by_a_whole_file) {
  auto o = oracle();
  auto cfg = delta_config();
  cfg.max_chain = 3;
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      for (size_t n : {40u, 60u, 80u})
        w.store(o.prefill("ns", tokens(n)));
      BOOST_TEST(w.tier->stats().delta_files == 2u);
      // A fourth link would make a chain of 4: written whole, and it
      // supersedes the chain, leaves first.
      w.store(o.prefill("ns", tokens(100)));
      BOOST_TEST(w.tier->stats().delta_files == 2u);
      BOOST_TEST(header_of(w, 100)->parent.empty());
      BOOST_TEST((ev
                  == events{{80, removal_reason::superseded},
                            {60, removal_reason::superseded},
                            {40, removal_reason::superseded}}));
      BOOST_TEST(w.files().size() == 1u);
      restores_right(w, o, prompt_of(70), 70);
    },
    recording(ev, cfg));
}

BOOST_AUTO_TEST_CASE(rows_that_differ_from_the_parents_are_written_whole) {
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      // The same tokens with other state bytes (another namespace's state,
      // relabelled): the proof fails, the file is whole.
      auto alien = o.prefill("elsewhere", tokens(160));
      alien.ns = "ns";
      auto want = flatten(alien.layers[0].segments);
      w.store(alien);
      BOOST_TEST(w.tier->stats().delta_refused == 1u);
      BOOST_TEST(w.tier->stats().delta_files == 0u);
      auto h = header_of(w, 160);
      BOOST_REQUIRE(h);
      BOOST_TEST(h->parent.empty());
      auto m = w.tier->find(storage_key::prefix("ns", tokens(160)));
      auto e = w.restore(*m);
      BOOST_REQUIRE(e);
      auto got = flatten(e->layers[0].segments);
      BOOST_TEST((got == want)); // its own bytes, none of the parent's
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(a_rewritten_parent_takes_its_children_along) {
  auto o = oracle();
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      w.store(o.prefill("ns", tokens(200)));
      // The parent's key written again: a new write id under the same
      // name. The children were cut from the old one: they go.
      w.store(o.prefill("ns", tokens(100)));
      BOOST_TEST(
        (ev
         == events{{160, removal_reason::gone}, {200, removal_reason::gone}}));
      BOOST_TEST(w.tier->stats().chain_cascades == 2u);
      BOOST_TEST(!header_of(w, 160));
      restores_right(w, o, prompt_of(180), 100);
      BOOST_TEST(w.files().size() == 1u);
      w.reopen();
      BOOST_TEST(w.tier->stats().files == 1u);
    },
    recording(ev));
}

BOOST_AUTO_TEST_CASE(a_corrupt_parent_removes_its_children_and_serves_nothing) {
  auto o = oracle();
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      auto parent = header_of(w, 100);
      auto at = parent->layers[1].payload.offset + 5;
      w.mutate(file_name("ns", tokens(100)),
               [&](auto& b) { b[at] ^= std::byte{1}; });
      auto m = w.tier->find(prompt_of(160), "ns");
      BOOST_REQUIRE(m);
      auto e = w.restore(*m);
      BOOST_REQUIRE(!e);
      BOOST_TEST((e.error() == ec::corrupt_data));
      BOOST_TEST((ev
                  == events{{100, removal_reason::corrupt},
                            {160, removal_reason::corrupt}}));
      BOOST_TEST(!w.tier->find(prompt_of(160), "ns"));
      drive(*w.tier, w.queue);
      BOOST_TEST(w.files().empty());
    },
    recording(ev));
}

BOOST_AUTO_TEST_CASE(a_missing_parent_is_a_miss_for_its_child) {
  auto o = oracle();
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      w.remove(file_name("ns", tokens(100)));
      auto m = w.tier->find(prompt_of(160), "ns");
      BOOST_REQUIRE(m);
      auto e = w.restore(*m);
      BOOST_REQUIRE(!e);
      BOOST_TEST((e.error() == ec::not_found));
      BOOST_TEST(
        (ev
         == events{{100, removal_reason::gone}, {160, removal_reason::gone}}));
      BOOST_TEST(!w.tier->find(prompt_of(160), "ns"));
    },
    recording(ev));
}

BOOST_AUTO_TEST_CASE(a_parent_is_never_evicted_before_its_children) {
  auto o = oracle();
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      w.store(o.prefill("ns", tokens(100)));      // P, least recently used
      w.store(o.prefill("ns", tokens(160)));      // C, P's child
      w.store(o.prefill("ns", tokens(50, 7000))); // U, unrelated
      auto bytes = w.tier->stats().file_bytes;
      // One byte under: the least recently used file that has no child
      // goes, C, not P.
      std::optional<uint64_t> on_disk;
      w.tier->set_byte_cap(bytes - 1, [&](uint64_t n) { on_disk = n; });
      drive(*w.tier, w.queue);
      BOOST_TEST((ev == events{{160, removal_reason::evicted}}));
      restores_right(w, o, prompt_of(120), 100);
      // Using P now makes U the oldest; a cap for one file leaves P alone.
      auto p_bytes = header_of(w, 100)->file_length;
      ev.clear();
      w.tier->set_byte_cap(p_bytes);
      drive(*w.tier, w.queue);
      BOOST_TEST((ev == events{{50, removal_reason::evicted}}));
      BOOST_TEST(w.tier->stats().files == 1u);
    },
    recording(ev));
}

BOOST_AUTO_TEST_CASE(eviction_over_the_cap_takes_leaves_then_their_parents) {
  auto o = oracle();
  events ev;
  on_every_backend(
    [&](world& w) {
      ev.clear();
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      // Restore the parent alone: it is now more recent than its child,
      // and still goes only after it.
      auto pm = w.tier->find(storage_key::prefix("ns", tokens(100)));
      BOOST_REQUIRE(pm);
      BOOST_REQUIRE(w.restore(*pm));
      w.store(o.prefill("ns", tokens(50, 7000)));
      auto keep = w.tier->stats().file_bytes - header_of(w, 100)->file_length
                  - header_of(w, 160)->file_length;
      w.tier->set_byte_cap(keep);
      drive(*w.tier, w.queue);
      BOOST_TEST((ev
                  == events{{160, removal_reason::evicted},
                            {100, removal_reason::evicted}}));
      BOOST_TEST(w.tier->stats().files == 1u);
      // A restart over a small cap evicts the same way.
      w.tier->set_byte_cap(64ull << 30);
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      ev.clear();
      auto cfg = recording(ev);
      cfg.byte_cap = header_of(w, 100)->file_length;
      w.configure(cfg);
      auto r = w.reopen();
      BOOST_TEST(r.evicted == 2u);
      BOOST_TEST(w.tier->stats().files == 1u);
      BOOST_TEST(!header_of(w, 160));
    },
    recording(ev));
}

BOOST_AUTO_TEST_CASE(the_scan_drops_children_of_a_missing_or_rewritten_parent) {
  auto o = oracle();
  on_every_backend(
    [&](world& w) {
      w.store(o.prefill("ns", tokens(100)));
      w.store(o.prefill("ns", tokens(160)));
      w.store(o.prefill("ns", tokens(200)));
      w.store(o.prefill("ns", tokens(60, 3000)));
      w.store(o.prefill("ns", tokens(90, 3000)));
      auto r = w.reopen();
      BOOST_TEST(r.loaded == 5u);
      BOOST_TEST(r.broken_chains == 0u);
      // The root of the first chain goes behind the tier's back: both
      // descendants are dropped, whatever order the listing gives.
      w.remove(file_name("ns", tokens(100)));
      r = w.reopen();
      BOOST_TEST(r.broken_chains == 2u);
      BOOST_TEST(r.loaded == 2u);
      BOOST_TEST(w.files().size() == 2u);
      auto other = tokens(90, 3000);
      other.push_back(999999);
      restores_right(w, o, other, 90);
      // A crash between a parent's rewrite and its child's removal: the
      // child's bytes are back on disk, naming the old write id.
      std::vector<std::byte> child;
      auto name = file_name("ns", tokens(90, 3000));
      w.mutate(name, [&](auto& b) { child = b; });
      w.store(o.prefill("ns", tokens(60, 3000)));
      BOOST_TEST(w.files().size() == 1u);
      {
        auto f =
          w.fs().open(join_path(w.tier->root(), name), open_mode::create);
        BOOST_REQUIRE(f);
        BOOST_REQUIRE((*f)->write_at(0, child));
        BOOST_REQUIRE(!(*f)->sync());
      }
      r = w.reopen();
      BOOST_TEST(r.broken_chains == 1u);
      BOOST_TEST(r.loaded == 1u);
      BOOST_TEST(w.files().size() == 1u);
    },
    delta_config());
}

BOOST_AUTO_TEST_CASE(a_version_2_file_is_still_served) {
  auto o = oracle();
  on_every_backend([&](world& w) {
    w.store(o.prefill("ns", tokens(100)));
    auto h = header_of(w, 100);
    // Rewrite its header as version 2 wrote it: no parent write id field.
    auto name = file_name("ns", tokens(100));
    w.mutate(name, [&](auto& b) {
      size_t at = 64 + 4 + h->fingerprint.size() + 4 + h->ns.size() + 1 + 8 + 4
                  + 4; // past the (empty) parent file name
      b.erase(b.begin() + static_cast<ptrdiff_t>(at),
              b.begin() + static_cast<ptrdiff_t>(at) + 8);
      // Payloads stay where they were: pad the header back to them.
      b.insert(b.begin() + static_cast<ptrdiff_t>(h->header_length) - 8, 8,
               std::byte{0});
      uint32_t len = h->header_length - 8;
      b[8] = std::byte{2};
      std::memcpy(b.data() + 16, &len, 4);
      auto sum = XXH3_64bits(b.data(), len - 8);
      std::memcpy(b.data() + len - 8, &sum, 8);
    });
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 1u);
    BOOST_TEST(header_of(w, 100)->version == 2u);
    restores_right(w, o, prompt_of(100), 100);
    restores_right(w, o, prompt_of(70), 70);
  });
}
