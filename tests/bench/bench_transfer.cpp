// bench_transfer: a peer fetch over CAF's middleman next to raw TCP, on
// loopback, in one run.
//
//   raw      the same number of bytes through a loopback TCP connection
//            from and into one reused 4 MiB huge-page buffer at each end,
//            1 MiB socket buffers and ops (tests/bench/raw_tcp.hpp, the
//            sockets alone): the floor.
//   lane     one entry fetched from another actor system: FetchEntry over
//            the middleman (127.0.0.1, an ephemeral port; the sender's
//            transfer_table lays the entry out as pieces then), the bytes
//            over the bulk lane (bulk_lane.hpp, XXH3-64 as they are written
//            and read) into one buffer, verified, the message validated and
//            the entry decoded (tiers::read_entry). "lane bytes" is the
//            lane's read alone.
//   chunks   the same with the bytes as FetchChunk messages through the
//            middleman, W in flight (transfer_pull), from a sender without
//            a lane (it hashes the whole entry before it answers).
//
// Entries have the llama-3.1-8b shape (32 kv layers, 128 KiB per token):
// 64 MiB = 512 tokens, 256 MiB = 2048 tokens. Each figure is the best of
// `--reps` runs, both sides interleaved. Usage:
//   bench_transfer [--quick] [--json] [--reps N]
#include "messages/bulk_lane.hpp"
#include "messages/transfer_table.hpp"
#include "messages/type_ids.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/bench/raw_tcp.hpp"
#include "tiers/entry_message.hpp"
#include "tiers/geometry.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace kvtier;
using clk = std::chrono::steady_clock;
using fetch_reply = msg::sealed<msg::FetchEntryReply>;
using chunk_reply = msg::sealed<msg::FetchChunkReply>;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_transfer: %s\n", what.c_str());
  std::exit(1);
}

double seconds_since(clk::time_point t0) {
  return std::chrono::duration<double>(clk::now() - t0).count();
}

/// Seconds to move `bytes` through a loopback TCP connection
/// (tests/bench/raw_tcp.hpp).
double raw_tcp(uint64_t bytes) {
  // Sockets alone: a reused receive buffer.
  std::string err;
  auto s = bench::raw_tcp(bytes, bench::raw_receive::reused_buffer, err);
  if (!s)
    die("raw tcp: " + err);
  return *s;
}

struct node_config : caf::actor_system_config {
  node_config() {
    load<caf::io::middleman>();
    msg::register_message_types(*this);
  }
};

/// The sending node: one offered entry, its chunks served on request.
caf::behavior sender(caf::event_based_actor*,
                     std::shared_ptr<msg::carrier> entry, uint64_t tokens,
                     uint32_t chunk_size, msg::bulk_server* lane) {
  msg::transfer_limits limits;
  limits.chunk_size = chunk_size;
  auto table = std::make_shared<msg::transfer_table>(limits, lane);
  return {
    [=](const msg::sealed<msg::FetchEntry>&) -> caf::result<fetch_reply> {
      auto r = table->offer(*entry, tokens, 0);
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
    [=](const msg::sealed<msg::FetchChunk>& m) -> caf::result<chunk_reply> {
      auto r = table->chunk(m.root(), 0);
      if (!r)
        return std::move(r.error());
      return std::move(*r);
    },
    [=](const msg::sealed<msg::CancelTransfer>& m) {
      table->cancel(m.root().getTransferId());
    },
  };
}

/// The receiving node's fetch: FetchEntry, then chunks with `window` in
/// flight; delivers the decoded entry's token count (0 on failure).
void fetcher(caf::event_based_actor* self, caf::actor peer, uint32_t window,
             std::shared_ptr<std::promise<uint64_t>> done) {
  auto timeout = std::chrono::seconds(60);
  msg::draft<msg::FetchEntry> d;
  d.root().setNs("bench");
  self->request(peer, timeout, std::move(d).seal())
    .then(
      [=](const fetch_reply& r) {
        auto pull = msg::transfer_pull::start(r.root().getTransfer(), window);
        if (!pull)
          die("fetch: " + describe(pull.error()));
        auto state = std::make_shared<msg::transfer_pull>(std::move(*pull));
        auto ask = std::make_shared<std::function<void()>>();
        *ask = [=] {
          for (auto i : state->next()) {
            msg::draft<msg::FetchChunk> c;
            c.root().setTransferId(state->id());
            c.root().setIndex(i);
            self->request(peer, timeout, std::move(c).seal())
              .then(
                [=](const chunk_reply& chunk) {
                  if (auto err = state->add(chunk.root()))
                    die("chunk: " + describe(err));
                  if (!state->complete()) {
                    (*ask)();
                    return;
                  }
                  if (state->in_flight() > 0)
                    return;
                  auto m = std::move(*state).finish<msg::RestoreEntryReply>();
                  if (!m)
                    die("verify: " + describe(m.error()));
                  auto e = tiers::read_entry(*m, m->root().getEntry());
                  if (!e)
                    die("decode: " + describe(e.error()));
                  msg::draft<msg::CancelTransfer> x;
                  x.root().setTransferId(state->id());
                  self->send(peer, std::move(x).seal());
                  done->set_value(e->tokens.size());
                  *ask = nullptr; // break the cycle
                },
                [=](caf::error& err) { die("chunk: " + describe(err)); });
          }
        };
        (*ask)();
      },
      [=](caf::error& err) { die("fetch entry: " + describe(err)); });
}

/// The same fetch with the bytes over the bulk lane: FetchEntry through
/// the middleman, then one read of the whole message from the lane.
uint64_t lane_fetch(caf::actor_system& sys, const caf::actor& peer,
                    double& bytes_s) {
  caf::scoped_actor self{sys};
  uint64_t tokens = 0;
  msg::draft<msg::FetchEntry> d;
  d.root().setNs("bench");
  self->request(peer, std::chrono::seconds(60), std::move(d).seal())
    .receive(
      [&](const fetch_reply& r) {
        auto h = r.root().getTransfer();
        auto t1 = clk::now();
        auto flat = msg::bulk_fetch("127.0.0.1", h,
                                    clk::now() + std::chrono::seconds(60));
        bytes_s = seconds_since(t1);
        if (!flat)
          die("lane: " + describe(flat.error()));
        auto m = msg::sealed<msg::RestoreEntryReply>::from_flat(*flat);
        if (!m)
          die("lane decode: " + describe(m.error()));
        auto e = tiers::read_entry(*m, m->root().getEntry());
        if (!e)
          die("lane entry: " + describe(e.error()));
        tokens = e->tokens.size();
        msg::draft<msg::CancelTransfer> x;
        x.root().setTransferId(h.getTransferId());
        self->send(peer, std::move(x).seal());
      },
      [&](caf::error& err) { die("fetch entry: " + describe(err)); });
  return tokens;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false, json = false;
  int reps = 3;
  uint32_t chunk_size = msg::default_chunk_size;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else if (std::strcmp(argv[i], "--chunk-kib") == 0 && i + 1 < argc)
      chunk_size = static_cast<uint32_t>(std::atoi(argv[++i])) << 10;
    else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else
      die(std::string{"unknown argument "} + argv[i]);
  }
  if (quick)
    reps = 1;
  auto g = tiers::model_geometry::preset("llama-3.1-8b", 1);
  if (!g)
    die("geometry");
  runtime::oracle_engine oracle{*g};
  node_config cfg_a, cfg_b;
  caf::actor_system sys_a{cfg_a}, sys_b{cfg_b};
  auto started = msg::bulk_server::start("127.0.0.1", 0);
  if (!started)
    die("bulk lane: " + describe(started.error()));
  auto lane = std::move(*started);
  std::vector<uint64_t> token_counts =
    quick ? std::vector<uint64_t>{512} : std::vector<uint64_t>{512, 2048};
  const uint32_t windows[] = {1, 2, 4, 8};
  if (!json)
    std::printf("%-10s %-12s %12s %12s %8s\n", "entry", "path", "fetch MB/s",
                "raw MB/s", "ratio");
  std::string rows;
  for (auto tokens : token_counts) {
    tiers::token_seq prompt(tokens);
    for (uint64_t i = 0; i < tokens; ++i)
      prompt[i] = static_cast<tiers::token>(i + 1);
    auto e = oracle.prefill("bench", prompt);
    msg::draft<msg::RestoreEntryReply> d;
    tiers::write_entry(d, d.root().initEntry(), e);
    auto entry = std::make_shared<msg::carrier>(std::move(d).seal());
    auto flat = entry->to_flat();
    if (!flat)
      die("flatten");
    auto bytes = (*flat)->size();
    auto srv = sys_a.spawn(sender, entry, tokens, chunk_size, lane.get());
    auto port = sys_a.middleman().publish(srv, 0, "127.0.0.1");
    if (!port)
      die("publish: " + to_string(port.error()));
    auto peer = sys_b.middleman().remote_actor("127.0.0.1", *port);
    if (!peer)
      die("remote_actor: " + to_string(peer.error()));
    // A lane transfer is served on its lane only: the chunk rows ask a
    // sender without one.
    auto srv_chunks = sys_a.spawn(sender, entry, tokens, chunk_size, nullptr);
    auto port_chunks = sys_a.middleman().publish(srv_chunks, 0, "127.0.0.1");
    if (!port_chunks)
      die("publish: " + to_string(port_chunks.error()));
    auto peer_chunks =
      sys_b.middleman().remote_actor("127.0.0.1", *port_chunks);
    if (!peer_chunks)
      die("remote_actor: " + to_string(peer_chunks.error()));
    auto mbs = [&](double t) { return static_cast<double>(bytes) / t / 1e6; };
    auto label = std::to_string(bytes >> 20) + " MiB";
    auto row = [&](const std::string& how, double best, double raw) {
      if (json)
        rows += (rows.empty() ? "" : ", ") + std::string{"{\"mib\": "}
                + std::to_string(bytes >> 20) + ", \"path\": \"" + how
                + "\", \"fetch_mb_s\": " + std::to_string(mbs(best))
                + ", \"raw_mb_s\": " + std::to_string(mbs(raw)) + "}";
      else
        std::printf("%-10s %-12s %12.0f %12.0f %7.2fx\n", label.c_str(),
                    how.c_str(), mbs(best), mbs(raw), raw / best);
    };
    {
      double best_lane = 1e9, best_bytes = 1e9, best_raw = 1e9;
      for (int r = 0; r < reps; ++r) {
        best_raw = std::min(best_raw, raw_tcp(bytes));
        double bytes_s = 0;
        auto t0 = clk::now();
        if (lane_fetch(sys_b, *peer, bytes_s) != tokens)
          die("lane: fetched entry has the wrong length");
        best_lane = std::min(best_lane, seconds_since(t0));
        best_bytes = std::min(best_bytes, bytes_s);
      }
      row("lane", best_lane, best_raw);
      row("lane bytes", best_bytes, best_raw);
    }
    for (auto w : windows) {
      double best_fetch = 1e9, best_raw = 1e9;
      for (int r = 0; r < reps; ++r) {
        best_raw = std::min(best_raw, raw_tcp(bytes));
        auto done = std::make_shared<std::promise<uint64_t>>();
        auto f = done->get_future();
        auto t0 = clk::now();
        sys_b.spawn(fetcher, *peer_chunks, w, done);
        if (f.wait_for(std::chrono::seconds(120)) != std::future_status::ready)
          die("fetch did not finish in 120 s");
        if (f.get() != tokens)
          die("fetched entry has the wrong length");
        best_fetch = std::min(best_fetch, seconds_since(t0));
      }
      row("chunks w=" + std::to_string(w), best_fetch, best_raw);
    }
    caf::anon_send_exit(srv, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(srv_chunks, caf::exit_reason::user_shutdown);
  }
  if (json)
    std::printf("{\"rows\": [%s]}\n", rows.c_str());
  return 0;
}
