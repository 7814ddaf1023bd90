// A `kvtier node` that holds state: the node command of the program
// (runtime/program/node.cpp, same arguments: `node --config FILE [--join
// HOST:PORT]...`), which first publishes `--entries N` oracle prefills of
// 64 tokens each in namespace "ns" (tokens 1000*i+1 .. 1000*i+64) into RAM,
// so a SIGTERM has something to flush (tests/cluster/nodes_test.cpp).
#include "runtime/config.hpp"
#include "runtime/program/commands.hpp"
#include "runtime/service.hpp"
#include "runtime/tools/oracle.hpp"

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

using namespace kvtier;

int main(int argc, char** argv) {
  std::vector<std::string> files, own;
  files.reserve(argc);
  std::vector<char*> args{argv[0]};
  uint64_t entries = 0;
  for (int i = 2; i < argc; ++i) {
    std::string a{argv[i]};
    if (a == "--config" && i + 1 < argc) {
      files.push_back("--config-file=" + std::string{argv[++i]});
      args.push_back(files.back().data());
    } else if (a == "--entries" && i + 1 < argc) {
      entries = std::stoull(argv[++i]);
    } else {
      own.push_back(a);
    }
  }
  runtime::kvtier_config cfg;
  if (auto err = cfg.load(static_cast<int>(args.size()), args.data())) {
    std::fprintf(stderr, "%s\n", describe(err).c_str());
    return 2;
  }
  return runtime::node_command(cfg, own, [&](runtime::service& svc) {
    auto g = runtime::running_geometry(svc.options());
    if (!g)
      return false;
    runtime::oracle_engine oracle{*g};
    for (uint64_t i = 0; i < entries; ++i) {
      tiers::token_seq tokens(64);
      std::iota(tokens.begin(), tokens.end(),
                static_cast<tiers::token>(1000 * i + 1));
      runtime::state_request r{i + 1, tokens, 16, std::nullopt};
      auto put = svc.publish(r, oracle.prefill("ns", tokens));
      if (!put || !put->kept) {
        std::fprintf(stderr, "node_writer: entry %llu not kept\n",
                     static_cast<unsigned long long>(i));
        return false;
      }
    }
    return true;
  });
}
