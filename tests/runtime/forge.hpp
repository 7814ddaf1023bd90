// Forged entry files for identity tests: a whole, correctly checksummed
// entry file of any state under any fingerprint, planted into a file system
// as if another process (or another model's writer) had left it there.
// Used to prove that a file of the wrong shape in a service's own directory
// is a counted miss, never served and never deleted.
#pragma once

#include "tiers/ssd/entry_format.hpp"
#include "tiers/ssd/file_system.hpp"

#include <boost/test/unit_test.hpp>

#include <cstring>

namespace kvtier::testing {

/// A whole entry file for prefix entry `e` under fingerprint `fp`.
inline std::vector<std::byte> file_image(const tiers::entry& e,
                                         const std::string& fp) {
  namespace ssd = tiers::ssd;
  auto h = ssd::layout(e, fp, 4096, 1u << 20);
  ssd::compute_checksums(h, e);
  auto head = ssd::encode(h);
  std::vector<std::byte> out(h.file_length);
  std::memcpy(out.data(), head->data(), h.header_length);
  for (size_t i = 0; i < e.layers.size(); ++i) {
    auto at = h.layers[i].payload.offset;
    for (auto& s : e.layers[i].segments) {
      std::memcpy(out.data() + at, s.bytes().data(), s.length);
      at += s.length;
    }
  }
  return out;
}

/// Writes `bytes` durably at `path` (replacing what was there).
inline void plant(tiers::ssd::file_system& fs, const std::string& path,
                  const std::vector<std::byte>& bytes) {
  (void)fs.remove(path);
  auto f = fs.open(path, tiers::ssd::open_mode::create);
  BOOST_REQUIRE(f);
  BOOST_REQUIRE((*f)->write_at(0, bytes));
  BOOST_REQUIRE(!(*f)->sync());
  BOOST_REQUIRE(!fs.sync_dir(path.substr(0, path.rfind('/'))));
}

} // namespace kvtier::testing
