// Typed message carriers: `draft<Root>` builds one message of root type
// `Root` (a struct from messages/*.capnp) with its tensor payloads as side
// views; `seal()` turns it into a `sealed<Root>`, the immutable,
// reference-counted value actors send each other through CAF.
//
//   msg::draft<msg::PeekPrefix> d;
//   d.root().setNs("ns");
//   auto m = std::move(d).seal();          // m.root().getNs() == "ns"
//
// Threads: a draft has one owner; a sealed message may be copied and read
// from any number of threads (see carrier.hpp).
//
// Across a process boundary: `to_flat()` gives flat bytes (payloads
// inline), `sealed<Root>::from_flat(bytes, limits)` reads them back and
// validates them. CAF serialization (the middleman) uses the same pair, and
// refuses a carrier with side buffers: tensor state crosses nodes only as
// chunked transfers (transfer.hpp), never as one giant CAF message. What
// arrives from a peer is size-checked before it is decoded, and counted
// when refused (wire_guard.hpp).
#pragma once

#include "messages/carrier.hpp"
#include "messages/wire_guard.hpp"

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/save_callback.hpp>
#include <caf/meta/type_name.hpp>

#include <capnp/schema.h>

#include <string>
#include <utility>

namespace kvtier::msg {

template <class Root>
class sealed;

/// A message of root type `Root` under construction.
template <class Root>
class draft : public draft_base {
public:
  draft()
    : draft_base(capnp::Schema::from<Root>())
    , root_(body().template initAs<Root>()) {}

  /// The body to fill in.
  typename Root::Builder root() {
    return root_;
  }

  /// The finished, immutable message. The draft is spent afterwards.
  sealed<Root> seal() &&;

private:
  typename Root::Builder root_;
};

/// An immutable message of root type `Root` with its side views.
template <class Root>
class sealed : public carrier {
public:
  /// An empty carrier (`valid() == false`); CAF needs one to load into.
  sealed() = default;

  /// The body. Requires `valid()`.
  typename Root::Reader root() const {
    return body().template getAs<Root>();
  }

  /// Reads and validates untrusted flat bytes as a `Root` message. The
  /// result's inline payloads are views of `flat`; nothing is copied
  /// unless `flat` is not 8-byte aligned.
  static caf::expected<sealed> from_flat(buffer_ref flat,
                                         const reader_limits& limits = {}) {
    auto f = decode(std::move(flat), capnp::Schema::from<Root>(), limits);
    if (!f)
      return std::move(f.error());
    return sealed{std::move(*f)};
  }

private:
  friend class draft<Root>;

  explicit sealed(std::shared_ptr<const detail::frame> f)
    : carrier(std::move(f)) {}
};

template <class Root>
sealed<Root> draft<Root>::seal() && {
  return sealed<Root>{seal_frame()};
}

/// Serializes a carrier as its flat bytes, for CAF's binary inspectors.
/// Fails for a carrier with side buffers (use `to_flat()` and a chunked
/// transfer); loading validates under default `reader_limits`.
caf::error save_flat(const carrier& x, std::string& bytes);

/// Counts a refused incoming message in `g` (`oversized` or not) and
/// logs the first refusal and then every power of two.
void count_refusal(wire_guard& g, bool oversized, const caf::error& why);

/// Loading half of `save_flat`: the bytes of a message from another
/// process, refused unread over the receiving system's
/// `wire_guard::max_bytes`, then decoded under default `reader_limits`;
/// every refusal is counted (wire_guard.hpp).
template <class Root>
caf::error load_flat(sealed<Root>& x, const std::string& bytes,
                     caf::execution_unit* ctx = nullptr) {
  auto& g = guard_of(ctx);
  if (auto cap = g.max_bytes.load(std::memory_order_relaxed);
      bytes.size() > cap) {
    auto err =
      make_error(ec::message_limit_exceeded, std::to_string(bytes.size())
                                               + " bytes from a peer exceed "
                                                 "cluster.max-message-bytes = "
                                               + std::to_string(cap));
    count_refusal(g, true, err);
    return err;
  }
  auto r = sealed<Root>::from_flat(buffer::copy_of(
    std::as_bytes(std::span<const char>{bytes.data(), bytes.size()})));
  if (!r) {
    count_refusal(g, false, r.error());
    return std::move(r.error());
  }
  x = std::move(*r);
  return {};
}

/// CAF 0.17 inspection: the carrier travels as its flat bytes.
template <class Inspector, class Root>
typename Inspector::result_type inspect(Inspector& f, sealed<Root>& x) {
  std::string bytes;
  auto save = caf::meta::save_callback([&]() -> caf::error {
    auto err = save_flat(x, bytes);
    if (!err)
      mutate_wire(bytes);
    return err;
  });
  auto load = caf::meta::load_callback([&]() -> caf::error {
    caf::execution_unit* ctx = nullptr;
    if constexpr (requires { f.context(); })
      ctx = f.context();
    return load_flat(x, bytes, ctx);
  });
  return f(caf::meta::type_name("kvtier::msg::sealed"), save, bytes, load);
}

/// A short description for logs: root name, word count, side buffers.
std::string to_string(const carrier& x);

} // namespace kvtier::msg
