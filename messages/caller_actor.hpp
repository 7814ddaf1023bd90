// A scoped actor for threads that are not the actor system's own (an
// engine's thread calling the embedded API, a tool's main thread), and the
// rule it exists for.
//
// CAF 0.17.6 keeps, per thread, a counted reference to the logger of the
// last actor system that thread constructed, or made a scoped actor in,
// and `~actor_system` waits until that logger is destroyed. A thread that
// once called into a service and lives on (an engine's worker, the thread
// that built the service) therefore kept another thread's destruction of
// the service waiting forever. Every scoped actor kvtier makes on a
// caller's thread is a `caller_actor`: once made, it drops the thread's
// reference again (CAF only uses it to tag its own log lines, which
// Debian's build does not write). `forget_thread_logger` does the same
// after an actor system is constructed on a caller's thread.
//
// Threads: a caller_actor is used by one thread at a time, like a
// scoped_actor.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

namespace kvtier {

/// Drops the calling thread's reference to `sys`'s logger, if it holds one.
void forget_thread_logger(caf::actor_system& sys) noexcept;

/// A `caf::scoped_actor` that leaves no reference to its system on the
/// thread that made it.
class caller_actor : public caf::scoped_actor {
public:
  explicit caller_actor(caf::actor_system& sys, bool hide = false)
    : caf::scoped_actor(sys, hide) {
    forget_thread_logger(sys);
  }
};

} // namespace kvtier
