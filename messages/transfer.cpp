#include "messages/transfer.hpp"

// The streaming state as a plain struct (the same package gives header
// and library).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>
#include <string>

namespace kvtier::msg {

namespace {

uint32_t chunks_for(uint64_t total, uint32_t chunk_size) {
  return static_cast<uint32_t>((total + chunk_size - 1) / chunk_size);
}

caf::error malformed(std::string what) {
  return make_error(ec::malformed_message, "transfer: " + std::move(what));
}

} // namespace

caf::expected<outgoing_transfer> outgoing_transfer::make(uint64_t id,
                                                         const carrier& c,
                                                         uint32_t chunk_size,
                                                         bool checksum) {
  if (chunk_size == 0)
    return make_error(ec::invalid_argument, "transfer chunk size of 0");
  auto pieces = c.to_pieces();
  if (!pieces)
    return std::move(pieces.error());
  outgoing_transfer t;
  t.id_ = id;
  t.root_type_ = c.root_type();
  t.chunk_size_ = chunk_size;
  t.total_ = kvtier::total_length(*pieces);
  t.count_ = chunks_for(t.total_, chunk_size);
  t.lane_only_ = !checksum;
  if (checksum) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    for (auto& p : *pieces)
      XXH3_64bits_update(&state, p.bytes().data(), p.length);
    t.checksum_ = XXH3_64bits_digest(&state);
  }
  t.pieces_ = std::move(*pieces);
  return t;
}

void outgoing_transfer::write_header(TransferHeader::Builder out) const {
  out.setTransferId(id_);
  out.setRootType(root_type_);
  out.setTotalLength(total_);
  out.setChunkSize(chunk_size_);
  out.setChunkCount(count_);
  out.setChecksum(checksum_);
  out.setLaneChecksum(lane_only_);
  if (lane_only_) {
    auto lengths = out.initLanePieces(static_cast<unsigned>(pieces_.size()));
    for (unsigned i = 0; i < pieces_.size(); ++i)
      lengths.set(i, pieces_[i].length);
  }
}

caf::expected<sealed<FetchChunkReply>>
outgoing_transfer::chunk(uint32_t index) const {
  if (index >= count_)
    return make_error(ec::invalid_argument, "chunk " + std::to_string(index)
                                              + " of a transfer of "
                                              + std::to_string(count_));
  if (lane_only_)
    return make_error(ec::invalid_argument,
                      "transfer " + std::to_string(id_)
                        + " is served on its bulk lane only (no chunks)");
  uint64_t offset = uint64_t{index} * chunk_size_;
  auto n = std::min<uint64_t>(chunk_size_, total_ - offset);
  draft<FetchChunkReply> d;
  d.root().setTransferId(id_);
  d.root().setIndex(index);
  d.root().setOffset(offset);
  auto data = d.root().initData(static_cast<unsigned>(n));
  // The chunk's bytes from the pieces it spans.
  uint64_t at = 0, done = 0;
  for (auto& p : pieces_) {
    if (done == n)
      break;
    if (offset + done < at + p.length) {
      auto from = offset + done - at;
      auto k = std::min<uint64_t>(p.length - from, n - done);
      std::memcpy(data.begin() + done, p.bytes().data() + from, k);
      done += k;
    }
    at += p.length;
  }
  return std::move(d).seal();
}

caf::expected<incoming_transfer>
incoming_transfer::start(TransferHeader::Reader h,
                         const reader_limits& limits) {
  auto total = h.getTotalLength();
  auto size = h.getChunkSize();
  if (total == 0 || total % 8 != 0 || size == 0)
    return malformed("header of " + std::to_string(total) + " bytes in "
                     + std::to_string(size) + "-byte chunks");
  if (total / 8 > limits.traversal_words)
    return make_error(ec::message_limit_exceeded,
                      "transfer of " + std::to_string(total)
                        + " bytes exceeds the reader's limit of "
                        + std::to_string(limits.traversal_words) + " words");
  if (h.getLaneChecksum())
    return malformed("transfer " + std::to_string(h.getTransferId())
                     + " is served on its bulk lane only: no checksum to "
                       "verify chunks against");
  if (h.getChunkCount() != chunks_for(total, size))
    return malformed("header says " + std::to_string(h.getChunkCount())
                     + " chunks, its sizes say "
                     + std::to_string(chunks_for(total, size)));
  incoming_transfer t;
  t.id_ = h.getTransferId();
  t.total_ = total;
  t.chunk_size_ = size;
  t.checksum_ = h.getChecksum();
  t.missing_ = h.getChunkCount();
  t.limits_ = limits;
  t.have_.assign(t.missing_, false);
  t.bytes_ = std::make_unique<buffer_builder>(total); // every chunk fills it
  return t;
}

caf::error incoming_transfer::add(FetchChunkReply::Reader c) {
  auto i = c.getIndex();
  if (c.getTransferId() != id_ || i >= have_.size())
    return malformed("chunk " + std::to_string(i) + " of transfer "
                     + std::to_string(c.getTransferId())
                     + " does not belong to transfer " + std::to_string(id_)
                     + " of " + std::to_string(have_.size()) + " chunks");
  uint64_t offset = uint64_t{i} * chunk_size_;
  auto want = std::min<uint64_t>(chunk_size_, total_ - offset);
  auto data = c.getData();
  if (c.getOffset() != offset || data.size() != want)
    return malformed("chunk " + std::to_string(i) + " has "
                     + std::to_string(data.size()) + " bytes at offset "
                     + std::to_string(c.getOffset()) + ", expected "
                     + std::to_string(want) + " at " + std::to_string(offset));
  if (have_[i])
    return {};
  std::memcpy(bytes_->data() + offset, data.begin(), want);
  have_[i] = true;
  --missing_;
  return {};
}

caf::expected<buffer_ref> incoming_transfer::verified() && {
  if (!bytes_)
    return malformed("already finished");
  if (missing_ > 0)
    return malformed(std::to_string(missing_) + " of "
                     + std::to_string(have_.size()) + " chunks missing");
  auto flat = std::move(*bytes_).freeze();
  bytes_.reset();
  auto sum = XXH3_64bits(flat->data(), flat->size());
  if (sum != checksum_)
    return make_error(ec::corrupt_data, "transfer " + std::to_string(id_)
                                          + ": checksum mismatch over "
                                          + std::to_string(total_) + " bytes");
  return flat;
}

} // namespace kvtier::msg
