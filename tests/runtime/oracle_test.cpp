#define BOOST_TEST_MODULE runtime_oracle
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"

#include <chrono>
#include <numeric>

using namespace kvtier;
using namespace kvtier::tiers;
using kvtier::runtime::oracle_engine;

namespace {

token_seq iota_tokens(size_t n, token first = 1) {
  token_seq t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

const char* families[] = {"tiny-dense", "tiny-window", "tiny-hybrid"};

} // namespace

BOOST_AUTO_TEST_CASE(prefill_is_deterministic_and_verifies) {
  for (auto name : families) {
    oracle_engine eng(model_geometry::preset(name).value(), 16);
    auto t = iota_tokens(40);
    auto a = eng.prefill("ns", t);
    auto b = eng.prefill("ns", t);
    for (size_t l = 0; l < a.layers.size(); ++l)
      BOOST_TEST(flatten(a.layers[l].segments) == flatten(b.layers[l].segments),
                 name << " layer " << l);
    BOOST_TEST(!eng.verify(a), name);
  }
}

BOOST_AUTO_TEST_CASE(a_served_state_must_belong_to_its_prompt) {
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto prompt = iota_tokens(40);
  auto prefix = eng.prefill("ns", iota_tokens(30));
  BOOST_TEST(!eng.verify_served(prefix, "ns", prompt, false));
  // Another namespace, another prompt, the whole prompt (nothing left to
  // forward): right bytes, wrong request.
  BOOST_TEST(
    static_cast<bool>(eng.verify_served(prefix, "other", prompt, false)));
  BOOST_TEST(static_cast<bool>(
    eng.verify_served(prefix, "ns", iota_tokens(40, 2), false)));
  auto whole = eng.prefill("ns", prompt);
  BOOST_TEST(static_cast<bool>(eng.verify_served(whole, "ns", prompt, false)));
  // A checkpoint must extend the whole prompt.
  auto generated = eng.prefill("ns", iota_tokens(60));
  BOOST_TEST(!eng.verify_served(generated, "ns", prompt, true));
  BOOST_TEST(!eng.verify_served(whole, "ns", prompt, true));
  BOOST_TEST(static_cast<bool>(eng.verify_served(prefix, "ns", prompt, true)));
  BOOST_TEST(static_cast<bool>(
    eng.verify_served(generated, "ns", iota_tokens(40, 3), true)));
}

BOOST_AUTO_TEST_CASE(state_depends_on_namespace_and_every_token) {
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto t = iota_tokens(10);
  auto a = eng.prefill("ns-a", t);
  auto b = eng.prefill("ns-b", t);
  BOOST_TEST(flatten(a.layers[0].segments) != flatten(b.layers[0].segments));
  // Served under the wrong namespace, the bytes must not verify.
  b.ns = "ns-a";
  BOOST_TEST(static_cast<bool>(eng.verify(b)));
  auto t2 = t;
  t2[0] = 999; // changing the first token changes every row after it
  auto c = eng.prefill("ns-a", t2);
  auto fa = flatten(a.layers[0].segments);
  auto fc = flatten(c.layers[0].segments);
  for (size_t row = 0; row < 10; ++row)
    BOOST_TEST(!std::equal(fa.begin() + row * 64, fa.begin() + row * 64 + 64,
                           fc.begin() + row * 64));
}

BOOST_AUTO_TEST_CASE(a_salt_makes_another_models_bytes_of_the_same_shape) {
  auto g = model_geometry::preset("tiny-hybrid").value();
  oracle_engine plain(g), a(g, 0, 7), b(g, 0, 8);
  auto t = iota_tokens(30);
  auto sa = a.prefill("ns", t);
  BOOST_TEST(!a.verify(sa));
  BOOST_TEST(static_cast<bool>(b.verify(sa)));
  BOOST_TEST(static_cast<bool>(plain.verify(sa)));
  BOOST_TEST(static_cast<bool>(a.verify(plain.prefill("ns", t))));
  // Extension keeps the salt; generated tokens ignore it.
  auto ext = a.extend(a.prefill("ns", iota_tokens(20)), t);
  BOOST_REQUIRE(ext);
  BOOST_TEST(!a.verify(*ext));
  BOOST_TEST(a.generate("ns", t, 8) == plain.generate("ns", t, 8));
}

BOOST_AUTO_TEST_CASE(extension_equals_fresh_prefill_for_every_family) {
  for (auto name : families) {
    oracle_engine eng(model_geometry::preset(name).value(), 8);
    auto t = iota_tokens(50, 7);
    for (size_t p : {1u, 5u, 15u, 16u, 17u, 30u, 50u}) {
      auto donor = eng.prefill("ns", std::span{t}.first(p));
      auto ext = eng.extend(donor, t);
      BOOST_REQUIRE(ext);
      auto fresh = eng.prefill("ns", t);
      for (size_t l = 0; l < fresh.layers.size(); ++l)
        BOOST_TEST(flatten(ext->layers[l].segments)
                     == flatten(fresh.layers[l].segments),
                   name << " p=" << p << " layer " << l);
      BOOST_TEST(!eng.verify(*ext), name << " p=" << p);
    }
  }
}

BOOST_AUTO_TEST_CASE(verify_names_the_first_wrong_byte) {
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto e = eng.prefill("ns", iota_tokens(8));
  // Replace layer 1 with a copy that has one byte flipped in row 5.
  auto bytes = flatten(e.layers[1].segments);
  bytes[5 * 64 + 3] ^= std::byte{1};
  e.layers[1].segments = {view::of(buffer::copy_of(bytes))};
  auto err = eng.verify(e);
  BOOST_REQUIRE(err);
  BOOST_TEST(static_cast<ec>(err.code()) == ec::corrupt_data);
  BOOST_TEST(describe(err).find("layer 1") != std::string::npos);
  BOOST_TEST(describe(err).find("row 5, byte 3") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(verify_rejects_a_ring_served_in_the_wrong_slot_order) {
  oracle_engine eng(model_geometry::preset("tiny-window").value());
  auto e = eng.prefill("ns", iota_tokens(20)); // window 16: wrapped
  auto bytes = flatten(e.layers[0].segments);
  std::rotate(bytes.begin(), bytes.begin() + 32, bytes.end());
  e.layers[0].segments = {view::of(buffer::copy_of(bytes))};
  BOOST_TEST(static_cast<bool>(eng.verify(e)));
}

BOOST_AUTO_TEST_CASE(extend_refuses_a_state_that_is_not_a_prefix) {
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto donor = eng.prefill("ns", token_seq{1, 2, 3});
  auto r = eng.extend(donor, token_seq{1, 9, 3, 4});
  BOOST_REQUIRE(!r);
  BOOST_TEST(static_cast<ec>(r.error().code()) == ec::invalid_argument);
}

BOOST_AUTO_TEST_CASE(prefill_cost_grows_linearly_not_quadratically) {
  // Counted in work, not time: extending N tokens in steps of 64 must write
  // each row once, so the bytes allocated equal N rows, not N^2/2.
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto t = iota_tokens(4096);
  auto e = eng.prefill("ns", std::span{t}.first(64));
  for (size_t n = 128; n <= t.size(); n += 64)
    e = eng.extend(e, std::span{t}.first(n)).value();
  std::vector<buffer_ref> bufs;
  collect_buffers(e, bufs);
  uint64_t held = 0;
  for (auto& b : bufs)
    held += b->size();
  BOOST_TEST(held == 4096ull * 64 * 4);
  BOOST_TEST(!eng.verify(e));
}

BOOST_AUTO_TEST_CASE(generate_is_a_pure_function_of_the_prefix) {
  oracle_engine eng(model_geometry::preset("tiny-dense").value());
  auto t = iota_tokens(5);
  auto a = eng.generate("ns", t, 20, 100);
  BOOST_TEST(a == eng.generate("ns", t, 20, 100));
  BOOST_TEST(a != eng.generate("other", t, 20, 100));
  for (auto x : a)
    BOOST_TEST(x < 100u);
  // Generating 10 then 10 more equals generating 20.
  auto first = eng.generate("ns", t, 10, 100);
  auto cont = t;
  cont.insert(cont.end(), first.begin(), first.end());
  auto second = eng.generate("ns", cont, 10, 100);
  first.insert(first.end(), second.begin(), second.end());
  BOOST_TEST(first == a);
}
