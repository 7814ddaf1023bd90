#include "runtime/service/spawn.hpp"

#include "actors/admission_actor.hpp"
#include "actors/checkpoints_actor.hpp"
#include "actors/feed_follower_actor.hpp"
#include "actors/peer_tier_actor.hpp"
#include "actors/ram_tier_actor.hpp"
#include "actors/serve_actor.hpp"
#include "actors/sessions_actor.hpp"
#include "actors/ssd_tier_actor.hpp"
#include "runtime/net/address.hpp"
#include "tiers/ssd/file_system.hpp"

#include "messages/error.hpp"
#include "messages/log.hpp"

#include <caf/send.hpp>

namespace kvtier::runtime {

caf::expected<actors::ssd_tier_actor>
spawn_ssd_tier(caf::actor_system& sys, const service_options& opts,
               tiers::ssd::file_system* fs,
               std::vector<tiers::checkpoint_file>* saved) {
  namespace ssd = tiers::ssd;
  auto parts = std::make_shared<actors::ssd_parts>();
  parts->relay = std::make_shared<actors::completion_relay>();
  if (!fs) {
    parts->own_fs = std::make_unique<ssd::posix_file_system>();
    fs = parts->own_fs.get();
  }
  auto choice = ssd::parse_engine_choice(opts.io_engine);
  if (!choice)
    return std::move(choice.error());
  auto engine = ssd::make_io_engine(*choice, parts->relay->sink());
  if (!engine)
    return std::move(engine.error());
  parts->engine = std::make_unique<ssd::counted_engine>(std::move(*engine));
  auto model = running_model(opts);
  if (!model)
    return std::move(model.error());
  ssd::ssd_config cfg;
  cfg.index_at_open = false; // `index_step` below, then the actor
  cfg.dir = opts.ssd_dir;
  cfg.model = std::move(*model); // names the directory: <dir>/<fingerprint>
  cfg.byte_cap = opts.ssd_cap_bytes;
  cfg.policy = tiers::parse_ram_policy(opts.ssd_policy)
                 .value_or(tiers::ram_policy::lru); // validated
  cfg.queue_cap = opts.write_behind_cap_bytes;
  cfg.alignment = static_cast<uint32_t>(opts.alignment);
  cfg.checksum_chunk = std::max<uint32_t>(cfg.alignment, cfg.checksum_chunk);
  cfg.max_attempts = static_cast<uint32_t>(opts.write_attempts);
  cfg.delta_files = opts.delta_files;
  cfg.max_chain = static_cast<uint32_t>(opts.max_chain);
  auto rule = ssd::parse_admission_rule(opts.ssd_admission);
  if (!rule)
    return std::move(rule.error());
  cfg.admission = *rule;
  cfg.write_budget_bytes_per_day = opts.ssd_write_budget_bytes_per_day;
  parts->cap_bytes = opts.ssd_cap_bytes;
  parts->retry_backoff_ms = opts.retry_backoff_ms;
  parts->deadline_ms = opts.storage_deadline_ms;
  parts->write_attempts = static_cast<uint32_t>(opts.write_attempts);
  parts->index_batch = static_cast<size_t>(opts.ssd_index_batch);
  actors::route_reports(cfg, *parts);
  parts->tier = std::make_unique<ssd::ssd_tier>(cfg, *fs, *parts->engine);
  auto scan = parts->tier->open();
  if (!scan)
    return std::move(scan.error());
  // The first `ssd-tier.index-before-serving` files are indexed before
  // serving (a small directory wholly, as before); a larger one is indexed
  // by the actor while it serves (docs/ssd-format.md "Start-up").
  auto& tier = *parts->tier;
  if (tier.index_step(static_cast<size_t>(opts.ssd_index_before_serving))) {
    log::info("kvtier ssd: opened " + tier.root() + ": "
              + ssd::scan_summary(tier.scan_result()));
  } else {
    log::info("kvtier ssd: opened " + tier.root() + ": "
              + std::to_string(tier.stats().index_files)
              + " files indexed; indexing the rest while serving");
  }
  if (saved)
    *saved = parts->tier->checkpoint_files();
  return sys.spawn(actors::ssd_tier, std::move(parts));
}

actors::ram_tier_actor
spawn_ram_tier(caf::actor_system& sys, const service_options& opts,
               actors::store_actor ssd,
               std::shared_ptr<actors::put_observer_slot> observer) {
  actors::ram_tier_config cfg;
  cfg.cap_bytes = opts.ram_cap_bytes;
  cfg.objects = opts.objects;
  cfg.policy =
    tiers::parse_ram_policy(opts.ram_policy).value_or(tiers::ram_policy::lru);
  cfg.pin_budget_bytes = static_cast<uint64_t>(
    static_cast<double>(opts.ram_cap_bytes) * opts.pin_share);
  if (opts.bookkeeping_share > 0)
    cfg.bookkeeping_budget_bytes = static_cast<uint64_t>(
      static_cast<double>(opts.ram_cap_bytes) * opts.bookkeeping_share);
  cfg.deadline_ms = opts.storage_deadline_ms;
  cfg.write_behind = opts.write_behind && ssd;
  cfg.write_behind_bytes_per_s = opts.write_behind_bytes_per_s;
  cfg.write_behind_delay_ms = opts.write_behind_delay_ms;
  cfg.write_behind_cap_bytes = opts.write_behind_cap_bytes;
  auto ram = sys.spawn(actors::ram_tier, cfg, ssd, std::move(observer));
  // The one link back: the SSD actor tells this RAM actor of every file it
  // removes (SsdEvictEvent). Sent at once, so it is in the SSD actor's
  // mailbox before any spill order this RAM actor can send.
  if (ssd)
    caf::anon_send(ssd, actors::attach_ram_atom::value,
                   actors::spill_listener_actor{ram});
  return ram;
}

actors::sessions_actor spawn_sessions(caf::actor_system& sys,
                                      actors::ram_tier_actor ram,
                                      uint64_t deadline_ms) {
  return sys.spawn(actors::sessions, std::move(ram), deadline_ms);
}

caf::expected<actors::admission_actor>
spawn_admission(caf::actor_system& sys, const service_options& opts) {
  auto g = running_geometry(opts);
  if (!g)
    return std::move(g.error());
  tiers::admission_limits limits{opts.kv_budget_bytes, opts.position_limit,
                                 opts.max_queued};
  return sys.spawn(actors::admission, std::move(*g), limits);
}

actors::checkpoints_actor
spawn_checkpoints(caf::actor_system& sys, const service_options& opts,
                  actors::store_actor ssd,
                  std::vector<tiers::checkpoint_file> saved) {
  auto checkpoints =
    sys.spawn(actors::checkpoints, opts.checkpoint_every_tokens, ssd,
              std::move(saved), opts.storage_deadline_ms);
  // The SSD actor tells this one of every checkpoint file it removes.
  // Sent at once, so it is in the SSD actor's mailbox before any write
  // order a flush of this actor can send; only erase orders of the files
  // found at start may come first (their removals concern nobody).
  if (ssd)
    caf::anon_send(ssd, actors::attach_ckpt_atom::value,
                   actors::spill_listener_actor{checkpoints});
  return checkpoints;
}

/// One peer fetch's deadline: `cluster.fetch-deadline-ms`, but at most
/// half of the storage deadline less 10 ms (the facade waits half of it for
/// a tier: a failed fetch must answer before, so the fallback is served).
static uint64_t fetch_deadline_ms(const service_options& opts) {
  auto cap = opts.storage_deadline_ms / 2;
  cap = cap > 20 ? cap - 10 : std::max<uint64_t>(cap / 2, 1);
  return std::min(opts.cluster_fetch_deadline_ms, cap);
}

/// The serving side of peer fetches and the peer tier (cluster.enabled):
/// the peer tier is the last cold tier and hears of every peer up/down.
static caf::error spawn_cluster_parts(caf::actor_system& sys,
                                      const service_options& opts,
                                      const tiers::model_geometry& g,
                                      service_handles& h) {
  actors::serve_config sc;
  sc.limits.max_bytes = opts.cluster_serve_max_bytes;
  sc.limits.idle_ms = opts.cluster_serve_idle_ms;
  sc.lane_address = net::plaintext_address_for(opts.cluster_listen_address);
  sc.tier_deadline_ms = std::max<uint64_t>(fetch_deadline_ms(opts) / 2, 1);
  sc.max_prompt_tokens = opts.position_limit;
  // The bulk lane: plain TCP beside a loopback node only.
  std::shared_ptr<msg::bulk_server> lane;
  if (!sc.lane_address.empty()) {
    auto l = msg::bulk_server::start(
      sc.lane_address, 0,
      std::chrono::milliseconds{std::max<uint64_t>(sc.tier_deadline_ms, 1000)});
    if (!l)
      return std::move(l.error());
    lane = std::move(*l);
  }
  // What it serves from: RAM, then every store (the local lookup).
  actors::local_tiers local{h.tiers.ram, h.tiers.stores};
  auto serve = actors::spawn_serve(sys, sc, std::move(local), std::move(lane));
  h.cluster.serve = caf::actor_cast<caf::actor>(serve);
  actors::peer_tier_config pc;
  pc.fetch_max_bytes = opts.cluster_fetch_max_bytes;
  pc.fetch_deadline_ms = fetch_deadline_ms(opts);
  pc.fetched_to_ssd = opts.cluster_fetched_to_ssd;
  pc.max_prompt_tokens = opts.position_limit;
  pc.ssd_deadline_ms = opts.storage_deadline_ms;
  auto peer =
    actors::spawn_peer_tier(sys, pc, g, h.tiers.store, h.cluster.serve);
  h.tiers.cold.push_back(
    {caf::actor_cast<actors::cold_tier_actor>(peer), msg::Tier::PEER, "peer"});
  h.tiers.lifecycle.push_back({peer, "peer", actors::tier_stage::holder});
  h.cluster.peer = peer;
  h.tiers.peer = peer;
  h.cluster.listeners.push_back(caf::actor_cast<caf::actor>(peer));
  return {};
}

tiers::route_costs route_costs_of(const service_options& o) {
  tiers::route_costs c;
  c.prefill = o.route_prefill_cost;
  c.ram = o.route_ram_cost;
  c.ssd = o.route_ssd_cost;
  c.peer = o.route_peer_cost;
  c.peer_ssd = o.route_peer_ssd_cost;
  c.load_weight = o.route_load_weight;
  c.load_window = o.route_load_window;
  c.full_penalty = o.route_full_penalty;
  return c;
}

actors::feed_actor spawn_feed(caf::actor_system& sys,
                              const service_options& opts,
                              std::vector<caf::actor> subscribers,
                              std::shared_ptr<actors::feed_memory> memory) {
  actors::feed_config cfg;
  cfg.node = opts.cluster_node_id;
  cfg.ring = static_cast<size_t>(opts.cluster_feed_ring);
  cfg.ring_bytes = opts.cluster_feed_ring_bytes;
  cfg.memory = std::move(memory);
  cfg.subscribers = std::move(subscribers);
  return sys.spawn(actors::feed, std::move(cfg));
}

caf::actor spawn_feed_listener(caf::actor_system& sys,
                               std::function<void(const actors::feed_event&)> f,
                               std::shared_ptr<std::atomic<uint64_t>> errors) {
  return sys.spawn(actors::feed_listener, std::move(f), std::move(errors));
}

namespace {

/// The put observer as a feed subscriber: called for every put event.
caf::actor spawn_put_observer(caf::actor_system& sys,
                              std::shared_ptr<actors::put_observer_slot> slot) {
  return spawn_feed_listener(sys, [slot](const actors::feed_event& e) {
    if (e.kind != msg::FeedKind::PUT)
      return;
    try {
      (*slot)(e.key, e.ns);
    } catch (...) {
      slot->count_error(); // contained: the put stands
    }
  });
}

} // namespace

void wire_store(actors::service_actors& t, actors::store_actor store,
                std::string name, msg::Tier tag) {
  if (!t.store)
    t.store = store;
  t.stores.push_back(store);
  t.cold.push_back({store, tag, name});
  t.lifecycle.push_back({store, std::move(name), actors::tier_stage::store});
}

caf::expected<service_handles>
spawn_service(caf::actor_system& sys, const service_options& opts,
              tiers::ssd::file_system* fs,
              std::shared_ptr<actors::put_observer_slot> observer,
              const std::vector<store_plan>& stores) {
  if (auto err = opts.validate())
    return err;
  log::set_level(*log::parse_level(opts.log_level));
  if (opts.checkpoint_every_tokens > 0 && opts.ssd_dir.empty())
    // Allowed (in-process resumption of an engine that runs in RAM only),
    // but the promise of resuming after a restart cannot be kept: said here
    // and in report().checkpoints.ram_only.
    log::warn("kvtier service: service.checkpoint-every-tokens = "
              + std::to_string(opts.checkpoint_every_tokens)
              + " without ssd-tier.dir: checkpoints are kept in RAM only "
                "and none survives a restart (set ssd-tier.dir to resume "
                "generations after one)");
  service_handles h;
  std::vector<caf::actor> first_subscribers;
  if (observer) {
    h.put_observer = spawn_put_observer(sys, observer);
    first_subscribers.push_back(h.put_observer);
  }
  h.feed = spawn_feed(sys, opts, std::move(first_subscribers), h.feed_memory);
  std::vector<tiers::checkpoint_file> saved; // checkpoint files, by header
  if (!opts.ssd_dir.empty()) {
    auto ssd = spawn_ssd_tier(sys, opts, fs, &saved);
    if (!ssd)
      return std::move(ssd.error());
    h.tiers.ssd = std::move(*ssd);
    // Before any spill order: the files found at start are the feed's
    // first events.
    caf::anon_send(h.tiers.ssd, actors::attach_feed_atom::value, h.feed);
    // The SSD is the first cold tier of the facade's lookups.
    wire_store(h.tiers, h.tiers.ssd, "ssd", msg::Tier::SSD);
  }
  for (auto& plan : stores) {
    auto store = plan.spawn(sys);
    if (!store)
      return make_error(ec::invalid_config,
                        "the store " + plan.name
                          + " did not start: " + describe(store.error()));
    wire_store(h.tiers, caf::actor_cast<actors::store_actor>(*store), plan.name,
               msg::Tier::STORE);
  }
  auto adm = spawn_admission(sys, opts);
  if (!adm)
    return std::move(adm.error());
  h.tiers.admission = std::move(*adm);
  h.tiers.ram = spawn_ram_tier(sys, opts, h.tiers.store, std::move(observer));
  // Before any put (the facade that sends them is spawned below).
  caf::anon_send(h.tiers.ram, actors::attach_feed_atom::value, h.feed);
  h.tiers.sessions = spawn_sessions(sys, h.tiers.ram, opts.storage_deadline_ms);
  bool possible = opts.checkpoint_every_tokens > 0 || !saved.empty();
  h.tiers.checkpoints =
    spawn_checkpoints(sys, opts, h.tiers.store, std::move(saved));
  // The lifecycle loops' order: the gate, the holders (the peer tier joins
  // them below), then the stores wired above.
  using actors::tier_stage;
  std::vector<actors::lifecycle_ref> first{
    {h.tiers.admission, "admission", tier_stage::gate},
    {h.tiers.ram, "ram", tier_stage::holder},
    {h.tiers.sessions, "sessions", tier_stage::holder},
    {h.tiers.checkpoints, "checkpoints", tier_stage::holder}};
  h.tiers.lifecycle.insert(h.tiers.lifecycle.begin(), first.begin(),
                           first.end());
  auto g = running_geometry(opts);
  if (!g)
    return std::move(g.error());
  if (opts.cluster_enabled) {
    auto c = spawn_cluster_parts(sys, opts, *g, h);
    if (c)
      return c;
  }
  h.facade =
    sys.spawn(actors::cache_service, h.tiers, std::move(*g), possible,
              opts.idle_demotion_ms, opts.objects, opts.storage_deadline_ms,
              opts.cold_wait_ms, route_costs_of(opts), h.latency);
  if (opts.cluster_enabled) {
    h.cluster.feed = caf::actor_cast<caf::actor>(h.feed);
    // The follower turns each peer's feed into directory batches for the
    // peer tier.
    auto directory =
      caf::actor_cast<actors::directory_sink_actor>(h.cluster.peer);
    h.cluster.listeners.push_back(
      caf::actor_cast<caf::actor>(actors::spawn_feed_follower(
        sys, directory,
        std::chrono::milliseconds{opts.cluster_down_after_ms})));
  }
  return h;
}

} // namespace kvtier::runtime
