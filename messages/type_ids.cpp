#include "messages/type_ids.hpp"

#include <caf/actor_system_config.hpp>

namespace kvtier::msg {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvtier>();
}

} // namespace kvtier::msg
