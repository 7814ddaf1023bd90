// The SSD index's estimate of what it holds in RAM (`approx_bytes`, the
// report's `ssd.index_bytes`): it grows with each indexed file by at least
// the file's record and header and by 4 bytes per token the tree did not
// hold yet (a key that extends an indexed one adds only its new tokens),
// follows a replace, and falls back to about the empty index's figure when
// every file is gone, whichever way it went.
#define BOOST_TEST_MODULE ssd_index
#include "tiers/ssd/ssd_index.hpp"

#include <boost/test/unit_test.hpp>

using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

ssd_file prefix_file(std::string name, token_seq tokens, size_t layers = 32) {
  auto h = std::make_shared<entry_header>();
  h->ns = "ns";
  h->token_count = tokens.size();
  h->tokens = std::move(tokens);
  h->layers.resize(layers);
  return ssd_file{std::move(name), std::move(h), 1000};
}

token_seq run(token from, size_t n) {
  token_seq out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = from + static_cast<token>(i);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_estimate_follows_what_is_indexed) {
  ssd_index index;
  auto empty = index.approx_bytes();
  index.insert(prefix_file("a", run(0, 1000)));
  auto one = index.approx_bytes();
  // The record, the header with its 32 layer descriptions, the names, and
  // the key's 1000 tokens once.
  BOOST_TEST(one >= empty + 1000 * sizeof(token) + 32 * sizeof(layer_info));
  BOOST_TEST(one
             < empty + 1000 * sizeof(token) + 32 * sizeof(layer_info) + 2048);
  // A longer key sharing the first's 1000 tokens adds its 500 new ones and
  // a record, not 1500 tokens.
  auto longer = run(0, 1500);
  index.insert(prefix_file("b", longer));
  auto two = index.approx_bytes();
  BOOST_TEST(two - one >= 500 * sizeof(token) + 32 * sizeof(layer_info));
  BOOST_TEST(two - one < 500 * sizeof(token) + 32 * sizeof(layer_info) + 2048);
  // Replacing "b" by a file of the same name and fewer layers: the old
  // record leaves with it.
  index.insert(prefix_file("b", longer, 1));
  BOOST_TEST(index.approx_bytes() < two);
  BOOST_TEST(index.approx_bytes() > one);
  // Erased (one by name, the other replaced by a file of the same key
  // under another name, then erased): back to the empty figure.
  index.erase("a");
  index.insert(prefix_file("c", longer));
  BOOST_TEST(index.size() == 1u);
  index.erase("c");
  BOOST_TEST(index.size() == 0u);
  // (The namespace's root node may stay.)
  BOOST_TEST(index.approx_bytes() < empty + 512);
}
