// SSD removals reach the RAM tier and the checkpoints (SsdEvictEvent),
// message by message on CAF's deterministic scheduler: a real SSD actor
// (in-memory file system, an I/O engine that runs each op at once, so every
// completion is an io_done message the scheduler orders), a real RAM actor
// and a real checkpoints actor, wired as runtime/service/spawn.cpp wires them.
// The SSD cap holds one 100-token entry, so each new file evicts the one
// before. Also: a completed release cancels its checkpoint's writes.
#define BOOST_TEST_MODULE actors_ssd_evict
#include "actors/tier_counters.hpp"
#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/checkpoints_actor.hpp"
#include "actors/ram_tier_actor.hpp"
#include "actors/ssd_tier_actor.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/checkpoints.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/memory_file_system.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

namespace ssd = tiers::ssd;

using ram_impl = std::remove_pointer_t<actors::ram_tier_pointer>;
using checkpoints_impl = std::remove_pointer_t<actors::checkpoints_pointer>;

struct fixture : kvtier::testing::kvtier_fixture<> {
  runtime::oracle_engine oracle{*tiers::model_geometry::preset("tiny-dense")};
  actors::ssd_tier_actor ssd;
  actors::ram_tier_actor ram;
  actors::checkpoints_actor ckpt;

  fixture() {
    ssd::ssd_config cfg;
    cfg.dir = "/ssd";
    cfg.fingerprint = "tiny-dense";
    auto one = ssd::layout(entry(100, 1), cfg.fingerprint, cfg.alignment,
                           cfg.checksum_chunk)
                 .file_length;
    cfg.byte_cap = one * 3 / 2; // one 100-token file fits, two do not
    ssd = sys.spawn(actors::ssd_tier, testing::inline_ssd(cfg));
    // 1 MiB: 4096 tokens of tiny-dense (256 bytes per token).
    ram =
      sys.spawn(actors::ram_tier,
                actors::ram_tier_config{uint64_t{1} << 20, true}, ssd, nullptr);
    self->send(ssd, actors::attach_ram_atom::value,
               actors::spill_listener_actor{ram});
    ckpt = sys.spawn(actors::checkpoints, uint64_t{16}, ssd,
                     std::vector<tiers::checkpoint_file>{}, uint64_t{10000});
    self->send(ssd, actors::attach_ckpt_atom::value,
               actors::spill_listener_actor{ckpt});
    drain();
  }

  static tiers::token_seq seq(size_t n, tiers::token first) {
    tiers::token_seq t(n);
    for (size_t i = 0; i < n; ++i)
      t[i] = first + static_cast<tiers::token>(i);
    return t;
  }

  tiers::entry entry(size_t n, tiers::token first,
                     const std::string& ns = "ns") {
    return oracle.prefill(ns, seq(n, first));
  }

  template <class Root>
  static sealed<Root> empty() {
    return msg::draft<Root>{}.seal();
  }

  /// Publishes, then snapshots everything not durable (RAM FlushState):
  /// the SSD actor writes it, RAM marks it durable on the reply.
  void publish_durable(size_t n, tiers::token first,
                       const std::string& ns = "ns") {
    msg::draft<msg::PublishState> d;
    tiers::write_entry(d, d.root().initEntry(), entry(n, first, ns));
    self->send(ram, std::move(d).seal());
    self->send(ram, empty<msg::FlushState>());
    drain();
    self->receive([](const sealed<msg::PublishStateReply>& r) {
      BOOST_CHECK(r.root().getKept());
    });
    self->receive([](const sealed<msg::FlushStateReply>&) {});
  }

  /// Installs `e` as restored from SSD (durable claimed); returns kept.
  bool install(const tiers::entry& e) {
    msg::draft<msg::InstallEntry> d;
    tiers::write_entry(d, d.root().initEntry(), e);
    d.root().setDurable(true);
    self->send(ram, std::move(d).seal());
    drain();
    bool kept = false;
    self->receive([&](const sealed<msg::InstallEntryReply>& r) {
      kept = r.root().getKept();
    });
    return kept;
  }

  /// The RAM tier's item of (ns, tokens): nullopt when not held.
  std::optional<tiers::ram_item> item(const tiers::token_seq& tokens,
                                      const std::string& ns = "ns") {
    return deref<ram_impl>(ram).state.tier->item({false, ns, tokens});
  }

  bool durable(const tiers::token_seq& tokens) {
    auto i = item(tokens);
    return i && i->durable;
  }

  uint64_t boundary() {
    msg::draft<msg::ReclaimAtBoundary> b;
    b.root().setTargetBytes(UINT64_MAX);
    self->send(ram, std::move(b).seal());
    drain();
    uint64_t released = 0;
    self->receive([&](const sealed<msg::ReclaimAtBoundaryReply>& r) {
      released = r.root().getReleased();
    });
    return released;
  }

  sealed<msg::ReadReportReply> ssd_report() {
    self->send(ssd, empty<msg::ReadReport>());
    drain();
    std::optional<sealed<msg::ReadReportReply>> out;
    self->receive([&](const sealed<msg::ReadReportReply>& r) { out = r; });
    return *out;
  }

  uint64_t backing_lost() {
    self->send(ram, empty<msg::ReadReport>());
    drain();
    uint64_t n = 0;
    self->receive([&](const sealed<msg::ReadReportReply>& r) {
      n = actors::read_part<tiers::report::ram>(r.root()).backing_lost;
    });
    return n;
  }

  /// Saves a checkpoint of `request` (ns "ns") by `attempt`; whether it
  /// was kept.
  bool save_checkpoint(uint64_t request, size_t n, tiers::token first,
                       uint32_t attempt = 0) {
    msg::draft<msg::SaveCheckpoint> d;
    d.root().initRequest().setId(request);
    d.root().getRequest().setNs("ns");
    d.root().getRequest().setAttempt(attempt);
    tiers::write_entry(d, d.root().initEntry(), entry(n, first));
    self->send(ckpt, std::move(d).seal());
    drain();
    bool kept = false;
    self->receive([&](const sealed<msg::SaveCheckpointReply>& r) {
      kept = r.root().getKept();
    });
    return kept;
  }

  sealed<msg::ReleaseRequest> release(uint64_t request, bool completed,
                                      uint32_t attempt = 0) {
    msg::draft<msg::ReleaseRequest> d;
    d.root().initRequest().setId(request);
    d.root().getRequest().setNs("ns");
    d.root().getRequest().setAttempt(attempt);
    d.root().setCompleted(completed);
    return std::move(d).seal();
  }

  /// The checkpoints actor's FlushState: its writes ordered and answered.
  void flush_checkpoints() {
    self->send(ckpt, empty<msg::FlushState>());
    drain();
    self->receive([](const sealed<msg::FlushStateReply>&) {});
  }

  /// Tokens of `request`'s checkpoint as FindCheckpoint serves it for
  /// `prompt` (0: none); `from_ssd` tells where it came from, `stale` the
  /// tokens of a checkpoint passed over.
  size_t find_checkpoint(uint64_t request, bool* from_ssd = nullptr,
                         const tiers::token_seq& prompt = {},
                         uint32_t attempt = 0, uint64_t* stale = nullptr) {
    msg::draft<msg::FindCheckpoint> d;
    d.root().initRequest().setId(request);
    d.root().getRequest().setNs("ns");
    d.root().getRequest().setAttempt(attempt);
    tiers::write_tokens(d.root().getRequest().initPrompt(prompt.size()),
                        prompt);
    self->send(ckpt, std::move(d).seal());
    drain();
    size_t n = 0;
    self->receive([&](const sealed<msg::FindCheckpointReply>& r) {
      if (r.root().isEntry()) {
        auto e = tiers::read_entry(r, r.root().getEntry());
        BOOST_REQUIRE(e);
        BOOST_CHECK(!oracle.verify_served(*e, "ns", prompt, true));
        n = e->size();
      }
      if (from_ssd)
        *from_ssd = r.root().getFromSsd();
      if (stale)
        *stale = r.root().getStaleTokens();
    });
    return n;
  }

  tiers::checkpoint_store& checkpoints() {
    return deref<checkpoints_impl>(ckpt).state.store;
  }

  tiers::report::ssd ssd_counters() {
    report_ = ssd_report();
    return actors::read_part<tiers::report::ssd>(report_->root());
  }

  std::optional<sealed<msg::ReadReportReply>> report_;

  sealed<msg::EraseEntry> erase(const std::string& ns,
                                const tiers::token_seq& tokens) {
    return erase(tiers::storage_key::prefix(ns, tokens));
  }

  sealed<msg::EraseEntry> erase(const tiers::storage_key& key) {
    msg::draft<msg::EraseEntry> d;
    tiers::write_key(d.root().initKey(), key);
    return std::move(d).seal();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ssd_evict, fixture)

BOOST_AUTO_TEST_CASE(an_entry_evicted_from_ssd_is_no_longer_durable_in_ram) {
  auto a = seq(100, 1), b = seq(100, 5000);
  publish_durable(100, 1);
  BOOST_CHECK(durable(a));
  // B's file pushes A's out of the SSD cap: RAM hears of it.
  publish_durable(100, 5000);
  BOOST_CHECK(durable(b));
  BOOST_CHECK(!durable(a));
  BOOST_REQUIRE(item(a)); // still held, now as the only copy
  BOOST_CHECK_EQUAL(
    actors::read_part<tiers::report::ssd>(ssd_report().root()).evicted, 1u);
  BOOST_CHECK_EQUAL(backing_lost(), 1u);
  // A boundary releases B (its file is there), never A.
  BOOST_CHECK_EQUAL(boundary(), 1u);
  BOOST_CHECK(!item(b));
  BOOST_REQUIRE(item(a));
  // Demotion writes A again before it leaves RAM.
  auto writes =
    actors::read_part<tiers::report::ssd>(ssd_report().root()).writes_ok;
  msg::draft<msg::DemoteIdle> d;
  d.root().setIdleMs(0);
  self->send(ram, std::move(d).seal());
  drain();
  self->receive([](const sealed<msg::DemoteIdleReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getDemoted(), 1u);
  });
  BOOST_CHECK(!item(a));
  BOOST_CHECK_EQUAL(
    actors::read_part<tiers::report::ssd>(ssd_report().root()).writes_ok,
    writes + 1);
  msg::draft<msg::FindPrefix> f;
  f.root().setNs("ns");
  tiers::write_tokens(f.root().initPrompt(101), seq(101, 1));
  self->send(ssd, std::move(f).seal());
  drain();
  self->receive([](const sealed<msg::FindPrefixReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUsableTokens(), 100u);
  });
}

BOOST_AUTO_TEST_CASE(a_restored_entry_is_durable_only_while_its_file_is) {
  // A's file on SSD, nothing in RAM.
  publish_durable(100, 1);
  BOOST_CHECK_EQUAL(boundary(), 1u);
  // Installed as restored trimmed from A's file: durable by that file.
  BOOST_REQUIRE(install(entry(60, 1)));
  BOOST_CHECK(durable(seq(60, 1)));
  // A's file goes: the entry restored from it is no longer durable.
  publish_durable(100, 5000);
  BOOST_CHECK(!durable(seq(60, 1)));
  BOOST_CHECK_EQUAL(backing_lost(), 1u);
  BOOST_CHECK_EQUAL(boundary(), 1u); // B only
  BOOST_CHECK(item(seq(60, 1)));
}

BOOST_AUTO_TEST_CASE(an_install_after_the_file_went_is_not_durable) {
  publish_durable(100, 1);
  BOOST_CHECK_EQUAL(boundary(), 1u);
  // A's file goes after A was read back, before the install arrives: the
  // RAM actor asks the SSD actor and does not take the claim.
  publish_durable(100, 5000);
  BOOST_REQUIRE(install(entry(100, 1)));
  BOOST_CHECK(!durable(seq(100, 1)));
  BOOST_CHECK(durable(seq(100, 5000)));
  BOOST_CHECK_EQUAL(boundary(), 1u); // B only
  BOOST_CHECK(item(seq(100, 1)));
}

BOOST_AUTO_TEST_CASE(erasing_a_file_tells_ram_or_for_a_checkpoint_the_owner) {
  publish_durable(100, 1);
  self->send(ssd, erase("ns", seq(100, 1)));
  expect((sealed<msg::EraseEntry>), from(self).to(ssd));
  expect((sealed<msg::SsdEvictEvent>), from(ssd).to(ram));
  drain();
  self->receive([](const sealed<msg::EraseEntryReply>& r) {
    BOOST_CHECK(r.root().getErased());
  });
  BOOST_CHECK(!durable(seq(100, 1)));
  // A checkpoint file: written and erased, RAM hears nothing.
  auto key = tiers::storage_key::checkpoint(7, 0, "ns", seq(10, 1));
  msg::draft<msg::SpillEntry> s;
  s.root().setOrderId(1);
  s.root().setReason(msg::SpillReason::CHECKPOINT);
  tiers::write_entry(s, s.root().getItem().initEntry(), entry(10, 1));
  tiers::write_owner(s.root().getKind().initCheckpoint(), key);
  self->send(ssd, std::move(s).seal());
  drain();
  self->receive([](const sealed<msg::SpillEntryReply>& r) {
    BOOST_CHECK(r.root().getOutcome() == msg::SpillOutcome::DURABLE);
  });
  self->send(ssd, erase(key));
  expect((sealed<msg::EraseEntry>), from(self).to(ssd));
  expect((sealed<msg::SsdEvictEvent>), from(ssd).to(ckpt));
  disallow((sealed<msg::SsdEvictEvent>), from(ssd).to(ram));
  drain();
  self->receive([](const sealed<msg::EraseEntryReply>& r) {
    BOOST_CHECK(r.root().getErased());
  });
}

BOOST_AUTO_TEST_CASE(
  a_checkpoint_evicted_from_ssd_is_written_again_by_a_flush) {
  BOOST_CHECK(save_checkpoint(7, 100, 1));
  flush_checkpoints();
  BOOST_CHECK(checkpoints().undurable().empty());
  BOOST_CHECK_EQUAL(ssd_counters().writes_ok, 1u);
  // A prefix file pushes the checkpoint's out of the SSD cap: the
  // checkpoints actor hears of it (RAM does not), and its checkpoint held
  // in memory is no longer durable.
  publish_durable(100, 5000);
  BOOST_CHECK_EQUAL(ssd_counters().evicted, 1u);
  BOOST_CHECK_EQUAL(backing_lost(), 0u);
  BOOST_CHECK_EQUAL(checkpoints().undurable().size(), 1u);
  // The next flush writes it again (and that evicts the prefix file).
  flush_checkpoints();
  BOOST_CHECK(checkpoints().undurable().empty());
  BOOST_CHECK_EQUAL(ssd_counters().writes_ok, 3u);
  BOOST_CHECK_EQUAL(backing_lost(), 1u);
  // Memory cleared (a close): the file alone restores it.
  self->send(ckpt, empty<msg::CloseService>());
  drain();
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  bool from_ssd = false;
  BOOST_CHECK_EQUAL(find_checkpoint(7, &from_ssd), 100u);
  BOOST_CHECK(from_ssd);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_file_that_went_is_a_miss_from_then_on) {
  BOOST_CHECK(save_checkpoint(7, 100, 1));
  flush_checkpoints();
  self->send(ckpt, empty<msg::CloseService>());
  drain();
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  // The file goes behind the tier's back: the restore finds it gone, and
  // the checkpoints actor forgets it instead of asking again.
  auto& parts =
    *deref<std::remove_pointer_t<actors::ssd_tier_pointer>>(ssd).state.parts;
  auto name =
    ssd::file_name(tiers::storage_key::checkpoint(7, 0, "ns", seq(100, 1)));
  BOOST_REQUIRE(!parts.own_fs->remove(parts.tier->root() + "/" + name));
  BOOST_CHECK_EQUAL(find_checkpoint(7), 0u);
  BOOST_CHECK_EQUAL(checkpoints().size(), 0u);
  BOOST_CHECK_EQUAL(find_checkpoint(7), 0u); // no second read
  BOOST_CHECK_EQUAL(ssd_counters().restores_failed, 1u);
}

BOOST_AUTO_TEST_CASE(a_completed_release_cancels_its_checkpoint_writes) {
  BOOST_CHECK(save_checkpoint(7, 100, 1));
  // Two flushes order the write twice before either is answered: the
  // first is in flight, the second waits behind it; then the release.
  self->send(ckpt, empty<msg::FlushState>());
  self->send(ckpt, empty<msg::FlushState>());
  self->send(ckpt, release(7, true));
  drain();
  self->receive([](const sealed<msg::FlushStateReply>&) {});
  self->receive([](const sealed<msg::FlushStateReply>&) {});
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getCheckpointsRemoved(), 1u);
  });
  // The queued one was never written; the one in flight was, then erased.
  auto c = ssd_counters();
  BOOST_CHECK_EQUAL(c.writes_cancelled, 1u);
  BOOST_CHECK_EQUAL(c.writes_ok, 1u);
  BOOST_CHECK_EQUAL(c.files, 0u);
  BOOST_CHECK_EQUAL(c.queue_items, 0u);
  BOOST_CHECK_EQUAL(c.dropped, 0u);
  BOOST_CHECK_EQUAL(checkpoints().size(), 0u); // late answers change nothing
  BOOST_CHECK_EQUAL(find_checkpoint(7), 0u);
  self->send(ssd, empty<msg::ReadStats>());
  self->send(ssd, empty<msg::FlushState>());
  drain();
  self->receive([](const sealed<msg::ReadStatsReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getPendingCheckpointWrites(), 0u);
  });
  self->receive([](const sealed<msg::FlushStateReply>& r) {
    BOOST_CHECK(r.root().getResult().getDurable());
  });
}

BOOST_AUTO_TEST_CASE(a_completed_release_answers_after_its_removal_record) {
  BOOST_CHECK(save_checkpoint(7, 100, 1));
  flush_checkpoints();
  self->send(ckpt, release(7, true));
  expect((sealed<msg::ReleaseRequest>), from(self).to(ckpt));
  expect((sealed<msg::RemoveCheckpoints>), from(ckpt).to(ssd));
  // The file leaves the index at once (the checkpoints actor hears of it,
  // and finds nothing of the released identity to clear); the record's
  // write (one engine op) completes before the SSD answers, and the
  // checkpoints actor answers the release only after that answer.
  expect((sealed<msg::SsdEvictEvent>), from(ssd).to(ckpt));
  expect((actors::io_done), to(ssd));
  expect((sealed<msg::RemoveCheckpointsReply>), from(ssd).to(ckpt));
  expect((sealed<msg::ReleaseRequestReply>), from(ckpt).to(self));
  drain();
  auto c = ssd_counters();
  BOOST_CHECK_EQUAL(c.removal_records, 1u);
  BOOST_CHECK_EQUAL(c.files, 0u);
  BOOST_CHECK_EQUAL(c.removals_pending, 0u);
  BOOST_CHECK_EQUAL(find_checkpoint(7), 0u);
}

BOOST_AUTO_TEST_CASE(a_release_that_reached_no_file_asks_the_ssd_nothing) {
  BOOST_CHECK(save_checkpoint(7, 100, 1)); // never flushed
  self->send(ckpt, release(7, true));
  expect((sealed<msg::ReleaseRequest>), from(self).to(ckpt));
  disallow((sealed<msg::RemoveCheckpoints>), from(ckpt).to(ssd));
  drain();
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getCheckpointsRemoved(), 1u);
    BOOST_CHECK(!r.root().getRemovalPending());
  });
}

BOOST_AUTO_TEST_CASE(a_prefix_in_a_checkpoint_like_namespace_stays_a_prefix) {
  // A publish in the namespace the old convention gave checkpoints: a
  // prefix file like any other. Its removal goes to RAM; the checkpoints
  // actor never sees it, before or after it is evicted.
  publish_durable(100, 1, "kvtier.checkpoint/7/ns");
  BOOST_CHECK_EQUAL(find_checkpoint(7), 0u);
  BOOST_CHECK_EQUAL(checkpoints().size(), 0u);
  publish_durable(100, 5000); // evicts it
  BOOST_CHECK_EQUAL(ssd_counters().evicted, 1u);
  BOOST_CHECK_EQUAL(backing_lost(), 1u); // RAM heard of it
  BOOST_CHECK_EQUAL(checkpoints().size(), 0u);
  // A spill order cannot smuggle a checkpoint key past its reason.
  msg::draft<msg::SpillEntry> s;
  s.root().setReason(msg::SpillReason::SNAPSHOT);
  tiers::write_entry(s, s.root().getItem().initEntry(), entry(10, 1));
  tiers::write_owner(s.root().getKind().initCheckpoint(),
                     tiers::storage_key::checkpoint(7, 0, "ns", {}));
  self->send(ssd, std::move(s).seal());
  drain();
  self->receive([](const sealed<msg::SpillEntryReply>& r) {
    BOOST_CHECK(r.root().getOutcome() == msg::SpillOutcome::REFUSED);
  });
}

BOOST_AUTO_TEST_CASE(a_checkpoint_is_served_only_for_a_prompt_it_extends) {
  BOOST_CHECK(save_checkpoint(7, 100, 1));
  uint64_t stale = 0;
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(60, 1)), 100u);
  // Another prompt under the same request id: stale, not served.
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(60, 2), 0, &stale), 0u);
  BOOST_CHECK_EQUAL(stale, 100u);
  // A prompt longer than the checkpoint: stale too.
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(101, 1), 0, &stale), 0u);
  BOOST_CHECK_EQUAL(stale, 100u);
  // The same rule after a restart, when only the file holds it (no read
  // is made for a stale one).
  flush_checkpoints();
  self->send(ckpt, empty<msg::CloseService>());
  drain();
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  auto reads = ssd_counters().restores_ok;
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(60, 2), 0, &stale), 0u);
  BOOST_CHECK_EQUAL(stale, 100u);
  BOOST_CHECK_EQUAL(ssd_counters().restores_ok, reads);
  bool from_ssd = false;
  BOOST_CHECK_EQUAL(find_checkpoint(7, &from_ssd, seq(60, 1)), 100u);
  BOOST_CHECK(from_ssd);
}

BOOST_AUTO_TEST_CASE(a_retry_that_resumes_a_checkpoint_owns_it) {
  BOOST_CHECK(save_checkpoint(7, 100, 1, 0));
  // Attempt 1 (a retry) resumes it; attempt 0 completes late.
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(50, 1), 1), 100u);
  self->send(ckpt, release(7, true, 0));
  drain();
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getCheckpointsRemoved(), 0u);
  });
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(50, 1), 1), 100u);
  // Attempt 0 keeps saving: disposed; attempt 1's saves are kept.
  BOOST_CHECK(!save_checkpoint(7, 120, 1, 0));
  BOOST_CHECK(save_checkpoint(7, 120, 1, 1));
  // The flush writes it under attempt 1: a restart remembers the owner.
  flush_checkpoints();
  auto files = deref<std::remove_pointer_t<actors::ssd_tier_pointer>>(ssd)
                 .state.parts->tier->checkpoint_files();
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  BOOST_CHECK_EQUAL(files[0].key.attempt, 1u);
  self->send(ckpt, release(7, true, 1));
  drain();
  self->receive([](const sealed<msg::ReleaseRequestReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getCheckpointsRemoved(), 1u);
  });
  BOOST_CHECK_EQUAL(find_checkpoint(7, nullptr, seq(50, 1), 1), 0u);
  BOOST_CHECK_EQUAL(ssd_counters().files, 0u);
}

BOOST_AUTO_TEST_CASE(a_superseded_file_is_no_longer_durable_in_ram) {
  // A's file backs A in RAM. B extends A and is trimmable: when B's file
  // is durable it supersedes A's (removed), and RAM hears of it.
  publish_durable(20, 1);
  BOOST_REQUIRE(durable(seq(20, 1)));
  msg::draft<msg::SpillEntry> d; // B, written by another path than RAM
  d.root().setReason(msg::SpillReason::SNAPSHOT);
  tiers::write_entry(d, d.root().getItem().initEntry(), entry(40, 1));
  self->send(ssd, std::move(d).seal());
  expect((sealed<msg::SpillEntry>), from(self).to(ssd));
  drain();
  self->receive([](const sealed<msg::SpillEntryReply>& r) {
    BOOST_CHECK(r.root().getOutcome() == msg::SpillOutcome::DURABLE);
  });
  BOOST_CHECK(!durable(seq(20, 1)));
  BOOST_REQUIRE(item(seq(20, 1))); // kept, now as the only copy
  BOOST_CHECK_EQUAL(backing_lost(), 1u);
  BOOST_CHECK_EQUAL(ssd_counters().files_superseded, 1u);
  BOOST_CHECK_EQUAL(ssd_counters().files, 1u);
  // A's prompts are served by B's file, trimmed.
  msg::draft<msg::FindPrefix> f;
  f.root().setNs("ns");
  tiers::write_tokens(f.root().initPrompt(21), seq(21, 1));
  self->send(ssd, std::move(f).seal());
  drain();
  self->receive([](const sealed<msg::FindPrefixReply>& r) {
    BOOST_CHECK_EQUAL(r.root().getUsableTokens(), 20u);
    BOOST_CHECK_EQUAL(r.root().getKey().getTokens().size(), 40u);
  });
}

BOOST_AUTO_TEST_SUITE_END()
