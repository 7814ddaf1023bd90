#include "tiers/model_identity.hpp"

#include <xxhash.h>

#include <cstdio>

namespace kvtier::tiers {

namespace {

/// Little-endian fields appended to a byte string (independent of struct
/// layout and host byte order).
class canonical {
public:
  void u8(uint8_t v) {
    out.push_back(static_cast<char>(v));
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u64(s.size());
    out += s;
  }
  std::string out;
};

std::string slug(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (out.size() == 40)
      break;
    auto u = static_cast<unsigned char>(c);
    if (u >= 'A' && u <= 'Z')
      out.push_back(static_cast<char>(u - 'A' + 'a'));
    else if ((u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '.'
             || c == '-' || c == '_')
      out.push_back(c);
    else
      out.push_back('-');
  }
  return out.empty() ? "model" : out;
}

/// `s` on one line: control characters shown as '?'.
std::string one_line(const std::string& s) {
  std::string out = s;
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  return out;
}

} // namespace

std::string model_identity::fingerprint() const {
  canonical c;
  c.str("kvtier.model-identity.1");
  c.str(geometry.name);
  c.u64(geometry.layers.size());
  for (auto& l : geometry.layers) {
    bool rows = l.kind == layer_kind::kv || l.kind == layer_kind::ring;
    c.u8(static_cast<uint8_t>(l.kind));
    c.u32(rows ? l.bytes_per_token : 0);
    c.u32(l.kind == layer_kind::ring ? l.window : 0);
    c.u64(rows ? 0 : l.state_bytes);
  }
  c.str(identity);
  auto h = XXH3_128bits(c.out.data(), c.out.size());
  char hex[40];
  std::snprintf(hex, sizeof hex, "%016llx%016llx",
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return slug(geometry.name) + "-" + hex;
}

std::string model_identity::describe() const {
  std::string out = "kvtier model identity: the state in this directory "
                    "belongs to this model only\n";
  out += "fingerprint: " + fingerprint() + "\n";
  out += "name: " + one_line(geometry.name) + "\n";
  out += "identity: " + (identity.empty() ? "(none given)" : one_line(identity))
         + "\n";
  out += "layers: " + geometry.layers_text() + "\n";
  out +=
    "bytes per token: " + std::to_string(geometry.bytes_per_token()) + "\n";
  return out;
}

} // namespace kvtier::tiers
