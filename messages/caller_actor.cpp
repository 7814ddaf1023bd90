#include "messages/caller_actor.hpp"

#include <caf/logger.hpp>

namespace kvtier {

void forget_thread_logger(caf::actor_system& sys) noexcept {
  if (caf::logger::current_logger() == &sys.logger())
    caf::logger::set_current_actor_system(nullptr);
}

} // namespace kvtier
