#include "runtime/tools/multi_replay.hpp"

#include "messages/error.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/options.hpp"
#include "runtime/tools/client.hpp"
#include "runtime/tools/node_spawn.hpp"
#include "runtime/tools/simulate.hpp"

#include "messages/caller_actor.hpp"
#include <caf/actor_system.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace kvtier::runtime {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
template <class Root>
using sealed = msg::sealed<Root>;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// How a scenario places its nodes and requests.
struct scenario_shape {
  std::string name;
  uint32_t nodes = 1;
  uint32_t cap_factor = 1;
  bool joined = false;
};

caf::expected<scenario_shape> shape_of(const std::string& name, uint32_t n) {
  if (name == "routed")
    return scenario_shape{name, n, 1, true};
  if (name == "single")
    return scenario_shape{name, 1, n, false};
  if (name == "random")
    return scenario_shape{name, n, 1, false};
  if (name == "round-robin")
    return scenario_shape{name, n, 1, true};
  return make_error(ec::invalid_argument,
                    "unknown scenario \"" + name
                      + "\" (routed, single, random, round-robin)");
}

void write_ini(std::ostream& out, const std::vector<option_value>& values) {
  std::string section;
  for (auto& v : values) {
    if (v.section != section)
      out << "[" << (section = v.section) << "]\n";
    out << v.key << "=" << v.text << "\n";
  }
}

/// One node's configuration file for `shape`.
void write_node_config(const fs::path& file, const service_options& base,
                       const replay_settings& rs_base, const std::string& id,
                       uint64_t ram_cap, uint64_t ssd_cap,
                       const fs::path& ssd_dir, const std::string& policy) {
  auto o = base;
  o.cluster_enabled = true;
  o.cluster_node_id = id;
  o.cluster_port = 0;
  o.cluster_listen_address = "127.0.0.1";
  o.cluster_peers.clear();
  o.cluster_tls = false;
  o.cluster_heartbeat_ms = 100;
  o.cluster_down_after_ms = 2000;
  o.cluster_reconnect_backoff_ms = 100;
  o.cluster_reconnect_backoff_max_ms = 1000;
  auto rs = rs_base;
  rs.ram_cap_bytes = ram_cap;
  rs.ssd_cap_bytes = ssd_cap;
  rs.ssd_dir = ssd_dir.string();
  rs.clean_ssd = true;
  rs.trace = fs::absolute(rs.trace).string();
  std::ofstream out(file);
  write_ini(out, option_values(o));
  write_ini(out, option_values(rs));
  out << "[scheduler]\npolicy='" << policy << "'\n";
}

/// The processes of one scenario and the driver's handles on them.
struct cluster_run {
  std::vector<std::unique_ptr<node_child>> children;
  std::vector<caf::actor> actors;

  /// SIGTERM to every child at once, then each reaped within `bound`.
  void stop(ms bound) {
    for (auto& c : children)
      c->signal(SIGTERM);
    for (auto& c : children)
      c->stop(bound);
  }
};

caf::error wait_full(caf::actor_system& sys, const cluster_run& run) {
  auto want = run.children.size() - 1;
  auto until = clock_type::now() + ms{20000};
  for (auto& c : run.children) {
    for (;;) {
      auto v = cluster::query_members(sys, c->address(), ms{2000});
      if (v && v->in_state(cluster::peer_state::up).size() == want)
        break;
      if (clock_type::now() > until)
        return make_error(ec::timeout, "node " + c->node_id()
                                         + " did not see all "
                                         + std::to_string(want)
                                         + " peers up within 20 s (its log: "
                                         + c->log_path().string() + ")");
      std::this_thread::sleep_for(ms{50});
    }
  }
  return {};
}

template <class Reply, class Root>
caf::expected<sealed<Reply>> ask(caf::actor_system& sys, const caf::actor& to,
                                 const sealed<Root>& m, ms deadline) {
  kvtier::caller_actor self{sys};
  caf::expected<sealed<Reply>> out = make_error(ec::timeout, "unanswered");
  self->request(to, caf::duration{deadline}, m)
    .receive([&](const sealed<Reply>& r) { out = r; },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

caf::error with_node(caf::error err, const node_child& c) {
  return make_error(ec::io_error, "node " + c.node_id() + ": " + describe(err)
                                    + " (its log: " + c.log_path().string()
                                    + ")");
}

uint64_t u64(const nlohmann::json& j, const char* k) {
  auto i = j.find(k);
  return i != j.end() && i->is_number_unsigned() ? i->get<uint64_t>() : 0;
}

caf::expected<placement_result>
run_scenario(caf::actor_system& sys, const trace& t, const service_options& o,
             const replay_settings& rs, const multi_replay_options& mo,
             const scenario_shape& shape, const fs::path& dir,
             const std::string& program) {
  placement_result out;
  out.name = shape.name;
  out.nodes = shape.nodes;
  auto eff = rs.apply(o);
  uint64_t ram_node = eff.ram_cap_bytes / mo.nodes;
  uint64_t ssd_node = eff.ssd_cap_bytes / mo.nodes;
  out.ram_cap_bytes_per_node = ram_node * shape.cap_factor;
  out.ssd_cap_bytes_per_node = ssd_node * shape.cap_factor;
  auto sdir = dir / shape.name;
  fs::create_directories(sdir);
  cluster_run run;
  auto stop_bound = ms{eff.storage_deadline_ms + 2000 + 5000};
  struct stopper {
    cluster_run& r;
    ms bound;
    ~stopper() {
      r.stop(bound);
    }
  } stop_at_exit{run, stop_bound};
  for (uint32_t k = 0; k < shape.nodes; ++k) {
    auto id = shape.name + "-n" + std::to_string(k);
    auto conf = sdir / (id + ".conf");
    write_node_config(conf, o, rs, id, out.ram_cap_bytes_per_node,
                      out.ssd_cap_bytes_per_node, sdir / (id + "-ssd"),
                      mo.scheduler_policy);
    std::vector<std::string> args{"node", "--config", conf.string(),
                                  "--replay-agent"};
    if (shape.joined && k > 0) {
      args.push_back("--join");
      args.push_back(run.children.front()->address());
    }
    auto c = node_child::start(program, args, sdir / (id + ".log"), ms{15000});
    if (!c)
      return std::move(c.error());
    run.children.push_back(std::move(*c));
  }
  if (shape.joined && shape.nodes > 1)
    if (auto err = wait_full(sys, run))
      return err;
  for (auto& c : run.children) {
    auto a = cluster::connect_node(sys, c->address(), ms{5000});
    if (!a)
      return with_node(a.error(), *c);
    run.actors.push_back(*a);
    out.per_node.push_back({});
    out.per_node.back().node_id = c->node_id();
  }
  std::map<std::string, size_t> index_of;
  for (size_t k = 0; k < run.children.size(); ++k)
    index_of[run.children[k]->node_id()] = k;
  std::mt19937_64 rng{mo.seed};
  auto start = clock_type::now();
  auto last_progress = start;
  uint64_t input = 0, hit = 0;
  for (size_t i = 0; i < t.requests.size(); ++i) {
    size_t k = 0;
    if (shape.name == "random")
      k = static_cast<size_t>(rng() % shape.nodes);
    else if (shape.name == "round-robin")
      k = i % shape.nodes;
    else if (shape.name == "routed") {
      // Node 0's router names the node (its recent-load figures count
      // every decision, since it is the only router asked).
      auto& req = t.requests[i];
      auto d = cluster::query_route(sys, run.actors[0],
                                    prompt_tokens(req, t.block_size),
                                    request_ns(t, req), mo.step_deadline,
                                    static_cast<uint32_t>(req.output_tokens));
      if (!d)
        return with_node(d.error(), *run.children[0]);
      auto at = index_of.find(d->chosen.node_id);
      if (at == index_of.end())
        return make_error(ec::io_error, "the router named node \""
                                          + d->chosen.node_id
                                          + "\", not one of this run's");
      k = at->second;
    }
    msg::draft<msg::ReplayStep> d;
    d.root().setIndex(i);
    auto r = ask<msg::ReplayStepReply>(sys, run.actors[k], std::move(d).seal(),
                                       mo.step_deadline);
    if (!r)
      return with_node(r.error(), *run.children[k]);
    auto s = r->root();
    auto& n = out.per_node[k];
    ++n.requests;
    n.input_tokens += s.getInputTokens();
    n.ram_tokens += s.getRamTokens();
    n.ssd_tokens += s.getSsdTokens();
    n.peer_tokens += s.getPeerTokens();
    n.fresh_tokens += s.getFreshTokens();
    n.verified_states += s.getVerified();
    n.wrong_states += s.getWrong();
    n.refused += s.getRefused() ? 1 : 0;
    input += s.getInputTokens();
    hit += s.getRamTokens() + s.getSsdTokens() + s.getPeerTokens();
    out.series.push_back(input ? double(hit) / double(input) : 0.0);
    if (mo.progress && seconds_since(last_progress) >= 1.0) {
      last_progress = clock_type::now();
      mo.progress(shape.name, i + 1, t.requests.size());
    }
  }
  for (size_t k = 0; k < run.actors.size(); ++k) {
    msg::draft<msg::ReplayFinish> d;
    auto r = ask<msg::ReplayFinishReply>(
      sys, run.actors[k], std::move(d).seal(), mo.finish_deadline);
    if (!r)
      return with_node(r.error(), *run.children[k]);
    auto j = nlohmann::json::parse(std::string{r->root().getReport().cStr()},
                                   nullptr, false);
    if (j.is_discarded())
      return with_node(
        make_error(ec::malformed_message, "its finish report is not JSON"),
        *run.children[k]);
    auto& n = out.per_node[k];
    if (j.contains("peer")) {
      n.remote_fetches = u64(j["peer"], "fetched");
      n.served_to_peers = u64(j["peer"], "served");
    }
    n.report = std::move(j);
  }
  out.wall_s = seconds_since(start);
  out.ran = true;
  return out;
}

std::string self_program() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string{} : p.string();
}

} // namespace

node_figures placement_result::total() const {
  node_figures s;
  s.node_id = "all";
  for (auto& n : per_node) {
    s.requests += n.requests;
    s.input_tokens += n.input_tokens;
    s.ram_tokens += n.ram_tokens;
    s.ssd_tokens += n.ssd_tokens;
    s.peer_tokens += n.peer_tokens;
    s.fresh_tokens += n.fresh_tokens;
    s.verified_states += n.verified_states;
    s.wrong_states += n.wrong_states;
    s.refused += n.refused;
    s.remote_fetches += n.remote_fetches;
    s.served_to_peers += n.served_to_peers;
  }
  return s;
}

double placement_result::token_hit_ratio() const {
  auto s = total();
  return s.input_tokens ? double(s.ram_tokens + s.ssd_tokens + s.peer_tokens)
                            / double(s.input_tokens)
                        : 0.0;
}

double placement_result::balance() const {
  if (per_node.empty())
    return 0;
  uint64_t most = 0, all = 0;
  for (auto& n : per_node) {
    most = std::max(most, n.requests);
    all += n.requests;
  }
  return all ? double(most) * double(per_node.size()) / double(all) : 0.0;
}

uint64_t multi_replay_result::wrong_states() const {
  uint64_t w = 0;
  for (auto& s : scenarios)
    w += s.total().wrong_states;
  return w;
}

const placement_result*
multi_replay_result::find(const std::string& name) const {
  for (auto& s : scenarios)
    if (s.name == name)
      return &s;
  return nullptr;
}

caf::expected<multi_replay_result>
multi_replay(const trace& t, const service_options& o,
             const replay_settings& rs, const multi_replay_options& mo) {
  if (mo.nodes == 0 || mo.nodes > 64)
    return make_error(ec::invalid_argument,
                      "--nodes " + std::to_string(mo.nodes)
                        + ": the node count must be 1 .. 64");
  std::vector<scenario_shape> shapes;
  for (auto& name : mo.scenarios) {
    auto s = shape_of(name, mo.nodes);
    if (!s)
      return std::move(s.error());
    shapes.push_back(*s);
  }
  auto g = running_geometry(rs.apply(o));
  if (!g)
    return std::move(g.error());
  auto program = mo.program.empty() ? self_program() : mo.program;
  if (program.empty())
    return make_error(ec::invalid_argument,
                      "no kvtier program to start the nodes with");
  fs::path dir = mo.work_dir;
  bool remove_dir = false;
  if (dir.empty()) {
    auto tmpl =
      (fs::temp_directory_path() / "kvtier-replay-nodes-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      return make_error(ec::io_error, "cannot create a temporary directory");
    dir = tmpl;
    remove_dir = !mo.keep_dir;
  }
  struct remover {
    fs::path d;
    bool on;
    ~remover() {
      std::error_code ec;
      if (on)
        fs::remove_all(d, ec);
    }
  } remove_at_exit{dir, remove_dir};
  multi_replay_result out;
  out.trace = t.name;
  out.model = g->name;
  out.requests = t.requests.size();
  out.nodes = mo.nodes;
  out.seed = mo.seed;
  cluster::client_config ccfg;
  caf::actor_system sys{ccfg};
  for (auto& shape : shapes) {
    auto s = run_scenario(sys, t, o, rs, mo, shape, dir, program);
    if (!s)
      return make_error(ec::io_error,
                        "scenario " + shape.name + ": " + describe(s.error()));
    out.scenarios.push_back(std::move(*s));
  }
  return out;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string share(uint64_t part, uint64_t whole) {
  return whole ? fmt("%.4f", double(part) / double(whole)) : "-";
}

nlohmann::json figures_json(const node_figures& n) {
  return {{"node_id", n.node_id},
          {"requests", n.requests},
          {"input_tokens", n.input_tokens},
          {"ram_tokens", n.ram_tokens},
          {"ssd_tokens", n.ssd_tokens},
          {"peer_tokens", n.peer_tokens},
          {"fresh_tokens", n.fresh_tokens},
          {"verified_states", n.verified_states},
          {"wrong_states", n.wrong_states},
          {"refused", n.refused},
          {"remote_fetches", n.remote_fetches},
          {"served_to_peers", n.served_to_peers}};
}

} // namespace

std::string render_table(const multi_replay_result& r) {
  std::ostringstream o;
  o << "replay of " << r.trace << " on " << r.nodes << " nodes, " << r.requests
    << " requests, model " << r.model << "\n\n";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "  %-12s %5s %9s %8s %8s %8s %8s %9s %8s %7s %8s\n", "scenario",
                "nodes", "hit", "RAM", "SSD", "peers", "fresh", "remote",
                "balance", "wrong", "wall s");
  o << buf;
  for (auto& s : r.scenarios) {
    if (!s.ran) {
      std::snprintf(buf, sizeof buf, "  %-12s %5u   not run: %s\n",
                    s.name.c_str(), s.nodes, s.why.c_str());
      o << buf;
      continue;
    }
    auto t = s.total();
    std::snprintf(buf, sizeof buf,
                  "  %-12s %5u %9.4f %8s %8s %8s %8s %9llu %8.3f %7llu "
                  "%8.1f\n",
                  s.name.c_str(), s.nodes, s.token_hit_ratio(),
                  share(t.ram_tokens, t.input_tokens).c_str(),
                  share(t.ssd_tokens, t.input_tokens).c_str(),
                  share(t.peer_tokens, t.input_tokens).c_str(),
                  share(t.fresh_tokens, t.input_tokens).c_str(),
                  static_cast<unsigned long long>(t.remote_fetches),
                  s.balance(), static_cast<unsigned long long>(t.wrong_states),
                  s.wall_s);
    o << buf;
  }
  o << "\n  (hit, RAM, SSD, peers, fresh: shares of the prompt tokens; "
       "remote: entries fetched from peers;\n   balance: most requests on "
       "one node over the mean, 1.000 is even)\n\n  requests per node:\n";
  for (auto& s : r.scenarios) {
    if (!s.ran)
      continue;
    o << "    " << s.name << ":";
    for (auto& n : s.per_node)
      o << " " << n.node_id << "=" << n.requests;
    o << "\n";
  }
  return o.str();
}

nlohmann::json to_json(const multi_replay_result& r) {
  using nlohmann::json;
  json scenarios = json::array();
  for (auto& s : r.scenarios) {
    json j = {{"name", s.name}, {"ran", s.ran}, {"nodes", s.nodes}};
    if (!s.ran) {
      j["why"] = s.why;
      scenarios.push_back(std::move(j));
      continue;
    }
    auto t = s.total();
    j.update(figures_json(t));
    j.erase("node_id");
    j["token_hit_ratio"] = s.token_hit_ratio();
    j["balance"] = s.balance();
    j["ram_cap_bytes_per_node"] = s.ram_cap_bytes_per_node;
    j["ssd_cap_bytes_per_node"] = s.ssd_cap_bytes_per_node;
    j["wall_s"] = s.wall_s;
    json nodes = json::array();
    for (auto& n : s.per_node) {
      auto nj = figures_json(n);
      nj["report"] = n.report;
      nodes.push_back(std::move(nj));
    }
    j["per_node"] = std::move(nodes);
    scenarios.push_back(std::move(j));
  }
  return {{"trace", r.trace},      {"model", r.model},
          {"nodes", r.nodes},      {"requests", r.requests},
          {"seed", r.seed},        {"wrong_states", r.wrong_states()},
          {"scenarios", scenarios}};
}

std::string render_svg(const multi_replay_result& r) {
  constexpr double width = 860, height = 460, left = 60, right = 170, top = 50,
                   bottom = 60, mid_gap = 40;
  // Left panel: hit/RAM/SSD/peer per scenario; right: per-node shares.
  const double panel = (width - left - right - mid_gap) / 2;
  auto y = [&](double v) {
    return height - bottom - (height - top - bottom) * v;
  };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width
    << "' height='" << height << "' font-family='sans-serif' font-size='12'>\n"
    << "<rect width='100%' height='100%' fill='white'/>\n";
  auto text = [&](double x, double yy, const std::string& t,
                  const char* anchor = "start", const char* colour = "#222") {
    char buf[128];
    std::snprintf(buf, sizeof buf,
                  "<text x='%.1f' y='%.1f' text-anchor='%s' fill='%s'>", x, yy,
                  anchor, colour);
    o << buf << t << "</text>\n";
  };
  auto bar = [&](double x, double w, double v, const char* colour) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
                  "fill='%s'/>\n",
                  x, y(v), w, y(0) - y(v), colour);
    o << buf;
  };
  text(left, 22,
       "Replay of " + r.trace + " on " + std::to_string(r.nodes)
         + " nodes: placements compared");
  for (int i = 0; i <= 5; ++i) {
    double v = i / 5.0;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' "
                  "stroke='#ddd'/>\n",
                  left, width - right, y(v), y(v));
    o << buf;
    text(left - 6, y(v) + 4, fmt("%.1f", v), "end");
  }
  std::vector<const placement_result*> ran;
  for (auto& s : r.scenarios)
    if (s.ran)
      ran.push_back(&s);
  const char* colours[] = {"#1f77b4", "#2ca02c", "#ff7f0e", "#d62728"};
  const char* names[] = {"hit ratio", "from RAM", "from SSD", "from peers"};
  double group = ran.empty() ? panel : panel / double(ran.size());
  for (size_t g = 0; g < ran.size(); ++g) {
    auto t = ran[g]->total();
    double in = t.input_tokens ? double(t.input_tokens) : 1.0;
    double v[] = {ran[g]->token_hit_ratio(), double(t.ram_tokens) / in,
                  double(t.ssd_tokens) / in, double(t.peer_tokens) / in};
    double x0 = left + group * double(g) + group * 0.1;
    double w = group * 0.8 / 4;
    for (int b = 0; b < 4; ++b)
      bar(x0 + w * b, w * 0.9, v[b], colours[b]);
    text(x0 + group * 0.4, height - bottom + 16, ran[g]->name, "middle");
    text(x0 + w * 0.45, y(v[0]) - 4, fmt("%.3f", v[0]), "middle");
  }
  text(left + panel / 2, height - 18, "token shares per scenario", "middle");
  // Per-node request shares: one bar per node, grouped by scenario.
  double px = left + panel + mid_gap;
  for (size_t g = 0; g < ran.size(); ++g) {
    auto& s = *ran[g];
    uint64_t all = s.total().requests;
    double x0 = px + group * double(g) + group * 0.1;
    double w = group * 0.8 / double(std::max<size_t>(s.per_node.size(), 1));
    for (size_t k = 0; k < s.per_node.size(); ++k)
      bar(x0 + w * double(k), w * 0.9,
          all ? double(s.per_node[k].requests) / double(all) : 0.0, "#9467bd");
    text(x0 + group * 0.4, height - bottom + 16, s.name, "middle");
  }
  text(px + panel / 2, height - 18, "each node's share of the requests",
       "middle");
  for (int b = 0; b < 4; ++b)
    text(width - right + 10, top + 10 + 16.0 * b, names[b], "start",
         colours[b]);
  text(width - right + 10, top + 10 + 16.0 * 4, "node's requests", "start",
       "#9467bd");
  o << "</svg>\n";
  return o.str();
}

} // namespace kvtier::runtime
