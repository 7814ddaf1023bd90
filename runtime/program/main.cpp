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

/// One command in the usage text: its synopsis (each line after `kvtier`)
/// and what it does.
struct command_help {
  const char* name;
  const char* synopsis;
  const char* text;
};

const command_help commands[] = {
  {"replay",
   "replay [TRACE] [--simulate] [--json FILE] [--plot FILE.svg]\n"
   "       [--no-verify] [--no-settle] [--quiet] [--close]\n"
   "replay [TRACE] --simulate --sweep|--capacities=N,N,... [regret's flags]\n"
   "replay [TRACE] --nodes N [--seed S] [--scenarios LIST]\n"
   "       [--work-dir DIR] [--json FILE] [--plot FILE.svg] [--quiet]",
   "replay a request trace through the service (default: the [replay]\n"
   "trace); --simulate: the whole-prefix LRU reference, with --sweep or\n"
   "--capacities the eviction regret report (as regret); --nodes N: the\n"
   "trace across N node processes: routed, one node, random and\n"
   "round-robin placement (docs/replay.md)"},
  {"demo", "demo [--json FILE] [--plot FILE.svg] [--no-verify] [--quiet]",
   "the replay of the conversation trace on the default configuration,\n"
   "writing demo-data/replay.{json,svg}"},
  {"regret",
   "regret [TRACE] [--capacities=N,N,...|--sweep] [--json FILE]\n"
   "       [--plot FILE.svg] [--max-requests N] [--conv-stagger S]\n"
   "       [--frequency-cap N] [--ghost-factor X] [--cost-weight X]\n"
   "       [--fresh-weight X] [--duel-window X] [--duel-edge X]\n"
   "       [--unknown-interval X] [--slack X] [--no-inherit] [--no-duel]\n"
   "       [--no-frequency] [--no-reuse] [--no-lru2]",
   "block-level token hit ratio of LRU, gdsf-radix and Belady's foresight\n"
   "ceiling at each capacity in tokens (default --sweep: 1 % .. 100 % of\n"
   "the working set), with the policy's rules checked; exit 1 when one\n"
   "fails; the other flags change the policy's knobs (docs/eviction.md)"},
  {"scenario", "scenario FILE...",
   "run scripted engine scenarios (conf/scenarios/*.scn)"},
  {"inspect", "inspect DIR [--verify] [--quarantine]",
   "list what an SSD tier directory holds (DIR: the tier's directory, or\n"
   "one model's <dir>/<fingerprint>/); --verify checks every payload\n"
   "checksum; --quarantine moves corrupt files aside into\n"
   "<fingerprint>/quarantine/ (refused while a service holds the\n"
   "directory's LOCK; docs/ssd-format.md)"},
  {"node", "node [--config FILE] [--join HOST:PORT]... [--replay-agent]",
   "run a cluster node until SIGTERM or SIGINT, then flush, tell the peers\n"
   "and exit (docs/cluster.md); prints \"kvtier node listening HOST:PORT\n"
   "[http=HOST:PORT] node-id=NAME\" on stdout; --join: a peer to meet\n"
   "(beside cluster.peers); --replay-agent: serve replay --nodes steps;\n"
   "--http.enabled: the operator's endpoint (docs/operations.md)"},
  {"members", "members HOST:PORT", "print a node's membership view"},
  {"config", "config",
   "validate the configuration and print the effective options"},
  {"version", "version", "print the version"},
  {"help", "help [COMMAND]", "print this text, or one command's"},
};

const command_help* find_command(const std::string& name) {
  for (auto& c : commands)
    if (name == c.name)
      return &c;
  return nullptr;
}

/// `text` with every line after the first indented by `indent` spaces.
std::string indented(const char* text, size_t indent) {
  std::string out;
  for (const char* p = text; *p; ++p) {
    out += *p;
    if (*p == '\n')
      out.append(indent, ' ');
  }
  return out;
}

const char* options_note =
  "Options (--section.key=value, --config-file=FILE) override the embedded\n"
  "default configuration (conf/kvtier.conf), or FILE when given; every key\n"
  "is listed there with its range (kvtier config prints them).";

void usage(std::FILE* out) {
  std::fputs("usage: kvtier <command> [arguments] [--config-file=FILE]\n"
             "              [--section.key=value ...]\n\ncommands:\n",
             out);
  for (auto& c : commands)
    std::fprintf(out, "  %s\n      %s\n", indented(c.synopsis, 2).c_str(),
                 indented(c.text, 6).c_str());
  std::fprintf(out, "\n%s\n", options_note);
}

void command_usage(const command_help& c) {
  std::printf("usage: kvtier %s\n\n%s\n\n%s\n",
              indented(c.synopsis, 13).c_str(), c.text, options_note);
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
  if (argc < 2) {
    // No command is a usage error: the text on stderr, exit 2.
    usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  bool version = cmd == "version" || cmd == "--version";
  bool help = cmd == "help" || cmd == "--help" || cmd == "-h";
  if ((version && argc > 2) || (help && argc > 3)) {
    kvtier::runtime::complain(version ? "version" : "help",
                              std::string{"unexpected argument '"}
                                + argv[version ? 2 : 3] + "'");
    return 2;
  }
  if (version) {
    std::printf("kvtier %s\n", KVTIER_VERSION);
    return 0;
  }
  if (help && argc == 3) {
    auto* c = find_command(argv[2]);
    if (!c) {
      kvtier::runtime::complain("help", std::string{"unknown command '"}
                                          + argv[2]
                                          + "' (kvtier help lists them)");
      return 2;
    }
    command_usage(*c);
    return 0;
  }
  if (help) {
    usage(stdout);
    return 0;
  }
  // `kvtier COMMAND --help` is `kvtier help COMMAND`.
  if (auto* c = find_command(cmd))
    for (int i = 2; i < argc; ++i)
      if (std::string_view{argv[i]} == "--help"
          || std::string_view{argv[i]} == "-h") {
        command_usage(*c);
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
    // describe() says "kvtier: invalid_config: ...": the one prefix.
    std::fprintf(stderr, "%s\n", kvtier::describe(err).c_str());
    return 2;
  }
  using namespace kvtier::runtime;
  if (cmd == "config") {
    if (!own.empty()) {
      complain("config", "unexpected argument '" + own.front() + "'");
      return 2;
    }
    return print_config(cfg);
  }
  if (cmd == "replay")
    return replay_command(cfg, own);
  if (cmd == "demo")
    return demo_command(cfg, own);
  if (cmd == "regret")
    return regret_command(cfg, own);
  if (cmd == "inspect")
    return inspect_command(cfg, own);
  if (cmd == "scenario")
    return scenario_command(cfg, own);
  if (cmd == "node")
    return node_command(cfg, own);
  if (cmd == "members")
    return members_command(cfg, own);
  // Deliberately plain stderr: the usage is the answer to a wrong command.
  std::fprintf(stderr,
               "kvtier: unknown command '%s' (kvtier help lists them)\n",
               cmd.c_str());
  return 2;
}
