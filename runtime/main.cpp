// The `kvtier` program: `kvtier <command> [options]`. Options are the
// configuration's (`--section.key=value`, `--config-file=FILE`); without a
// file the embedded default (conf/kvtier.conf) applies.
#include "runtime/config.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using kvtier::runtime::kvtier_config;

void usage() {
  std::puts(
    "usage: kvtier <command> [--config-file=FILE] [--section.key=value ...]\n"
    "\n"
    "commands:\n"
    "  config     validate the configuration and print the effective options\n"
    "  version    print the version\n"
    "  help       print this text\n"
    "\n"
    "Options override the embedded default configuration (conf/kvtier.conf),\n"
    "or FILE when given; every key is listed there with its range.");
}

int print_config(kvtier_config& cfg) {
  auto& o = cfg.options;
  std::printf("[ram-tier]\ncap-bytes=%llu\n",
              static_cast<unsigned long long>(o.ram_cap_bytes));
  std::printf("[ssd-tier]\ndir=\"%s\"\ncap-bytes=%llu\nalignment=%llu\n"
              "write-behind-cap-bytes=%llu\nio-engine=\"%s\"\n",
              o.ssd_dir.c_str(),
              static_cast<unsigned long long>(o.ssd_cap_bytes),
              static_cast<unsigned long long>(o.alignment),
              static_cast<unsigned long long>(o.write_behind_cap_bytes),
              o.io_engine.c_str());
  std::printf(
    "[admission]\nmodel=\"%s\"\nmodel-scale=%g\nkv-budget-bytes=%llu\n"
    "position-limit=%llu\n",
    o.model.c_str(), o.model_scale,
    static_cast<unsigned long long>(o.kv_budget_bytes),
    static_cast<unsigned long long>(o.position_limit));
  std::printf(
    "[service]\nidle-demotion-ms=%llu\ncheckpoint-every-tokens=%llu\n",
    static_cast<unsigned long long>(o.idle_demotion_ms),
    static_cast<unsigned long long>(o.checkpoint_every_tokens));
  auto policy = caf::get_or(cfg, "scheduler.policy", caf::atom("stealing"));
  std::printf("[scheduler]\npolicy='%s'\n", to_string(policy).c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "help";
  if (cmd == "version" || cmd == "--version") {
    std::printf("kvtier %s\n", KVTIER_VERSION);
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    usage();
    return 0;
  }
  // Everything after the command is configuration.
  std::vector<char*> args{argv[0]};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  kvtier_config cfg;
  if (auto err = cfg.load(static_cast<int>(args.size()), args.data())) {
    std::fprintf(stderr, "%s\n", kvtier::describe(err).c_str());
    return 2;
  }
  if (cmd == "config")
    return print_config(cfg);
  std::fprintf(stderr, "kvtier: unknown command '%s'\n\n", cmd.c_str());
  usage();
  return 2;
}
