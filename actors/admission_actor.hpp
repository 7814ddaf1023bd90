// The admission actor: sole owner of `tiers::admission` (the KV byte budget
// and the position limit, docs/api.md "Calls": admit). A plain admit
// answers at once; a queued admit (AdmitRequest with queue = true) is
// answered only when a later release admits it, in arrival order, so the
// engine can await it and no request starves. A request that can never be
// admitted is answered with its error inside the reply (`never`), naming
// the limit and the excess; so is one the bounded queue cannot take
// (`queue_full`). CloseService ends admission: queued admits are answered
// `closed`, later admits and fits fail `closed`; releases still work.
#pragma once

#include "actors/interfaces.hpp"
#include "tiers/admission.hpp"

#include <caf/typed_response_promise.hpp>

#include <memory>
#include <unordered_map>

namespace kvtier::actors {

struct admission_state {
  static inline const char* name = "admission";

  using admit_promise =
    caf::typed_response_promise<sealed<msg::AdmitRequestReply>>;

  std::unique_ptr<tiers::admission> engine;
  /// Queued admits by request id, answered when admitted.
  std::unordered_map<uint64_t, std::pair<admit_promise, uint64_t>> waiting;
};

using admission_pointer = admission_actor::stateful_pointer<admission_state>;

/// The behaviour over `geometry` and `limits`.
admission_actor::behavior_type admission(admission_pointer self,
                                         tiers::model_geometry geometry,
                                         tiers::admission_limits limits);

} // namespace kvtier::actors
