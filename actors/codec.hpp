// Small conversions the actors share between Cap'n Proto messages and the
// values their tiers take: errors as `Error` fields, request identities,
// durability evidence, ring keys. Plain functions, no state, any thread.
//
// Decoding policy (docs/messages.md "Reader limits"): a handler that reads a
// message runs its body inside `decoding`, which turns a `kj::Exception` thrown
// by a malformed reader into an `ec::malformed_message` error reply, so no
// exception crosses a handler.
#pragma once

#include "messages/log.hpp"
#include "messages/type_ids.hpp"
#include "tiers/admission.hpp"
#include "tiers/ram_types.hpp"
#include "tiers/ssd/ssd_stats.hpp"

#include <kj/exception.h>

#include <caf/error.hpp>
#include <caf/node_id.hpp>
#include <caf/result.hpp>
#include <caf/system_messages.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kvtier::actors {

using sealed_flush = msg::sealed<msg::FlushStateReply>;

/// Writes `err` (code and rendered context) into `out`.
void write_error(msg::Error::Builder out, const caf::error& err);

/// The error an `Error` field carries; none for code 0.
caf::error read_error(msg::Error::Reader in);

/// The session of a request identity, if any.
std::optional<std::string> session_of(msg::RequestIdentity::Reader r);

/// What admission needs of a request identity.
tiers::admission_request admission_of(msg::RequestIdentity::Reader r);

/// The FlushState answer of a role that holds no state a flush could make
/// durable (admission, sessions, the peer tier): durable, nothing pending.
sealed_flush nothing_to_flush();

/// The FlushState answer of a holder wired without a store: durable only
/// when it holds nothing; otherwise `held` pending and an error saying that
/// `held` `what` (e.g. "entries") cannot be made durable.
sealed_flush flush_without_store(uint64_t held, std::string_view what);

/// Writes `errors` as `out`'s error list (none: the list stays empty).
void write_errors(msg::DurabilityResult::Builder out,
                  const std::vector<caf::error>& errors);

/// Copies durability evidence into a `DurabilityResult`.
void write_evidence(msg::DurabilityResult::Builder out,
                    const tiers::ssd::durability_evidence& ev);

/// A RAM key of an `EntryKey`.
tiers::ram_key key_of(msg::EntryKey::Reader k);

/// Milliseconds of `clock_now` since its epoch (actors pass
/// `self->clock().now()`, so tests advance it).
template <class TimePoint>
uint64_t millis(TimePoint t) {
  using namespace std::chrono;
  return static_cast<uint64_t>(
    duration_cast<milliseconds>(t.time_since_epoch()).count());
}

/// Whether the message `self` handles now may have come from another
/// process: its sender is another node's actor, or it has none (a peer's
/// anonymous message arrives without a sender, so an anonymous one is not
/// trusted). Handlers that serve this node only (admin, test hooks, tier
/// control) refuse or ignore such messages; this process's threads and
/// callers send them with a sender (`caf::send_as`, a scoped actor).
template <class Self>
bool from_other_process(Self* self) {
  auto& s = self->current_sender();
  return !s || s->node() != self->node();
}

/// CAF's defaults end an actor that receives an exit message (any reason
/// but normal) or a bare error message: a peer that learnt an actor's
/// handle (every actor that talks to peers, and every actor a node actor
/// forwards to) could stop it with one message. `self` keeps CAF's
/// behaviour for exit messages from actors of this process and ignores the
/// rest, and ignores every bare error message (kvtier never sends one);
/// `refused(what)` is called for each ignored one. This process stops such
/// an actor with `send_exit` from an actor of its own (a scoped actor),
/// never anonymously.
template <class Self, class Refused>
void guard_signals(Self* self, Refused refused) {
  self->set_exit_handler([self, refused](caf::exit_msg& em) {
    if (!em.source || em.source.node() != self->node()) {
      refused(em.source
                ? "an exit message from node " + to_string(em.source.node())
                : std::string{"an anonymous exit message"});
      return;
    }
    if (em.reason)
      self->quit(std::move(em.reason));
  });
  self->set_error_handler([refused](caf::error& err) {
    refused("a bare error message (" + to_string(err) + ")");
  });
}

/// `guard_signals` for actors that keep no counter of such messages (the
/// facade; the tier actors, whose handles a peer learns from the facade's
/// delegated answers): each is a warning in the log, naming `who`.
template <class Self>
void guard_signals(Self* self, const char* who) {
  guard_signals(self, [who](const std::string& what) {
    log::warn(std::string{"kvtier "} + who + ": ignored " + what);
  });
}

/// Runs `f` (returning a `caf::result<T>` or `T`), turning a decode
/// failure into an `ec::malformed_message` error.
template <class T, class F>
caf::result<T> decoding(F&& f) {
  try {
    return f();
  } catch (const kj::Exception& e) {
    return make_error(ec::malformed_message,
                      std::string{"undecodable message: "}
                        + e.getDescription().cStr());
  }
}

} // namespace kvtier::actors
