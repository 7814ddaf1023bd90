// Schema-driven walks over a message body, used by the carrier only (not a
// public API). Both follow the Cap'n Proto schema of the body, so a new
// message type or field needs no code here.
//
// `check_tree` reads every field a reader could touch (every pointer, text,
// enum and active union member) and checks every `Payload` against the
// carrier's side views; run under a limited reader it turns any hostile
// shape into an exception or an error before a handler sees the message.
// `inline_payloads` replaces side references by inline Data in a copy that
// is about to leave the process; `reference_payloads` does the same for
// small payloads and makes large ones segments of their own, by reference.
// Single-threaded; they may throw kj::Exception, which the carrier catches.
#pragma once

#include "messages/buffer.hpp"
#include "messages/common.capnp.h"

#include <caf/error.hpp>
#include <capnp/dynamic.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::msg::detail {

/// Checks one payload against `sides` (a side reference) or its own Data:
/// the index must be in range and the lengths must agree. Errors are
/// `malformed_message` prefixed with `path`.
caf::error check_payload(Payload::Reader p, const std::vector<view>& sides,
                         const std::string& path);

/// Reads all of `body`; fails with `malformed_message` on an unknown enum
/// value or union member, or a payload that disagrees with `sides`.
/// Visits at most `max_elements` elements of the lists it walks (structs,
/// lists, text, data, enums); more fail with `message_limit_exceeded`.
/// A message's own words bound what it can hold (an enum takes 2 bytes,
/// every other walked element at least a word), unless it lists elements
/// of zero size, which amplify the walk without bytes.
caf::error check_tree(capnp::DynamicStruct::Reader body,
                      const std::vector<view>& sides,
                      uint64_t max_elements = UINT64_MAX);

/// Copies each side payload under `body` into inline Data. Fails with
/// `message_limit_exceeded` for a payload larger than one Data can hold.
caf::error inline_payloads(capnp::DynamicStruct::Builder body,
                           const std::vector<view>& sides);

/// Like `inline_payloads`, but a side payload of at least `by_reference`
/// bytes that starts on a word and fills whole words is not copied: it
/// becomes a segment of its own that refers to the side's memory
/// (`Orphanage::referenceExternalData`), which must outlive the builder.
caf::error reference_payloads(capnp::DynamicStruct::Builder body,
                              const std::vector<view>& sides,
                              capnp::Orphanage orphanage,
                              uint64_t by_reference);

} // namespace kvtier::msg::detail
