# The multi-node replay's tool messages (`kvtier replay --nodes N`,
# runtime/tools/multi_replay.hpp, docs/replay.md "Several nodes"): the
# driver asks the replay agent in a `kvtier node --replay-agent` process to
# run one trace request by its index, and at the end for the node's totals.
# Only a node started with --replay-agent answers them (others refuse,
# not_found). Owned by messages/. None holds side buffers, so each may
# cross processes through CAF's middleman; the agent checks the index
# against the trace it loaded.
@0xc1717cb24e5bb6d6;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("kvtier::msg");

struct ReplayStep {
  # Run trace request `index` (0-based, in the agent's copy of the trace)
  # through this node's service, verified with the oracle.
  index @0 :UInt64;
}

struct ReplayStepReply {
  # What the request was served (prompt tokens by tier).
  inputTokens @0 :UInt64;
  ramTokens @1 :UInt64;
  ssdTokens @2 :UInt64;
  peerTokens @3 :UInt64;
  freshTokens @4 :UInt64;
  # States the oracle checked (0 or 1) and rejected (must be 0).
  verified @5 :UInt32;
  wrong @6 :UInt32;
  # The request could never be admitted (served nothing).
  refused @7 :Bool;
  # The service's answer to the acquire: none, ram, ssd, checkpoint, peer.
  source @8 :Text;
}

struct ReplayFinish {
  # Complete the running requests, settle, and report this node's totals.
}

struct ReplayFinishReply {
  # The node's replay report (runtime/tools/report.hpp to_json) with its
  # service's peer-tier counters under "peer", as JSON text.
  report @0 :Text;
}
