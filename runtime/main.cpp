// The `kvtier` program: `kvtier <command> [arguments] [options]`. Options
// of the form `--section.key=value` and `--config-file=FILE` configure the
// service (without a file the embedded default, conf/kvtier.conf, applies);
// the rest belong to the command (runtime/commands.hpp).
#include "runtime/commands.hpp"
#include "runtime/config.hpp"

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
    "  demo       the replay of the conversation trace on the default\n"
    "             configuration, writing demo-data/replay.{json,svg}\n"
    "  scenario FILE...\n"
    "             run scripted engine scenarios (conf/scenarios/*.scn)\n"
    "  inspect DIR [--verify]\n"
    "             list what an SSD tier directory holds; --verify checks\n"
    "             every payload checksum\n"
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
  std::printf("[model]\nidentity=\"%s\"\npreset=\"%s\"\nscale=%g\n"
              "layers=\"%s\"\n",
              o.model_identity.c_str(), o.model.c_str(), o.model_scale,
              o.model_layers.c_str());
  if (auto m = kvtier::runtime::running_model(o))
    std::printf("; fingerprint %s\n; resolved layers %s\n",
                m->fingerprint().c_str(), m->geometry.layers_text().c_str());
  std::printf("[admission]\nkv-budget-bytes=%llu\nposition-limit=%llu\n"
              "max-queued=%llu\n",
              static_cast<unsigned long long>(o.kv_budget_bytes),
              static_cast<unsigned long long>(o.position_limit),
              static_cast<unsigned long long>(o.max_queued));
  std::printf(
    "[service]\nidle-demotion-ms=%llu\ncheckpoint-every-tokens=%llu\n",
    static_cast<unsigned long long>(o.idle_demotion_ms),
    static_cast<unsigned long long>(o.checkpoint_every_tokens));
  auto& r = cfg.replay;
  std::printf("[replay]\ntrace=\"%s\"\nmax-requests=%llu\nverify=%s\n"
              "settle=%s\nspeed=%g\nbatch=%llu\nprefill-tokens-per-s=%g\n"
              "model-scale=%g\nram-cap-bytes=%llu\nssd-cap-bytes=%llu\n"
              "clean-ssd=%s\n",
              r.trace.c_str(), static_cast<unsigned long long>(r.max_requests),
              r.verify ? "true" : "false", r.settle ? "true" : "false", r.speed,
              static_cast<unsigned long long>(r.batch), r.prefill_tokens_per_s,
              r.model_scale, static_cast<unsigned long long>(r.ram_cap_bytes),
              static_cast<unsigned long long>(r.ssd_cap_bytes),
              r.clean_ssd ? "true" : "false");
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
  for (int i = 2; i < argc; ++i) {
    std::string_view a{argv[i]};
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
  if (cmd == "config")
    return print_config(cfg);
  if (cmd == "replay")
    return replay_command(cfg, own);
  if (cmd == "demo")
    return demo_command(cfg, own);
  if (cmd == "inspect")
    return inspect_command(cfg, own);
  if (cmd == "scenario")
    return scenario_command(cfg, own);
  std::fprintf(stderr, "kvtier: unknown command '%s'\n\n", cmd.c_str());
  usage();
  return 2;
}
