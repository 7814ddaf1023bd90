// Objects through the RAM and SSD actors, message by message on CAF's
// deterministic scheduler: a real SSD actor (in-memory file system, an I/O
// engine that runs each op at once, so every completion is an io_done
// message the scheduler orders) and a real RAM actor, wired as
// runtime/service/spawn.cpp wires them. RAM holds two objects of 400 KiB (1 MiB
// cap), so a third evicts the least recently used. Every object served is
// compared byte for byte with the one put.
#define BOOST_TEST_MODULE actors_ram_objects
#include "tests/actors/inline_ssd.hpp"
#include "tests/caf_bridge.hpp"

#include "actors/cache_service.hpp"
#include "actors/ram_tier_actor.hpp"
#include "actors/ssd_tier_actor.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/ssd/memory_file_system.hpp"

using namespace kvtier;
using actors::sealed;

namespace {

namespace ssd = tiers::ssd;
using tensors = std::vector<tiers::attachment>;

using ram_impl = std::remove_pointer_t<actors::ram_tier_pointer>;
using ssd_impl = std::remove_pointer_t<actors::ssd_tier_pointer>;

/// 400 KiB in two tensors; byte i of the first = (i * 3 + salt) mod 251.
tensors object(uint8_t salt) {
  auto make = [](size_t n, uint8_t s) {
    buffer_builder b(n);
    for (size_t i = 0; i < n; ++i)
      b.data()[i] = std::byte(static_cast<uint8_t>((i * 3 + s) % 251));
    auto buf = std::move(b).freeze();
    return view{buf, 0, n};
  };
  return {{"encoder", {make(400 << 10, salt)}},
          {"cls", {make(64, static_cast<uint8_t>(salt + 1))}}};
}

bool same(const tensors& a, const tensors& b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name
        || flatten(a[i].segments) != flatten(b[i].segments))
      return false;
  return true;
}

struct fixture : kvtier::testing::kvtier_fixture<> {
  actors::ssd_tier_actor ssd;
  actors::ram_tier_actor ram;

  fixture() {
    ssd::ssd_config cfg;
    cfg.dir = "/ssd";
    cfg.fingerprint = "objects";
    ssd = sys.spawn(actors::ssd_tier, testing::inline_ssd(cfg));
    ram =
      sys.spawn(actors::ram_tier,
                actors::ram_tier_config{uint64_t{1} << 20, true}, ssd, nullptr);
    self->send(ssd, actors::attach_ram_atom::value,
               actors::spill_listener_actor{ram});
    drain();
  }

  template <class Root>
  static sealed<Root> empty() {
    return msg::draft<Root>{}.seal();
  }

  static sealed<msg::PutObject> put_message(const std::string& key,
                                            const tensors& t) {
    msg::draft<msg::PutObject> d;
    auto obj = d.root().initObject();
    obj.setKey(key);
    tiers::write_attachments(d, obj.initAttachments(t.size()), t);
    return std::move(d).seal();
  }

  static sealed<msg::GetObject> get_message(const std::string& key) {
    msg::draft<msg::GetObject> d;
    d.root().setKey(key);
    return std::move(d).seal();
  }

  void put(const std::string& key, const tensors& t) {
    self->send(ram, put_message(key, t));
    drain();
    self->receive(
      [](const sealed<msg::PutObjectReply>& r) {
        BOOST_CHECK(r.root().getKept());
      },
      [](const caf::error& err) { BOOST_FAIL(describe(err)); });
  }

  /// The GetObject reply already in self's mailbox.
  std::optional<tensors> got() {
    std::optional<tensors> out;
    self->receive(
      [&](const sealed<msg::GetObjectReply>& r) {
        if (!r.root().isObject())
          return;
        auto a =
          tiers::read_attachments(r, r.root().getObject().getAttachments());
        BOOST_REQUIRE(a);
        out = std::move(*a);
      },
      [](const caf::error& err) { BOOST_FAIL(describe(err)); });
    return out;
  }

  std::optional<tensors> get(const std::string& key) {
    self->send(ram, get_message(key));
    drain();
    return got();
  }

  /// RAM's flush: every object not durable is written.
  void flush() {
    self->send(ram, empty<msg::FlushState>());
    drain();
    self->receive([](const sealed<msg::FlushStateReply>&) {});
  }

  std::optional<tiers::ram_object> in_ram(const std::string& key) {
    return deref<ram_impl>(ram).state.tier->peek_object(key);
  }

  ssd::ssd_tier& ssd_tier() {
    return *deref<ssd_impl>(ssd).state.parts->tier;
  }

  bool on_ssd(const std::string& key) {
    return ssd_tier().contains(tiers::storage_key::object(key));
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ram_objects, fixture)

BOOST_AUTO_TEST_CASE(an_evicted_object_is_spilled_and_found_again_by_its_key) {
  auto a = object(1), b = object(2), c = object(3);
  put("a", a);
  put("b", b);
  BOOST_CHECK(!on_ssd("a"));
  put("c", c); // a is the least recently used: spilled
  BOOST_CHECK(!in_ram("a"));
  BOOST_CHECK(on_ssd("a"));
  auto r = get("a");
  BOOST_REQUIRE(r);
  BOOST_CHECK(same(*r, a));
  // Installed again as durable (its file is there), b spilled for it.
  BOOST_REQUIRE(in_ram("a"));
  BOOST_CHECK(in_ram("a")->durable);
  BOOST_CHECK(!in_ram("b"));
  BOOST_CHECK(on_ssd("b"));
  BOOST_CHECK_EQUAL(ssd_tier().stats().restores_ok, 1u);
  BOOST_CHECK_LE(deref<ram_impl>(ram).state.tier->bytes(), uint64_t{1} << 20);
  // Evicted again as durable: dropped without a second write.
  auto writes = ssd_tier().stats().writes_ok;
  put("d", object(4));
  put("e", object(5));
  BOOST_CHECK(!in_ram("a"));
  BOOST_CHECK_EQUAL(ssd_tier().stats().writes_ok, writes + 1); // c only
  BOOST_CHECK(same(*get("b"), b));
  BOOST_CHECK(!get("never-put"));
}

BOOST_AUTO_TEST_CASE(
  a_get_while_the_spill_is_pending_is_served_from_the_queue) {
  auto a = object(1);
  put("a", a);
  put("b", object(2));
  // Both in RAM's mailbox at once: c's put evicts a (its SpillEntry goes
  // out first), the get misses RAM and asks the SSD actor, which has a's
  // write queued and not yet durable.
  self->send(ram, put_message("c", object(3)));
  self->send(ram, get_message("a"));
  drain();
  self->receive([](const sealed<msg::PutObjectReply>&) {});
  auto r = got();
  BOOST_REQUIRE(r);
  BOOST_CHECK(same(*r, a));
  BOOST_CHECK_EQUAL(ssd_tier().stats().restores_ok, 0u); // no read
  // Installed as not durable (no file was durable when the SSD answered).
  BOOST_REQUIRE(in_ram("a"));
  BOOST_CHECK(!in_ram("a")->durable);
  flush();
  BOOST_CHECK(in_ram("a")->durable);
}

BOOST_AUTO_TEST_CASE(
  a_put_while_the_restore_runs_wins_and_erases_the_old_file) {
  auto v1 = object(1), v2 = object(9);
  put("a", v1);
  flush(); // a's file is durable
  put("b", object(2));
  put("c", object(3)); // a leaves RAM, durable: dropped
  BOOST_REQUIRE(!in_ram("a"));
  BOOST_REQUIRE(on_ssd("a"));
  // The get starts a read of v1's file; the put of v2 arrives while it
  // runs. The late v1 is never installed; the get answers v2.
  self->send(ram, get_message("a"));
  self->send(ram, put_message("a", v2));
  drain();
  auto r = got();
  self->receive([](const sealed<msg::PutObjectReply>&) {});
  BOOST_REQUIRE(r);
  BOOST_CHECK(same(*r, v2));
  BOOST_REQUIRE(in_ram("a"));
  BOOST_CHECK(same(in_ram("a")->tensors, v2));
  // v1's file is gone: nothing can restore it any more.
  BOOST_CHECK(!on_ssd("a"));
  BOOST_CHECK(!ssd_tier().find(tiers::storage_key::object("a")));
  // Evicted and found again: v2.
  put("d", object(4));
  put("e", object(5));
  BOOST_REQUIRE(!in_ram("a"));
  auto again = get("a");
  BOOST_REQUIRE(again);
  BOOST_CHECK(same(*again, v2));
}

BOOST_AUTO_TEST_CASE(a_close_while_the_restore_runs_discards_it) {
  put("a", object(1));
  flush();
  put("b", object(2));
  put("c", object(3));
  BOOST_REQUIRE(!in_ram("a"));
  self->send(ram, get_message("a"));
  self->send(ram, empty<msg::CloseService>());
  drain();
  self->receive(
    [](const sealed<msg::GetObjectReply>&) {
      BOOST_FAIL("a get answered with an object after close");
    },
    [](const caf::error& err) { BOOST_CHECK(err == ec::closed); });
  self->receive([](const sealed<msg::CloseServiceReply>&) {});
  // The restore finished after the close: nothing was installed.
  BOOST_CHECK(!in_ram("a"));
  BOOST_CHECK_EQUAL(deref<ram_impl>(ram).state.tier->bytes(), 0u);
  BOOST_CHECK(deref<ram_impl>(ram).state.object_reads.empty());
}

BOOST_AUTO_TEST_CASE(identical_gets_share_one_restore) {
  auto a = object(1);
  put("a", a);
  flush();
  put("b", object(2));
  put("c", object(3));
  for (int i = 0; i < 3; ++i)
    self->send(ram, get_message("a"));
  drain();
  for (int i = 0; i < 3; ++i) {
    auto r = got();
    BOOST_REQUIRE(r);
    BOOST_CHECK(same(*r, a));
  }
  BOOST_CHECK_EQUAL(ssd_tier().stats().reads, 1u);
}

BOOST_AUTO_TEST_CASE(an_object_file_that_goes_clears_the_durable_mark) {
  put("a", object(1));
  flush();
  BOOST_REQUIRE(in_ram("a")->durable);
  msg::draft<msg::EraseEntry> d;
  tiers::write_key(d.root().initKey(), tiers::storage_key::object("a"));
  self->send(ssd, std::move(d).seal());
  drain(); // the SsdEvictEvent reaches RAM
  self->receive([](const sealed<msg::EraseEntryReply>& r) {
    BOOST_CHECK(r.root().getErased());
  });
  BOOST_CHECK(!in_ram("a")->durable);
  BOOST_CHECK_EQUAL(deref<ram_impl>(ram).state.tier->counters().backing_lost,
                    1u);
  // Evicted now, it is written again rather than dropped as "on SSD".
  put("b", object(2));
  put("c", object(3));
  BOOST_CHECK(on_ssd("a"));
}

BOOST_AUTO_TEST_CASE(without_objects_the_ram_actor_and_the_facade_refuse_them) {
  auto no_objects =
    sys.spawn(actors::ram_tier,
              actors::ram_tier_config{uint64_t{1} << 20, false}, ssd, nullptr);
  actors::service_actors tiers;
  tiers.ram = no_objects;
  auto facade = sys.spawn(
    actors::cache_service, tiers, *tiers::model_geometry::preset("tiny-dense"),
    false, uint64_t{0}, false, uint64_t{10000}, uint64_t{100},
    tiers::route_costs{}, std::shared_ptr<tiers::latency_book>{});
  drain();
  auto refused = [&](auto to) {
    self->send(to, put_message("a", object(1)));
    self->send(to, get_message("a"));
    drain();
    for (int i = 0; i < 2; ++i)
      self->receive(
        [](const sealed<msg::PutObjectReply>&) { BOOST_FAIL("put answered"); },
        [](const sealed<msg::GetObjectReply>&) { BOOST_FAIL("get answered"); },
        [](const caf::error& err) {
          BOOST_CHECK(err == ec::unsupported);
          BOOST_CHECK(describe(err).find("ram-tier.objects")
                      != std::string::npos);
        });
  };
  refused(no_objects);
  refused(facade);
  BOOST_CHECK_EQUAL(deref<ram_impl>(no_objects).state.tier->bytes(), 0u);
}

BOOST_AUTO_TEST_SUITE_END()
