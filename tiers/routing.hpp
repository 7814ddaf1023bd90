// routing: which node of a cluster should serve a request (docs/cluster.md
// "Routing"). Plain values in, a ranking out; the facade (actors/
// cache_service_route.cpp) gathers what each node holds and how loaded it
// is, this file weighs them. No I/O, no clocks, no threads.
//
// Cost model, in prefill-token equivalents (route.* options). For node n
// and a prompt of P tokens:
//
//   cost(n) = prefill * (P - u) + c(tier) * u          the request's work
//           + load-weight * recent(n)                   how busy n is
//           + full-penalty * P   if n has no headroom   (queued admits, or
//                                                        too little budget)
//
// where u is the prefix n would reuse and tier where it comes from, chosen
// as n's own lookup chooses (the strictly-longer rule, tier by tier:
// docs/actors.md "Cold tiers"): n's RAM prefix, then its SSD prefix if strictly
// longer, then the longest prefix any *other* node holds (a peer fetch) if
// strictly longer again. c(tier) is ram-cost, ssd-cost, peer-cost (a peer's RAM
// copy) or peer-ssd-cost (a peer's SSD copy). recent(n) is the prompt tokens
// this router sent to n lately: an exponential average over its last
// ~load-window decisions (each decision scales every node's figure by
// 1 - 1/window and adds P to the chosen one), so new conversations spread
// while a continuing one stays where its state is, unless that node got
// far more work than the others. Ties go to the smaller recent(n), then to
// the earlier node in the list (the asking node comes first).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kvtier::tiers {

/// Where a node's reused prefix would come from.
enum class route_tier : uint8_t { none, ram, ssd, peer_ram, peer_ssd };

const char* to_string(route_tier t);

/// The knobs of the cost model: the route.* options, which the service
/// sets (runtime/service/spawn.cpp); these defaults are for tests and equal
/// the shipped ones (checked by tests/runtime/options_test.cpp).
struct route_costs {
  double prefill = 1.0;
  double ram = 0.0;
  double ssd = 0.1;
  double peer = 0.2;
  double peer_ssd = 0.3;
  double load_weight = 0.1;
  double full_penalty = 1.0;
  uint64_t load_window = 64;
};

/// What one node can offer a request.
struct route_node {
  std::string node_id;
  std::string address;
  /// Longest usable prefix of the prompt in its RAM and on its SSD.
  uint64_t ram_tokens = 0;
  uint64_t ssd_tokens = 0;
  /// It lacks admission headroom for the request (queued admits, or its
  /// free budget is below the request's projected bytes).
  bool full = false;
};

/// One node's figures for one request.
struct route_eval {
  route_tier tier = route_tier::none;
  /// Prefix tokens it would reuse.
  uint64_t usable = 0;
  /// The node whose copy a peer fetch would take (tier peer_*), else -1.
  int64_t from = -1;
  double cost = 0;
  double recent = 0;
};

/// `evaluate`'s answer: every node's figures and the cheapest one.
struct route_ranking {
  std::vector<route_eval> nodes;
  /// Index into `nodes`; -1 when there are none.
  int64_t best = -1;
};

/// Weighs every node of `nodes` for a prompt of `prompt_tokens` tokens;
/// `recent[i]` is node i's recent load (missing entries: 0).
route_ranking evaluate(const route_costs& c, std::span<const route_node> nodes,
                       std::span<const double> recent, uint64_t prompt_tokens);

/// The recent load per node as one router saw it (its own decisions).
class route_load {
public:
  explicit route_load(uint64_t window = 64);

  /// Node `node`'s figure (0 when unknown).
  double recent(const std::string& node) const;

  /// One decision: every figure decays by 1 - 1/window, `node` gains
  /// `tokens`.
  void record(const std::string& node, uint64_t tokens);

  /// Forgets a node (it went down).
  void forget(const std::string& node);

private:
  double keep_;
  std::map<std::string, double, std::less<>> recent_;
};

} // namespace kvtier::tiers
