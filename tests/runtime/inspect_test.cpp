// `kvtier inspect` (runtime/tools/inspect.hpp) over a real directory: entries
// written in the SSD format are listed with their prefixes and sizes,
// --verify catches a flipped payload byte, temps and other fingerprints
// are reported, and nothing is ever removed.
#define BOOST_TEST_MODULE runtime_inspect
#include <boost/test/unit_test.hpp>

#include "runtime/tools/inspect.hpp"
#include "runtime/tools/oracle.hpp"
#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/ssd_tier.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::runtime;
namespace ssd = kvtier::tiers::ssd;
namespace stdfs = std::filesystem;

namespace {

struct temp_dir {
  stdfs::path path;
  temp_dir() {
    path = stdfs::temp_directory_path()
           / ("kvtier-inspect-" + std::to_string(::getpid()));
    stdfs::remove_all(path);
    stdfs::create_directories(path);
  }
  ~temp_dir() {
    stdfs::remove_all(path);
  }
};

/// Writes `e` as an entry file of `fingerprint` under `dir` (a prefix
/// entry unless `key` says otherwise); returns its path.
stdfs::path write_entry(const stdfs::path& dir, const std::string& fingerprint,
                        const tiers::entry& e,
                        std::optional<tiers::storage_key> key = {}) {
  auto h = ssd::layout(e, fingerprint, 4096, 1u << 20);
  if (key) {
    h.kind = key->kind;
    h.request = key->request;
    h.attempt = key->attempt;
  }
  h.write_id = 1;
  ssd::compute_checksums(h, e);
  auto header = ssd::encode(h);
  auto path = dir / fingerprint / ssd::file_name(h.key());
  stdfs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header->data()),
            static_cast<std::streamsize>(header->size()));
  for (size_t l = 0; l < e.layers.size(); ++l) {
    out.seekp(static_cast<std::streamoff>(h.layers[l].payload.offset));
    for (auto& v : e.layers[l].segments)
      out.write(reinterpret_cast<const char*>(v.bytes().data()),
                static_cast<std::streamsize>(v.length));
  }
  for (size_t a = 0; a < e.attachments.size(); ++a) {
    out.seekp(static_cast<std::streamoff>(h.attachments[a].payload.offset));
    for (auto& v : e.attachments[a].segments)
      out.write(reinterpret_cast<const char*>(v.bytes().data()),
                static_cast<std::streamsize>(v.length));
  }
  return path;
}

/// An SSD tier over `dir` for `model`, with its own I/O engine (not
/// opened yet; its failure lines are dropped).
struct tier_on {
  ssd::completion_queue queue;
  std::unique_ptr<ssd::io_engine> engine;
  std::unique_ptr<ssd::ssd_tier> tier;

  tier_on(ssd::file_system& fs, const stdfs::path& dir,
          const tiers::model_identity& model) {
    auto e = ssd::make_io_engine(ssd::engine_choice::threads, queue.sink());
    BOOST_REQUIRE(e);
    engine = std::move(*e);
    ssd::ssd_config cfg;
    cfg.dir = dir.string();
    cfg.model = model;
    cfg.log = [](const std::string&) {};
    tier = std::make_unique<ssd::ssd_tier>(cfg, fs, *engine);
  }
};

tiers::token_seq tokens(uint32_t n, uint32_t salt) {
  tiers::token_seq t(n);
  for (uint32_t i = 0; i < n; ++i)
    t[i] = i * 31 + salt;
  return t;
}

} // namespace

BOOST_AUTO_TEST_CASE(lists_entries_with_prefixes_and_sizes) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  auto a = e.prefill("chat", tokens(100, 1));
  a.session = "s1";
  write_entry(dir.path, "tiny-dense", a);
  write_entry(dir.path, "tiny-dense", e.prefill("chat", tokens(40, 2)));
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), true);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->fingerprints.size() == 1u);
  auto& g = r->fingerprints[0];
  BOOST_TEST(g.fingerprint == "tiny-dense");
  BOOST_TEST(g.entries == 2u);
  BOOST_TEST(r->problems() == 0u);
  uint64_t tokens_listed = 0;
  for (auto& f : g.files) {
    BOOST_TEST(f.status == "ok");
    BOOST_TEST(f.ns == "chat");
    BOOST_TEST(f.chunks_checked == 4u); // one chunk per layer
    BOOST_TEST(f.bytes == stdfs::file_size(dir.path / "tiny-dense" / f.name));
    tokens_listed += f.tokens;
    if (f.tokens == 100) {
      BOOST_TEST(f.session == "s1");
      BOOST_TEST(f.head == tiers::token_seq(tokens(8, 1)));
    }
  }
  BOOST_TEST(tokens_listed == 140u);
  auto text = render_inspect(*r);
  BOOST_TEST(text.find("[tiny-dense] 2 entries") != std::string::npos);
  BOOST_TEST(text.find("session=s1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(verify_finds_a_flipped_payload_byte_and_removes_nothing) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  auto path =
    write_entry(dir.path, "tiny-dense", e.prefill("x", tokens(64, 3)));
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(4096 + 10);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(4096 + 10);
    f.write(&c, 1);
  }
  ssd::posix_file_system fs;
  auto quick = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(quick);
  BOOST_TEST(quick->problems() == 0u); // headers alone look fine
  auto full = inspect(fs, dir.path.string(), true);
  BOOST_REQUIRE(full);
  BOOST_TEST(full->problems() == 1u);
  BOOST_TEST(full->fingerprints[0].files[0].status == "corrupt");
  BOOST_TEST(stdfs::exists(path));
}

BOOST_AUTO_TEST_CASE(reports_temps_other_fingerprints_and_torn_headers) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  auto good = write_entry(dir.path, "tiny-dense", e.prefill("x", tokens(8, 4)));
  write_entry(dir.path, "other-model", e.prefill("x", tokens(8, 5)));
  std::ofstream(dir.path / "tiny-dense" / "abc.kvt.1.2.tmp") << "partial";
  std::ofstream(dir.path / "tiny-dense" / "0123.kvt") << "KVTIER but not";
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->fingerprints.size() == 2u);
  BOOST_TEST(r->fingerprints[0].fingerprint == "other-model");
  BOOST_TEST(r->fingerprints[0].entries == 1u);
  auto& mine = r->fingerprints[1];
  BOOST_TEST(mine.entries == 1u);
  BOOST_TEST(mine.problems == 2u);
  std::map<std::string, std::string> status;
  for (auto& f : mine.files)
    status[f.name] = f.status;
  BOOST_TEST(status["abc.kvt.1.2.tmp"] == "temp");
  BOOST_TEST(status["0123.kvt"] == "corrupt");
  BOOST_TEST(status[good.filename().string()] == "ok");
  BOOST_TEST(stdfs::exists(dir.path / "tiny-dense" / "0123.kvt"));
}

BOOST_AUTO_TEST_CASE(names_checkpoint_files_and_removal_records) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  auto s = e.prefill("chat", tokens(20, 1));
  write_entry(dir.path, "tiny-dense", s,
              tiers::storage_key::checkpoint(42, 2, "chat", s.tokens));
  auto record = std::string(32, 'a') + "." + std::string(16, '0') + ".kvr";
  std::ofstream(dir.path / "tiny-dense" / record);
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), true);
  BOOST_REQUIRE(r);
  auto& g = r->fingerprints.at(0);
  BOOST_TEST(g.entries == 1u);
  BOOST_TEST(g.problems == 0u); // a record is no problem
  std::map<std::string, const inspected_file*> by_status;
  for (auto& f : g.files)
    by_status[f.status] = &f;
  BOOST_REQUIRE(by_status.count("ok") == 1u);
  BOOST_REQUIRE(by_status.count("record") == 1u);
  auto& cp = *by_status["ok"];
  BOOST_TEST(cp.kind == "checkpoint");
  BOOST_TEST(cp.request == 42u);
  BOOST_TEST(cp.attempt == 2u);
  BOOST_TEST(render_inspect(*r).find("checkpoint request=42 attempt=2")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_files_priority_is_listed_when_not_the_default) {
  temp_dir dir;
  oracle_engine o(*tiers::model_geometry::preset("tiny-dense"));
  auto low = o.prefill("low", tokens(8, 1));
  low.priority = 7; // the entry's, as the RAM tier hands it over
  write_entry(dir.path, "tiny-dense", low);
  write_entry(dir.path, "tiny-dense", o.prefill("plain", tokens(8, 2)));
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), true);
  BOOST_REQUIRE(r);
  auto& g = r->fingerprints.at(0);
  BOOST_TEST(g.problems == 0u);
  std::map<std::string, uint32_t> by_ns;
  for (auto& f : g.files)
    by_ns[f.ns] = f.priority;
  BOOST_TEST(by_ns["low"] == 7u);
  BOOST_TEST(by_ns["plain"] == uint32_t{tiers::default_priority});
  auto text = render_inspect(*r);
  BOOST_TEST(text.find("ns=low") != std::string::npos);
  BOOST_TEST(text.find(" priority=7") != std::string::npos);
  BOOST_TEST(text.find(" priority=35") == std::string::npos); // the default
}

BOOST_AUTO_TEST_CASE(a_missing_directory_is_not_found) {
  ssd::posix_file_system fs;
  auto r = inspect(fs, "/nonexistent/kvtier-inspect", false);
  BOOST_REQUIRE(!r);
  BOOST_TEST((r.error() == ec::not_found));
}

BOOST_AUTO_TEST_CASE(names_the_model_the_holder_and_files_of_another_shape) {
  temp_dir dir;
  tiers::model_identity model{*tiers::model_geometry::preset("tiny-dense"),
                              "weights=test"};
  ssd::posix_file_system fs;
  tier_on t{fs, dir.path, model};
  auto& tier = t.tier;
  BOOST_REQUIRE(tier->open());
  auto fp = model.fingerprint();
  oracle_engine mine(model.geometry);
  write_entry(dir.path, fp, mine.prefill("x", tokens(8, 4)));
  auto other = model.geometry;
  other.layers[3].bytes_per_token = 16;
  auto forged =
    write_entry(dir.path, fp, oracle_engine(other).prefill("x", tokens(9, 4)));
  auto r = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->fingerprints.size() == 1u);
  auto& g = r->fingerprints[0];
  BOOST_TEST(g.model == model.describe());
  BOOST_TEST(g.holder.find("pid " + std::to_string(::getpid()))
             != std::string::npos);
  BOOST_TEST(g.files.size() == 2u); // LOCK and MODEL are not entries
  BOOST_TEST(g.entries == 1u);
  BOOST_TEST(g.problems == 1u);
  for (auto& f : g.files)
    if (f.name == forged.filename().string()) {
      BOOST_TEST(f.status == "mismatched");
      BOOST_TEST(f.detail.find("layer 3 (kv): bytes per token 16")
                 != std::string::npos);
    }
  auto text = render_inspect(*r);
  BOOST_TEST(text.find("identity: weights=test") != std::string::npos, text);
  BOOST_TEST(text.find("layers: 4*kv:64") != std::string::npos, text);
  BOOST_TEST(text.find("LOCK: pid ") != std::string::npos, text);
  tier.reset(); // released: the lock file names nobody
  auto after = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(after);
  BOOST_TEST(after->fingerprints[0].holder.empty());
  BOOST_TEST(stdfs::exists(forged)); // inspecting removes nothing
}

BOOST_AUTO_TEST_CASE(lists_an_object_file_by_its_key) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  auto state = e.prefill("enc", tokens(16, 3));
  tiers::entry obj;
  obj.ns = "image-42";
  obj.attachments = {{"vision", state.layers[0].segments},
                     {"pooled", state.layers[1].segments}};
  write_entry(dir.path, "tiny-dense", obj,
              tiers::storage_key::object("image-42"));
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), true);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE_EQUAL(r->fingerprints.size(), 1u);
  auto& files = r->fingerprints[0].files;
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  BOOST_TEST(files[0].status == "ok", files[0].detail);
  BOOST_TEST(files[0].kind == "object");
  BOOST_TEST(files[0].tokens == 0u);
  BOOST_TEST(files[0].attachments == 2u);
  BOOST_TEST(files[0].chunks_checked == 2u);
  auto text = render_inspect(*r);
  BOOST_TEST(
    text.find("object key=image-42 attachments=2") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(a_models_own_directory_is_inspected_as_its_fingerprint) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  write_entry(dir.path, "tiny-dense", e.prefill("x", tokens(8, 4)));
  std::ofstream(dir.path / "tiny-dense" / "0123.kvt") << "KVTIER but not";
  ssd::posix_file_system fs;
  for (auto path : {(dir.path / "tiny-dense").string(),
                    (dir.path / "tiny-dense").string() + "/"}) {
    auto r = inspect(fs, path, true);
    BOOST_REQUIRE(r);
    BOOST_REQUIRE_EQUAL(r->fingerprints.size(), 1u);
    BOOST_TEST(r->fingerprints[0].fingerprint == "tiny-dense");
    BOOST_TEST(r->fingerprints[0].entries == 1u);
    BOOST_TEST(r->fingerprints[0].problems == 1u); // checked: not 0
  }
}

BOOST_AUTO_TEST_CASE(a_lock_whose_process_exited_is_stale_not_held) {
  temp_dir dir;
  oracle_engine e(*tiers::model_geometry::preset("tiny-dense"));
  write_entry(dir.path, "tiny-dense", e.prefill("x", tokens(8, 4)));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // A process that ran and exited (killed: its LOCK text stays).
  auto child = ::fork();
  if (child == 0)
    ::_exit(0);
  BOOST_REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  auto lock = dir.path / "tiny-dense" / ssd::lock_file_name;
  std::ofstream(lock) << "pid " << child << " on host " << host << "\n";
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(r);
  BOOST_TEST(to_string(r->fingerprints[0].lock) == std::string{"stale"});
  auto text = render_inspect(*r);
  BOOST_TEST(text.find("(stale: that process has exited") != std::string::npos,
             text);
  // This process runs: held. Another host's: not checked.
  std::ofstream(lock) << "pid " << ::getpid() << " on host " << host << "\n";
  BOOST_TEST(
    to_string(inspect(fs, dir.path.string(), false)->fingerprints[0].lock)
    == std::string{"held"});
  std::ofstream(lock) << "pid 1 on host elsewhere-" << host << "\n";
  BOOST_TEST(
    to_string(inspect(fs, dir.path.string(), false)->fingerprints[0].lock)
    == std::string{"unknown"});
}

BOOST_AUTO_TEST_CASE(a_garbled_header_is_corrupt_and_can_be_quarantined) {
  temp_dir dir;
  tiers::model_identity model{*tiers::model_geometry::preset("tiny-dense"), ""};
  auto fp = model.fingerprint();
  oracle_engine e(model.geometry);
  auto good = write_entry(dir.path, fp, e.prefill("x", tokens(8, 4)));
  // Two files whose version field is garbage ("entry format version
  // 1482162179"), one of them with a taken name in the quarantine.
  auto garble = [&](uint32_t salt) {
    auto path = write_entry(dir.path, fp, e.prefill("x", tokens(9, salt)));
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    uint32_t version = 1482162179;
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&version), 4);
    return path;
  };
  auto first = garble(5);
  auto second = garble(6);
  stdfs::create_directories(dir.path / fp / quarantine_dir_name);
  std::ofstream(dir.path / fp / quarantine_dir_name / second.filename())
    << "an earlier one";
  ssd::posix_file_system fs;
  auto r = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(r);
  auto& g = r->fingerprints.at(0);
  BOOST_TEST(g.problems == 2u);
  for (auto& f : g.files)
    if (f.name != good.filename().string()) {
      BOOST_TEST(f.status == "corrupt");
      BOOST_TEST(f.detail.find("entry format version 1482162179 is no "
                               "format's")
                   != std::string::npos,
                 f.detail);
    }
  // Moved aside, never deleted; a taken name gets a suffix.
  auto moved = quarantine(fs, *r);
  BOOST_REQUIRE(moved);
  BOOST_TEST(*moved == 2u);
  BOOST_TEST(r->problems() == 0u);
  BOOST_TEST(!stdfs::exists(first));
  BOOST_TEST(
    stdfs::exists(dir.path / fp / quarantine_dir_name / first.filename()));
  BOOST_TEST(stdfs::exists(dir.path / fp / quarantine_dir_name
                           / (second.filename().string() + ".1")));
  BOOST_TEST(stdfs::exists(good));
  auto text = render_inspect(*r);
  BOOST_TEST(text.find("quarantined") != std::string::npos, text);
  BOOST_TEST(text.find("-> quarantine/" + first.filename().string())
               != std::string::npos,
             text);
  // The SSD tier agrees: a garbled header is corrupt (removed at start),
  // and it never looks into the quarantine.
  auto third = garble(7);
  tier_on t{fs, dir.path, model};
  auto scan = t.tier->open();
  BOOST_REQUIRE(scan);
  BOOST_TEST(scan->corrupt_removed == 1u);
  BOOST_TEST(scan->ignored == 0u);
  BOOST_TEST(scan->loaded == 1u);
  BOOST_TEST(!stdfs::exists(third));
  // While the tier holds the directory, nothing is moved.
  garble(8);
  auto held = inspect(fs, dir.path.string(), false);
  BOOST_REQUIRE(held);
  BOOST_TEST(to_string(held->fingerprints.at(0).lock) == std::string{"held"});
  auto refused = quarantine(fs, *held);
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error() == ec::locked));
  BOOST_TEST(held->problems() == 1u);
}
