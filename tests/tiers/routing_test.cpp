// The routing cost model (tiers/routing.hpp): a prompt goes where its
// prefix is (RAM before SSD before a peer fetch), each node's own lookup
// is the strictly-longer rule, a node with nothing may still fetch the
// longest copy another node holds, ties go to the less loaded node, a node
// without headroom pays the full penalty, and the recent load decays over
// the window.
#define BOOST_TEST_MODULE tiers_routing
#include <boost/test/unit_test.hpp>

#include "tiers/routing.hpp"

#include <ostream>
#include <vector>

using namespace kvtier::tiers;

namespace kvtier::tiers {
std::ostream& operator<<(std::ostream& os, route_tier t) {
  return os << to_string(t);
}
} // namespace kvtier::tiers

namespace {

route_node node(const char* id, uint64_t ram, uint64_t ssd, bool full = false) {
  return route_node{id, "", ram, ssd, full};
}

route_ranking rank(const std::vector<route_node>& n, uint64_t p,
                   std::vector<double> recent = {}, route_costs c = {}) {
  return evaluate(c, n, recent, p);
}

} // namespace

BOOST_AUTO_TEST_CASE(the_node_holding_the_longest_prefix_wins) {
  auto r = rank({node("a", 100, 0), node("b", 900, 0), node("c", 0, 0)}, 1000);
  BOOST_TEST(r.best == 1);
  BOOST_TEST(r.nodes[1].tier == route_tier::ram);
  BOOST_TEST(r.nodes[1].usable == 900u);
  BOOST_TEST(r.nodes[1].cost == 100.0); // 100 tokens to prefill, RAM free
  // a and c would fetch b's copy: 100 prefilled + 900 fetched at 0.2.
  BOOST_TEST(r.nodes[0].tier == route_tier::peer_ram);
  BOOST_TEST(r.nodes[0].from == 1);
  BOOST_TEST(r.nodes[2].cost == 100.0 + 0.2 * 900);
}

BOOST_AUTO_TEST_CASE(each_node_applies_the_strictly_longer_rule) {
  // Its own SSD only when strictly longer than its RAM; a peer only when
  // strictly longer than both.
  auto r = rank({node("a", 500, 500), node("b", 0, 600)}, 1000);
  BOOST_TEST(r.nodes[0].tier == route_tier::peer_ssd);
  BOOST_TEST(r.nodes[0].usable == 600u);
  BOOST_TEST(r.nodes[1].tier == route_tier::ssd);
  BOOST_TEST(r.nodes[1].cost == 400.0 + 0.1 * 600);
  BOOST_TEST(r.best == 1);
  r = rank({node("a", 500, 500), node("b", 0, 500)}, 1000);
  BOOST_TEST(r.nodes[0].tier == route_tier::ram); // equal SSD: RAM stays
  BOOST_TEST(r.nodes[1].tier == route_tier::ssd); // a's copy is not longer
  BOOST_TEST(r.best == 0);
}

BOOST_AUTO_TEST_CASE(the_best_peer_copy_is_another_nodes) {
  // The longest holder's own best peer copy is the second longest.
  auto r = rank({node("a", 800, 0), node("b", 0, 300), node("c", 0, 0)}, 1000);
  BOOST_TEST(r.nodes[0].tier == route_tier::ram);
  BOOST_TEST(r.nodes[1].tier == route_tier::peer_ram);
  BOOST_TEST(r.nodes[1].from == 0);
  BOOST_TEST(r.nodes[2].from == 0);
  r = rank({node("a", 800, 0), node("b", 0, 0)}, 1000);
  BOOST_TEST(r.nodes[1].usable == 800u);
  BOOST_TEST(rank({node("a", 800, 0)}, 1000).nodes[0].from == -1);
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_less_loaded_node_then_the_first) {
  auto r = rank({node("a", 0, 0), node("b", 0, 0)}, 100, {50, 10});
  BOOST_TEST(r.best == 1);
  BOOST_TEST(r.nodes[0].cost == 100 + 0.1 * 50);
  r = rank({node("a", 0, 0), node("b", 0, 0)}, 100, {0, 0});
  BOOST_TEST(r.best == 0);
  BOOST_TEST(rank({}, 100).best == -1);
}

BOOST_AUTO_TEST_CASE(load_outweighs_a_prefix_only_past_its_worth) {
  // a would fetch b's 500 tokens at 0.2 each: b's advantage is 100
  // equivalents, which 1000 tokens of recent load (at 0.1) cancel.
  std::vector<route_node> n{node("a", 0, 0), node("b", 500, 0)};
  BOOST_TEST(rank(n, 1000, {0, 999}).best == 1);
  BOOST_TEST(rank(n, 1000, {0, 1001}).best == 0);
}

BOOST_AUTO_TEST_CASE(a_node_without_headroom_pays_the_full_penalty) {
  auto r = rank({node("a", 900, 0, true), node("b", 0, 0)}, 1000);
  BOOST_TEST(r.nodes[0].cost == 100.0 + 1000.0);
  BOOST_TEST(r.best == 1); // fetching a's copy: 100 + 180
  BOOST_TEST(r.nodes[1].tier == route_tier::peer_ram);
}

BOOST_AUTO_TEST_CASE(every_knob_moves_the_figures) {
  route_costs c;
  c.prefill = 2;
  c.ssd = 0.5;
  c.load_weight = 1;
  auto r = rank({node("a", 0, 400)}, 1000, {10}, c);
  BOOST_TEST(r.nodes[0].cost == 2.0 * 600 + 0.5 * 400 + 10);
}

BOOST_AUTO_TEST_CASE(the_recent_load_decays_over_its_window) {
  route_load l{4};
  l.record("a", 100);
  BOOST_TEST(l.recent("a") == 100.0);
  l.record("b", 100);
  BOOST_TEST(l.recent("a") == 75.0);
  BOOST_TEST(l.recent("b") == 100.0);
  BOOST_TEST(l.recent("c") == 0.0);
  l.forget("a");
  BOOST_TEST(l.recent("a") == 0.0);
  // Alternating decisions keep two nodes close; one node's figure
  // converges to tokens x window.
  route_load one{4};
  for (int i = 0; i < 200; ++i)
    one.record("a", 10);
  BOOST_TEST(one.recent("a") == 40.0, boost::test_tools::tolerance(1e-6));
}
