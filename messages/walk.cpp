#include "messages/walk.hpp"

#include "messages/carrier.hpp"
#include "messages/common.capnp.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace kvtier::msg::detail {

namespace {

bool is_payload(capnp::StructSchema s) {
  return s.getProto().getId() == capnp::typeId<Payload>();
}

caf::error malformed(const std::string& path, std::string what) {
  return make_error(ec::malformed_message,
                    (path.empty() ? std::string{"body"} : path) + ": "
                      + std::move(what));
}

/// The walk state: the side views and the dotted path of the current field.
struct checker {
  const std::vector<view>& sides;
  std::string path;
  /// List elements the walk may still visit (`check_tree`'s bound).
  uint64_t elements_left = 0;

  caf::error value(const capnp::DynamicValue::Reader& v) {
    switch (v.getType()) {
      case capnp::DynamicValue::STRUCT:
        return structure(v.as<capnp::DynamicStruct>());
      case capnp::DynamicValue::LIST: return list(v.as<capnp::DynamicList>());
      case capnp::DynamicValue::ENUM:
        if (v.as<capnp::DynamicEnum>().getEnumerant() == nullptr)
          return malformed(
            path, "unknown enum value "
                    + std::to_string(v.as<capnp::DynamicEnum>().getRaw()));
        return {};
      default: return {}; // scalars; text and data were checked by get()
    }
  }

  caf::error field(capnp::DynamicStruct::Reader s,
                   capnp::StructSchema::Field f) {
    auto size = path.size();
    path += path.empty() ? "" : ".";
    path += f.getProto().getName().cStr();
    auto err = value(s.get(f));
    if (!err)
      path.resize(size);
    return err;
  }

  caf::error structure(capnp::DynamicStruct::Reader s) {
    auto schema = s.getSchema();
    if (is_payload(schema))
      return check_payload(s.as<Payload>(), sides, path);
    for (auto f : schema.getNonUnionFields())
      if (auto err = field(s, f))
        return err;
    if (schema.getUnionFields().size() == 0)
      return {};
    KJ_IF_MAYBE (f, s.which())
      return field(s, *f);
    return malformed(path, "unknown union member");
  }

  caf::error list(capnp::DynamicList::Reader l) {
    switch (l.getSchema().whichElementType()) {
      case capnp::schema::Type::STRUCT:
      case capnp::schema::Type::LIST:
      case capnp::schema::Type::TEXT:
      case capnp::schema::Type::DATA:
      case capnp::schema::Type::ENUM: break;
      default: return {}; // scalar lists were bounds-checked when read
    }
    // Elements of zero size (structs without fields' words) take no bytes:
    // a few bytes would otherwise make the walk visit 2^29 of them.
    if (l.size() > elements_left)
      return make_error(ec::message_limit_exceeded,
                        (path.empty() ? std::string{"body"} : path) + ": "
                          + std::to_string(l.size())
                          + " list elements exceed what the message's size "
                            "allows (zero-sized elements)");
    elements_left -= l.size();
    auto size = path.size();
    for (uint32_t i = 0; i < l.size(); ++i) {
      path += "[" + std::to_string(i) + "]";
      if (auto err = value(l[i]))
        return err;
      path.resize(size);
    }
    return {};
  }
};

struct inliner {
  const std::vector<view>& sides;
  /// Set: payloads of at least `by_reference` bytes, word-aligned and
  /// whole words, are referenced as segments of their own.
  std::optional<capnp::Orphanage> orphanage = std::nullopt;
  uint64_t by_reference = 0;

  caf::error payload(Payload::Builder p) {
    if (!p.isSide())
      return {};
    if (p.getSide() >= sides.size())
      return make_error(ec::malformed_message, "side buffer "
                                                 + std::to_string(p.getSide())
                                                 + " out of range");
    auto& v = sides[p.getSide()];
    if (v.length > max_inline_payload)
      return make_error(ec::message_limit_exceeded,
                        "a payload of " + std::to_string(v.length)
                          + " bytes exceeds the largest inline Data ("
                          + std::to_string(max_inline_payload)
                          + " bytes): send it as a chunked transfer");
    auto* at = v.bytes().data();
    if (orphanage && v.length >= by_reference && v.length % 8 == 0
        && reinterpret_cast<uintptr_t>(at) % 8 == 0) {
      p.adoptData(orphanage->referenceExternalData(
        capnp::Data::Reader{reinterpret_cast<const kj::byte*>(at), v.length}));
      return {};
    }
    auto d = p.initData(static_cast<unsigned>(v.length));
    if (v.length > 0)
      std::memcpy(d.begin(), v.bytes().data(), v.length);
    return {};
  }

  caf::error structure(capnp::DynamicStruct::Builder s) {
    auto schema = s.getSchema();
    if (is_payload(schema))
      return payload(s.as<Payload>());
    for (auto f : schema.getNonUnionFields())
      if (auto err = field(s, f))
        return err;
    KJ_IF_MAYBE (f, s.which())
      return field(s, *f);
    return {};
  }

  caf::error field(capnp::DynamicStruct::Builder s,
                   capnp::StructSchema::Field f) {
    auto t = f.getType();
    if (f.getProto().isGroup() || (t.isStruct() && s.has(f)))
      return structure(s.get(f).as<capnp::DynamicStruct>());
    if (t.isList() && s.has(f))
      return list(s.get(f).as<capnp::DynamicList>());
    return {};
  }

  caf::error list(capnp::DynamicList::Builder l) {
    auto et = l.getSchema().getElementType();
    for (uint32_t i = 0; i < l.size() && (et.isStruct() || et.isList()); ++i) {
      auto v = l[i];
      auto err = et.isStruct() ? structure(v.as<capnp::DynamicStruct>())
                               : list(v.as<capnp::DynamicList>());
      if (err)
        return err;
    }
    return {};
  }
};

} // namespace

caf::error check_payload(Payload::Reader p, const std::vector<view>& sides,
                         const std::string& path) {
  auto len = p.getLength();
  switch (p.which()) {
    case Payload::SIDE: {
      auto i = p.getSide();
      if (i >= sides.size())
        return malformed(path,
                         "side buffer " + std::to_string(i) + " out of range ("
                           + std::to_string(sides.size()) + " side buffers)");
      if (sides[i].length != len)
        return malformed(path, "payload says " + std::to_string(len)
                                 + " bytes, side buffer holds "
                                 + std::to_string(sides[i].length));
      return {};
    }
    case Payload::DATA:
      if (p.getData().size() != len)
        return malformed(path, "payload says " + std::to_string(len)
                                 + " bytes, data holds "
                                 + std::to_string(p.getData().size()));
      return {};
  }
  return malformed(path, "payload of unknown variant");
}

caf::error check_tree(capnp::DynamicStruct::Reader body,
                      const std::vector<view>& sides, uint64_t max_elements) {
  return checker{sides, {}, max_elements}.structure(body);
}

caf::error inline_payloads(capnp::DynamicStruct::Builder body,
                           const std::vector<view>& sides) {
  return inliner{sides}.structure(body);
}

caf::error reference_payloads(capnp::DynamicStruct::Builder body,
                              const std::vector<view>& sides,
                              capnp::Orphanage orphanage,
                              uint64_t by_reference) {
  return inliner{sides, orphanage, std::max<uint64_t>(by_reference, 8)}
    .structure(body);
}

} // namespace kvtier::msg::detail
