// Every fuzz target (tests/fuzz/targets.hpp) over every file of its corpus,
// tests/fuzz/corpus/<target>/: the seeds and every input a fuzzing run
// found crashing, so each stays a regression test in the default (gcc)
// suite. A target reports a broken property by aborting, which fails this
// binary naming the file on stderr.
#define BOOST_TEST_MODULE fuzz_corpus
#include <boost/test/unit_test.hpp>

#include "tests/fuzz/targets.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

namespace fs = std::filesystem;

BOOST_AUTO_TEST_CASE(every_target_over_its_corpus) {
  auto corpus = fs::path{KVTIER_SOURCE_DIR} / "tests/fuzz/corpus";
  size_t total = 0;
  for (auto& t : kvtier::fuzz::targets()) {
    auto dir = corpus / t.name;
    BOOST_TEST_INFO("corpus " << dir);
    BOOST_REQUIRE(fs::is_directory(dir));
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file())
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    // Every target has its seeds at least.
    BOOST_TEST(files.size() >= 3u, t.name << ": " << files.size() << " files");
    for (auto& f : files) {
      std::ifstream in{f, std::ios::binary};
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
      // Named before it runs: an abort leaves this as the last line.
      std::cerr << "fuzz.corpus: " << t.name << " " << f.filename().string()
                << "\n";
      BOOST_TEST(
        t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())
        == 0);
      ++total;
    }
  }
  BOOST_TEST_MESSAGE("ran " << total << " corpus files");
}

BOOST_AUTO_TEST_CASE(targets_are_found_by_name) {
  for (auto& t : kvtier::fuzz::targets())
    BOOST_TEST(kvtier::fuzz::find_target(t.name) == &t);
  BOOST_TEST(kvtier::fuzz::find_target("no-such-target") == nullptr);
}
