// `kvtier inspect DIR`: what an SSD tier directory holds. DIR is the
// tier's directory (every fingerprint directory under it is listed) or one
// model's own `<dir>/<fingerprint>/` (recognised by its MODEL, LOCK or
// entry files). Per fingerprint: the model its MODEL file names, the
// process its LOCK file names and whether that process still runs (a LOCK
// whose owner exited is stale: the next start takes it over), its entry
// files (namespace, tokens, layers, bytes, session; an object file's key
// and attachments), orphan temps, files whose layers are not that model's,
// and files it cannot read; with `verify`, reads every payload and checks
// its chunk checksums (docs/ssd-format.md).
//
// Inspecting never removes anything. A file is "corrupt" exactly when the
// SSD tier's start-up scan would remove it as corrupt (the same header
// decoder; a misnamed file is "misnamed", which the scan removes too), or
// when --verify found a payload whose checksum does not match.
// `quarantine` moves such files aside into `<fingerprint>/quarantine/`
// (never deleting one), holding the directory's lock meanwhile, so never
// while a service uses it.
// Single-threaded, blocking file reads through `tiers::ssd::file_system`.
#pragma once

#include "tiers/ssd/file_system.hpp"
#include "tiers/state.hpp" // default_priority

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::runtime {

/// One file of a fingerprint directory.
struct inspected_file {
  std::string name;
  /// "ok", "temp" (an interrupted write), "record" (a checkpoint removal
  /// record), "corrupt", "incompatible", "mismatched" (layers of another
  /// model than MODEL names), "misnamed", "unreadable" or "other" (not an
  /// entry file).
  std::string status = "ok";
  /// Why the status is not "ok".
  std::string detail;
  std::string ns;
  std::string session;
  /// "prefix", "checkpoint" (with the request and attempt it names) or
  /// "object" (`ns` is the object's key; its tensors are attachments).
  std::string kind;
  uint64_t request = 0;
  uint32_t attempt = 0;
  uint64_t write_id = 0;
  /// The retention priority its header carries (0 to 100; the SSD tier
  /// evicts lower priorities first; the default for files that carry
  /// none).
  uint32_t priority = tiers::default_priority;
  /// A delta file (docs/ssd-format.md, "Delta files"): the parent it
  /// names, that parent's write id and the rows it leaves to it (the
  /// first `parent_tokens` tokens are the parent's; `head` starts after
  /// them). Empty / 0 for a whole file.
  std::string parent;
  uint64_t parent_write_id = 0;
  uint64_t parent_tokens = 0;
  uint64_t tokens = 0;
  /// The prefix's first tokens (at most 8; a delta's own first tokens).
  std::vector<uint32_t> head;
  uint32_t layers = 0;
  uint32_t attachments = 0;
  uint64_t bytes = 0;
  /// With verify: payload chunks checked (and whether all matched).
  uint64_t chunks_checked = 0;
  /// Where `quarantine` moved it (relative to the fingerprint directory),
  /// empty when it was not moved.
  std::string quarantined;
};

/// Whether the process a LOCK file names still holds it.
enum class lock_state : uint8_t {
  none,    // no LOCK file, or an empty one (released)
  held,    // its process runs on this host
  stale,   // its process exited (killed): the next start takes it over
  unknown, // another host's process, or text that names no process
};

const char* to_string(lock_state s);

struct inspected_fingerprint {
  std::string fingerprint;
  /// The fingerprint directory's path.
  std::string path;
  /// The MODEL file's text (empty when there is none).
  std::string model;
  /// The LOCK file's text: "pid N on host H" of the service that took it
  /// (empty once released, or without a LOCK file), and whether that
  /// process still holds it.
  std::string holder;
  lock_state lock = lock_state::none;
  std::vector<inspected_file> files;
  uint64_t entries = 0;
  uint64_t entry_bytes = 0;
  uint64_t problems = 0;
};

struct inspect_report {
  std::string dir;
  bool verified = false;
  std::vector<inspected_fingerprint> fingerprints;

  /// Files that are neither healthy entries nor ignorable names.
  uint64_t problems() const;
};

/// Inspects `dir` (the SSD tier's `dir`, holding one folder per
/// fingerprint, or one such folder). `ec::not_found` when `dir` does not
/// exist.
caf::expected<inspect_report> inspect(tiers::ssd::file_system& fs,
                                      const std::string& dir, bool verify);

/// The folder `quarantine` moves files into, in a fingerprint directory
/// (the SSD tier lists regular files only: it never looks inside).
inline constexpr const char* quarantine_dir_name = "quarantine";

/// Moves every "corrupt" and "misnamed" file of `r` into its fingerprint's
/// `quarantine/` folder (a name taken there gets a ".N" suffix; nothing is
/// deleted), marking it in `r` (status "quarantined", `quarantined` set,
/// no longer a problem), under each directory's lock, taken as a service
/// takes it: `ec::locked` naming the holder, before anything moves, when a
/// service holds one. The number of files moved.
caf::expected<uint64_t> quarantine(tiers::ssd::file_system& fs,
                                   inspect_report& r);

/// The report as text: one block per fingerprint, one line per file with
/// the leading tokens of its prefix.
std::string render_inspect(const inspect_report& r);

} // namespace kvtier::runtime
