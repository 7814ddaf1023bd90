#include "runtime/tools/node_spawn.hpp"

#include "messages/error.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace kvtier::runtime {

caf::expected<std::unique_ptr<node_child>>
node_child::start(const std::string& program,
                  const std::vector<std::string>& args,
                  const std::filesystem::path& log, ms bound) {
  std::unique_ptr<node_child> c{new node_child};
  c->log_ = log;
  int fds[2];
  if (::pipe(fds) != 0)
    return make_error(ec::io_error,
                      std::string{"pipe: "} + std::strerror(errno));
  // Built before fork: the child of a threaded process only execs.
  std::vector<std::string> all{program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto log_file = log.string();
  auto parent = ::getpid();
  c->pid_ = ::fork();
  if (c->pid_ < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return make_error(ec::io_error,
                      std::string{"fork: "} + std::strerror(errno));
  }
  if (c->pid_ == 0) {
    // Dies with the parent, even one that crashed without destructors.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    ::dup2(fds[1], STDOUT_FILENO);
    auto fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0)
      ::dup2(fd, STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  c->out_ = fds[0];
  auto line = c->read_line(bound);
  const std::string prefix = "kvtier node listening ";
  if (line.rfind(prefix, 0) != 0)
    return make_error(line.empty() ? ec::timeout : ec::io_error,
                      "node process " + std::to_string(c->pid_)
                        + (line.empty()
                             ? " printed no listening line within "
                                 + std::to_string(bound.count()) + " ms"
                             : " printed '" + line + "'")
                        + " (its log: " + log_file + ")");
  auto rest = line.substr(prefix.size());
  auto space = rest.find(' ');
  c->address_ = rest.substr(0, space);
  auto colon = c->address_.rfind(':');
  if (colon == std::string::npos)
    return make_error(ec::io_error,
                      "node process printed '" + line + "' (no port)");
  c->port_ = static_cast<uint16_t>(std::stoul(c->address_.substr(colon + 1)));
  auto http = rest.find(" http=");
  if (http != std::string::npos)
    c->http_address_ =
      rest.substr(http + 6, rest.find(' ', http + 6) - http - 6);
  auto id = rest.find("node-id=");
  if (id != std::string::npos)
    c->node_id_ = rest.substr(id + 8);
  return c;
}

node_child::~node_child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::kill(pid_, SIGCONT);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0)
    ::close(out_);
}

int node_child::stop(ms bound) {
  if (pid_ <= 0)
    return -1;
  ::kill(pid_, SIGTERM);
  return reap(bound);
}

void node_child::signal(int sig) {
  if (pid_ > 0)
    ::kill(pid_, sig);
}

void node_child::kill9() {
  if (pid_ <= 0)
    return;
  ::kill(pid_, SIGKILL);
  reap(ms{5000});
}

std::string node_child::log() const {
  std::ifstream in(log_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string node_child::read_line(ms bound) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    char c;
    if (::read(out_, &c, 1) != 1)
      break;
    if (c == '\n')
      return line;
    line += c;
  }
  return line;
}

int node_child::reap(ms bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(ms{10});
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

} // namespace kvtier::runtime
