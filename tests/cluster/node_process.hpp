// A `kvtier node` process for multi-process tests: writes a generated
// configuration (port 0 unless given, fast heartbeats) into a working
// directory, starts the program (KVTIER_PROGRAM, the built binary) with
// `--config FILE` and `--join` arguments through the spawner the
// multi-node replay uses (runtime/tools/node_spawn.hpp: the listening line
// "kvtier node listening HOST:PORT node-id=NAME" read within a bound,
// SIGTERM then SIGKILL after a bound). The destructor kills a process
// still running (also a stopped one), and each child has PR_SET_PDEATHSIG,
// so a failing or crashing test leaves no process behind.
// The node's stderr goes to `<dir>/<id>-<n>.log`, printed by `log()` for a
// failure's diagnosis.
//
// Also a client actor system (with the middleman) that asks a node for its
// membership view, and `wait_for`, a bounded poll of a condition.
//
// One test thread uses a `node_process`.
#pragma once

#include "messages/error.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/node.hpp"
#include "runtime/tools/client.hpp"
#include "runtime/tools/node_spawn.hpp"
#include "tests/cluster/test_cluster.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <poll.h>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace kvtier::test {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

/// How the generated configuration sets a node up.
struct node_settings {
  std::string node_id;
  /// model.identity: nodes with different ones refuse each other.
  std::string identity = test_identity;
  std::vector<std::string> joins;
  uint16_t port = 0;
  /// ssd-tier.dir (empty: none).
  std::string ssd_dir;
  uint64_t heartbeat_ms = test_timing::heartbeat_ms;
  uint64_t down_after_ms = test_timing::down_after_ms;
  uint64_t backoff_ms = test_timing::backoff_ms;
  uint64_t backoff_max_ms = test_timing::backoff_max_ms;
  /// model.preset and ram-tier.cap-bytes.
  std::string model = "tiny-dense";
  uint64_t ram_cap_bytes = 64ull << 20;
  /// The program (empty: KVTIER_PROGRAM) and arguments after the joins.
  std::string program;
  std::vector<std::string> extra_args;
  /// More `key=value` lines of the [cluster] section (e.g. tls=true).
  std::vector<std::string> cluster_lines;
};

class node_process {
public:
  node_process(const std::filesystem::path& dir, node_settings s)
    : settings_(std::move(s))
    , dir_(dir) {
    static int count = 0; // two processes may share an id (a collision)
    stem_ = settings_.node_id + "-" + std::to_string(++count);
    start();
  }

  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  uint16_t port() const {
    return port_;
  }
  std::string address() const {
    return "127.0.0.1:" + std::to_string(port_);
  }
  const std::string& node_id() const {
    return settings_.node_id;
  }
  /// HOST:PORT of its HTTP endpoint (when started with http.enabled).
  std::string http_address() const {
    return child_ ? child_->http_address() : std::string{};
  }
  bool running() const {
    return child_ && child_->running();
  }
  /// Its process id (-1 when not started).
  pid_t pid() const {
    return child_ ? child_->pid() : -1;
  }

  /// SIGTERM, then the exit status within `bound` (else SIGKILL and -1).
  int stop(ms bound = 8000ms) {
    BOOST_REQUIRE(running());
    return child_->stop(bound);
  }

  /// SIGKILL and reap.
  void kill9() {
    BOOST_REQUIRE(running());
    child_->kill9();
  }

  /// Sends `sig` (e.g. SIGUSR1 to a node_writer).
  void signal(int sig) {
    child_->signal(sig);
  }

  void pause() {
    child_->signal(SIGSTOP);
  }
  void resume() {
    child_->signal(SIGCONT);
  }

  /// Starts the program again with the same settings, on the same port
  /// (unless it was given one already).
  void restart() {
    BOOST_REQUIRE(!running());
    if (settings_.port == 0)
      settings_.port = port_;
    start();
  }

  /// The node's stderr so far.
  std::string log() const {
    std::ifstream in(dir_ / (stem_ + ".log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  /// Writes the configuration `settings_` describes to `file` (also for a
  /// test that runs the program itself, e.g. one that must refuse to start).
  static void write_config(const node_settings& settings_,
                           const std::filesystem::path& file) {
    std::ofstream out(file);
    out << "[cluster]\nnode-id=\"" << settings_.node_id << "\"\n"
        << "port=" << settings_.port << "\n"
        << "heartbeat-ms=" << settings_.heartbeat_ms << "\n"
        << "down-after-ms=" << settings_.down_after_ms << "\n"
        << "reconnect-backoff-ms=" << settings_.backoff_ms << "\n"
        << "reconnect-backoff-max-ms=" << settings_.backoff_max_ms << "\n";
    for (auto& line : settings_.cluster_lines)
      out << line << "\n";
    out << "[model]\npreset=\"" << settings_.model
        << "\"\nscale=1.0\nidentity=\"" << settings_.identity << "\"\n"
        << "[ram-tier]\ncap-bytes=" << settings_.ram_cap_bytes << "\n"
        << "[ssd-tier]\ndir=\"" << settings_.ssd_dir << "\"\n"
        << "write-behind=false\n"
        << "[service]\nidle-demotion-ms=0\nstorage-deadline-ms=3000\n";
  }

private:
  void start() {
    auto conf = dir_ / (stem_ + ".conf");
    write_config(settings_, conf);
    std::vector<std::string> args{"node", "--config", conf.string()};
    for (auto& j : settings_.joins) {
      args.push_back("--join");
      args.push_back(j);
    }
    args.insert(args.end(), settings_.extra_args.begin(),
                settings_.extra_args.end());
    child_.reset(); // a previous run's process is reaped already
    auto c = runtime::node_child::start(
      settings_.program.empty() ? KVTIER_PROGRAM : settings_.program, args,
      dir_ / (stem_ + ".log"), 10000ms);
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(c),
                          "node " << settings_.node_id << ": "
                                  << (c ? std::string{} : describe(c.error()))
                                  << "; its log:\n"
                                  << log());
    child_ = std::move(*c);
    port_ = child_->port();
    BOOST_TEST_MESSAGE("node " << settings_.node_id << " listens on "
                               << address());
  }

  node_settings settings_;
  std::filesystem::path dir_;
  std::string stem_;
  std::unique_ptr<runtime::node_child> child_;
  uint16_t port_ = 0;
};

/// The exit status of `command` (through the shell; -1 when it did not
/// exit) and its stdout and stderr.
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string out;
  int status = -1;
  if (auto* p = ::popen((command + " 2>&1").c_str(), "r")) {
    char buf[4096];
    while (auto n = std::fread(buf, 1, sizeof buf, p))
      out.append(buf, n);
    status = ::pclose(p);
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// An actor system that can reach nodes (the middleman, kvtier's types).
using cluster::client_config;

/// The least time a wait for something that must happen is given: a
/// loaded machine (the suite runs beside other work) may make what takes
/// milliseconds here take seconds.
inline constexpr ms patient_wait{30000};

/// Polls `pred` every 20 ms until it holds or `bound` passes, and never
/// gives up before `patient_wait` (`bound` says what it takes on an idle
/// machine); whether it held. For what must not happen, `never_within`.
inline bool wait_for(const std::function<bool()>& pred, ms bound) {
  auto deadline =
    std::chrono::steady_clock::now() + std::max(bound, patient_wait);
  while (true) {
    if (pred())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(20ms);
  }
}

/// Whether `pred` stayed false for all of `span` (polled every 20 ms).
inline bool never_within(const std::function<bool()>& pred, ms span) {
  auto deadline = std::chrono::steady_clock::now() + span;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred())
      return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

/// The membership view of the node at `address`, asked from `sys` (each
/// ask bounded by 5 s) until one ask answers or `patience` passes; nullopt
/// when none did. A client that must be refused asks once instead
/// (`cluster::query_members`).
inline std::optional<cluster::members_view>
members_of(caf::actor_system& sys, const std::string& address,
           ms patience = patient_wait) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (true) {
    if (auto v = cluster::query_members(sys, address, 5000ms))
      return std::move(*v);
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
}

/// A fresh temporary directory, removed when it goes.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    auto tmpl =
      (std::filesystem::temp_directory_path() / "kvtier-nodes-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(tmpl.data()));
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// What a test of node processes starts from: a directory for them and a
/// client that asks them for their membership views.
struct nodes_fixture {
  temp_dir dir;
  client_config cfg;
  caf::actor_system sys{cfg};

  /// `n`'s membership view, asked until one ask answers (`members_of`).
  std::optional<cluster::members_view> view(const node_process& n) {
    return members_of(sys, n.address());
  }

  /// `id`'s state in `n`'s view (down when unknown or unreachable).
  cluster::peer_state state_of(const node_process& n, const std::string& id) {
    if (auto v = view(n))
      for (auto& m : v->members)
        if (m.node_id == id)
          return m.state;
    return cluster::peer_state::down;
  }
};

} // namespace kvtier::test
