// bench_handshake: does a peer that keeps failing its handshakes slow the
// node down for its legitimate clients? (#28 item 6, docs/cluster.md
// "Security").
//
// Starts a `kvtier node` with TLS (certificates of a throwaway CA made with
// the `openssl` command in a temporary directory), keeps one certified
// client connected, and times its membership queries (ListMembers, the
// cheapest request a node answers) in phases: alone; while R rogue threads
// connect as fast as they can and send plaintext (a CAF handshake header);
// while they run full TLS handshakes with a certificate of another CA
// (refused after the node's key exchange and signature); each rogue is a
// process of its own. Prints per phase
// the rogue connections per second the node refused and the client's ask
// latency p50 / p99 / max beside the lone baseline. A plaintext node is
// timed the same way with plaintext rogues announcing 4 GiB frames.
//
// Each phase runs for at least 5 s. Options: --asks N (per phase, at
// least; default 400), --rogues R (default 2),
// --program PATH (the kvtier program; default: beside this binary).
#include "runtime/cluster/node.hpp"
#include "runtime/tools/client.hpp"
#include "runtime/tools/node_spawn.hpp"
#include "tests/runtime/http_client.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using namespace kvtier;
using clk = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;
namespace fs = std::filesystem;

namespace {

int sh(const std::string& cmd) {
  return std::system((cmd + " > /dev/null 2>&1").c_str());
}

/// A CA `name` (self-signed) or a leaf signed by `signer`, in `dir`.
bool make_cert(const fs::path& dir, const std::string& name,
               const std::string& signer = {}) {
  auto key = (dir / (name + ".key")).string();
  auto pem = (dir / (name + ".pem")).string();
  std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (signer.empty())
    return sh("openssl req -x509 " + ec + " -keyout " + key + " -out " + pem
              + " -days 2 -subj /CN=bench-" + name)
           == 0;
  auto csr = (dir / (name + ".csr")).string();
  return sh("openssl req " + ec + " -keyout " + key + " -out " + csr
            + " -subj /CN=bench-" + name)
           == 0
         && sh("openssl x509 -req -in " + csr + " -CA "
               + (dir / (signer + ".pem")).string() + " -CAkey "
               + (dir / (signer + ".key")).string() + " -CAcreateserial -out "
               + pem + " -days 2")
              == 0;
}

/// A plaintext rogue: a CAF client handshake header announcing 4 GiB,
/// then it waits for the node to close the connection.
void plaintext_rogue(uint16_t port, std::atomic<bool>& stop,
                     std::atomic<uint64_t>& done) {
  unsigned char h[32] = {0x01, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xF0};
  char buf[512];
  while (!stop) {
    int fd = testing::http_connect(port, std::chrono::seconds(2));
    if (fd < 0)
      continue;
    static_cast<void>(::send(fd, h, sizeof h, MSG_NOSIGNAL));
    while (::recv(fd, buf, sizeof buf, 0) > 0) {
    }
    ::close(fd);
    ++done;
  }
}

/// A TLS rogue: full handshakes presenting a certificate of another CA.
void tls_rogue(uint16_t port, const fs::path& dir, std::atomic<bool>& stop,
               std::atomic<uint64_t>& done) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_use_certificate_chain_file(ctx, (dir / "rogue.pem").c_str());
  SSL_CTX_use_PrivateKey_file(ctx, (dir / "rogue.key").c_str(),
                              SSL_FILETYPE_PEM);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  while (!stop) {
    int fd = testing::http_connect(port, std::chrono::seconds(2));
    if (fd < 0)
      continue;
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      char buf[64];
      static_cast<void>(SSL_read(ssl, buf, sizeof buf)); // the refusal
    }
    SSL_free(ssl);
    ::close(fd);
    ERR_clear_error();
    ++done;
  }
  SSL_CTX_free(ctx);
}

/// The least time each phase runs.
constexpr std::chrono::seconds min_phase{5};

struct phase_result {
  std::string name;
  double rogue_per_s = 0;
  double p50 = 0, p99 = 0, max = 0;
  size_t failed = 0;
  std::string first_error;
};

double pct(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

/// `asks` membership queries of the node at `address` from `sys`, timed,
/// while `rogues` threads run `rogue`.
/// Which rogues a phase runs.
struct rogue_spec {
  std::string kind; // "plain" or "tls"
  uint16_t port = 0;
  fs::path dir;
};

std::string self_path() {
  return fs::read_symlink("/proc/self/exe").string();
}

phase_result run_phase(const std::string& name, caf::actor_system& sys,
                       const std::string& address, int asks, int rogues,
                       const rogue_spec& rogue) {
  // The rogues are processes of their own (as a misbehaving peer is): this
  // program again with `--rogue KIND PORT DIR COUNTER`, each adding its
  // connections to a counter in a shared file.
  auto counter = fs::temp_directory_path()
                 / ("kvtier-bench-rogues-" + std::to_string(::getpid()));
  {
    std::ofstream(counter).put('\0');
    fs::resize_file(counter, 4096);
  }
  int cfd = ::open(counter.c_str(), O_RDWR);
  auto* done = static_cast<std::atomic<uint64_t>*>(
    ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0));
  ::close(cfd);
  std::vector<pid_t> children;
  for (int i = 0; i < rogues; ++i) {
    std::vector<std::string> args{
      self_path(),        "--rogue",
      rogue.kind,         std::to_string(rogue.port),
      rogue.dir.string(), counter.string()};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ)
        == 0)
      children.push_back(pid);
  }
  std::this_thread::sleep_for(ms{300}); // let the rogues get going
  auto start_done = done->load();
  auto t0 = clk::now();
  std::vector<double> lat;
  phase_result r;
  r.name = name;
  // At least `asks` asks and at least `min_phase` of rogue traffic: on a
  // quiet machine 400 asks take a fraction of a second, shorter than one
  // rogue TLS handshake round.
  for (int i = 0; i < asks || clk::now() - t0 < min_phase; ++i) {
    auto a = clk::now();
    auto v = cluster::query_members(sys, address, ms{5000});
    auto us = std::chrono::duration<double, std::micro>(clk::now() - a).count();
    if (v) {
      lat.push_back(us);
    } else {
      if (r.failed++ == 0)
        r.first_error = describe(v.error()) + " after "
                        + std::to_string(static_cast<int>(us / 1000)) + " ms";
    }
  }
  auto secs = std::chrono::duration<double>(clk::now() - t0).count();
  r.rogue_per_s = static_cast<double>(done->load() - start_done) / secs;
  for (auto pid : children) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  ::munmap(done, 4096);
  fs::remove(counter);
  r.p50 = pct(lat, 0.5);
  r.p99 = pct(lat, 0.99);
  r.max = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  return r;
}

void print(const phase_result& r, const phase_result& base) {
  std::printf("%-34s %10.0f %10.0f %10.0f %10.0f %8.2fx %6zu\n", r.name.c_str(),
              r.rogue_per_s, r.p50, r.p99, r.max,
              base.p99 > 0 ? r.p99 / base.p99 : 0.0, r.failed);
  if (!r.first_error.empty())
    std::printf("  first failure: %s\n", r.first_error.c_str());
}

std::string program_beside(const char* argv0) {
  auto self = fs::read_symlink("/proc/self/exe");
  static_cast<void>(argv0);
  return (self.parent_path() / "kvtier").string();
}

std::unique_ptr<runtime::node_child>
start_node(const std::string& program, const fs::path& dir,
           const std::string& name, const std::string& cluster_lines) {
  auto conf = dir / (name + ".conf");
  std::ofstream(conf) << "[cluster]\nnode-id=\"" << name << "\"\nport=0\n"
                      << cluster_lines
                      << "[model]\npreset=\"tiny-dense\"\nidentity=\"bench\"\n"
                      << "[ssd-tier]\ndir=\"\"\n";
  auto c =
    runtime::node_child::start(program, {"node", "--config", conf.string()},
                               dir / (name + ".log"), ms{20000});
  if (!c) {
    std::cerr << "bench_handshake: cannot start the node: "
              << describe(c.error()) << "\n";
    std::exit(1);
  }
  return std::move(*c);
}

} // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 6 && std::string{argv[1]} == "--rogue") {
    // A rogue process: KIND PORT DIR COUNTER (see run_phase). OpenSSL
    // writes with write(): a node that closes the connection mid-handshake
    // must not end the rogue with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    int fd = ::open(argv[5], O_RDWR);
    auto* done = static_cast<std::atomic<uint64_t>*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    std::atomic<bool> never{false};
    auto port = static_cast<uint16_t>(std::stoi(argv[3]));
    if (std::string{argv[2]} == "tls")
      tls_rogue(port, argv[4], never, *done);
    else
      plaintext_rogue(port, never, *done);
    return 0;
  }
  int asks = 400, rogues = 2;
  std::string program = program_beside(argv[0]);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--asks")
      asks = std::stoi(argv[i + 1]);
    else if (k == "--rogues")
      rogues = std::stoi(argv[i + 1]);
    else if (k == "--program")
      program = argv[i + 1];
    else {
      std::cerr << "bench_handshake: unknown option " << k << "\n";
      return 2;
    }
  }
  auto dir = fs::temp_directory_path()
             / ("kvtier-bench-handshake-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  if (!make_cert(dir, "ca") || !make_cert(dir, "other")
      || !make_cert(dir, "node", "ca") || !make_cert(dir, "client", "ca")
      || !make_cert(dir, "rogue", "other")) {
    std::cerr << "bench_handshake: openssl could not make the certificates\n";
    return 1;
  }
  auto p = [&](const std::string& n) { return (dir / n).string(); };
  std::printf("certified ListMembers asks while rogue processes connect (%d "
              "asks per phase, %d rogues; microseconds)\n",
              asks, rogues);
  std::printf("%-34s %10s %10s %10s %10s %9s %6s\n", "phase", "rogue/s", "p50",
              "p99", "max", "p99/base", "failed");
  {
    auto node = start_node(program, dir, "tls",
                           "tls=true\ntls-certificate=\"" + p("node.pem")
                             + "\"\ntls-key=\"" + p("node.key")
                             + "\"\ntls-ca=\"" + p("ca.pem") + "\"\n");
    cluster::client_config cfg{
      {p("client.pem"), p("client.key"), p("ca.pem"), ""}};
    caf::actor_system sys{cfg};
    auto addr = node->address();
    auto port = node->port();
    auto base = run_phase("TLS node, alone", sys, addr, asks, 0, {});
    print(base, base);
    print(run_phase("TLS node, plaintext rogues", sys, addr, asks, rogues,
                    {"plain", port, dir}),
          base);
    print(run_phase("TLS node, other-CA TLS rogues", sys, addr, asks, rogues,
                    {"tls", port, dir}),
          base);
    node->stop();
  }
  {
    auto node = start_node(program, dir, "plain", "");
    cluster::client_config cfg;
    caf::actor_system sys{cfg};
    auto addr = node->address();
    auto port = node->port();
    auto base = run_phase("plaintext node, alone", sys, addr, asks, 0, {});
    print(base, base);
    print(run_phase("plaintext node, 4 GiB-header rogues", sys, addr, asks,
                    rogues, {"plain", port, dir}),
          base);
    node->stop();
  }
  fs::remove_all(dir);
  return 0;
}
