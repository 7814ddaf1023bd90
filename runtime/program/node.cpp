// `kvtier node` and `kvtier members` (docs/cluster.md): a long-running
// node process and a client that prints a node's membership view.
#include "runtime/cluster/node.hpp"
#include "runtime/options.hpp"
#include "runtime/program/commands.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/client.hpp"
#include "runtime/tools/replay_agent.hpp"

#include "messages/log.hpp"
#include "messages/type_ids.hpp"

#include <caf/io/middleman.hpp>

#include "messages/caller_actor.hpp"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <pthread.h>

namespace kvtier::runtime {

int node_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  return node_command(cfg, args, {});
}

int node_command(kvtier_config& cfg, const std::vector<std::string>& args,
                 const std::function<bool(service&)>& ready) {
  auto& o = cfg.options;
  bool agent = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--replay-agent") {
      agent = true;
    } else if (args[i] == "--join" && i + 1 < args.size()) {
      o.cluster_peers.push_back(args[++i]);
    } else if (args[i].rfind("--join=", 0) == 0) {
      o.cluster_peers.push_back(args[i].substr(7));
    } else if (args[i] == "--join") {
      complain("node", "--join needs HOST:PORT");
      return 2;
    } else {
      complain("node", "unexpected argument '" + args[i] + "'");
      return 2;
    }
  }
  o.cluster_enabled = true;
  // --replay-agent: the [replay] section applies (its caps, SSD directory,
  // scale), and the trace must load before anything starts.
  std::optional<trace> agent_trace;
  if (agent) {
    trace_options to;
    to.max_requests = cfg.replay.max_requests;
    auto t = load_trace(cfg.replay.trace, to);
    if (!t) {
      complain("node", "--replay-agent: " + reason(t.error()));
      return 2;
    }
    agent_trace = std::move(*t);
    o = cfg.replay.apply(o);
  }
  if (auto err = o.validate()) {
    complain("node", reason(err));
    return 2;
  }
  auto geometry = running_geometry(o);
  if (!geometry) {
    complain("node", reason(geometry.error()));
    return 2;
  }
  if (agent && cfg.replay.clean_ssd && !o.ssd_dir.empty())
    if (auto model = running_model(o)) {
      std::error_code ec;
      std::filesystem::remove_all(
        std::filesystem::path(o.ssd_dir) / model->fingerprint(), ec);
    }
  // SIGTERM and SIGINT are taken by this thread alone (sigwait below):
  // blocked before any actor thread starts, so every thread inherits it.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  int exit_code = 0;
  {
    service svc{cfg};
    if (auto err = svc.start_error()) {
      complain("node", "cannot start: " + reason(err));
      return 2;
    }
    if (ready && !ready(svc))
      return 2;
    auto* n = svc.cluster();
    caf::actor replay_agent;
    if (agent_trace) {
      replay_options ro;
      ro.verify = cfg.replay.verify;
      ro.settle = cfg.replay.settle;
      ro.batch = static_cast<uint32_t>(cfg.replay.batch);
      ro.prefill_tokens_per_s = cfg.replay.prefill_tokens_per_s;
      replay_agent =
        spawn_replay_agent(svc, std::move(*agent_trace), *geometry, ro);
      n->attach_agent(replay_agent);
    }
    // The listening line is the command's result (a starter,
    // runtime/tools/node_spawn.hpp, reads it on stdout); the endpoint's
    // address before the node id, which ends the line. The log says the
    // same for an operator.
    auto http = svc.http_address();
    std::printf("kvtier node listening %s%s node-id=%s\n", n->address().c_str(),
                http.empty() ? "" : (" http=" + http).c_str(),
                n->node_id().c_str());
    std::fflush(stdout);
    auto id = "kvtier node " + n->node_id() + ": ";
    log::info(id + "listening on " + n->address() + ", node-id " + n->node_id()
              + ", " + std::to_string(o.cluster_peers.size())
              + " peer(s) to join" + (http.empty() ? "" : ", http " + http)
              + (agent_trace ? ", replay agent" : ""));
    int sig = 0;
    sigwait(&stop, &sig);
    log::info(id + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ": closing");
    if (replay_agent) {
      // The agent calls the service: it goes first (a step in flight ends
      // with the service's answer, bounded by the storage deadline).
      n->attach_agent(caf::actor{});
      kvtier::caller_actor waiter{svc.system()};
      waiter->send_exit(replay_agent, caf::exit_reason::user_shutdown);
      waiter->wait_for(replay_agent);
    }
    // Stop taking requests and flush (bounded by the storage deadline).
    auto flushed = svc.close();
    if (!flushed) {
      log::error(id + "close: " + reason(flushed.error()));
      exit_code = 1;
    } else {
      log::write(flushed->durable ? log::level::info : log::level::warn,
                 id + "flushed: " + std::to_string(flushed->entries)
                   + " entries, durable="
                   + (flushed->durable ? "true" : "false") + ", "
                   + std::to_string(flushed->failed) + " failed");
    }
    // Tell the peers (bounded by down-after-ms); then the service goes.
    auto told = n->leave(cluster::millis{o.cluster_down_after_ms});
    if (told)
      log::info(id + "left (" + std::to_string(*told) + " peer(s) told)");
    else
      log::warn(id + "left (" + reason(told.error()) + ")");
  }
  return exit_code;
}

int members_command(kvtier_config& cfg, const std::vector<std::string>& args) {
  for (auto& a : args)
    if (a.rfind("--", 0) == 0) {
      complain("members", "unknown option " + a);
      return 2;
    }
  if (args.size() > 1) {
    complain("members", "unexpected argument '" + args[1] + "'");
    return 2;
  }
  if (args.empty()) {
    complain("members", "which node? usage: kvtier members HOST:PORT");
    return 2;
  }
  // Over TLS, with this configuration's certificate, when cluster.tls is on.
  cluster::client_config ccfg{tls_files_of(cfg.options)};
  caf::actor_system sys{ccfg};
  auto v = cluster::query_members(sys, args[0], cluster::millis{5000});
  if (!v) {
    complain("members", args[0] + ": " + reason(v.error()));
    return 1;
  }
  std::printf("self %s %s%s\n", v->self.node_id.c_str(),
              v->self.address.c_str(), v->leaving ? " leaving" : "");
  for (auto& m : v->members)
    std::printf("member %s %s %s\n", m.node_id.c_str(), m.address.c_str(),
                cluster::to_string(m.state));
  std::printf("refused model-identity=%llu node-id=%llu protocol=%llu "
              "bad-messages=%llu oversized=%llu undecodable=%llu "
              "remote-admin=%llu handshake=%llu oversized-frames=%llu "
              "garbage-frames=%llu refused-connections=%llu "
              "failed-handshakes=%llu\n",
              static_cast<unsigned long long>(v->refused.model_identity),
              static_cast<unsigned long long>(v->refused.node_id),
              static_cast<unsigned long long>(v->refused.protocol),
              static_cast<unsigned long long>(v->refused.malformed),
              static_cast<unsigned long long>(v->refused_oversized),
              static_cast<unsigned long long>(v->refused_undecodable),
              static_cast<unsigned long long>(v->refused_admin),
              static_cast<unsigned long long>(v->refused_handshake),
              static_cast<unsigned long long>(v->oversized_frames),
              static_cast<unsigned long long>(v->garbage_frames),
              static_cast<unsigned long long>(v->refused_connections),
              static_cast<unsigned long long>(v->failed_handshakes));
  return 0;
}

} // namespace kvtier::runtime
