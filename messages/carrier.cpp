#include "messages/carrier.hpp"

#include "messages/assert.hpp"
#include "messages/sealed.hpp"
#include "messages/walk.hpp"

#include <capnp/dynamic.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>

namespace kvtier::msg {

namespace detail {

/// What every copy of a carrier shares. Built completely before it is
/// shared, never changed afterwards.
struct frame {
  buffer_ref words;
  std::vector<view> sides;
  capnp::StructSchema schema;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;
  capnp::AnyPointer::Reader body;
  uint64_t root_type = 0;
};

} // namespace detail

namespace {

using detail::frame;

kj::ArrayPtr<const capnp::word> word_span(const buffer& b) {
  return {reinterpret_cast<const capnp::word*>(b.data()),
          b.size() / sizeof(capnp::word)};
}

/// Shares a Cap'n Proto word array as a buffer (no copy).
buffer_ref share_words(kj::Array<capnp::word> words) {
  auto holder = std::make_shared<kj::Array<capnp::word>>(kj::mv(words));
  auto bytes = holder->asBytes();
  return buffer::adopt(reinterpret_cast<const std::byte*>(bytes.begin()),
                       bytes.size(), [holder]() mutable { holder.reset(); });
}

/// A frame over `words`, which must hold a well-formed envelope (built
/// here, or checked by `decode`). Its reader never runs out of traversal
/// budget: the message was bounded before.
std::shared_ptr<const frame> make_frame(buffer_ref words,
                                        std::vector<view> sides,
                                        capnp::StructSchema schema,
                                        int nesting) {
  auto f = std::make_shared<frame>();
  f->words = std::move(words);
  f->sides = std::move(sides);
  f->schema = schema;
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::numeric_limits<uint64_t>::max();
  options.nestingLimit = nesting;
  f->reader = std::make_unique<capnp::FlatArrayMessageReader>(
    word_span(*f->words), options);
  auto env = f->reader->getRoot<Envelope>();
  f->root_type = env.getRootType();
  f->body = env.getBody();
  return f;
}

std::string hex(uint64_t x) {
  char out[24];
  std::snprintf(out, sizeof out, "0x%016llx",
                static_cast<unsigned long long>(x));
  return out;
}

caf::error malformed(std::string what) {
  return make_error(ec::malformed_message, std::move(what));
}

/// Cap'n Proto reports limit breaches as plain exceptions: tell them apart
/// by their (stable, documented) descriptions.
caf::error from_exception(const kj::Exception& e) {
  std::string text = e.getDescription().cStr();
  if (text.find("traversal limit") != std::string::npos
      || text.find("too deeply-nested") != std::string::npos)
    return make_error(ec::message_limit_exceeded, text);
  return malformed(text);
}

/// The envelope checks and the full walk, under `limits`.
caf::error check_flat(const buffer& flat, capnp::StructSchema root,
                      const reader_limits& limits) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = limits.traversal_words;
  options.nestingLimit = limits.nesting;
  auto words = word_span(flat);
  capnp::FlatArrayMessageReader reader{words, options};
  if (reader.getEnd() != words.end())
    return malformed(std::to_string((words.end() - reader.getEnd()) * 8)
                     + " bytes follow the message");
  auto env = reader.getRoot<Envelope>();
  // The 64-bit type tag first: bytes that are no kvtier message at all
  // fail here, not as a plausible protocol mismatch.
  auto want = root.getProto().getId();
  if (env.getRootType() != want)
    return malformed("the message holds type " + hex(env.getRootType())
                     + ", expected " + root.getShortDisplayName().cStr() + " ("
                     + hex(want) + ")");
  if (env.getProtocol() != PROTOCOL_VERSION)
    return make_error(ec::incompatible_format,
                      "protocol " + std::to_string(env.getProtocol())
                        + ", this build reads "
                        + std::to_string(PROTOCOL_VERSION));
  if (env.getBody().isNull())
    return malformed("the envelope has no body");
  // Every element the walk visits takes at least 2 bytes of a real
  // message (an enum; a struct, list, text or data element a word).
  return detail::check_tree(env.getBody().getAs<capnp::DynamicStruct>(root), {},
                            4 * uint64_t{words.size()} + 64);
}

/// Words a copy of `f`'s message needs with every side payload shorter
/// than `inline_below` bytes inline (the rest referenced, not counted),
/// bounded to what one segment may hold.
uint64_t words_needed(const frame& f, uint64_t inline_below) {
  uint64_t want = f.words->size() / 8 + 64;
  for (auto& s : f.sides)
    if (s.length < inline_below)
      want += (s.length + 7) / 8 + 1;
  return std::min<uint64_t>(want, std::numeric_limits<uint32_t>::max());
}

/// Copies `f`'s envelope into `out`; its body, for the payloads to be
/// rewritten.
capnp::DynamicStruct::Builder copy_body(capnp::MessageBuilder& out,
                                        const frame& f) {
  out.setRoot(f.reader->getRoot<Envelope>());
  return out.getRoot<Envelope>().getBody().getAs<capnp::DynamicStruct>(
    f.schema);
}

} // namespace

uint64_t carrier::root_type() const noexcept {
  return frame_ ? frame_->root_type : 0;
}

std::string carrier::root_name() const {
  return frame_ ? frame_->schema.getShortDisplayName().cStr() : "";
}

const std::vector<view>& carrier::sides() const noexcept {
  static const std::vector<view> none;
  return frame_ ? frame_->sides : none;
}

bool carrier::has_side_buffers() const noexcept {
  return frame_ && !frame_->sides.empty();
}

const buffer_ref& carrier::words() const noexcept {
  static const buffer_ref none;
  return frame_ ? frame_->words : none;
}

capnp::AnyPointer::Reader carrier::body() const {
  KVTIER_ASSERT(frame_ != nullptr);
  return frame_->body;
}

caf::expected<view> carrier::payload(Payload::Reader p) const {
  KVTIER_ASSERT(frame_ != nullptr);
  if (auto err = detail::check_payload(p, frame_->sides, "payload"))
    return err;
  if (p.isSide())
    return frame_->sides[p.getSide()];
  auto d = p.getData();
  if (d.size() == 0)
    return view{frame_->words, 0, 0};
  auto* base = reinterpret_cast<const kj::byte*>(frame_->words->data());
  KVTIER_ASSERT(d.begin() >= base && d.end() <= base + frame_->words->size());
  return view{frame_->words, static_cast<uint64_t>(d.begin() - base), d.size()};
}

std::optional<caf::expected<buffer_ref>>
carrier::to_flat_in_place(uint64_t want) const {
  // A large message is built straight into populated memory one word past
  // its start, and the segment table written into that word: the flat
  // bytes without a copy of the whole message, and without a page fault
  // per 4 KiB. The builder zeroes its first segment when it goes, so it
  // lives as long as the bytes do. Only for a single segment; otherwise
  // nullopt and the caller builds as usual.
  size_t mapped = 0;
  auto bytes = (want + 1) * sizeof(capnp::word);
  auto* mem = allocate_populated(bytes, mapped);
  if (!mem)
    return std::nullopt;
  auto* words = reinterpret_cast<capnp::word*>(mem);
  std::shared_ptr<capnp::MallocMessageBuilder> out;
  try {
    out = std::make_shared<capnp::MallocMessageBuilder>(
      kj::arrayPtr(words + 1, static_cast<size_t>(want)));
    auto dyn = copy_body(*out, *frame_);
    if (auto err = detail::inline_payloads(dyn, frame_->sides)) {
      out.reset();
      release_populated(mem, mapped);
      return caf::expected<buffer_ref>{std::move(err)};
    }
    auto segs = out->getSegmentsForOutput();
    if (segs.size() != 1 || segs[0].begin() != words + 1) {
      out.reset();
      release_populated(mem, mapped);
      return std::nullopt;
    }
    uint32_t table[2] = {0, static_cast<uint32_t>(segs[0].size())};
    std::memcpy(mem, table, sizeof table);
    auto used = (segs[0].size() + 1) * sizeof(capnp::word);
    return caf::expected<buffer_ref>{
      buffer::adopt(mem, used, [out, mem, mapped]() mutable {
        out.reset(); // zeroes the segment: before the memory goes
        release_populated(mem, mapped);
      })};
  } catch (const kj::Exception& e) {
    out.reset();
    release_populated(mem, mapped);
    return caf::expected<buffer_ref>{from_exception(e)};
  }
}

caf::expected<buffer_ref> carrier::to_flat() const {
  KVTIER_ASSERT(frame_ != nullptr);
  if (frame_->sides.empty())
    return frame_->words;
  auto want = words_needed(*frame_, std::numeric_limits<uint64_t>::max());
  if (want * sizeof(capnp::word) >= populated_threshold)
    if (auto flat = to_flat_in_place(want))
      return std::move(*flat);
  try {
    capnp::MallocMessageBuilder out{static_cast<unsigned>(want)};
    auto dyn = copy_body(out, *frame_);
    if (auto err = detail::inline_payloads(dyn, frame_->sides))
      return err;
    return share_words(capnp::messageToFlatArray(out));
  } catch (const kj::Exception& e) {
    return from_exception(e);
  }
}

caf::expected<std::vector<view>>
carrier::to_pieces(uint64_t by_reference) const {
  KVTIER_ASSERT(frame_ != nullptr);
  if (frame_->sides.empty())
    return std::vector<view>{view::of(frame_->words)};
  auto want = words_needed(*frame_, by_reference);
  try {
    auto out = std::make_shared<capnp::MallocMessageBuilder>(
      static_cast<unsigned>(want));
    auto dyn = copy_body(*out, *frame_);
    if (auto err = detail::reference_payloads(
          dyn, frame_->sides, out->getOrphanage(), by_reference))
      return err;
    auto segs = out->getSegmentsForOutput();
    // The segment table: the count less one, each size in words, padded
    // to a whole word.
    std::vector<uint32_t> table(segs.size() + 1 + (segs.size() + 1) % 2, 0);
    table[0] = static_cast<uint32_t>(segs.size() - 1);
    for (size_t i = 0; i < segs.size(); ++i)
      table[i + 1] = static_cast<uint32_t>(segs[i].size());
    std::vector<view> pieces;
    pieces.push_back(
      view::of(buffer::copy_of(std::as_bytes(std::span{table}))));
    for (auto seg : segs) {
      auto* at = reinterpret_cast<const std::byte*>(seg.begin());
      auto bytes = seg.size() * sizeof(capnp::word);
      // A referenced side is sent from its own buffer; the builder's own
      // segments from memory that keeps the builder alive.
      auto side =
        std::find_if(frame_->sides.begin(), frame_->sides.end(),
                     [&](const view& v) { return v.bytes().data() == at; });
      if (side != frame_->sides.end() && side->length == bytes)
        pieces.push_back(*side);
      else
        pieces.push_back(view::of(buffer::adopt(at, bytes, [out] {})));
    }
    return pieces;
  } catch (const kj::Exception& e) {
    return from_exception(e);
  }
}

caf::expected<std::shared_ptr<const frame>>
carrier::decode(buffer_ref flat, capnp::StructSchema root,
                const reader_limits& limits) {
  if (!flat || flat->size() == 0)
    return malformed("no bytes");
  if (flat->size() % sizeof(capnp::word) != 0)
    return malformed(std::to_string(flat->size())
                     + " bytes are not whole 8-byte words (truncated?)");
  if (flat->size() / sizeof(capnp::word) > limits.traversal_words)
    return make_error(ec::message_limit_exceeded,
                      std::to_string(flat->size()) + " bytes exceed the "
                        + "reader's traversal limit of "
                        + std::to_string(limits.traversal_words) + " words");
  if (reinterpret_cast<uintptr_t>(flat->data()) % alignof(capnp::word) != 0)
    flat = buffer::copy_of(flat->bytes());
  try {
    if (auto err = check_flat(*flat, root, limits))
      return err;
    return make_frame(std::move(flat), {}, root, limits.nesting);
  } catch (const kj::Exception& e) {
    return from_exception(e);
  }
}

draft_base::draft_base(capnp::StructSchema root)
  : root_(root) {
  auto env = builder_.initRoot<Envelope>();
  env.setRootType(root.getProto().getId());
  env.setProtocol(PROTOCOL_VERSION);
}

capnp::AnyPointer::Builder draft_base::body() {
  return builder_.getRoot<Envelope>().getBody();
}

uint32_t draft_base::add_side(view v) {
  KVTIER_ASSERT(!sealed_);
  KVTIER_ASSERT(sides_.size() < std::numeric_limits<uint32_t>::max());
  sides_.push_back(std::move(v));
  return static_cast<uint32_t>(sides_.size() - 1);
}

void draft_base::set_payload(Payload::Builder p, view v) {
  p.setLength(v.length);
  p.setSide(add_side(std::move(v)));
}

std::shared_ptr<const frame> draft_base::seal_frame() {
  KVTIER_ASSERT(!sealed_);
  sealed_ = true;
  auto words = share_words(capnp::messageToFlatArray(builder_));
  /// Built here, so trusted: Cap'n Proto's default nesting bound suffices.
  return make_frame(std::move(words), std::move(sides_), root_,
                    capnp::ReaderOptions{}.nestingLimit);
}

caf::error save_flat(const carrier& x, std::string& bytes) {
  if (!x.valid())
    return make_error(ec::invalid_argument, "cannot serialize an empty "
                                            "carrier");
  if (x.has_side_buffers())
    return make_error(ec::invalid_argument,
                      x.root_name() + " holds side buffers, which never "
                        + "leave the process: send to_flat() bytes as a "
                        + "chunked transfer");
  auto& w = x.words();
  bytes.assign(reinterpret_cast<const char*>(w->data()), w->size());
  return {};
}

std::string to_string(const carrier& x) {
  if (!x.valid())
    return "sealed(empty)";
  return "sealed<" + x.root_name() + ">(" + std::to_string(x.words()->size())
         + " bytes, " + std::to_string(x.sides().size()) + " side buffers)";
}

} // namespace kvtier::msg
