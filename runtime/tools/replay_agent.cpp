#include "runtime/tools/replay_agent.hpp"

#include "messages/error.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/node.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include <nlohmann/json.hpp>

#include <memory>

namespace kvtier::runtime {

namespace {

template <class Root>
using sealed = msg::sealed<Root>;

/// What the agent holds: the session refers to the trace and options.
struct agent_parts {
  service* svc = nullptr;
  trace t;
  replay_options opts;
  std::unique_ptr<replay_session> session;
  bool finished = false;
};

struct agent_state {
  std::shared_ptr<agent_parts> parts;
  static inline const char* name = "kvtier.replay_agent";
};

using agent_actor = caf::stateful_actor<agent_state>;

nlohmann::json peer_json(const service_report::peer_part& p) {
  return {{"fetches", p.fetches},
          {"fetched", p.fetched},
          {"bytes", p.bytes},
          {"coalesced", p.coalesced},
          {"over_cap", p.over_cap},
          {"failed", p.failed_none + p.failed_unreachable + p.failed_timeout
                       + p.failed_corrupt + p.failed_other},
          {"served", p.served},
          {"served_none", p.served_none},
          {"serve_bytes", p.serve_bytes},
          {"peers_up", p.peers_up},
          {"directory_entries", p.entries}};
}

caf::behavior agent_behavior(agent_actor* self,
                             std::shared_ptr<agent_parts> parts) {
  self->state.parts = std::move(parts);
  return {
    [self](const sealed<msg::ReplayStep>& m)
      -> caf::result<sealed<msg::ReplayStepReply>> {
      auto& p = *self->state.parts;
      if (p.finished)
        return make_error(ec::invalid_argument, "replay step after the finish");
      auto st = p.session->step(m.root().getIndex());
      if (!st)
        return std::move(st.error());
      msg::draft<msg::ReplayStepReply> d;
      auto r = d.root();
      r.setInputTokens(st->input_tokens);
      r.setRamTokens(st->ram_tokens);
      r.setSsdTokens(st->ssd_tokens);
      r.setPeerTokens(st->peer_tokens);
      r.setFreshTokens(st->fresh_tokens);
      r.setVerified(st->verified);
      r.setWrong(st->wrong);
      r.setRefused(st->refused);
      r.setSource(to_string(st->source));
      return std::move(d).seal();
    },
    [self](const sealed<msg::ReplayFinish>&)
      -> caf::result<sealed<msg::ReplayFinishReply>> {
      auto& p = *self->state.parts;
      if (p.finished)
        return make_error(ec::invalid_argument, "replay finished twice");
      p.finished = true;
      auto rep = p.session->finish();
      if (!rep)
        return std::move(rep.error());
      auto j = to_json(*rep);
      auto svc_rep = p.svc->report();
      if (!svc_rep)
        return std::move(svc_rep.error());
      j["peer"] = peer_json(svc_rep->peer);
      if (auto* n = p.svc->cluster())
        j["node_id"] = n->node_id();
      msg::draft<msg::ReplayFinishReply> d;
      d.root().setReport(j.dump());
      return std::move(d).seal();
    },
  };
}

} // namespace

caf::actor spawn_replay_agent(service& svc, trace t,
                              const tiers::model_geometry& geometry,
                              replay_options opts) {
  auto parts = std::make_shared<agent_parts>();
  parts->svc = &svc;
  parts->t = std::move(t);
  parts->opts = std::move(opts);
  parts->opts.progress = nullptr;
  parts->session =
    std::make_unique<replay_session>(parts->t, svc, geometry, parts->opts);
  return svc.system().spawn<caf::detached>(agent_behavior, std::move(parts));
}

} // namespace kvtier::runtime
