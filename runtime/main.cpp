// The `kvtier` program. For now: version and help; later issues add its jobs
// (node, scenario runner, trace replay, admin).
#include <cstdio>
#include <cstring>
#include <string>

namespace {

void usage() {
  std::puts("usage: kvtier <command> [options]\n"
            "\n"
            "commands:\n"
            "  demo       run the synthetic engine through the tiers\n"
            "  version    print the version\n"
            "  help       print this text");
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
  std::fprintf(stderr, "kvtier: unknown command '%s'\n\n", cmd.c_str());
  usage();
  return 2;
}
