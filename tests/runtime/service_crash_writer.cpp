// The service crash test's victim: a separate process running an embedded
// service (write-behind on) over a real directory, publishing turns of a
// few conversations without end. After every publish it asks which saved
// prefixes exist and prints one line per entry newly durable there
// ("durable C K": a write-behind snapshot, a spill or a flush made it so;
// saved_prefixes lists only renamed, synced, indexed files), and every few
// turns it flushes and prints "flushed N". The test SIGKILLs it at a random
// moment. Usage: service_crash_writer DIR SEED
#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"
#include "tests/runtime/service_crash_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <unistd.h>

using namespace kvtier;
namespace crash = kvtier::testing::service_crash;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR SEED\n", argv[0]);
    return 2;
  }
  ::alarm(300); // never outlives a stuck test
  uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  auto opts = crash::options(argv[1]);
  runtime::service svc{opts};
  if (svc.start_error()) {
    std::fprintf(stderr, "start: %s\n", describe(svc.start_error()).c_str());
    return 3;
  }
  runtime::oracle_engine oracle{*runtime::running_geometry(opts)};
  auto ns = crash::ns(seed);
  std::map<tiers::token_seq, std::pair<int, int>> published;
  std::set<tiers::token_seq> reported;
  auto report_new = [&] {
    auto saved = svc.saved_prefixes();
    if (!saved)
      return;
    for (auto& p : *saved) {
      if (p.ns != ns || reported.count(p.tokens) > 0)
        continue;
      auto it = published.find(p.tokens);
      if (it == published.end())
        continue;
      reported.insert(p.tokens);
      std::printf("durable %d %d\n", it->second.first, it->second.second);
    }
    std::fflush(stdout);
  };
  for (int k = 0;; ++k)
    for (int c = 0; c < crash::conversations; ++c) {
      auto prompt = crash::prompt(seed, c, k);
      runtime::state_request req{static_cast<uint64_t>(c + 1), prompt, 4, {}};
      auto acq = svc.acquire(req, ns);
      tiers::entry state;
      if (acq && acq->source != runtime::state_source::none
          && !oracle.verify(acq->state))
        if (auto e = oracle.extend(acq->state, prompt))
          state = std::move(*e);
      if (state.tokens.empty())
        state = oracle.prefill(ns, prompt);
      if (svc.publish(req, std::move(state)))
        published[prompt] = {c, k};
      report_new();
      if (c == 0 && k % 3 == 2) {
        auto f = svc.flush();
        report_new();
        std::printf("flushed %d\n", f && f->durable ? 1 : 0);
        std::fflush(stdout);
      }
    }
}
