// Object files (docs/ssd-format.md, "Object files"): exact tensor objects
// stored as attachments under key kind object, found by exact key only,
// restored bit-exact after a restart, served from the write-behind queue
// while their write is pending, erased with their pending writes. Every
// test runs on every backend (file system x I/O engine).
#define BOOST_TEST_MODULE ssd_objects
#include "tests/ssd/ssd_fixture.hpp"

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

/// `n` bytes, byte i = (i * 7 + salt) mod 251.
view pattern(size_t n, uint8_t salt) {
  buffer_builder b(n);
  for (size_t i = 0; i < n; ++i)
    b.data()[i] = std::byte(static_cast<uint8_t>((i * 7 + salt) % 251));
  auto buf = std::move(b).freeze();
  return view{buf, 0, n};
}

/// An object's entry: tensors of several sizes (one split in two segments,
/// one empty) under `key`.
entry object(const std::string& key, uint8_t salt = 1) {
  entry e;
  e.ns = key;
  auto big = pattern(3 * 4096 + 17, salt);
  auto half = big.length / 2;
  e.attachments = {
    {"pixels",
     {view{big.buf, 0, half}, view{big.buf, half, big.length - half}}},
    {"cls", {pattern(33, static_cast<uint8_t>(salt + 1))}},
    {"none", {}}};
  return e;
}

void check_same(const std::vector<attachment>& got,
                const std::vector<attachment>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST(got[i].name == want[i].name);
    BOOST_TEST((flatten(got[i].segments) == flatten(want[i].segments)));
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(an_object_file_restores_bit_exact_after_a_restart) {
  on_every_backend([](world& w) {
    auto key = storage_key::object("image-1");
    auto o = object("image-1");
    BOOST_REQUIRE(w.tier->enqueue(o, write_reason::spill, key));
    BOOST_TEST(!w.tier->contains(key)); // pending: not on SSD
    BOOST_TEST(w.flush().durable);
    BOOST_TEST(w.tier->contains(key));
    auto r = w.reopen();
    BOOST_TEST(r.loaded == 1u);
    auto m = w.tier->find(key);
    BOOST_REQUIRE(m);
    BOOST_TEST(m->length == 0u);
    auto e = w.restore(*m);
    BOOST_REQUIRE(e);
    BOOST_TEST(e->ns == "image-1");
    BOOST_TEST(e->tokens.empty());
    BOOST_TEST(e->layers.empty());
    check_same(e->attachments, o.attachments);
    BOOST_TEST(w.tier->stats().restores_ok == 1u);
  });
}

BOOST_AUTO_TEST_CASE(an_object_is_found_by_its_exact_key_only) {
  // A prefix in a namespace named like the object, and a checkpoint of
  // that namespace: three files, none found as another.
  runtime::oracle_engine oracle{*model_geometry::preset("tiny-dense")};
  on_every_backend([&](world& w) {
    auto prefix = oracle.prefill("image-1", tokens(8));
    w.store(prefix);
    BOOST_REQUIRE(w.tier->enqueue(object("image-1"), write_reason::snapshot,
                                  storage_key::object("image-1")));
    BOOST_TEST(w.flush().durable);
    for (int restart = 0; restart < 2; ++restart) {
      auto m = w.tier->find(tokens(9), "image-1");
      BOOST_REQUIRE(m);
      BOOST_TEST((m->header->kind == key_kind::prefix));
      BOOST_TEST(!w.tier->find(token_seq{}, "image-1"));
      auto saved = w.tier->saved_prefixes();
      BOOST_REQUIRE_EQUAL(saved.size(), 1u);
      BOOST_TEST(saved[0].tokens == tokens(8));
      BOOST_TEST(w.tier->checkpoint_files().empty());
      BOOST_TEST(!w.tier->find(storage_key::object("image-2")));
      auto om = w.tier->find(storage_key::object("image-1"));
      BOOST_REQUIRE(om);
      BOOST_TEST((om->header->kind == key_kind::object));
      BOOST_TEST(w.tier->stats().files == 2u);
      w.reopen();
    }
  });
}

BOOST_AUTO_TEST_CASE(a_pending_object_write_is_served_from_the_queue) {
  on_every_backend([](world& w) {
    auto key = storage_key::object("image-1");
    auto o = object("image-1");
    BOOST_TEST(!w.tier->queued(key));
    BOOST_REQUIRE(w.tier->enqueue(o, write_reason::spill, key));
    auto q = w.tier->queued(key);
    BOOST_REQUIRE(q);
    check_same(q->attachments, o.attachments);
    // The same buffers, no copy.
    BOOST_TEST(q->attachments[0].segments[0].buf
               == o.attachments[0].segments[0].buf);
    // A newer write of the key is the one served.
    auto o2 = object("image-1", 9);
    BOOST_REQUIRE(w.tier->enqueue(o2, write_reason::spill, key));
    check_same(w.tier->queued(key)->attachments, o2.attachments);
    BOOST_TEST(w.flush().durable);
    BOOST_TEST(!w.tier->queued(key)); // written: the file serves it now
    auto e = w.restore(*w.tier->find(key));
    BOOST_REQUIRE(e);
    check_same(e->attachments, o2.attachments);
  });
}

BOOST_AUTO_TEST_CASE(an_erased_object_leaves_no_file_and_no_pending_write) {
  on_every_backend([](world& w) {
    auto key = storage_key::object("image-1");
    BOOST_REQUIRE(w.tier->enqueue(object("image-1"), write_reason::spill, key));
    BOOST_TEST(w.flush().durable);
    BOOST_REQUIRE(w.tier->enqueue(object("image-1", 5), write_reason::spill,
                                  key)); // running or queued
    BOOST_TEST(w.tier->erase(key));
    BOOST_TEST(!w.tier->find(key));
    BOOST_TEST(!w.tier->queued(key));
    BOOST_TEST(w.flush().durable); // cancelled is not dropped
    BOOST_TEST(w.files().empty());
    w.reopen();
    BOOST_TEST(!w.tier->find(key));
    BOOST_TEST(!w.tier->erase(key));
  });
}

BOOST_AUTO_TEST_CASE(an_object_file_is_not_checked_against_the_model) {
  // The model's geometry describes prefix state; an object is attachments
  // alone, which no geometry describes: written, indexed and restored
  // under any model.
  ssd_config cfg;
  cfg.model = model_identity{every_kind(), "test"};
  on_every_backend(
    [](world& w) {
      auto key = storage_key::object("image-1");
      auto o = object("image-1");
      BOOST_REQUIRE(w.tier->enqueue(o, write_reason::spill, key));
      BOOST_TEST(w.flush().durable);
      auto r = w.reopen();
      BOOST_TEST(r.loaded == 1u);
      BOOST_TEST(r.mismatched == 0u);
      auto e = w.restore(*w.tier->find(key));
      BOOST_REQUIRE(e);
      check_same(e->attachments, o.attachments);
    },
    cfg);
}

BOOST_AUTO_TEST_CASE(
  an_object_entry_with_tokens_layers_or_a_session_is_refused) {
  runtime::oracle_engine oracle{*model_geometry::preset("tiny-dense")};
  on_every_backend([&](world& w) {
    auto key = storage_key::object("k");
    auto with_tokens = object("k");
    with_tokens.tokens = {1, 2};
    auto with_layers = oracle.prefill("k", tokens(2));
    with_layers.tokens.clear();
    auto with_session = object("k");
    with_session.session = "s";
    auto owner = key;
    owner.request = 3;
    for (auto* e : {&with_tokens, &with_layers, &with_session}) {
      auto r = w.tier->enqueue(*e, write_reason::spill, key);
      BOOST_REQUIRE(!r);
      BOOST_TEST((r.error() == ec::invalid_argument));
    }
    auto r = w.tier->enqueue(object("k"), write_reason::spill, owner);
    BOOST_REQUIRE(!r);
    BOOST_TEST(describe(r.error()).find("names a request")
               != std::string::npos);
    BOOST_TEST(w.tier->stats().queue_items == 0u);
  });
}
