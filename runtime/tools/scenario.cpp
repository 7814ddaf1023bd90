#include "runtime/tools/scenario.hpp"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace kvtier::runtime {

namespace {

const std::set<std::string>& verbs() {
  static const std::set<std::string> v{
    "request",     "restart",       "flush",     "boundary", "pressure",
    "demote-idle", "close-session", "disk-full", "disk-ok",  "expect"};
  return v;
}

caf::error bad(const std::string& file, size_t line, const std::string& what) {
  return make_error(ec::invalid_argument,
                    file + ":" + std::to_string(line) + ": " + what);
}

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

const std::set<std::string>& operators() {
  static const std::set<std::string> ops{"==", "!=", ">=", "<=", ">", "<"};
  return ops;
}

} // namespace

caf::expected<scenario> parse_scenario(const std::string& text,
                                       const std::string& file) {
  scenario out;
  out.file = file;
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    auto w = words_of(line);
    if (w.empty())
      continue;
    if (w[0] == "scenario") {
      auto at = line.find("scenario") + 8;
      auto first = line.find_first_not_of(" \t", at);
      auto last = line.find_last_not_of(" \t\r");
      out.name =
        first == std::string::npos ? "" : line.substr(first, last - first + 1);
      continue;
    }
    if (w[0] == "set") {
      for (size_t i = 1; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        if (eq == std::string::npos || eq == 0)
          return bad(file, n, "set expects key=value, got '" + w[i] + "'");
        out.settings[w[i].substr(0, eq)] = w[i].substr(eq + 1);
      }
      continue;
    }
    if (verbs().count(w[0]) == 0)
      return bad(file, n, "unknown step '" + w[0] + "'");
    scenario_step s;
    s.line = n;
    s.verb = w[0];
    for (size_t i = 1; i < w.size(); ++i) {
      auto eq = w[i].find('=');
      if (s.verb != "expect" && eq != std::string::npos && eq > 0)
        s.args[w[i].substr(0, eq)] = w[i].substr(eq + 1);
      else
        s.words.push_back(w[i]);
    }
    if (s.verb == "expect"
        && (s.words.size() != 3 || operators().count(s.words[1]) == 0))
      return bad(file, n,
                 "expect needs FACT OP VALUE with OP one of == != >= <= > <");
    if (s.verb == "request" && (s.words.size() != 1 || !s.args.count("prompt")))
      return bad(file, n, "request needs an ID and prompt=...");
    out.steps.push_back(std::move(s));
  }
  if (out.name.empty())
    return bad(file, 1, "no 'scenario NAME' line");
  return out;
}

caf::expected<scenario> load_scenario(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(ec::not_found, "cannot read scenario " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path);
}

namespace {

std::optional<double> number(const std::string& s) {
  if (s.empty())
    return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size())
    return std::nullopt;
  return v;
}

bool holds(const std::string& op, double a, double b) {
  if (op == "==")
    return a == b;
  if (op == "!=")
    return a != b;
  if (op == ">=")
    return a >= b;
  if (op == "<=")
    return a <= b;
  if (op == ">")
    return a > b;
  return a < b;
}

/// Facts sharing `name`'s first component, for an "unknown fact" message.
std::string near(const std::string& name, const scenario_facts& facts) {
  auto head = name.substr(0, name.find('.'));
  std::string out;
  for (auto& [k, v] : facts)
    if (k.rfind(head, 0) == 0 && out.size() < 200)
      out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none with that prefix" : out;
}

} // namespace

std::optional<scenario_failure> check_expectation(const scenario_step& s,
                                                  const scenario_facts& facts) {
  auto& name = s.words[0];
  auto& op = s.words[1];
  auto& want = s.words[2];
  scenario_failure f{s.line, name + " " + op + " " + want, {}};
  auto i = facts.find(name);
  if (i == facts.end()) {
    f.actual = "no fact '" + name + "' (known: " + near(name, facts) + ")";
    return f;
  }
  auto a = number(i->second), b = number(want);
  bool ok =
    a && b ? holds(op, *a, *b)
           : (op == "==" ? i->second == want : op == "!=" && i->second != want);
  if (ok)
    return std::nullopt;
  f.actual = name + " = " + i->second;
  return f;
}

std::string render_result(const scenario_result& r) {
  std::ostringstream o;
  o << (r.passed() ? "PASS " : "FAIL ") << r.name << " (" << r.file << ")\n";
  if (!r.error.empty())
    o << "  error: " << r.error << "\n";
  for (auto& f : r.failures)
    o << "  " << r.file << ":" << f.line << ": expected " << f.expected
      << ", got " << f.actual << "\n";
  return o.str();
}

} // namespace kvtier::runtime
