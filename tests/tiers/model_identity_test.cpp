#define BOOST_TEST_MODULE tiers_model_identity
#include <boost/test/unit_test.hpp>

#include "runtime/tools/oracle.hpp"
#include "tiers/model_identity.hpp"

#include <set>

using namespace kvtier;
using namespace kvtier::tiers;

namespace {

model_geometry preset(const std::string& name, double scale = 1.0) {
  return model_geometry::preset(name, scale).value();
}

std::string error_of(const caf::error& err) {
  return err ? describe(err) : std::string{};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(layer_descriptions_read_every_kind_and_repeat) {
  auto g = model_geometry::parse_layers(
    " 2*(ring:8:16, kv:8), recurrent:256,object:64,3*kv:4");
  BOOST_REQUIRE_MESSAGE(g, (g ? std::string{} : error_of(g.error())));
  BOOST_TEST(g->name == "custom");
  BOOST_REQUIRE(g->layers.size() == 9u);
  BOOST_TEST((g->layers[0] == layer_spec{layer_kind::ring, 8, 16, 0}));
  BOOST_TEST((g->layers[1] == layer_spec{layer_kind::kv, 8, 0, 0}));
  BOOST_TEST((g->layers[2] == g->layers[0]));
  BOOST_TEST((g->layers[4] == layer_spec{layer_kind::recurrent, 0, 0, 256}));
  BOOST_TEST((g->layers[5] == layer_spec{layer_kind::object, 0, 0, 64}));
  BOOST_TEST((g->layers[8] == layer_spec{layer_kind::kv, 4, 0, 0}));
}

BOOST_AUTO_TEST_CASE(layer_description_errors_name_position_and_expectation) {
  auto at = [](const std::string& text) {
    auto g = model_geometry::parse_layers(text);
    BOOST_REQUIRE(!g);
    BOOST_TEST((g.error() == ec::invalid_config));
    return describe(g.error());
  };
  BOOST_TEST(contains(at(""), "at character 1"));
  BOOST_TEST(contains(at("kv:"), "at character 4"));
  BOOST_TEST(contains(at("kv:"), "the bytes per token"));
  BOOST_TEST(contains(at("ring:8"), "':' and the window"));
  BOOST_TEST(contains(at("kv:8;kv:8"), "at character 5"));
  BOOST_TEST(contains(at("kv:8;kv:8"), "',' or the end"));
  BOOST_TEST(contains(at("0*kv:8"), "a repeat count (a positive number)"));
  BOOST_TEST(contains(at("3 kv:8"), "at character 3"));
  BOOST_TEST(contains(at("3 kv:8"), "'*' after the repeat count 3"));
  BOOST_TEST(contains(at("kv:99999999999"), "from 1 to 4294967295"));
  BOOST_TEST(contains(at("70000*kv:8"), "at most 65536 layers"));
  BOOST_TEST(contains(at("((((((((kv:1))))))))"), "levels of parentheses"));
  BOOST_TEST(contains(at("(kv:8"), "expected ')' or ','"));
}

BOOST_AUTO_TEST_CASE(layers_text_folds_runs_and_periods_and_parses_back) {
  BOOST_TEST(preset("llama-3.1-8b").layers_text() == "32*kv:4096");
  BOOST_TEST(preset("gemma-3-12b", 1.0 / 1024).layers_text()
             == "8*(5*ring:8:1024,kv:8)");
  BOOST_TEST(preset("tiny-hybrid").layers_text() == "3*recurrent:256,kv:32");
  BOOST_TEST(preset("tiny-window").layers_text() == "2*ring:32:16,kv:32");
  for (auto& name : model_geometry::preset_names()) {
    auto g = preset(name, 1.0 / 16);
    auto back = model_geometry::parse_layers(g.layers_text());
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(back);
      BOOST_TEST((back->layers == g.layers));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_fingerprint_changes_with_every_part_of_the_identity) {
  model_identity base{preset("llama-3.1-8b", 1.0 / 64), "weights=a kv=bf16"};
  auto fp = base.fingerprint();
  BOOST_TEST(fp.rfind("llama-3.1-8b-", 0) == 0u);
  BOOST_TEST(fp.size() == std::string{"llama-3.1-8b-"}.size() + 32);
  BOOST_TEST(model_identity{base}.fingerprint() == fp); // stable
  std::set<std::string> seen{fp};
  auto differs = [&](model_identity m, const char* what) {
    BOOST_TEST_CONTEXT(what) {
      BOOST_TEST(seen.insert(m.fingerprint()).second);
    }
  };
  differs({preset("llama-3.1-8b", 1.0 / 128), base.identity}, "scale");
  differs({base.geometry, "weights=a kv=fp8"}, "identity string");
  differs({base.geometry, ""}, "no identity string");
  auto one_layer = base;
  one_layer.geometry.layers[31].bytes_per_token += 1;
  differs(one_layer, "one layer's bytes per token");
  auto kind = base;
  kind.geometry.layers[3].kind = layer_kind::ring;
  kind.geometry.layers[3].window = 4096;
  differs(kind, "one layer's kind");
  auto window = kind;
  window.geometry.layers[3].window = 2048;
  differs(window, "one ring's window");
  auto fewer = base;
  fewer.geometry.layers.pop_back();
  differs(fewer, "layer count");
  auto renamed = base;
  renamed.geometry.name = "Other Model/v2";
  differs(renamed, "name");
  BOOST_TEST(renamed.fingerprint().rfind("other-model-v2-", 0) == 0u);
  auto recurrent = model_identity{preset("tiny-hybrid"), ""};
  auto bigger = recurrent;
  bigger.geometry.layers[0].state_bytes = 512;
  BOOST_TEST(recurrent.fingerprint() != bigger.fingerprint());
  // Fields a kind does not use do not count.
  auto noise = base;
  noise.geometry.layers[0].window = 77;
  noise.geometry.layers[0].state_bytes = 5;
  BOOST_TEST(noise.fingerprint() == fp);
}

BOOST_AUTO_TEST_CASE(the_description_states_the_identity_in_words) {
  model_identity m{preset("gemma-3-12b", 1.0 / 1024), "gemma kv=bf16"};
  auto text = m.describe();
  BOOST_TEST(contains(text, "fingerprint: " + m.fingerprint() + "\n"));
  BOOST_TEST(contains(text, "name: gemma-3-12b\n"));
  BOOST_TEST(contains(text, "identity: gemma kv=bf16\n"));
  BOOST_TEST(contains(text, "layers: 8*(5*ring:8:1024,kv:8)\n"));
  BOOST_TEST(contains(model_identity{preset("tiny-dense"), ""}.describe(),
                      "identity: (none given)\n"));
}

BOOST_AUTO_TEST_CASE(the_check_names_the_layer_and_the_field) {
  auto g = preset("tiny-window"); // ring 32/16, ring 32/16, kv 32
  runtime::oracle_engine oracle{g};
  auto e = oracle.prefill("ns", token_seq{1, 2, 3});
  BOOST_TEST(!g.check(e));
  auto wrong = [&](model_geometry other, const std::string& want) {
    auto err =
      g.check(runtime::oracle_engine{other}.prefill("ns", token_seq{1, 2, 3}));
    BOOST_TEST_CONTEXT(want) {
      BOOST_TEST((err == ec::invalid_argument));
      BOOST_TEST(contains(error_of(err), want), error_of(err));
    }
  };
  auto window = g;
  window.layers[1].window = 8;
  wrong(window, "layer 1 (ring): window 8, the model's is 16");
  auto bpt = g;
  bpt.layers[2].bytes_per_token = 16;
  wrong(bpt, "layer 2 (kv): bytes per token 16, the model's is 32");
  auto kind = g;
  kind.layers[0] = {layer_kind::kv, 32, 0, 0};
  wrong(kind, "layer 0: kind kv, the model's is ring");
  auto fewer = g;
  fewer.layers.pop_back();
  wrong(fewer, "the state has 2 layers, the model (tiny-window) has 3");
  // Recurrent sizes, and what each kind leaves zero.
  auto h = preset("tiny-hybrid");
  auto he = runtime::oracle_engine{h}.prefill("ns", token_seq{1, 2});
  BOOST_TEST(!h.check(he));
  auto small = h;
  small.layers[1].state_bytes = 128;
  auto se = runtime::oracle_engine{small}.prefill("ns", token_seq{1, 2});
  BOOST_TEST(contains(error_of(h.check(se)),
                      "layer 1 (recurrent): state bytes 128, the model's is "
                      "256"));
  auto kv_window = he;
  kv_window.layers[3].window = 4;
  BOOST_TEST(contains(error_of(h.check(kv_window)),
                      "layer 3 (kv): window 4, the model's is 0"));
  // Attachments are the producing method's: not part of the geometry.
  auto with_draft =
    runtime::oracle_engine{g, 24}.prefill("ns", token_seq{1, 2, 3});
  BOOST_TEST(!g.check(with_draft));
}
