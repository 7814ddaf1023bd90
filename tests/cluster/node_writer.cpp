// A `kvtier node` that holds state: the node command of the program
// (runtime/program/node.cpp, same arguments: `node --config FILE [--join
// HOST:PORT]...`), which first publishes `--entries N` oracle prefills of
// 64 tokens each in namespace "ns" (tokens 1000*i+1 .. 1000*i+64) into RAM,
// so a SIGTERM has something to flush (tests/cluster/nodes_test.cpp).
// `--tokens T` makes each entry T tokens long (tokens 1000*i+1 .. +T, so T
// < 1000). Every SIGUSR1 makes it skip one sequence number of its event feed
// (a gap its followers must resync from) and then publish one more entry
// (the next i), printing "node_writer: late entry I" to stderr
// (tests/cluster/peer_nodes_test.cpp).
#include "runtime/config.hpp"
#include "runtime/program/commands.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"

#include "actors/interfaces.hpp"

#include <caf/send.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/event_based_actor.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>
#include <numeric>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<std::promise<void>>)

using namespace kvtier;

int main(int argc, char** argv) {
  // SIGUSR1 is taken by the late-entry thread alone: blocked before any
  // other thread starts, so every thread inherits the mask.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  std::vector<std::string> files, own;
  files.reserve(argc);
  std::vector<char*> args{argv[0]};
  uint64_t entries = 0;
  uint64_t tokens_per_entry = 64;
  for (int i = 2; i < argc; ++i) {
    std::string a{argv[i]};
    if (a == "--config" && i + 1 < argc) {
      files.push_back("--config-file=" + std::string{argv[++i]});
      args.push_back(files.back().data());
    } else if (a == "--entries" && i + 1 < argc) {
      entries = std::stoull(argv[++i]);
    } else if (a == "--tokens" && i + 1 < argc) {
      tokens_per_entry = std::stoull(argv[++i]);
    } else {
      own.push_back(a);
    }
  }
  runtime::kvtier_config cfg;
  if (auto err = cfg.load(static_cast<int>(args.size()), args.data())) {
    std::fprintf(stderr, "%s\n", describe(err).c_str());
    return 2;
  }
  auto publish = [tokens_per_entry](runtime::service& svc, uint64_t i) {
    auto g = runtime::running_geometry(svc.options());
    if (!g)
      return false;
    runtime::oracle_engine oracle{*g};
    tiers::token_seq tokens(tokens_per_entry);
    std::iota(tokens.begin(), tokens.end(),
              static_cast<tiers::token>(1000 * i + 1));
    runtime::state_request r{i + 1, tokens, 16, std::nullopt};
    auto put = svc.publish(r, oracle.prefill("ns", tokens));
    if (!put || !put->kept) {
      std::fprintf(stderr, "node_writer: entry %llu not kept\n",
                   static_cast<unsigned long long>(i));
      return false;
    }
    return true;
  };
  return runtime::node_command(cfg, own, [&](runtime::service& svc) {
    for (uint64_t i = 0; i < entries; ++i)
      if (!publish(svc, i))
        return false;
    // The feed takes its test hook from an actor of this process only (an
    // anonymous message may be a peer's): a relay asks it, and says when
    // the skip is done.
    using done_ptr = std::shared_ptr<std::promise<void>>;
    auto feed = caf::actor_cast<caf::actor>(svc.event_feed());
    // Hidden: the thread holds it for good, and the actor system's shutdown
    // must not wait for it. A spawn argument: CAF 0.17 binds a null tuple
    // for argument-less spawns (UBSan).
    auto relay = svc.system().spawn<caf::hidden>(
      [feed](caf::event_based_actor* self, int) {
        return caf::behavior{[self, feed](actors::feed_skip_atom a, uint64_t n,
                                          const done_ptr& done) {
          self->request(feed, std::chrono::seconds{5}, a, n)
            .then([done](uint64_t) { done->set_value(); },
                  [done](caf::error&) { done->set_value(); });
        }};
      },
      0);
    // Lives until the process ends (it only waits for signals).
    std::thread{[&svc, publish, usr1, relay, next = entries]() mutable {
      for (;;) {
        int sig = 0;
        if (sigwait(&usr1, &sig) != 0)
          return;
        // A plain send to the relay, no scoped actor: one made on this
        // thread kept the actor system's shutdown waiting (CAF 0.17). The
        // skip is done before the publish below starts, so the put's event
        // comes after the gap.
        auto done = std::make_shared<std::promise<void>>();
        auto skipped = done->get_future();
        caf::anon_send(relay, actors::feed_skip_atom::value, uint64_t{1}, done);
        skipped.wait_for(std::chrono::seconds{5});
        if (publish(svc, next))
          std::fprintf(stderr, "node_writer: late entry %llu\n",
                       static_cast<unsigned long long>(next));
        ++next;
      }
    }}.detach();
    return true;
  });
}
