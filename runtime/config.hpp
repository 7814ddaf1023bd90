// kvtier's configuration: CAF's config file format (INI, one level of
// sections) with command-line overrides (`--section.key=value`), read into
// one plain `service_options` value and validated before anything starts.
//
// Policy: every invalid value is refused at start with an `ec::invalid_config`
// error naming the key and the accepted range; an unknown key inside one of
// kvtier's sections, and a dotted section such as [kvtier.ram-tier] (which
// CAF would silently ignore), are refused too, as is a key that moved to
// another section (admission.model is now model.preset), naming the new key.
// `running_model` is the one resolution of the [model] section into the
// model identity every part of the service uses. Defaults live in
// conf/kvtier.conf, which is compiled in as the embedded default.
//
// A `kvtier_config` is used by one thread while loading; afterwards the
// options are plain values to copy anywhere.
#pragma once

#include "../messages/error.hpp"
#include "../tiers/model_identity.hpp"

#include <caf/actor_system_config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// Every kvtier option (see conf/kvtier.conf for meanings and ranges).
/// The member initializers are the defaults; runtime/options.hpp lists
/// every member once, and conf/kvtier.conf must agree with them.
struct service_options {
  // [ram-tier]
  uint64_t ram_cap_bytes = 2ull << 30;
  /// `ram-tier.objects`: keep exact tensor objects (`service::objects()`);
  /// false: no object port (objects() is null, object calls `unsupported`).
  bool objects = true;
  /// `ram-tier.policy`: the eviction order within a priority, "lru" or
  /// "gdsf" (tiers/entry_ranking.hpp, docs/eviction.md).
  std::string ram_policy = "lru";
  /// `ram-tier.pin-share`: the share of the cap that entries an engine
  /// pinned (`state_request::pin_ms`) may hold, at most; a pin over it is
  /// refused (the put stands).
  double pin_share = 0.25;
  /// `ram-tier.bookkeeping-share`: the share of the cap that the RAM
  /// tier's bookkeeping (index, records, bodies) may cost beside the state
  /// bytes; over it entries are evicted as over the cap. 0: unbounded.
  double bookkeeping_share = 0.5;
  // [ssd-tier]
  std::string ssd_dir;
  uint64_t ssd_cap_bytes = 16ull << 30;
  /// `ssd-tier.policy`: the SSD tier's eviction order within a priority,
  /// "lru" or "gdsf" (tiers/ssd/ssd_index.hpp, docs/eviction.md).
  std::string ssd_policy = "lru";
  uint64_t alignment = 4096;
  uint64_t write_behind_cap_bytes = 512ull << 20;
  std::string io_engine = "auto";
  /// `ssd-tier.write-behind`: kept prefixes are snapshotted to SSD in the
  /// background (RAM actor, docs/ram-tier.md "Write-behind").
  bool write_behind = true;
  /// `ssd-tier.write-behind-bytes-per-s`: the snapshots' write budget.
  uint64_t write_behind_bytes_per_s = 64ull << 20;
  /// `ssd-tier.write-behind-delay-ms`: how long a put waits for its
  /// snapshot (a state replaced sooner is never written).
  uint64_t write_behind_delay_ms = 1000;
  /// `ssd-tier.write-attempts`: attempts a failing write gets.
  uint64_t write_attempts = 4;
  /// `ssd-tier.retry-backoff-ms`: the wait before the second attempt,
  /// doubling after each failure.
  uint64_t retry_backoff_ms = 100;
  /// `ssd-tier.delta-files`: a prefix extending a durable prefix file is
  /// written as a delta naming it (docs/ssd-format.md "Delta files").
  bool delta_files = true;
  /// `ssd-tier.max-chain`: most files one restore reads (a delta chain).
  uint64_t max_chain = 8;
  /// `ssd-tier.admission`: which eviction spills are written, "all" or
  /// "reused" (tiers/ssd/write_admission.hpp).
  std::string ssd_admission = "all";
  /// `ssd-tier.write-budget-bytes-per-day`: bytes the SSD tier writes in
  /// any 24 hours at most; 0: no budget.
  uint64_t ssd_write_budget_bytes_per_day = 0;
  /// `ssd-tier.index-before-serving`: entry files the start-up scan
  /// indexes before the SSD tier serves (a directory of at most this many
  /// starts wholly indexed, its checkpoint files handed over at once); the
  /// rest are indexed while it serves (docs/ssd-format.md "Start-up").
  uint64_t ssd_index_before_serving = 10000;
  /// `ssd-tier.index-batch`: entry files the start-up scan indexes per
  /// step while the SSD actor serves (requests run between steps).
  uint64_t ssd_index_batch = 1024;
  // [model] (docs/configuration.md, "The model"; resolved by
  // `running_model`)
  /// `model.preset`: the geometry preset, unless `model_layers` is set.
  std::string model = "llama-3.1-8b";
  /// `model.scale`: the preset's byte sizes scaled by this, in (0, 1].
  double model_scale = 1.0 / 64;
  /// `model.identity`: the engine's words for what its state bytes mean
  /// (weights, tokenizer, KV dtype, quantisation); part of the fingerprint.
  std::string model_identity;
  /// `model.layers`: the engine's own layer description
  /// (`tiers::model_geometry::parse_layers`); replaces the preset, taken as
  /// given (no scale).
  std::string model_layers;
  // [admission]
  uint64_t kv_budget_bytes = 4ull << 30;
  uint64_t position_limit = 131072;
  uint64_t max_queued = 4096;
  // [service]
  /// `service.idle-demotion-ms`: on by default (five minutes); it acts
  /// only with an SSD tier. The timer runs every quarter of it, never more
  /// often than `actors::min_idle_period`.
  uint64_t idle_demotion_ms = 300000;
  uint64_t checkpoint_every_tokens = 0;
  /// `service.storage-deadline-ms`: the longest any call waits on storage
  /// (docs/api.md "Deadlines").
  uint64_t storage_deadline_ms = 10000;
  /// `service.cold-wait-ms`: how long an acquire that RAM answered with a
  /// usable prefix waits for the cold tiers' finds (docs/api.md
  /// "Deadlines"); 0: until the tier deadline.
  uint64_t cold_wait_ms = 100;
  // [log] (docs/logging.md; messages/log.hpp)
  /// `log.level`: trace, debug, info, warn, error or off; the process-wide
  /// level of kvtier's log, set when a configuration loads and when a
  /// service starts.
  std::string log_level = "info";
  // [cluster] (docs/cluster.md; runtime/cluster/node.hpp)
  /// `cluster.enabled`: publish a node actor and meet peers (`kvtier node`
  /// sets it); the service then loads CAF's middleman.
  bool cluster_enabled = false;
  /// `cluster.listen-address`: loopback unless `cluster_tls`.
  std::string cluster_listen_address = "127.0.0.1";
  /// `cluster.port`: 0 picks a free one.
  uint64_t cluster_port = 0;
  /// `cluster.peers`: HOST:PORT of nodes to join.
  std::vector<std::string> cluster_peers;
  /// `cluster.node-id`: unique in the cluster; empty: HOST:PORT listened on.
  std::string cluster_node_id;
  uint64_t cluster_heartbeat_ms = 250;
  uint64_t cluster_down_after_ms = 2000;
  uint64_t cluster_reconnect_backoff_ms = 100;
  uint64_t cluster_reconnect_backoff_max_ms = 5000;
  /// `cluster.serve-max-bytes`: flat bytes of every transfer this node
  /// offers its peers at once (an offer over it is refused, queue_full).
  uint64_t cluster_serve_max_bytes = uint64_t{1} << 30;
  /// `cluster.serve-idle-ms`: an offer no peer pulled for this long goes.
  uint64_t cluster_serve_idle_ms = 10000;
  /// `cluster.fetch-max-bytes`: bytes of peer fetches in flight at once (a
  /// candidate over it is no candidate).
  uint64_t cluster_fetch_max_bytes = uint64_t{1} << 30;
  /// `cluster.fetch-deadline-ms`: one peer fetch, every holder tried; at
  /// most half of service.storage-deadline-ms less 10 ms (the facade's wait
  /// for a tier) takes effect.
  uint64_t cluster_fetch_deadline_ms = 4000;
  /// `cluster.fetched-to-ssd`: write each fetched entry to the local SSD at
  /// once (besides installing it in RAM).
  bool cluster_fetched_to_ssd = true;
  /// `cluster.feed-ring`: events the event feed keeps (a subscriber behind
  /// by more resyncs from a snapshot); the feed runs without a cluster too.
  uint64_t cluster_feed_ring = 4096;
  /// `cluster.feed-ring-bytes`: the most the kept events may hold, their
  /// keys included (the oldest leave first when either bound is passed).
  uint64_t cluster_feed_ring_bytes = uint64_t{16} << 20;
  /// `cluster.tls`: publish and connect through CAF's OpenSSL module; every
  /// peer must present a certificate signed by `cluster_tls_ca` (both
  /// directions). Required for a non-loopback listen address or peer.
  bool cluster_tls = false;
  /// `cluster.tls-certificate`, `cluster.tls-key`, `cluster.tls-ca`: PEM
  /// files (required with `cluster_tls`; checked readable at start).
  std::string cluster_tls_certificate;
  std::string cluster_tls_key;
  std::string cluster_tls_ca;
  /// `cluster.tls-passphrase`: of an encrypted key (empty: none).
  std::string cluster_tls_passphrase;
  /// `cluster.max-message-bytes`: flat bytes of one message from a peer,
  /// checked before it is decoded (over it: refused and counted).
  uint64_t cluster_max_message_bytes = uint64_t{256} << 20;
  /// `cluster.remote-admin`: peers and remote clients may call admin
  /// operations through the node actor (flush, close, demote...).
  bool cluster_remote_admin = false;
  // The node port's gate (runtime/net/port_guard.hpp): what a
  // connection that has not finished CAF's handshake may cost the node.
  /// `cluster.max-unproven-connections`: connections short of their
  /// handshake at once; more are closed at once (counted).
  uint64_t cluster_max_unproven_connections = 32;
  /// `cluster.handshakes-per-s`: new connections admitted per second (and
  /// at once after a quiet spell); more are closed at once (counted).
  uint64_t cluster_handshakes_per_s = 20;
  /// `cluster.handshake-timeout-ms`: a connection that has not finished
  /// its handshake by then is closed.
  uint64_t cluster_handshake_timeout_ms = 10000;
  /// `cluster.failed-handshake-penalty-ms`: after a connection from an
  /// address failed its handshake, the address waits this long before its
  /// next one is admitted, doubling while it keeps failing, up to
  /// `cluster.handshake-timeout-ms` (loopback addresses are exempt; 0: off).
  uint64_t cluster_failed_handshake_penalty_ms = 200;
  // [route] (docs/cluster.md "Routing"; tiers/routing.hpp): the cost of
  // serving a request on a node, in prefill-token equivalents.
  /// `route.prefill-cost`: per prompt token the node must compute.
  double route_prefill_cost = 1.0;
  /// `route.ram-cost`, `route.ssd-cost`: per token reused from the node's
  /// own RAM or SSD.
  double route_ram_cost = 0.0;
  double route_ssd_cost = 0.1;
  /// `route.peer-cost`, `route.peer-ssd-cost`: per token fetched from a
  /// peer's RAM or a peer's SSD.
  double route_peer_cost = 0.2;
  double route_peer_ssd_cost = 0.3;
  /// `route.load-weight`: per token of the router's recent load figure for
  /// the node (prompt tokens it sent there lately).
  double route_load_weight = 0.1;
  /// `route.load-window`: decisions the recent load figure averages over.
  uint64_t route_load_window = 64;
  /// `route.full-penalty`: per prompt token, added for a node without
  /// admission headroom (queued admits or too little free budget).
  double route_full_penalty = 1.0;
  // [http] (docs/operations.md): the operator's endpoint, served by the
  // service itself (runtime/http/endpoint.hpp).
  /// `http.enabled`: serve /metrics, /stats, /health and the admin routes.
  bool http_enabled = false;
  /// `http.address`, `http.port`: where (a loopback address unless
  /// `http_admin_token` is set; port 0: any free port).
  std::string http_address = "127.0.0.1";
  uint64_t http_port = 9470;
  /// `http.admin-token`: the bearer token the admin routes require (empty:
  /// none, allowed on a loopback address only).
  std::string http_admin_token;
  /// `http.max-connections`: connections served at once (more are
  /// answered 503 and closed).
  uint64_t http_max_connections = 16;
  /// `http.timeout-ms`: longest a client may take to send a request or
  /// read the answer (an idle keep-alive connection closes after it).
  uint64_t http_timeout_ms = 5000;

  /// Checks every value against its accepted range.
  caf::error validate() const;
  /// The [cluster] part of `validate`.
  caf::error validate_cluster() const;
  /// The [http] part of `validate`.
  caf::error validate_http() const;
};

/// The model `o` describes: the geometry of `o.model_layers` when set,
/// else preset `o.model` at `o.model_scale`, with `o.model_identity`. The
/// one resolution every part uses (spawn, admission, the facade, the SSD
/// fingerprint, replay, tests' oracles). `ec::invalid_config` naming the
/// key that is wrong.
caf::expected<tiers::model_identity> running_model(const service_options& o);

/// `running_model(o)`'s geometry.
caf::expected<tiers::model_geometry> running_geometry(const service_options& o);

/// The [replay] section: how `kvtier replay` and `kvtier demo` drive the
/// service (docs/replay.md). Zero for a scale or cap, and an empty SSD
/// directory, keep the service's; idle demotion is set for the replay.
struct replay_settings {
  std::string trace =
    "tests/traces/mooncake-fast25/conversation_trace.jsonl.gz";
  /// The first half hour of the conversation trace (`make demo`).
  uint64_t max_requests = 6000;
  bool verify = true;
  bool settle = true;
  double speed = 0;
  uint64_t batch = 1;
  double prefill_tokens_per_s = 10000;
  /// 1/4096 of the preset's sizes: 32 bytes per token for llama-3.1-8b.
  double model_scale = 1.0 / 4096;
  /// 256 MiB: below the conversation trace's working set, so the demo's
  /// SSD serves a share (docs/replay.md).
  uint64_t ram_cap_bytes = 256ull << 20;
  uint64_t ssd_cap_bytes = 1ull << 30;
  /// The replay's SSD directory (empty: keep ssd-tier.dir).
  std::string ssd_dir = "demo-data/ssd";
  /// Idle demotion during the replay, applied always: 0 (off) is what the
  /// --simulate reference models.
  uint64_t idle_demotion_ms = 0;
  bool clean_ssd = true;
  /// `replay.write-behind`: keep the service's write-behind on during the
  /// replay (false: off, so the --simulate reference, which models no
  /// background snapshots, agrees exactly).
  bool write_behind = false;

  /// Checks every value against its accepted range.
  caf::error validate() const;

  /// `o` with this section's scale, caps, SSD directory and idle demotion
  /// applied.
  service_options apply(service_options o) const;
};

/// The CAF actor system configuration with kvtier's options declared.
class kvtier_config : public caf::actor_system_config {
public:
  kvtier_config();

  /// Parses `ini_text` then the command line (which wins), then validates.
  /// A kvtier option on the command line is `--section.key=value` (a bare
  /// `--section.key` sets a boolean); its value is written as in the file
  /// (strings need no quotes). Sizes (`*-bytes*` keys) take units: `8GiB`,
  /// `512MB`, `64KiB`, `4096`. Errors name where: `FILE:LINE: KEY: ...` for
  /// the file (`source`), `--KEY=VALUE: ...` for the command line.
  caf::error load(int argc, char** argv, const std::string& ini_text,
                  const std::string& source = "the embedded default");

  /// `load` with the embedded default, or the file named by
  /// `--config-file=FILE` on the command line.
  caf::error load(int argc, char** argv);

  /// Loads CAF's middleman module (once; before the actor system starts),
  /// for a service with `cluster.enabled`; with `cluster.tls` also CAF's
  /// OpenSSL module, configured with the node's certificate, key and CA.
  void load_middleman();

  service_options options;
  replay_settings replay;

private:
  /// Installs the scheduler `scheduler.policy` names when it is kvtier's
  /// own (`affine`, runtime/affine_sharing.hpp); refuses unknown names.
  caf::error load_scheduler();

  bool scheduler_loaded_ = false;
  bool middleman_loaded_ = false;
};

/// conf/kvtier.conf as compiled into the program.
const char* embedded_default_config();

} // namespace kvtier::runtime
