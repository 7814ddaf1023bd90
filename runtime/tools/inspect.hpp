// `kvtier inspect DIR`: what an SSD tier directory holds, read-only.
// Lists every fingerprint directory under DIR and, per fingerprint, the
// model its MODEL file names (and the holder its LOCK file names, while a
// service runs there), its entry files (namespace, tokens, layers, bytes,
// session; an object file's key and attachments), orphan temps, files whose
// layers are not that model's, and files it cannot read; with `verify`, reads
// every payload and checks its chunk checksums (docs/ssd-format.md).
//
// Unlike the SSD tier's start-up scan, inspecting never removes or renames
// anything: a corrupt file is reported, not deleted. Single-threaded,
// blocking file reads through `tiers::ssd::file_system`.
#pragma once

#include "tiers/ssd/file_system.hpp"

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
};

struct inspected_fingerprint {
  std::string fingerprint;
  /// The MODEL file's text (empty when there is none).
  std::string model;
  /// The LOCK file's text: the holder while a service uses the directory
  /// (empty when none does, or there is no LOCK file).
  std::string holder;
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
/// fingerprint). `ec::not_found` when `dir` does not exist.
caf::expected<inspect_report> inspect(tiers::ssd::file_system& fs,
                                      const std::string& dir, bool verify);

/// The report as text: one block per fingerprint, one line per file with
/// the leading tokens of its prefix.
std::string render_inspect(const inspect_report& r);

} // namespace kvtier::runtime
