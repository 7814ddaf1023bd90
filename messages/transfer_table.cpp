#include "messages/transfer_table.hpp"

#include "messages/bulk_lane.hpp"

#include <algorithm>
#include <string>

namespace kvtier::msg {

transfer_table::transfer_table(transfer_limits limits, bulk_server* lane)
  : limits_(limits)
  , lane_(lane) {}

caf::expected<sealed<FetchEntryReply>>
transfer_table::offer(const carrier& c, uint64_t usable_tokens, uint64_t now_ms,
                      bool use_lane) {
  auto id = next_id_++;
  bool lane = lane_ != nullptr && use_lane;
  auto out = outgoing_transfer::make(id, c, limits_.chunk_size, !lane);
  if (!out)
    return std::move(out.error());
  auto bytes = out->total_length();
  if (bytes_ + bytes > limits_.max_bytes) {
    ++stats_.refused_over_cap;
    return make_error(ec::queue_full, "transfer of " + std::to_string(bytes)
                                        + " bytes: offered transfers hold "
                                        + std::to_string(bytes_) + " of "
                                        + std::to_string(limits_.max_bytes)
                                        + " bytes");
  }
  draft<FetchEntryReply> d;
  d.root().setUsableTokens(usable_tokens);
  auto header = d.root().initTransfer();
  out->write_header(header);
  if (lane) {
    header.setBulkPort(lane_->port());
    header.setBulkHost(lane_->address());
    header.setBulkToken(lane_->offer(id, out->pieces()));
  }
  bytes_ += bytes;
  live_.emplace(id, live{std::move(*out), bytes, now_ms});
  ++stats_.offered;
  return std::move(d).seal();
}

caf::expected<sealed<FetchChunkReply>>
transfer_table::chunk(FetchChunk::Reader req, uint64_t now_ms) {
  auto i = live_.find(req.getTransferId());
  if (i == live_.end()) {
    ++stats_.unknown_pulls;
    return make_error(ec::invalid_argument,
                      "no transfer " + std::to_string(req.getTransferId())
                        + " (never offered, cancelled or expired)");
  }
  auto c = i->second.out.chunk(req.getIndex());
  if (!c)
    return std::move(c.error());
  i->second.last_use_ms = now_ms;
  ++stats_.chunks_served;
  return c;
}

bool transfer_table::cancel(uint64_t id) {
  auto i = live_.find(id);
  if (i == live_.end())
    return false;
  bytes_ -= i->second.bytes;
  live_.erase(i);
  if (lane_)
    lane_->withdraw(id); // a no-op for a transfer offered without it
  ++stats_.cancelled;
  return true;
}

size_t transfer_table::expire(uint64_t now_ms) {
  size_t n = 0;
  for (auto i = live_.begin(); i != live_.end();) {
    if (now_ms - std::min(now_ms, i->second.last_use_ms) >= limits_.idle_ms) {
      bytes_ -= i->second.bytes;
      if (lane_)
        lane_->withdraw(i->first);
      i = live_.erase(i);
      ++n;
    } else {
      ++i;
    }
  }
  stats_.expired += n;
  return n;
}

caf::expected<transfer_pull> transfer_pull::start(TransferHeader::Reader h,
                                                  uint32_t window,
                                                  const reader_limits& limits) {
  if (window == 0)
    return make_error(ec::invalid_argument, "transfer window of 0 chunks");
  auto in = incoming_transfer::start(h, limits);
  if (!in)
    return std::move(in.error());
  return transfer_pull{std::move(*in), h.getTransferId(), h.getChunkCount(),
                       window};
}

std::vector<uint32_t> transfer_pull::next() {
  std::vector<uint32_t> out;
  while (in_flight_.size() < window_) {
    uint32_t index;
    if (!again_.empty()) {
      index = again_.back();
      again_.pop_back();
    } else if (next_index_ < count_) {
      index = next_index_++;
    } else {
      break;
    }
    in_flight_.push_back(index);
    out.push_back(index);
  }
  return out;
}

caf::error transfer_pull::add(FetchChunkReply::Reader chunk) {
  auto i = std::find(in_flight_.begin(), in_flight_.end(), chunk.getIndex());
  if (i != in_flight_.end())
    in_flight_.erase(i);
  // A late answer to a request retried meanwhile: no need to ask again.
  auto a = std::find(again_.begin(), again_.end(), chunk.getIndex());
  if (a != again_.end())
    again_.erase(a);
  return in_.add(chunk);
}

void transfer_pull::retry(uint32_t index) {
  auto i = std::find(in_flight_.begin(), in_flight_.end(), index);
  if (i == in_flight_.end())
    return; // answered meanwhile, or never asked for
  in_flight_.erase(i);
  again_.push_back(index);
}

} // namespace kvtier::msg
