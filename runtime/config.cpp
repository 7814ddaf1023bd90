// Reading kvtier's configuration: the embedded default, the file and the
// command line into one `kvtier_config` (CAF's options beside kvtier's),
// refusing unknown sections and keys with a "did you mean", moved options
// and values of the wrong type, naming the file and line. The values'
// rules are checked in option_checks.cpp.
#include "runtime/config.hpp"
#include "runtime/options.hpp"

#include "runtime/affine_sharing.hpp"
#include "runtime/net/tls.hpp"

#include <caf/io/middleman.hpp>

#include <caf/scheduler/coordinator.hpp>

#include <caf/settings.hpp>

#include "messages/log.hpp"
#include "messages/type_ids.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

namespace kvtier::runtime {

namespace {

/// The options each kvtier section declares (for refusing unknown keys):
/// the one list (runtime/options.hpp).
const std::map<std::string, std::set<std::string>>& known_keys() {
  static const auto m = [] {
    std::map<std::string, std::set<std::string>> out;
#define KVTIER_KNOWN(section, key, member, rule, help) out[section].insert(key);
    KVTIER_SERVICE_OPTIONS(KVTIER_KNOWN)
    KVTIER_REPLAY_OPTIONS(KVTIER_KNOWN)
#undef KVTIER_KNOWN
    return out;
  }();
  return m;
}

/// Keys that moved to another section: old "section.key" -> new one.
const std::map<std::string, std::string>& moved_keys() {
  static const std::map<std::string, std::string> m{
    {"admission.model", "model.preset"},
    {"admission.model-scale", "model.scale"},
  };
  return m;
}

caf::error moved(const std::string& where, const std::string& key) {
  return make_error(ec::invalid_config,
                    where + key + " has moved: use " + moved_keys().at(key)
                      + " ([model] section, docs/configuration.md)");
}

/// Command-line options naming a key that moved.
caf::error check_moved_options(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a{argv[i]};
    if (a.substr(0, 2) != "--")
      continue;
    auto key = std::string{a.substr(2, a.find('=') - 2)};
    if (moved_keys().count(key) > 0)
      return moved("--", key);
  }
  return {};
}

/// The edit distance of `a` and `b` (insertions, deletions, substitutions).
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      auto up = row[j];
      row[j] = std::min(
        {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The name of `known` nearest to `name` when it looks like a misspelling
/// of it (at most 3 edits, and fewer than half the name), else "".
std::string nearest(const std::string& name,
                    const std::set<std::string>& known) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (auto& k : known) {
    // At least the lengths' difference apart: beyond 3, no suggestion
    // (and a hostile file's megabyte-long key costs no quadratic pass).
    auto gap =
      name.size() > k.size() ? name.size() - k.size() : k.size() - name.size();
    if (gap > 3)
      continue;
    if (auto d = distance(name, k); d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best_d <= 3 && 2 * best_d < std::max<size_t>(name.size(), 2) ? best
                                                                      : "";
}

/// The sections CAF declares options in (`opts`' categories: [scheduler],
/// [middleman], ...) and kvtier's own.
std::set<std::string> known_sections(const caf::config_option_set& opts) {
  std::set<std::string> out;
  for (auto& o : opts)
    out.emplace(o.category().begin(), o.category().end());
  for (auto& [section, keys] : known_keys())
    out.insert(section);
  return out;
}

/// Every option name, "section.key", kvtier's and CAF's.
std::set<std::string> known_names(const caf::config_option_set& opts) {
  std::set<std::string> out;
  for (auto& o : opts)
    out.insert(std::string{o.category().begin(), o.category().end()} + "."
               + std::string{o.long_name().begin(), o.long_name().end()});
  return out;
}

/// "did you mean X? " when `name` is near one of `known`, else "".
std::string did_you_mean(const std::string& name,
                         const std::set<std::string>& known,
                         const std::string& before = "",
                         const std::string& after = "") {
  auto n = nearest(name, known);
  return n.empty() ? std::string{}
                   : "did you mean " + before + n + after + "? ";
}

/// Section names in `ini` that CAF would ignore or kvtier does not know.
/// Where line `n` of the configuration text came from: `FILE:LINE` for the
/// file, the argument itself for the command line (`cli`: line number to
/// argument, for the lines `with_command_line` appended).
struct origin {
  std::string source;
  std::map<int, std::string> cli;

  std::string at(int n) const {
    if (auto i = cli.find(n); i != cli.end())
      return i->second;
    return source + ":" + std::to_string(n);
  }
};

caf::error check_sections(const std::string& ini, const origin& where,
                          const std::set<std::string>& sections) {
  std::istringstream in(ini);
  std::string line, section;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == ';')
      continue;
    if (line[first] == '[') {
      section = line.substr(first + 1, line.find(']') - first - 1);
      if (section.find('.') != std::string::npos)
        return make_error(ec::invalid_config,
                          where.at(n) + ": section [" + section
                            + "] has a dot; use one level, e.g. ["
                            + section.substr(section.rfind('.') + 1) + "]");
      // A section nobody reads would be skipped whole, its keys with it
      // (a node without its SSD tier for [ssd_tier]).
      if (sections.count(section) == 0)
        return make_error(ec::invalid_config,
                          where.at(n) + ": unknown section [" + section + "] ("
                            + did_you_mean(section, sections, "[", "]")
                            + "kvtier's are in conf/kvtier.conf)");
      continue;
    }
    auto keys = known_keys().find(section);
    if (keys == known_keys().end())
      continue; // CAF's own sections ([scheduler], [middleman], ...)
    auto key = line.substr(first, line.find('=') - first);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (moved_keys().count(section + "." + key) > 0)
      return moved(where.at(n) + ": ", section + "." + key);
    if (keys->second.count(key) == 0)
      return make_error(ec::invalid_config,
                        where.at(n) + ": unknown key " + section + "." + key);
  }
  return {};
}

/// `ini` with every value of a kvtier key checked against its option's
/// type, because CAF 0.17's INI reader silently ignores a value of another
/// type (`scale=1` for a real number, `peers="HOST:PORT"` for a list): an
/// integer for a real number is written as the real it means (1 -> 1.0),
/// any other mismatch is refused naming the key and the type it takes.
/// `text` as a plain byte count when it is a size with a unit (`8GiB`,
/// `512MB`, `64 KiB`, `10B`): decimal (KB, MB, GB, TB) and binary (KiB,
/// MiB, GiB, TiB) units, a whole or decimal number before them; nullopt
/// when it has no unit (then it is read as it is).
std::optional<std::string> size_with_unit(const std::string& text) {
  size_t i = 0;
  while (
    i < text.size()
    && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0 || i == text.size())
    return std::nullopt;
  auto unit = text.substr(text.find_first_not_of(' ', i));
  static const std::map<std::string, double> units{
    {"B", 1},           {"KB", 1e3},           {"MB", 1e6},
    {"GB", 1e9},        {"TB", 1e12},          {"KiB", 1024.0},
    {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  auto u = units.find(unit);
  if (u == units.end())
    return std::nullopt;
  double v = 0;
  try {
    v = std::stod(text.substr(0, i)) * u->second;
  } catch (...) {
    return std::nullopt;
  }
  if (!(v >= 0 && v < 1.8e19) || v != std::floor(v))
    return std::nullopt;
  return std::to_string(static_cast<uint64_t>(v));
}

/// What a value of `opt`'s type looks like, in words.
std::string expected_of(const caf::config_option& opt, const std::string& key) {
  std::string type{opt.type_name().begin(), opt.type_name().end()};
  if (type == "uint64" || type == "ulong" || type.find("uint") == 0)
    return key.find("bytes") != std::string::npos
             ? "a non-negative size (e.g. 4096, 512MB, 8GiB)"
             : "a non-negative integer";
  if (type == "boolean" || type == "bool")
    return "true or false";
  if (type == "real64" || type == "double" || type == "real")
    return "a number";
  if (type == "string")
    return "a string in quotes";
  if (type.find("list") != std::string::npos
      || type.find("vector") != std::string::npos)
    return "a list in [...]";
  if (type == "atom")
    return "a word of at most 10 characters";
  if (type == "timespan")
    return "a duration (e.g. 10ms, 2s)";
  return "a value of type " + type;
}

/// A command-line argument that is not one of kvtier's keys, before CAF
/// reads it: refused in kvtier's words when CAF has no such option or its
/// value is not of the option's type (CAF's own parser would answer
/// "parser_error(not_an_option, ...)").
caf::error check_caf_argument(const caf::config_option_set& opts,
                              const std::string& a) {
  if (a.rfind("--", 0) != 0)
    return {};
  auto eq = a.find('=');
  auto name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
  auto* opt = opts.cli_long_name_lookup(name);
  if (opt == nullptr) {
    auto plain = name.substr(name.find('#') + 1); // without "caf#"
    return make_error(ec::invalid_config,
                      a + ": unknown option ("
                        + did_you_mean(plain, known_names(opts), "--")
                        + "`kvtier config` prints kvtier's options)");
  }
  std::string key{opt->long_name().begin(), opt->long_name().end()};
  auto full =
    std::string{opt->category().begin(), opt->category().end()} + "." + key;
  if (eq == std::string::npos) {
    if (opt->check(caf::config_value{true}) == caf::none)
      return {};
    return make_error(ec::invalid_config, a + ": expected "
                                            + expected_of(*opt, key)
                                            + " after '='");
  }
  auto text = a.substr(eq + 1);
  auto value = caf::config_value::parse(text);
  if ((value && opt->check(*value) == caf::none)
      || opt->check(caf::config_value{text}) == caf::none
      || (text.size() <= 10
          && opt->check(caf::config_value{caf::atom_from_string(text)})
               == caf::none))
    return {};
  return make_error(
    ec::invalid_config,
    a + ": " + full + ": expected " + expected_of(*opt, key) + ", not "
      + (text.empty() ? std::string{"nothing"} : "'" + text + "'"));
}

caf::expected<std::string> typed_ini(const std::string& ini,
                                     const caf::config_option_set& opts,
                                     const origin& where) {
  std::istringstream in(ini);
  std::string line, section, out;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto keep = [&] { out += line + "\n"; };
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == ';') {
      keep();
      continue;
    }
    if (line[first] == '[') {
      section = line.substr(first + 1, line.find(']') - first - 1);
      keep();
      continue;
    }
    auto eq = line.find('=');
    if (known_keys().count(section) == 0 || eq == std::string::npos) {
      keep();
      continue;
    }
    auto key = line.substr(first, eq - first);
    key.erase(key.find_last_not_of(" \t") + 1);
    auto text = line.substr(eq + 1);
    text.erase(0, text.find_first_not_of(" \t"));
    text.erase(text.find_last_not_of(" \t\r") + 1);
    auto* opt = opts.qualified_name_lookup(section, key);
    if (opt != nullptr && key.find("bytes") != std::string::npos)
      if (auto plain = size_with_unit(text)) {
        out += line.substr(0, eq + 1) + *plain + "\n";
        continue;
      }
    auto value = caf::config_value::parse(text);
    // A word option's word is refused at its line (a rule's word check).
    if (auto* rule = rule_of(section + "." + key);
        rule != nullptr && rule->check != nullptr
        && rule->check->word != nullptr && value
        && caf::holds_alternative<std::string>(*value)
        && !rule->check->word(caf::get<std::string>(*value)))
      return make_error(ec::invalid_config,
                        where.at(n) + ": " + section + "." + key
                          + ": expected one of " + rule->check->words
                          + ", not '" + caf::get<std::string>(*value) + "'");
    if (opt == nullptr || (value && !opt->check(*value))) {
      keep();
      continue;
    }
    if (value && caf::holds_alternative<caf::config_value::integer>(*value)
        && opt->check(caf::config_value{1.5}) == caf::none) {
      out += line.substr(0, eq + 1) + text + ".0\n";
      continue;
    }
    return make_error(
      ec::invalid_config,
      where.at(n) + ": " + section + "." + key + ": expected "
        + expected_of(*opt, key) + ", not "
        + (text.empty() ? std::string{"nothing"} : "'" + text + "'"));
  }
  return out;
}

} // namespace

kvtier_config::kvtier_config() {
  // One option group per option, from the one list (runtime/options.hpp).
  auto& o = options;
  auto& r = replay;
#define KVTIER_SERVICE_OPTION(section, key, member, rule, help)                \
  opt_group{custom_options_, section}.add(o.member, key, help);
#define KVTIER_REPLAY_OPTION(section, key, member, rule, help)                 \
  opt_group{custom_options_, section}.add(r.member, key, help);
  KVTIER_SERVICE_OPTIONS(KVTIER_SERVICE_OPTION)
  KVTIER_REPLAY_OPTIONS(KVTIER_REPLAY_OPTION)
#undef KVTIER_SERVICE_OPTION
#undef KVTIER_REPLAY_OPTION
  register_error_category(*this);
  msg::register_message_types(*this);
}

caf::error kvtier_config::load(int argc, char** argv,
                               const std::string& ini_text,
                               const std::string& source) {
  if (auto err = check_moved_options(argc, argv))
    return err;
  // kvtier's options on the command line become lines after the file's
  // (so they win), each remembered as its argument for the errors; the
  // rest (CAF's own options) goes to CAF as it came.
  origin where{source, {}};
  auto text = ini_text;
  if (!text.empty() && text.back() != '\n')
    text += '\n';
  int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a{argv[i]};
    auto eq = a.find('=');
    auto name = a.substr(0, eq);
    auto dot = name.find('.');
    if (i == 0 || a.rfind("--", 0) != 0 || dot == std::string::npos
        || known_keys().count(name.substr(2, dot - 2)) == 0) {
      if (i > 0)
        if (auto err = check_caf_argument(custom_options_, a))
          return err;
      rest.push_back(argv[i]);
      continue;
    }
    auto section = name.substr(2, dot - 2);
    auto key = name.substr(dot + 1);
    auto* opt = custom_options_.qualified_name_lookup(section, key);
    if (opt == nullptr)
      return make_error(
        ec::invalid_config,
        name + ": unknown option ("
          + did_you_mean(name.substr(2), known_names(custom_options_), "--")
          + "`kvtier config` prints every one)");
    bool boolean = opt->check(caf::config_value{true}) == caf::none;
    std::string value;
    if (eq == std::string::npos) {
      if (!boolean)
        return make_error(ec::invalid_config, a + ": expected "
                                                + expected_of(*opt, key)
                                                + " after '='");
      value = "true";
    } else {
      value = a.substr(eq + 1);
    }
    if (opt->check(caf::config_value{std::string{}}) == caf::none
        && value.rfind('"', 0) != 0) {
      std::string quoted = "\"";
      for (char c : value)
        quoted +=
          (c == '"' || c == '\\') ? std::string{'\\', c} : std::string{c};
      value = quoted + "\"";
    }
    text += "[" + section + "]\n" + key + "=" + value + "\n";
    lines += 2;
    where.cli[lines] = a;
  }
  if (auto err = check_sections(text, where, known_sections(custom_options_)))
    return err;
  auto typed = typed_ini(text, custom_options_, where);
  if (!typed)
    return std::move(typed.error());
  std::istringstream ini(*typed);
  if (auto err = parse(static_cast<int>(rest.size()), rest.data(), ini))
    return make_error(ec::invalid_config,
                      "cannot parse the configuration: " + to_string(err));
  if (auto err = options.validate())
    return err;
  if (auto err = replay.validate())
    return err;
  log::set_level(*log::parse_level(options.log_level));
  return load_scheduler();
}

caf::error kvtier_config::load_scheduler() {
  auto policy = caf::get_or(*this, "scheduler.policy", caf::atom("stealing"));
  if (policy == caf::atom("stealing") || policy == caf::atom("sharing"))
    return {}; // CAF's own
  if (policy != caf::atom("affine"))
    return make_error(ec::invalid_config,
                      "scheduler.policy: '" + to_string(policy)
                        + "' is none of 'affine', 'sharing', 'stealing'");
  if (!scheduler_loaded_) {
    // (kvtier_config::load hides the base class template of that name)
    actor_system_config::load<caf::scheduler::coordinator<affine_sharing>>();
    scheduler_loaded_ = true;
  }
  return {};
}

void kvtier_config::load_middleman() {
  if (middleman_loaded_)
    return;
  actor_system_config::load<caf::io::middleman>();
  if (options.cluster_tls)
    net::configure_tls(*this, tls_files_of(options));
  middleman_loaded_ = true;
}

caf::error kvtier_config::load(int argc, char** argv) {
  std::string path;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string_view a{argv[i]};
    if (i > 0 && a.substr(0, 14) == "--config-file=")
      path = std::string{a.substr(14)};
    else
      rest.push_back(argv[i]);
  }
  if (path.empty())
    return load(static_cast<int>(rest.size()), rest.data(),
                embedded_default_config(), "the embedded default");
  std::ifstream in(path);
  if (!in)
    return make_error(ec::invalid_config,
                      "cannot read configuration file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return load(static_cast<int>(rest.size()), rest.data(), text.str(), path);
}

} // namespace kvtier::runtime
