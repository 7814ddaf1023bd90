#define BOOST_TEST_MODULE ssd_identity
// The SSD tier's model identity and directory ownership: the directory is
// named after the model's fingerprint and states it in its MODEL file; a
// file of another shape is never indexed or served and never deleted; one
// holder at a time; private modes. (A second *process* is refused in
// crash_test.cpp, against the crash writer.)
#include "tests/ssd/ssd_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::tiers;
using namespace kvtier::tiers::ssd;
using namespace kvtier::tiers::ssd::test;

namespace {

/// The running model of these tests: two rings of window 16 and a kv layer.
model_identity model_a() {
  return {model_geometry::preset("tiny-window").value(), "test-weights-a"};
}

/// The same layer mix with another window in layer 1: another model.
model_geometry other_window() {
  auto g = model_geometry::preset("tiny-window").value();
  g.layers[1].window = 8;
  return g;
}

ssd_config config_a(const std::string& dir = {}) {
  ssd_config cfg;
  cfg.dir = dir;
  cfg.model = model_a();
  cfg.log = [](const std::string&) {};
  return cfg;
}

bool has(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// A whole entry file for `e` as the tier would write it, with header
/// fingerprint `fp` (a forgery needs nothing more: the checksums are
/// right, only the layers are another model's).
std::vector<std::byte> file_image(const entry& e, const std::string& fp) {
  auto h = layout(e, fp, 4096, 1u << 20);
  compute_checksums(h, e);
  auto head = encode(h);
  std::vector<std::byte> out(h.file_length);
  std::memcpy(out.data(), head->data(), h.header_length);
  auto put = [&](uint64_t at, const std::vector<view>& segs) {
    for (auto& s : segs) {
      std::memcpy(out.data() + at, s.bytes().data(), s.length);
      at += s.length;
    }
  };
  for (size_t i = 0; i < e.layers.size(); ++i)
    put(h.layers[i].payload.offset, e.layers[i].segments);
  for (size_t i = 0; i < e.attachments.size(); ++i)
    put(h.attachments[i].payload.offset, e.attachments[i].segments);
  return out;
}

/// The file system a world runs on.
file_system& fs_of(world& w, const backend& b) {
  return b.kind == fs_kind::memory ? static_cast<file_system&>(w.memory_)
                                   : static_cast<file_system&>(w.posix_);
}

/// Writes `bytes` as `name` into the tier's directory (replacing it).
void plant(world& w, const backend& b, const std::string& name,
           const std::vector<std::byte>& bytes) {
  auto& fs = fs_of(w, b);
  auto p = join_path(w.tier->root(), name);
  (void)fs.remove(p);
  auto f = fs.open(p, open_mode::create);
  BOOST_REQUIRE(f);
  BOOST_REQUIRE((*f)->write_at(0, bytes));
  BOOST_REQUIRE(!(*f)->sync());
}

uint32_t mode_of(file_system& fs, const std::string& path) {
  auto m = fs.mode(path);
  BOOST_REQUIRE_MESSAGE(m, path);
  return *m;
}

std::string read_all(file_system& fs, const std::string& path) {
  auto f = fs.open(path, open_mode::read);
  BOOST_REQUIRE(f);
  std::string s(static_cast<size_t>((*f)->size().value()), '\0');
  BOOST_REQUIRE((*f)->read_at(0, std::as_writable_bytes(std::span{s})));
  return s;
}

template <class Body>
void on_every_backend_of_model_a(Body&& body) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      world w{b, dir.path, config_a()};
      body(w, b, dir.path);
    }
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(the_directory_is_the_models_and_says_so_in_MODEL) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string& dir) {
      auto m = model_a();
      BOOST_TEST(w.tier->fingerprint() == m.fingerprint());
      BOOST_TEST(w.tier->root() == join_path(dir, m.fingerprint()));
      auto& fs = fs_of(w, b);
      BOOST_TEST(read_all(fs, join_path(w.tier->root(), model_file_name))
                 == m.describe());
      // Entries carry the fingerprint in their headers; a restart serves
      // them (the MODEL file matches).
      runtime::oracle_engine oracle{m.geometry};
      w.store(oracle.prefill("ns", tokens(20)));
      auto r = w.reopen();
      BOOST_TEST(r.loaded == 1u);
      auto m2 = w.tier->find(tokens(21), "ns");
      BOOST_REQUIRE(m2);
      auto got = w.restore(*m2);
      BOOST_REQUIRE(got);
      BOOST_TEST(!oracle.verify(*got));
    });
}

BOOST_AUTO_TEST_CASE(a_MODEL_file_naming_another_model_refuses_the_start) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string& dir) {
      auto p = join_path(w.tier->root(), model_file_name);
      auto text = read_all(fs_of(w, b), p);
      auto at = text.find("\nidentity: test-weights-a\n");
      BOOST_REQUIRE(at != std::string::npos);
      text.replace(at, std::string{"\nidentity: test-weights-a"}.size(),
                   "\nidentity: someone-else");
      w.tier.reset();
      auto& fs = fs_of(w, b);
      BOOST_REQUIRE(!fs.remove(p));
      auto f = fs.open(p, open_mode::create);
      BOOST_REQUIRE(f);
      BOOST_REQUIRE((*f)->write_at(0, std::as_bytes(std::span{text})));
      f->reset();
      ssd_tier again{config_a(dir), fs, *w.engine};
      auto r = again.open();
      BOOST_REQUIRE(!r);
      BOOST_TEST((r.error() == ec::incompatible_format));
      auto why = describe(r.error());
      BOOST_TEST(contains(why, "MODEL describes another model"), why);
      BOOST_TEST(contains(why, "identity: someone-else"), why);
      BOOST_TEST(contains(why, "identity: test-weights-a"), why);
    });
}

BOOST_AUTO_TEST_CASE(
  a_forged_file_of_another_shape_is_never_indexed_nor_deleted) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string&) {
      // Correct name, checksums and fingerprint: only layer 1's window is
      // another model's.
      runtime::oracle_engine forger{other_window()};
      auto forged = forger.prefill("ns", tokens(20));
      auto name = file_name("ns", forged.tokens);
      plant(w, b, name, file_image(forged, w.tier->fingerprint()));
      runtime::oracle_engine oracle{model_a().geometry};
      w.store(oracle.prefill("ns", tokens(10, 500)));
      auto r = w.reopen();
      BOOST_TEST(r.mismatched == 1u);
      BOOST_TEST(r.loaded == 1u);
      BOOST_TEST(r.corrupt_removed == 0u);
      BOOST_TEST(w.tier->stats().geometry_mismatched == 1u);
      BOOST_TEST(!w.tier->find(tokens(21), "ns")); // a miss, never served
      BOOST_TEST(w.tier->saved_prefixes().size() == 1u);
      BOOST_TEST(has(w.files(), name)); // kept for the model it belongs to
      BOOST_TEST(w.reopen().mismatched == 1u);
      BOOST_TEST(has(w.files(), name));
    });
}

BOOST_AUTO_TEST_CASE(
  a_restore_that_finds_another_models_file_is_a_counted_miss) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string&) {
      runtime::oracle_engine oracle{model_a().geometry};
      w.store(oracle.prefill("ns", tokens(20)));
      auto m = w.tier->find(tokens(21), "ns");
      BOOST_REQUIRE(m);
      // Replaced behind the tier's back by another model's state of the same
      // key (same name, valid checksums, this directory's fingerprint).
      runtime::oracle_engine forger{other_window()};
      auto forged =
        file_image(forger.prefill("ns", tokens(20)), w.tier->fingerprint());
      plant(w, b, m->name, forged);
      auto got = w.restore(*m);
      BOOST_REQUIRE(!got);
      BOOST_TEST((got.error() == ec::incompatible_format));
      BOOST_TEST(contains(describe(got.error()),
                          "layer 1 (ring): window 8, the model's is 16"));
      auto s = w.tier->stats();
      BOOST_TEST(s.restores_mismatched == 1u);
      BOOST_TEST(s.restores_failed == 1u);
      BOOST_TEST(s.corrupt_removed == 0u);
      BOOST_TEST(!w.tier->find(tokens(21), "ns")); // forgotten: no retry loop
      drive(*w.tier, w.queue);
      BOOST_TEST(has(w.files(), m->name)); // and never deleted
    });
}

BOOST_AUTO_TEST_CASE(enqueue_refuses_state_of_another_shape) {
  on_every_backend_of_model_a([](world& w, const backend&, const std::string&) {
    runtime::oracle_engine forger{other_window()};
    auto r =
      w.tier->enqueue(forger.prefill("ns", tokens(12)), write_reason::spill);
    BOOST_REQUIRE(!r);
    BOOST_TEST((r.error() == ec::invalid_argument));
    BOOST_TEST(contains(describe(r.error()), "layer 1 (ring): window 8"));
    BOOST_TEST(w.flush().durable);
    BOOST_TEST(w.files().empty());
  });
}

BOOST_AUTO_TEST_CASE(a_second_holder_of_the_directory_is_refused_by_name) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string& dir) {
      auto& fs = fs_of(w, b);
      {
        ssd_tier second{config_a(dir), fs, *w.engine};
        auto r = second.open();
        BOOST_REQUIRE(!r);
        BOOST_TEST((r.error() == ec::locked));
        auto why = describe(r.error());
        BOOST_TEST(contains(why, join_path(w.tier->root(), lock_file_name)));
        if (b.kind == fs_kind::posix)
          BOOST_TEST(contains(why, "pid " + std::to_string(::getpid())), why);
      }
      // The first holder is undisturbed, and its end frees the directory.
      runtime::oracle_engine oracle{model_a().geometry};
      w.store(oracle.prefill("ns", tokens(20)));
      drive(*w.tier, w.queue);
      w.tier.reset();
      ssd_tier third{config_a(dir), fs, *w.engine};
      auto r = third.open();
      BOOST_REQUIRE_MESSAGE(r, (r ? std::string{} : describe(r.error())));
      BOOST_TEST(r->loaded == 1u);
    });
}

BOOST_AUTO_TEST_CASE(services_of_other_models_share_a_root_without_a_fight) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string& dir) {
      auto cfg = config_a();
      cfg.model->identity = "test-weights-b";
      cfg.dir = dir;
      ssd_tier other{cfg, fs_of(w, b), *w.engine};
      auto r = other.open(); // another directory, another lock
      BOOST_REQUIRE_MESSAGE(r, (r ? std::string{} : describe(r.error())));
      BOOST_TEST(other.root() != w.tier->root());
    });
}

BOOST_AUTO_TEST_CASE(directories_are_made_0700_and_files_0600) {
  on_every_backend_of_model_a(
    [](world& w, const backend& b, const std::string&) {
      auto& fs = fs_of(w, b);
      BOOST_TEST(mode_of(fs, w.tier->root()) == 0700u);
      runtime::oracle_engine oracle{model_a().geometry};
      w.store(oracle.prefill("ns", tokens(20)));
      for (auto& n : {std::string{lock_file_name}, std::string{model_file_name},
                      file_name("ns", tokens(20))})
        BOOST_TEST_CONTEXT(n) {
          BOOST_TEST(mode_of(fs, join_path(w.tier->root(), n)) == 0600u);
        }
    });
  // On disk: every directory made on the way, and a temp file a crash left.
  scratch_dir dir;
  auto nested = dir.path + "/a/b";
  posix_file_system posix;
  faulty_file_system faulty{posix};
  auto cfg = config_a();
  world w{{fs_kind::posix, engine_choice::threads}, nested, cfg, &faulty};
  struct stat st;
  for (auto& d : {dir.path + "/a", nested, w.tier->root()}) {
    BOOST_REQUIRE(::stat(d.c_str(), &st) == 0);
    BOOST_TEST_CONTEXT(d) {
      BOOST_TEST((st.st_mode & 07777) == 0700u);
    }
  }
  faulty.inject(fs_op::rename, 1, fault_kind::crash);
  runtime::oracle_engine oracle{model_a().geometry};
  BOOST_REQUIRE(
    w.tier->enqueue(oracle.prefill("ns", tokens(20)), write_reason::spill));
  BOOST_TEST(!w.flush().durable);
  size_t temps = 0;
  for (auto& n : w.files())
    if (n.ends_with(".tmp")) {
      ++temps;
      BOOST_REQUIRE(::stat(join_path(w.tier->root(), n).c_str(), &st) == 0);
      BOOST_TEST((st.st_mode & 07777) == 0600u);
    }
  BOOST_TEST(temps == 1u);
  faulty.clear();
}

BOOST_AUTO_TEST_CASE(a_looser_directory_is_tightened_at_start_and_logged) {
  for (auto b : all_backends()) {
    BOOST_TEST_CONTEXT(b.name()) {
      scratch_dir dir;
      std::vector<std::string> lines;
      auto cfg = config_a();
      cfg.log = [&](const std::string& l) { lines.push_back(l); };
      world w{b, dir.path, cfg};
      auto& fs = fs_of(w, b);
      auto root = w.tier->root();
      w.tier.reset();
      BOOST_REQUIRE(!fs.set_mode(root, 0755));
      BOOST_TEST(lines.empty());
      w.reopen();
      BOOST_TEST(mode_of(fs, root) == 0700u);
      BOOST_REQUIRE(lines.size() == 1u);
      BOOST_TEST(contains(lines[0], "tightened"), lines[0]);
      BOOST_TEST(contains(lines[0], root), lines[0]);
      BOOST_TEST(contains(lines[0], "from 0755 to 0700"), lines[0]);
      w.reopen(); // already tight: nothing to say
      BOOST_TEST(lines.size() == 1u);
    }
  }
}
