// The one list of kvtier's options (each option is declared here once,
// checked by tests/runtime/options_test.cpp): every field of `service_options`
// and `replay_settings` with its section, key and help line, as X-macros.
// Defaults live in the member initializers of those structs
// (runtime/config.hpp), the only place they are written in code. From this list
// come the options CAF parses
// (`kvtier_config`), the keys a section accepts (unknown ones are
// refused), what `kvtier config` prints, and the comparisons the tests
// make: conf/kvtier.conf (compiled in as the embedded default) must set
// every option to exactly `service_options{}`'s and `replay_settings{}`'s
// value, and docs/configuration.md must name every key
// (tests/runtime/options_test.cpp). A new option is one line here, a
// member with its default, a line in conf/kvtier.conf and a row in the
// docs; the test fails, naming the option, when one of them is missing.
//
// Plain functions on values; any thread.
#pragma once

#include "runtime/config.hpp"
#include "runtime/net/tls.hpp"

#include <string>
#include <vector>

// clang-format off
/// X(section, key, member, help) for every `service_options` field.
#define KVTIER_SERVICE_OPTIONS(X)                                              \
  X("ram-tier", "cap-bytes", ram_cap_bytes, "bytes of state kept in RAM")      \
  X("ram-tier", "objects", objects,                                            \
    "keep exact tensor objects (objects()); false: no object port")            \
  X("ssd-tier", "dir", ssd_dir, "SSD tier directory (empty: no cold tier)")    \
  X("ssd-tier", "cap-bytes", ssd_cap_bytes, "bytes of entry files kept")       \
  X("ssd-tier", "alignment", alignment, "payload alignment in entry files")    \
  X("ssd-tier", "write-behind-cap-bytes", write_behind_cap_bytes,              \
    "bytes of writes that may wait for the disk")                              \
  X("ssd-tier", "io-engine", io_engine, "auto, uring or threads")              \
  X("ssd-tier", "write-behind", write_behind,                                  \
    "snapshot kept prefixes to SSD in the background")                         \
  X("ssd-tier", "write-behind-bytes-per-s", write_behind_bytes_per_s,          \
    "write budget of the snapshots")                                           \
  X("ssd-tier", "write-behind-delay-ms", write_behind_delay_ms,                \
    "how long a put waits for its snapshot")                                   \
  X("ssd-tier", "write-attempts", write_attempts,                              \
    "attempts a failing write gets before it is given up")                     \
  X("ssd-tier", "retry-backoff-ms", retry_backoff_ms,                          \
    "wait before a failed write's next attempt (doubling)")                    \
  X("ssd-tier", "delta-files", delta_files,                                    \
    "write an extension of a durable prefix as a delta file")                  \
  X("ssd-tier", "max-chain", max_chain,                                        \
    "most files one restore reads (a delta chain)")                            \
  X("model", "identity", model_identity,                                       \
    "the engine's words for what its state means (weights, tokenizer, "        \
    "KV dtype, quantisation)")                                                 \
  X("model", "preset", model, "geometry preset (unless layers is set)")        \
  X("model", "scale", model_scale, "scale of the preset's byte sizes")         \
  X("model", "layers", model_layers,                                           \
    "the engine's own layers, e.g. 32*kv:4096 (replaces the preset)")          \
  X("admission", "kv-budget-bytes", kv_budget_bytes,                           \
    "bytes admitted requests hold")                                            \
  X("admission", "position-limit", position_limit, "max prompt + new tokens")  \
  X("admission", "max-queued", max_queued,                                     \
    "requests admit_queued may hold waiting")                                  \
  X("service", "idle-demotion-ms", idle_demotion_ms,                           \
    "idle entries move to SSD after this long (0: off)")                       \
  X("service", "checkpoint-every-tokens", checkpoint_every_tokens, "0: none")  \
  X("service", "storage-deadline-ms", storage_deadline_ms,                     \
    "longest a call waits on storage")                                         \
  X("service", "cold-wait-ms", cold_wait_ms,                                   \
    "longest a RAM hit waits for the cold tiers' answers")                     \
  X("log", "level", log_level,                                                 \
    "trace, debug, info, warn, error or off (stderr)")                         \
  X("cluster", "enabled", cluster_enabled,                                     \
    "publish a node actor and meet peers (kvtier node sets it)")               \
  X("cluster", "listen-address", cluster_listen_address,                       \
    "address the node listens on (loopback unless cluster.tls)")                             \
  X("cluster", "port", cluster_port, "port the node listens on (0: any)")      \
  X("cluster", "peers", cluster_peers, "HOST:PORT of nodes to join")           \
  X("cluster", "node-id", cluster_node_id,                                     \
    "this node's unique name (empty: HOST:PORT)")                              \
  X("cluster", "heartbeat-ms", cluster_heartbeat_ms,                           \
    "heartbeat period to every up peer")                                       \
  X("cluster", "down-after-ms", cluster_down_after_ms,                         \
    "a peer silent this long is down")                                         \
  X("cluster", "reconnect-backoff-ms", cluster_reconnect_backoff_ms,           \
    "wait before reconnecting to a down peer (doubling)")                      \
  X("cluster", "reconnect-backoff-max-ms", cluster_reconnect_backoff_max_ms,   \
    "longest wait between reconnection attempts")                              \
  X("cluster", "serve-max-bytes", cluster_serve_max_bytes,                     \
    "bytes this node offers to peers at once")                                 \
  X("cluster", "serve-idle-ms", cluster_serve_idle_ms,                         \
    "an offer no peer pulled for this long goes")                              \
  X("cluster", "fetch-max-bytes", cluster_fetch_max_bytes,                     \
    "bytes of peer fetches in flight at once")                                 \
  X("cluster", "fetch-deadline-ms", cluster_fetch_deadline_ms,                 \
    "longest one peer fetch may take, every holder tried")                     \
  X("cluster", "fetched-to-ssd", cluster_fetched_to_ssd,                       \
    "write each entry fetched from a peer to the local SSD at once")           \
  X("cluster", "feed-ring", cluster_feed_ring,                                 \
    "events the event feed keeps for subscribers that come back")             \
  X("cluster", "tls", cluster_tls,                                             \
    "TLS with mutual authentication between nodes (CAF's OpenSSL module)")    \
  X("cluster", "tls-certificate", cluster_tls_certificate,                     \
    "this node's certificate chain (PEM), signed by the cluster's CA")        \
  X("cluster", "tls-key", cluster_tls_key, "this node's private key (PEM)")    \
  X("cluster", "tls-ca", cluster_tls_ca,                                       \
    "the cluster's CA certificate (PEM) every peer must be signed by")        \
  X("cluster", "tls-passphrase", cluster_tls_passphrase,                       \
    "passphrase of an encrypted tls-key (empty: none)")                       \
  X("cluster", "max-message-bytes", cluster_max_message_bytes,                 \
    "largest message a peer may send, checked before decoding")               \
  X("cluster", "remote-admin", cluster_remote_admin,                           \
    "let peers and remote clients call admin operations (flush, close...)")   \
  X("cluster", "max-unproven-connections", cluster_max_unproven_connections,   \
    "connections to the node's port short of their handshake at once")       \
  X("cluster", "handshakes-per-s", cluster_handshakes_per_s,                   \
    "new connections the node's port admits per second")                      \
  X("cluster", "handshake-timeout-ms", cluster_handshake_timeout_ms,           \
    "a connection that has not finished its handshake by then is closed")     \
  X("cluster", "failed-handshake-penalty-ms",                                  \
    cluster_failed_handshake_penalty_ms,                                       \
    "wait of an address after a failed handshake (doubling; 0: off)")         \
  X("route", "prefill-cost", route_prefill_cost,                               \
    "cost per prompt token a node computes")                                   \
  X("route", "ram-cost", route_ram_cost,                                       \
    "cost per token reused from the node's RAM")                               \
  X("route", "ssd-cost", route_ssd_cost,                                       \
    "cost per token reused from the node's SSD")                               \
  X("route", "peer-cost", route_peer_cost,                                     \
    "cost per token fetched from a peer's RAM")                                \
  X("route", "peer-ssd-cost", route_peer_ssd_cost,                             \
    "cost per token fetched from a peer's SSD")                                \
  X("route", "load-weight", route_load_weight,                                 \
    "cost per token of recent load the router sent the node")                  \
  X("route", "load-window", route_load_window,                                 \
    "decisions the recent load averages over")                                 \
  X("route", "full-penalty", route_full_penalty,                               \
    "cost per prompt token on a node without admission headroom")             \
  X("http", "enabled", http_enabled,                                           \
    "serve /metrics, /stats, /health and the admin routes over HTTP")         \
  X("http", "address", http_address,                                           \
    "address the endpoint listens on (loopback unless admin-token is set)")   \
  X("http", "port", http_port, "port the endpoint listens on (0: any)")        \
  X("http", "admin-token", http_admin_token,                                   \
    "bearer token the admin routes require (empty: none, loopback only)")     \
  X("http", "max-connections", http_max_connections,                           \
    "connections served at once (more: 503)")                                 \
  X("http", "timeout-ms", http_timeout_ms,                                     \
    "longest a client may take to send a request or read the answer")

/// X(section, key, member, help) for every `replay_settings` field.
#define KVTIER_REPLAY_OPTIONS(X)                                               \
  X("replay", "trace", trace, "trace file or weka directory")                  \
  X("replay", "max-requests", max_requests, "0: all")                          \
  X("replay", "verify", verify, "verify every served state")                   \
  X("replay", "settle", settle, "wait for spills after each call")             \
  X("replay", "speed", speed, "0: as fast as possible")                        \
  X("replay", "batch", batch, "requests admitted at once")                     \
  X("replay", "prefill-tokens-per-s", prefill_tokens_per_s, "assumed rate")    \
  X("replay", "model-scale", model_scale, "0: model.scale")                    \
  X("replay", "ram-cap-bytes", ram_cap_bytes, "0: ram-tier.cap-bytes")         \
  X("replay", "ssd-cap-bytes", ssd_cap_bytes, "0: ssd-tier.cap-bytes")         \
  X("replay", "ssd-dir", ssd_dir, "the replay's SSD directory (empty: "        \
    "ssd-tier.dir)")                                                           \
  X("replay", "idle-demotion-ms", idle_demotion_ms,                            \
    "idle demotion during the replay (0: off, as the reference)")              \
  X("replay", "clean-ssd", clean_ssd, "start with an empty SSD fingerprint")   \
  X("replay", "write-behind", write_behind,                                    \
    "keep the service's write-behind (false: off, as the reference)")
// clang-format on

namespace kvtier::runtime {

/// One option as the configuration file writes it.
struct option_value {
  std::string section;
  std::string key;
  /// The value in the file's syntax: a number, true/false, or a quoted
  /// string.
  std::string text;
};

/// Every option of `o` (or `r`), in the list's order.
std::vector<option_value> option_values(const service_options& o);
std::vector<option_value> option_values(const replay_settings& r);

/// One line per option whose values differ: "section.key: A, not B" (A
/// is `a`'s value, B `b`'s); empty when they agree on every option.
std::vector<std::string> differing_options(const service_options& a,
                                           const service_options& b);
std::vector<std::string> differing_options(const replay_settings& a,
                                           const replay_settings& b);

/// Every "section.key" of both lists.
std::vector<std::string> option_names();

/// `o`'s TLS files (runtime/net/tls.hpp; empty strings when
/// `o.cluster_tls` is off).
net::tls_files tls_files_of(const service_options& o);

} // namespace kvtier::runtime
