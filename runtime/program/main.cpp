// The `kvtier` program: `kvtier <command> [arguments] [options]`. Options
// of the form `--section.key=value` and `--config-file=FILE` configure the
// service (without a file the embedded default, conf/kvtier.conf, applies);
// `--config FILE` is `--config-file=FILE`; the rest belong to the command
// (runtime/program/commands.hpp).
#include "runtime/config.hpp"
#include "runtime/options.hpp"
#include "runtime/program/commands.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using kvtier::runtime::kvtier_config;

void usage() {
  std::puts(
    "usage: kvtier <command> [arguments] [--config-file=FILE]\n"
    "              [--section.key=value ...]\n"
    "\n"
    "commands:\n"
    "  replay [TRACE] [--simulate] [--json FILE] [--plot FILE.svg]\n"
    "         [--no-verify] [--quiet]\n"
    "             replay a request trace through the service (default: the\n"
    "             [replay] trace); --simulate: the whole-prefix LRU reference\n"
    "  replay [TRACE] --nodes N [--seed S] [--scenarios LIST]\n"
    "         [--work-dir DIR] [--json FILE] [--plot FILE.svg] [--quiet]\n"
    "             the trace across N node processes: routed, one node,\n"
    "             random and round-robin placement (docs/replay.md)\n"
    "  demo       the replay of the conversation trace on the default\n"
    "             configuration, writing demo-data/replay.{json,svg}\n"
    "  scenario FILE...\n"
    "             run scripted engine scenarios (conf/scenarios/*.scn)\n"
    "  inspect DIR [--verify]\n"
    "             list what an SSD tier directory holds; --verify checks\n"
    "             every payload checksum\n"
    "  node [--config FILE] [--join HOST:PORT]... [--replay-agent]\n"
    "             run a cluster node until SIGTERM (docs/cluster.md);\n"
    "             --replay-agent: serve replay --nodes steps\n"
    "  members HOST:PORT\n"
    "             print a node's membership view\n"
    "  config     validate the configuration and print the effective options\n"
    "  version    print the version\n"
    "  help       print this text\n"
    "\n"
    "Options override the embedded default configuration (conf/kvtier.conf),\n"
    "or FILE when given; every key is listed there with its range.");
}

int print_config(kvtier_config& cfg) {
  // Every option, from the one list (runtime/options.hpp).
  auto& o = cfg.options;
  auto values = kvtier::runtime::option_values(o);
  auto replay = kvtier::runtime::option_values(cfg.replay);
  values.insert(values.end(), replay.begin(), replay.end());
  std::string section;
  for (size_t i = 0; i < values.size(); ++i) {
    auto& v = values[i];
    if (v.section != section)
      std::printf("[%s]\n", (section = v.section).c_str());
    // A secret is said to be set, never shown.
    bool secret = (v.section == "cluster" && v.key == "tls-passphrase")
                  || (v.section == "http" && v.key == "admin-token");
    std::printf("%s=%s\n", v.key.c_str(),
                secret && v.text != "\"\"" ? "\"(set, not shown)\""
                                           : v.text.c_str());
    bool last = i + 1 == values.size() || values[i + 1].section != section;
    if (last && section == "model")
      if (auto m = kvtier::runtime::running_model(o))
        std::printf("; fingerprint %s\n; resolved layers %s\n",
                    m->fingerprint().c_str(),
                    m->geometry.layers_text().c_str());
  }
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
  // `--section.key=value` and `--config-file=` configure; the rest is the
  // command's.
  std::vector<char*> args{argv[0]};
  std::vector<std::string> own;
  std::vector<std::string> config_files; // `--config FILE` spelled out
  config_files.reserve(argc);            // (args points into it)
  for (int i = 2; i < argc; ++i) {
    std::string_view a{argv[i]};
    if (a == "--config" && i + 1 < argc) {
      config_files.push_back(std::string{"--config-file="} + argv[++i]);
      args.push_back(config_files.back().data());
      continue;
    }
    auto eq = a.find('=');
    bool config = a.substr(0, 2) == "--"
                  && (a.substr(0, 14) == "--config-file="
                      || a.substr(0, eq).find('.') != std::string_view::npos);
    if (config)
      args.push_back(argv[i]);
    else
      own.emplace_back(a);
  }
  kvtier_config cfg;
  if (auto err = cfg.load(static_cast<int>(args.size()), args.data())) {
    std::fprintf(stderr, "%s\n", kvtier::describe(err).c_str());
    return 2;
  }
  using namespace kvtier::runtime;
  if (cmd == "config") {
    if (!own.empty()) {
      std::fprintf(stderr, "kvtier: config: unexpected argument '%s'\n",
                   own.front().c_str());
      return 2;
    }
    return print_config(cfg);
  }
  if (cmd == "replay")
    return replay_command(cfg, own);
  if (cmd == "demo")
    return demo_command(cfg, own);
  if (cmd == "inspect")
    return inspect_command(cfg, own);
  if (cmd == "scenario")
    return scenario_command(cfg, own);
  if (cmd == "node")
    return node_command(cfg, own);
  if (cmd == "members")
    return members_command(cfg, own);
  std::fprintf(stderr, "kvtier: unknown command '%s'\n\n", cmd.c_str());
  usage();
  return 2;
}
