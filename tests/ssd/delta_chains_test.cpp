// The SSD tier's delta chains on their own: which files are held against
// eviction and supersession, which go with a parent, and which rows a
// buffer is known to hold.
#define BOOST_TEST_MODULE ssd_delta_chains
#include "tiers/ssd/delta_chains.hpp"

#include <boost/test/unit_test.hpp>

using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;

namespace {

ssd_file file_of(std::string name, std::string parent = {}) {
  auto h = std::make_shared<entry_header>();
  h->parent = std::move(parent);
  return ssd_file{std::move(name), std::move(h), 0};
}

} // namespace

BOOST_AUTO_TEST_CASE(a_parent_is_held_while_a_child_or_a_write_needs_it) {
  delta_chains chains{true, 8};
  BOOST_TEST(!chains.held("p"));
  auto child = file_of("c", "p");
  chains.link(child);
  BOOST_TEST(chains.held("p"));
  BOOST_TEST(!chains.held("c"));
  chains.unlink("c", *child.header);
  BOOST_TEST(!chains.held("p"));
  // A delta write in flight pins its parent, once per write.
  chains.pin("p");
  chains.pin("p");
  chains.unpin("p");
  BOOST_TEST(chains.held("p"));
  chains.unpin("p");
  BOOST_TEST(!chains.held("p"));
}

BOOST_AUTO_TEST_CASE(a_leaving_parent_hands_over_its_children_once) {
  delta_chains chains{true, 8};
  chains.link(file_of("c1", "p"));
  chains.link(file_of("c2", "p"));
  chains.link(file_of("g", "c1"));
  auto children = chains.take_children("p");
  BOOST_TEST(children.size() == 2u);
  BOOST_TEST(children.count("c1") == 1u);
  BOOST_TEST(!chains.held("p"));
  BOOST_TEST(chains.take_children("p").empty());
  BOOST_TEST(chains.held("c1")); // its own child still needs it
}

BOOST_AUTO_TEST_CASE(whole_files_are_never_delta_candidates_when_disabled) {
  ssd_index index;
  entry e;
  e.ns = "ns";
  e.tokens = {1, 2, 3};
  BOOST_TEST(!delta_chains(false, 8).choose(index, e).parent);
  BOOST_TEST(!delta_chains(true, 1).choose(index, e).parent); // chain of 1
  BOOST_TEST(!delta_chains(true, 8).choose(index, e).parent); // nothing shared
}
