// The one list of kvtier's options: every field of `service_options` and
// `replay_settings` with its section, key, rule and help line, as X-macros,
// each option declared here once. Its default is the member's initializer
// (runtime/config.hpp), the only place a default is written in code; its
// rule, here, is the only place its accepted values are: a numeric option's
// range (min .. max, bounds that may name another option) and unit, and
// any rule that is not a range (a power of two, a word list, an address's
// syntax, the model) as a named check in `checks` that the rule points to
// (runtime/option_rules.hpp has the words rules are written in).
//
// From this list come the options CAF parses (`kvtier_config`), the keys a
// section accepts (unknown ones are refused), `service_options::validate`
// and `replay_settings::validate` (errors name the key, the value and the
// range as rendered here), what `kvtier config` prints, and what the tests
// compare (tests/runtime/options_test.cpp): conf/kvtier.conf (compiled in
// as the embedded default) must set every option to exactly
// `service_options{}`'s and `replay_settings{}`'s value and state every
// number's range and unit, and docs/configuration.md must state every
// option's default, range and unit as `option_declarations` renders them.
//
// Adding an option: one line in the list below, a member with its default
// in runtime/config.hpp, a line in conf/kvtier.conf (a number's comment
// ending with `; Range: RANGE (UNIT)`) and a row in docs/configuration.md;
// the tests fail, naming the option, when one of them is missing or
// disagrees.
//
// Plain functions on values and constant rules; any thread.
#pragma once

#include "runtime/config.hpp"
#include "runtime/net/tls.hpp"
#include "runtime/option_rules.hpp"

#include <string>
#include <string_view>
#include <vector>

// clang-format off
/// X(section, key, member, rule, help) for every `service_options` field.
#define KVTIER_SERVICE_OPTIONS(X)                                              \
  X("ram-tier", "cap-bytes", ram_cap_bytes, bytes(MiB, 16 * TiB),              \
    "bytes of state kept in RAM")                                              \
  X("ram-tier", "objects", objects, flag(),                                    \
    "keep exact tensor objects (objects()); false: no object port")            \
  X("ram-tier", "policy", ram_policy, checked(checks::ram_policy),             \
    "eviction order within a priority: lru or gdsf")                           \
  X("ram-tier", "pin-share", pin_share, number("ratio", 0, 1),                 \
    "share of the cap engine pins may hold (0: no pin is granted)")            \
  X("ram-tier", "bookkeeping-share", bookkeeping_share,                        \
    number("ratio", 0, 16),                                                    \
    "share of the cap the RAM tier's bookkeeping may cost beside state "       \
    "(0: unbounded)")                                                          \
  X("ssd-tier", "dir", ssd_dir, text("a path"),                                \
    "SSD tier directory (empty: no cold tier)")                                \
  X("ssd-tier", "cap-bytes", ssd_cap_bytes, bytes(MiB, PiB),                   \
    "bytes of entry files kept")                                               \
  X("ssd-tier", "policy", ssd_policy, checked(checks::ram_policy),             \
    "eviction order of SSD files within a priority: lru or gdsf")              \
  X("ssd-tier", "alignment", alignment,                                        \
    bytes(512, MiB).and_is(checks::power_of_two),                              \
    "payload alignment in entry files")                                        \
  X("ssd-tier", "write-behind-cap-bytes", write_behind_cap_bytes,              \
    bytes(MiB, TiB),                                                           \
    "bytes of writes that may wait for the disk")                              \
  X("ssd-tier", "io-engine", io_engine, checked(checks::io_engine),            \
    "auto, uring or threads")                                                  \
  X("ssd-tier", "write-behind", write_behind, flag(),                          \
    "snapshot kept prefixes to SSD in the background")                         \
  X("ssd-tier", "write-behind-bytes-per-s", write_behind_bytes_per_s,          \
    number("bytes/s", MiB, 64 * GiB),                                          \
    "write budget of the snapshots")                                           \
  X("ssd-tier", "write-behind-delay-ms", write_behind_delay_ms,                \
    millis(0, 3600000),                                                        \
    "how long a put waits for its snapshot")                                   \
  X("ssd-tier", "write-attempts", write_attempts, count(1, 100),               \
    "attempts a failing write gets before it is given up")                     \
  X("ssd-tier", "retry-backoff-ms", retry_backoff_ms, millis(1, 60000),        \
    "wait before a failed write's next attempt (doubling)")                    \
  X("ssd-tier", "delta-files", delta_files, flag(),                            \
    "write an extension of a durable prefix as a delta file")                  \
  X("ssd-tier", "max-chain", max_chain, count(1, 64),                          \
    "most files one restore reads (a delta chain)")                            \
  X("ssd-tier", "admission", ssd_admission, checked(checks::ssd_admission),    \
    "which eviction spills are written: all, or reused")                       \
  X("ssd-tier", "write-budget-bytes-per-day", ssd_write_budget_bytes_per_day,  \
    bytes(MiB, PiB).or_zero(),                                                 \
    "bytes the SSD tier writes in any 24 hours (0: no budget)")                \
  X("ssd-tier", "index-before-serving", ssd_index_before_serving,             \
    count(0, 1000000000),                                                      \
    "entry files indexed at start before the SSD tier serves")                 \
  X("ssd-tier", "index-batch", ssd_index_batch, count(1, 1048576),             \
    "entry files the start-up scan indexes per step while serving")            \
  X("model", "identity", model_identity, checked(checks::model_identity),      \
    "the engine's words for what its state means (weights, tokenizer, KV "     \
    "dtype, quantisation)")                                                    \
  X("model", "preset", model, checked(checks::model_preset),                   \
    "geometry preset (unless layers is set)")                                  \
  X("model", "scale", model_scale, number("ratio", 0, 1).exclusive_min(),      \
    "scale of the preset's byte sizes")                                        \
  X("model", "layers", model_layers, checked(checks::model_layers),            \
    "the engine's own layers, e.g. 32*kv:4096 (replaces the preset)")          \
  X("admission", "kv-budget-bytes", kv_budget_bytes, bytes(MiB, 16 * TiB),     \
    "bytes admitted requests hold")                                            \
  X("admission", "position-limit", position_limit, tokens(1, 16777216),        \
    "max prompt + new tokens")                                                 \
  X("admission", "max-queued", max_queued, count(1, 1048576),                  \
    "requests admit_queued may hold waiting")                                  \
  X("service", "idle-demotion-ms", idle_demotion_ms, millis(0, 604800000),     \
    "idle entries move to SSD after this long (0: off)")                       \
  X("service", "checkpoint-every-tokens", checkpoint_every_tokens,             \
    tokens(0, 1048576),                                                        \
    "0: none")                                                                 \
  X("service", "storage-deadline-ms", storage_deadline_ms,                     \
    millis(10, 3600000),                                                       \
    "longest a call waits on storage")                                         \
  X("service", "cold-wait-ms", cold_wait_ms, millis(0, 60000),                 \
    "longest a RAM hit waits for the cold tiers' answers")                     \
  X("log", "level", log_level, checked(checks::log_level),                     \
    "trace, debug, info, warn, error or off (stderr)")                         \
  X("cluster", "enabled", cluster_enabled, flag(),                             \
    "publish a node actor and meet peers (kvtier node sets it)")               \
  X("cluster", "listen-address", cluster_listen_address,                       \
    checked(checks::listen_address),                                           \
    "address the node listens on (loopback unless cluster.tls)")               \
  X("cluster", "port", cluster_port, number("port", 0, 65535),                 \
    "port the node listens on (0: any)")                                       \
  X("cluster", "peers", cluster_peers, checked(checks::peer_addresses),        \
    "HOST:PORT of nodes to join")                                              \
  X("cluster", "node-id", cluster_node_id, checked(checks::node_id),           \
    "this node's unique name (empty: HOST:PORT)")                              \
  X("cluster", "heartbeat-ms", cluster_heartbeat_ms, millis(10, 60000),        \
    "heartbeat period to every up peer")                                       \
  X("cluster", "down-after-ms", cluster_down_after_ms,                         \
    millis(times(2, "cluster.heartbeat-ms"), 3600000),                         \
    "a peer silent this long is down")                                         \
  X("cluster", "reconnect-backoff-ms", cluster_reconnect_backoff_ms,           \
    millis(10, 600000),                                                        \
    "wait before reconnecting to a down peer (doubling)")                      \
  X("cluster", "reconnect-backoff-max-ms", cluster_reconnect_backoff_max_ms,   \
    millis(times(1, "cluster.reconnect-backoff-ms"), 3600000),                 \
    "longest wait between reconnection attempts")                              \
  X("cluster", "serve-max-bytes", cluster_serve_max_bytes, bytes(MiB, TiB),    \
    "bytes this node offers to peers at once")                                 \
  X("cluster", "serve-idle-ms", cluster_serve_idle_ms, millis(100, 3600000),   \
    "an offer no peer pulled for this long goes")                              \
  X("cluster", "fetch-max-bytes", cluster_fetch_max_bytes, bytes(4096, TiB),   \
    "bytes of peer fetches in flight at once")                                 \
  X("cluster", "fetch-deadline-ms", cluster_fetch_deadline_ms,                 \
    millis(10, 3600000),                                                       \
    "longest one peer fetch may take, every holder tried")                     \
  X("cluster", "fetched-to-ssd", cluster_fetched_to_ssd, flag(),               \
    "write each entry fetched from a peer to the local SSD at once")           \
  X("cluster", "feed-ring", cluster_feed_ring, count(16, 1048576),             \
    "events the event feed keeps for subscribers that come back")              \
  X("cluster", "feed-ring-bytes", cluster_feed_ring_bytes, bytes(64 * KiB, TiB), \
    "bytes the event feed's kept events may hold (each carries its key)")      \
  X("cluster", "tls", cluster_tls, flag(),                                     \
    "TLS with mutual authentication between nodes (CAF's OpenSSL module)")     \
  X("cluster", "tls-certificate", cluster_tls_certificate,                     \
    checked(checks::tls_file),                                                 \
    "this node's certificate chain (PEM), signed by the cluster's CA")         \
  X("cluster", "tls-key", cluster_tls_key, checked(checks::tls_file),          \
    "this node's private key (PEM)")                                           \
  X("cluster", "tls-ca", cluster_tls_ca, checked(checks::tls_file),            \
    "the cluster's CA certificate (PEM) every peer must be signed by")         \
  X("cluster", "tls-passphrase", cluster_tls_passphrase, text("text"),         \
    "passphrase of an encrypted tls-key (empty: none)")                        \
  X("cluster", "max-message-bytes", cluster_max_message_bytes,                 \
    bytes(MiB, GiB),                                                           \
    "largest message a peer may send, checked before decoding")                \
  X("cluster", "remote-admin", cluster_remote_admin, flag(),                   \
    "let peers and remote clients call admin operations (flush, close...)")    \
  X("cluster", "max-unproven-connections", cluster_max_unproven_connections,   \
    count(1, 65536),                                                           \
    "connections to the node's port short of their handshake at once")         \
  X("cluster", "handshakes-per-s", cluster_handshakes_per_s,                   \
    number("per s", 1, 1000000),                                               \
    "new connections the node's port admits per second")                       \
  X("cluster", "handshake-timeout-ms", cluster_handshake_timeout_ms,           \
    millis(100, 600000),                                                       \
    "a connection that has not finished its handshake by then is closed")      \
  X("cluster", "failed-handshake-penalty-ms",                                  \
    cluster_failed_handshake_penalty_ms,                                       \
    millis(0, times(1, "cluster.handshake-timeout-ms")),                       \
    "wait of an address after a failed handshake (doubling; 0: off)")          \
  X("route", "prefill-cost", route_prefill_cost, cost(0, 1e6),                 \
    "cost per prompt token a node computes")                                   \
  X("route", "ram-cost", route_ram_cost, cost(0, 1e6),                         \
    "cost per token reused from the node's RAM")                               \
  X("route", "ssd-cost", route_ssd_cost, cost(0, 1e6),                         \
    "cost per token reused from the node's SSD")                               \
  X("route", "peer-cost", route_peer_cost, cost(0, 1e6),                       \
    "cost per token fetched from a peer's RAM")                                \
  X("route", "peer-ssd-cost", route_peer_ssd_cost, cost(0, 1e6),               \
    "cost per token fetched from a peer's SSD")                                \
  X("route", "load-weight", route_load_weight, cost(0, 1e6),                   \
    "cost per token of recent load the router sent the node")                  \
  X("route", "load-window", route_load_window, count(1, 1000000),              \
    "decisions the recent load averages over")                                 \
  X("route", "full-penalty", route_full_penalty, cost(0, 1e6),                 \
    "cost per prompt token on a node without admission headroom")              \
  X("http", "enabled", http_enabled, flag(),                                   \
    "serve /metrics, /stats, /health and the admin routes over HTTP")          \
  X("http", "address", http_address, checked(checks::http_address),            \
    "address the endpoint listens on (loopback unless admin-token is set)")    \
  X("http", "port", http_port, number("port", 0, 65535),                       \
    "port the endpoint listens on (0: any)")                                   \
  X("http", "admin-token", http_admin_token, checked(checks::admin_token),     \
    "bearer token the admin routes require (empty: none, loopback only)")      \
  X("http", "max-connections", http_max_connections, count(1, 4096),           \
    "connections served at once (more: 503)")                                  \
  X("http", "timeout-ms", http_timeout_ms, millis(10, 3600000),                \
    "longest a client may take to send a request or read the answer")

/// X(section, key, member, rule, help) for every `replay_settings` field.
#define KVTIER_REPLAY_OPTIONS(X)                                               \
  X("replay", "trace", trace, text("a path"),                                  \
    "trace file or weka directory")                                            \
  X("replay", "max-requests", max_requests, count(0, 4294967296),              \
    "0: all")                                                                  \
  X("replay", "verify", verify, flag(),                                        \
    "verify every served state")                                               \
  X("replay", "settle", settle, flag(),                                        \
    "wait for spills after each call")                                         \
  X("replay", "speed", speed, number("ratio", 0, 1e6),                         \
    "0: as fast as possible")                                                  \
  X("replay", "batch", batch, count(1, 4096),                                  \
    "requests admitted at once")                                               \
  X("replay", "prefill-tokens-per-s", prefill_tokens_per_s,                    \
    number("tokens/s", 0, 1e9).exclusive_min(),                                \
    "assumed rate")                                                            \
  X("replay", "model-scale", model_scale,                                      \
    number("ratio", 0, 1).exclusive_min().or_zero(),                           \
    "0: model.scale")                                                          \
  X("replay", "ram-cap-bytes", ram_cap_bytes, bytes(MiB, 16 * TiB).or_zero(),  \
    "0: ram-tier.cap-bytes")                                                   \
  X("replay", "ssd-cap-bytes", ssd_cap_bytes, bytes(MiB, PiB).or_zero(),       \
    "0: ssd-tier.cap-bytes")                                                   \
  X("replay", "ssd-dir", ssd_dir, text("a path"),                              \
    "the replay's SSD directory (empty: ssd-tier.dir)")                        \
  X("replay", "idle-demotion-ms", idle_demotion_ms, millis(0, 604800000),      \
    "idle demotion during the replay (0: off, as the reference)")              \
  X("replay", "clean-ssd", clean_ssd, flag(),                                  \
    "start with an empty SSD fingerprint")                                     \
  X("replay", "write-behind", write_behind, flag(),                            \
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

/// One option as the docs state it.
struct option_declaration {
  std::string name; // "section.key"
  /// The default as `kvtier config` prints it.
  std::string default_text;
  /// The accepted values: `range_text` of its rule.
  std::string range;
  std::string unit;
};

/// Every option of both lists, in their order.
std::vector<option_declaration> option_declarations();

/// The rule of option `name` ("section.key"); null when there is none.
const option_rule* rule_of(std::string_view name);

/// What `r` accepts, in words: "1 MiB .. 16 TiB", "0 or (0, 1]",
/// "2 x cluster.heartbeat-ms .. 3600000", "a power of two, 512 .. 1 MiB",
/// a check's words, or the rule's own words.
std::string range_text(const option_rule& r);

/// A number as the docs and the errors write it: the shortest text that
/// reads back as `v` (a byte count of whole MiB, GiB, TiB or PiB in that
/// unit when `unit` is "bytes").
std::string number_text(double v, std::string_view unit = "");

/// Checks option `name` of `o` against its rule (`validate` does every
/// one); `running_model` uses it for `model.scale`.
caf::error check_option(const service_options& o, std::string_view name);

/// `o`'s TLS files (runtime/net/tls.hpp; empty strings when
/// `o.cluster_tls` is off).
net::tls_files tls_files_of(const service_options& o);

} // namespace kvtier::runtime
