#include "tiers/storage_key.hpp"

namespace kvtier::tiers {

const char* to_string(key_kind k) {
  switch (k) {
    case key_kind::prefix: return "prefix";
    case key_kind::checkpoint: return "checkpoint";
    case key_kind::object: return "object";
  }
  return "unknown";
}

} // namespace kvtier::tiers
