#define BOOST_TEST_MODULE runtime_identity_random
// The randomized state-identity test (issue #10): five services of other
// models (other geometries, another identity string of one geometry, a
// recurrent hybrid, another scale) run at once over one SSD root, each
// through its own fault-injecting view of the shared in-memory disk, while
// a random driver publishes (also in namespaces that look like checkpoint
// keys, and states of another model's shape), acquires, checkpoints,
// retries requests (new attempts; the older attempt later releases as a
// zombie), releases them completed or interrupted (with file removals that
// fail), reuses request ids for other prompts, flushes, restarts services,
// crashes the whole machine (every writer stopped, unsynced bytes lost),
// and plants forged files: correctly checksummed, of another model's shape,
// under a service's own fingerprint.
//
// Each model's oracle is salted with its fingerprint, so a state of one
// model served by another fails verification even where the shapes agree.
// After every acquire the served state must be the serving model's bytes
// for its namespace and a prefix of its prompt, or a checkpoint saved for
// exactly that (request, namespace) that extends the prompt and whose
// generation was not completed. A durable checkpoint a request's current
// attempt owns must resume. Wrong states must be 0; refusals and misses
// are printed.
//
// `ctest -R runtime.identity_random` runs 4 seeds of 250 steps; the soak
// entry (`make soak`) passes `-- 3000` steps over 12 seeds.
#include "tests/runtime/forge.hpp"
#include "tests/runtime/service_fixture.hpp"
#include "tiers/ssd/faulty_file_system.hpp"

#include <iostream>
#include <map>
#include <random>
#include <set>

using namespace kvtier;
using namespace kvtier::testing;
using runtime::state_source;
using tiers::token_seq;
using tiers::ssd::fault_kind;
using tiers::ssd::fs_op;

namespace {

/// Steps per seed: the first number on the command line after `--`.
int steps() {
  auto& m = boost::unit_test::framework::master_test_suite();
  for (int i = 1; i < m.argc; ++i)
    if (auto n = std::atoi(m.argv[i]); n > 0)
      return n;
  return 250;
}

int seeds() {
  return steps() > 1000 ? 12 : 4;
}

struct counts {
  uint64_t acquires = 0, served = 0, resumed = 0, stale = 0, wrong = 0;
  uint64_t refused = 0, forged = 0, mismatched = 0, completed = 0;
  uint64_t removal_faults = 0, zombie_releases = 0, restarts = 0, crashes = 0,
           hostile_publishes = 0, strict_resumes = 0;
};

using ident = std::pair<uint64_t, std::string>; // (request id, ns)

/// What the driver knows a request's checkpoint must be.
struct expected_checkpoint {
  token_seq tokens;
  uint32_t owner = 0;
  /// A flush or close reported it durable, and nothing newer was saved.
  bool durable = false;
  /// Held in the service's memory since it was saved (no restart since).
  bool in_memory = true;
};

/// One live request id of one model: its prompt and current attempt.
struct request_state {
  token_seq prompt;
  std::string ns;
  uint32_t attempt = 0;
  /// Earlier attempts still "running" (zombies that release later).
  std::vector<uint32_t> zombies;
};

struct model_node {
  std::string what;
  runtime::service_options opts;
  std::unique_ptr<tiers::ssd::faulty_file_system> faulty;
  std::unique_ptr<runtime::oracle_engine> oracle;
  std::unique_ptr<runtime::service> svc;

  std::map<uint64_t, request_state> requests;
  std::map<ident, expected_checkpoint> live;
  /// Every checkpoint ever kept per identity, and the completed ones.
  std::map<ident, std::set<token_seq>> saved, dead;
  /// Every prefix published (namespace, tokens).
  std::set<std::pair<std::string, token_seq>> published;

  std::string fingerprint() const {
    return runtime::running_model(opts)->fingerprint();
  }

  void start(tiers::ssd::memory_file_system& disk) {
    svc.reset();
    faulty = std::make_unique<tiers::ssd::faulty_file_system>(disk);
    auto g = runtime::running_geometry(opts);
    BOOST_REQUIRE(g);
    oracle = std::make_unique<runtime::oracle_engine>(
      *g, 0, std::hash<std::string>{}(fingerprint()));
    svc = std::make_unique<runtime::service>(
      opts, runtime::service_parts{faulty.get()});
    BOOST_REQUIRE_MESSAGE(!svc->start_error(),
                          what << ": " << describe(svc->start_error()));
    for (auto& [id, c] : live)
      c.in_memory = false;
  }

  runtime::state_request req(uint64_t id, uint32_t attempt) const {
    auto& r = requests.at(id);
    runtime::state_request out{id, r.prompt, 64, std::nullopt};
    out.attempt = attempt;
    return out;
  }
};

runtime::service_options node_options(std::string model, double scale,
                                      std::string layers,
                                      std::string identity) {
  service_fixture f; // its defaults: in-memory SSD in /ssd, threads engine
  auto o = f.opts;
  o.model = std::move(model);
  o.model_scale = scale;
  o.model_layers = std::move(layers);
  o.model_identity = std::move(identity);
  o.checkpoint_every_tokens = 8;
  o.ram_cap_bytes = 1ull << 20;
  o.ssd_cap_bytes = 64ull << 20; // no SSD eviction takes a checkpoint
  return o;
}

/// A pool of prompts sharing prefixes, so models and requests meet.
std::vector<token_seq> prompt_pool(std::mt19937_64& rng) {
  std::vector<token_seq> pool;
  auto base = service_fixture::seq(60, 1);
  for (int i = 0; i < 14; ++i) {
    token_seq p = i % 2 == 0 ? base : token_seq{};
    auto extra = 20 + rng() % 260;
    for (size_t k = 0; k < extra; ++k)
      p.push_back(static_cast<tiers::token>(1000 * (i + 1) + k % 97));
    pool.push_back(std::move(p));
  }
  return pool;
}

bool begins_with(const token_seq& t, const token_seq& p) {
  return t.size() >= p.size() && std::equal(p.begin(), p.end(), t.begin());
}

struct driver {
  std::mt19937_64 rng;
  tiers::ssd::memory_file_system disk;
  std::vector<model_node> nodes;
  std::vector<token_seq> pool;
  counts n;
  uint64_t next_id = 1;

  explicit driver(uint64_t seed)
    : rng(seed) {
    pool = prompt_pool(rng);
    auto add = [&](const char* what, runtime::service_options o) {
      model_node m;
      m.what = what;
      m.opts = std::move(o);
      nodes.push_back(std::move(m));
    };
    add("windows 16",
        node_options("tiny-dense", 1, "2*ring:64:16,2*kv:64", ""));
    add("windows 16, kv=fp8",
        node_options("tiny-dense", 1, "2*ring:64:16,2*kv:64", "kv=fp8"));
    add("windows 16 and 8",
        node_options("tiny-dense", 1, "ring:64:16,ring:64:8,2*kv:64", ""));
    add("tiny-hybrid", node_options("tiny-hybrid", 1, "", ""));
    add("tiny-dense at 1/2", node_options("tiny-dense", 0.5, "", ""));
    for (auto& m : nodes)
      m.start(disk);
  }

  size_t pick(size_t n) {
    return static_cast<size_t>(rng() % n);
  }

  std::string any_ns(uint64_t id) {
    switch (pick(5)) {
      case 0: return "other";
      case 1: // namespaces that look like the old checkpoint convention
        ++n.hostile_publishes;
        return "kvtier.checkpoint/" + std::to_string(id) + "/ns";
      case 2:
        ++n.hostile_publishes;
        return "kvtier.checkpoint/" + std::to_string(id);
      default: return "ns";
    }
  }

  /// A request id of `m`: an existing one, or a new one (sometimes a
  /// reused id number with another prompt).
  uint64_t some_request(model_node& m) {
    if (!m.requests.empty() && pick(3) != 0) {
      auto i = m.requests.begin();
      std::advance(i, pick(m.requests.size()));
      return i->first;
    }
    auto id = pick(4) == 0 && next_id > 1 ? 1 + pick(next_id - 1) : next_id++;
    m.requests[id] = {
      pool[pick(pool.size())], pick(4) == 0 ? "other" : "ns", 0, {}};
    return id;
  }

  void publish(model_node& m) {
    auto& p = pool[pick(pool.size())];
    auto len = 2 + pick(p.size() - 1);
    token_seq t(p.begin(), p.begin() + static_cast<long>(len));
    auto ns = any_ns(1 + pick(8));
    auto r = m.svc->publish(runtime::state_request{0, t, 16, std::nullopt},
                            m.oracle->prefill(ns, t));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    m.published.insert({ns, t});
  }

  /// A state of another model's shape offered to `m`: refused, naming it.
  void publish_foreign(model_node& m) {
    auto& other = nodes[pick(nodes.size())];
    if (other.oracle->geometry().layers == m.oracle->geometry().layers)
      return;
    auto t = pool[pick(pool.size())];
    auto r = m.svc->publish(runtime::state_request{0, t, 16, std::nullopt},
                            other.oracle->prefill("ns", t));
    BOOST_CHECK(!r);
    if (!r) {
      BOOST_CHECK(r.error() == ec::invalid_argument);
      ++n.refused;
    }
  }

  void acquire(model_node& m) {
    acquire(m, some_request(m));
  }

  void acquire(model_node& m, uint64_t id) {
    auto& rq = m.requests[id];
    auto r = m.svc->acquire(m.req(id, rq.attempt), rq.ns);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    ++n.acquires;
    ident key{id, rq.ns};
    auto l = m.live.find(key);
    bool resumed = r->source == state_source::checkpoint;
    if (r->source != state_source::none) {
      ++n.served;
      auto err = m.oracle->verify_served(r->state, rq.ns, rq.prompt, resumed);
      if (err) {
        ++n.wrong;
        BOOST_ERROR(m.what << ": wrong state: " << describe(err));
      }
    }
    if (resumed) {
      ++n.resumed;
      auto& tokens = r->state.tokens;
      bool known = m.saved[key].count(tokens) > 0;
      bool completed = m.dead[key].count(tokens) > 0;
      if (!known || completed) {
        ++n.wrong;
        BOOST_ERROR(m.what << ": request " << id << " resumed "
                           << (known ? "a completed" : "another's")
                           << " generation of " << tokens.size() << " tokens");
      }
      // The acquiring attempt owns what it resumed from now on; a new
      // owner is durable once a flush wrote it down.
      bool same = l != m.live.end() && l->second.tokens == tokens
                  && l->second.owner == rq.attempt;
      m.live[key] = {tokens, rq.attempt, same && l->second.durable, true};
      return;
    }
    if (r->stale_checkpoint_tokens > 0)
      ++n.stale;
    // A checkpoint the current attempt may resume, held in memory or made
    // durable, must have been resumed.
    if (l != m.live.end() && begins_with(l->second.tokens, rq.prompt)
        && (l->second.durable || l->second.in_memory)
        && l->second.owner <= rq.attempt) {
      ++n.wrong; // serving too little: counted with the wrong states
      BOOST_ERROR(m.what << ": request " << id << " did not resume its "
                         << l->second.tokens.size() << "-token checkpoint");
    } else if (l != m.live.end() && l->second.durable) {
      ++n.strict_resumes; // not resumable by this prompt: correctly fresh
    }
  }

  void checkpoint(model_node& m) {
    auto id = some_request(m);
    auto& rq = m.requests[id];
    auto gen = m.oracle->generate(rq.ns, rq.prompt, 8 + pick(24));
    auto tokens = service_fixture::cat(rq.prompt, gen);
    auto r = m.svc->checkpoint(m.req(id, rq.attempt),
                               m.oracle->prefill(rq.ns, tokens));
    BOOST_REQUIRE_MESSAGE(r, why(r));
    if (!*r)
      return; // disposed: not newer than what the identity holds
    ident key{id, rq.ns};
    m.live[key] = {tokens, rq.attempt, false, true};
    m.saved[key].insert(tokens);
    m.dead[key].erase(tokens);
  }

  void retry(model_node& m) {
    auto id = some_request(m);
    auto& rq = m.requests[id];
    rq.zombies.push_back(rq.attempt);
    ++rq.attempt;
  }

  /// Releases attempt `attempt` of `id`; completed kills what it owns.
  void release(model_node& m, uint64_t id, uint32_t attempt, bool completed) {
    auto& rq = m.requests[id];
    ident key{id, rq.ns};
    if (completed && pick(3) == 0) {
      m.faulty->inject(fs_op::remove, 1, fault_kind::eio);
      ++n.removal_faults;
    }
    auto r = m.svc->release(m.req(id, attempt), completed);
    BOOST_REQUIRE_MESSAGE(r, why(r));
    auto l = m.live.find(key);
    if (!completed || l == m.live.end() || l->second.owner != attempt)
      return;
    ++n.completed;
    m.dead[key].insert(l->second.tokens);
    m.live.erase(l);
  }

  void finish(model_node& m) {
    auto id = some_request(m);
    auto& rq = m.requests[id];
    if (!rq.zombies.empty() && pick(2) == 0) {
      auto z = rq.zombies.back();
      rq.zombies.pop_back();
      ++n.zombie_releases;
      release(m, id, z, pick(2) == 0);
      return;
    }
    bool completed = pick(3) != 0;
    release(m, id, rq.attempt, completed);
    if (completed && pick(2) == 0) // the id is reused for another prompt
      rq.prompt = pool[pick(pool.size())];
  }

  void mark_durable(model_node& m, const runtime::durability_result& d) {
    if (d.durable)
      for (auto& [k, c] : m.live)
        c.durable = c.durable || c.in_memory;
  }

  void flush(model_node& m) {
    auto r = m.svc->flush();
    BOOST_REQUIRE(r);
    mark_durable(m, *r);
  }

  void restart(model_node& m) {
    auto r = m.svc->close();
    BOOST_REQUIRE(r);
    mark_durable(m, *r);
    ++n.restarts;
    collect(m);
    m.start(disk);
  }

  /// The machine dies: every writer stops at once, then the power goes.
  void crash() {
    for (auto& m : nodes) {
      collect(m);
      m.faulty->crash_now();
      m.svc.reset(); // its close cannot persist anything any more
      for (auto& [k, c] : m.live)
        c.in_memory = false;
      std::erase_if(m.live, [](auto& kv) { return !kv.second.durable; });
    }
    disk.power_loss();
    ++n.crashes;
    for (auto& m : nodes)
      m.start(disk);
  }

  /// A checksummed file of another model's shape, under `m`'s fingerprint
  /// and the name of a prefix it may hold.
  void forge(model_node& m) {
    auto& other = nodes[pick(nodes.size())];
    if (other.oracle->geometry().layers == m.oracle->geometry().layers)
      return;
    auto t = pool[pick(pool.size())];
    t.resize(2 + pick(t.size() - 1));
    auto path = m.opts.ssd_dir + "/" + m.fingerprint() + "/"
                + tiers::ssd::file_name("ns", t);
    plant(disk, path,
          file_image(other.oracle->prefill("ns", t), m.fingerprint()));
    ++n.forged;
  }

  /// Misses the shape checks counted, before a service is replaced.
  void collect(model_node& m) {
    if (!m.svc)
      return;
    auto r = m.svc->report();
    if (r)
      n.mismatched += r->ssd.geometry_mismatched + r->ssd.restores_mismatched;
  }

  void step() {
    auto& m = nodes[pick(nodes.size())];
    switch (pick(40)) {
      case 0: return crash();
      case 1:
      case 2: return restart(m);
      case 3:
      case 4: return forge(m);
      case 5:
      case 6:
      case 7: return flush(m);
      case 8:
      case 9: return publish_foreign(m);
      case 10:
      case 11:
      case 12: return retry(m);
      case 13:
      case 14:
      case 15:
      case 16:
      case 17: return finish(m);
      case 18:
      case 19:
      case 20:
      case 21:
      case 22:
      case 23: return checkpoint(m);
      case 24:
      case 25:
      case 26:
      case 27:
      case 28:
      case 29: return publish(m);
      default: return acquire(m);
    }
  }

  /// Every saved prefix a service lists is one it published: no
  /// checkpoint and no other model's file ever appears there.
  void check_saved_prefixes() {
    for (auto& m : nodes) {
      auto s = m.svc->saved_prefixes();
      BOOST_REQUIRE(s);
      for (auto& p : *s)
        if (m.published.count({p.ns, p.tokens}) == 0) {
          ++n.wrong;
          BOOST_ERROR(m.what << ": saved_prefixes lists " << p.tokens.size()
                             << " tokens in '" << p.ns
                             << "' that it never published");
        }
    }
  }

  ~driver() {
    for (auto& m : nodes) {
      collect(m);
      m.svc.reset(); // before its faulty view goes
    }
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(no_service_ever_serves_another_identitys_state) {
  counts total;
  int per_seed = steps();
  for (int seed = 1; seed <= seeds(); ++seed) {
    BOOST_TEST_CONTEXT("seed " << seed) {
      counts n;
      {
        driver d{static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull};
        for (int i = 0; i < per_seed; ++i)
          d.step();
        d.check_saved_prefixes();
        d.crash(); // the last word: what survives a machine crash
        d.check_saved_prefixes();
        for (auto& m : d.nodes) {
          std::vector<uint64_t> ids;
          for (auto& [id, rq] : m.requests)
            ids.push_back(id);
          for (auto id : ids)
            d.acquire(m, id);
        }
        n = d.n;
      } // services closed and counted here
      total.acquires += n.acquires;
      total.served += n.served;
      total.resumed += n.resumed;
      total.stale += n.stale;
      total.wrong += n.wrong;
      total.refused += n.refused;
      total.forged += n.forged;
      total.mismatched += n.mismatched;
      total.completed += n.completed;
      total.removal_faults += n.removal_faults;
      total.zombie_releases += n.zombie_releases;
      total.restarts += n.restarts;
      total.crashes += n.crashes;
      total.hostile_publishes += n.hostile_publishes;
      total.strict_resumes += n.strict_resumes;
    }
  }
  std::cout << "identity_random: " << seeds() << " seeds x " << per_seed
            << " steps over 5 models on one root\n"
            << "  acquires " << total.acquires << ", states served "
            << total.served << ", checkpoints resumed " << total.resumed
            << ", stale checkpoints reported " << total.stale << "\n"
            << "  wrong states " << total.wrong << "\n"
            << "  refusals (publish of another shape) " << total.refused
            << ", forged files planted " << total.forged
            << ", shape misses counted " << total.mismatched << "\n"
            << "  generations completed " << total.completed
            << " (removal faults " << total.removal_faults
            << ", zombie releases " << total.zombie_releases << ")\n"
            << "  restarts " << total.restarts << ", machine crashes "
            << total.crashes << ", hostile-namespace publishes "
            << total.hostile_publishes << "\n";
  BOOST_TEST(total.wrong == 0u);
  // The run exercised what it claims to.
  BOOST_TEST(total.resumed > 0u);
  BOOST_TEST(total.completed > 0u);
  BOOST_TEST(total.refused > 0u);
  BOOST_TEST(total.forged > 0u);
  BOOST_TEST(total.crashes > 0u);
}
