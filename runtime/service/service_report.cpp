// ReadReportReply -> service_report (runtime/service/service_codec.hpp).
#include "runtime/service/service_codec.hpp"

namespace kvtier::runtime::codec {

namespace {

void ram_part(msg::RamCounters::Reader in, service_report::ram_part& o) {
  o.entries = in.getEntries();
  o.bytes = in.getBytes();
  o.cap_bytes = in.getCapBytes();
  o.hits = in.getHits();
  o.misses = in.getMisses();
  o.session_hits = in.getSessionHits();
  o.session_misses = in.getSessionMisses();
  o.prefix_scans = in.getPrefixScans();
  o.evictions = in.getEvictions();
  o.supersessions = in.getSupersessions();
  o.replacements = in.getReplacements();
  o.oversize = in.getOversize();
  o.observer_errors = in.getObserverErrors();
  o.backing_lost = in.getBackingLost();
  o.leaving_entries = in.getLeavingEntries();
  o.leaving_bytes = in.getLeavingBytes();
  o.leaving_dropped = in.getLeavingDropped();
  o.rejoined = in.getRejoined();
  o.boundary_dropped = in.getBoundaryDropped();
  o.snapshots = in.getSnapshots();
  o.resident_bytes = in.getResidentBytes();
}

void ssd_part(msg::SsdCounters::Reader in, service_report::ssd_part& o) {
  o.files = in.getFiles();
  o.file_bytes = in.getFileBytes();
  o.cap_bytes = in.getCapBytes();
  o.queue_items = in.getQueueItems();
  o.queue_bytes = in.getQueueBytes();
  o.writes_ok = in.getWritesOk();
  o.writes_failed = in.getWritesFailed();
  o.write_no_space = in.getWriteNoSpace();
  o.dropped = in.getDropped();
  o.superseded = in.getSuperseded();
  o.rejected_too_large = in.getRejectedTooLarge();
  o.evicted = in.getEvicted();
  o.restores_ok = in.getRestoresOk();
  o.restores_failed = in.getRestoresFailed();
  o.coalesced = in.getCoalesced();
  o.cancelled = in.getCancelled();
  o.corrupt_removed = in.getCorruptRemoved();
  o.writes_cancelled = in.getWritesCancelled();
  o.geometry_mismatched = in.getGeometryMismatched();
  o.restores_mismatched = in.getRestoresMismatched();
  o.files_superseded = in.getFilesSuperseded();
  o.removal_records = in.getRemovalRecords();
  o.removal_failures = in.getRemovalFailures();
  o.removals_pending = in.getRemovalsPending();
  o.writes_given_up = in.getWritesGivenUp();
  o.writes_retried = in.getWritesRetried();
  o.io_buffer_bytes = in.getIoBufferBytes();
  o.delta_files = in.getDeltaFiles();
  o.delta_refused = in.getDeltaRefused();
  o.chain_cascades = in.getChainCascades();
  o.prefix_bytes_written = in.getPrefixBytesWritten();
  o.new_token_bytes = in.getNewTokenBytes();
}

void checkpoints_part(msg::CheckpointCounters::Reader in,
                      service_report::checkpoints_part& o) {
  o.held = in.getHeld();
  o.saved = in.getSaved();
  o.disposed = in.getDisposed();
  o.resumed = in.getResumed();
  o.stale = in.getStale();
  o.removed = in.getRemoved();
  o.every_tokens = in.getEveryTokens();
  o.ram_only = in.getRamOnly();
}

void admission_part(msg::AdmissionCounters::Reader in,
                    service_report::admission_part& o) {
  o.admitted = in.getAdmitted();
  o.refused = in.getRefused();
  o.errors = in.getErrors();
  o.released = in.getReleased();
  o.waiting = in.getWaiting();
  o.held_bytes = in.getHeldBytes();
  o.holders = in.getHolders();
  o.budget_bytes = in.getBudgetBytes();
  o.max_queued = in.getMaxQueued();
  o.queue_full = in.getQueueFull();
}

io_counters io_part(msg::IoCounters::Reader in) {
  return io_counters{in.getReads(),        in.getWrites(),   in.getBytesRead(),
                     in.getBytesWritten(), in.getFailures(), in.getSubmitted()};
}

void peer_part(msg::PeerCounters::Reader in, service_report::peer_part& o) {
  o.peers_up = in.getPeersUp();
  o.entries = in.getEntries();
  o.finds = in.getFinds();
  o.over_cap = in.getOverCap();
  o.fetches = in.getFetches();
  o.fetched = in.getFetched();
  o.bytes = in.getBytes();
  o.coalesced = in.getCoalesced();
  o.lane_fetches = in.getLaneFetches();
  o.chunk_fetches = in.getChunkFetches();
  o.failed_none = in.getFailedNone();
  o.failed_unreachable = in.getFailedUnreachable();
  o.failed_timeout = in.getFailedTimeout();
  o.failed_corrupt = in.getFailedCorrupt();
  o.failed_other = in.getFailedOther();
  o.in_flight_bytes = in.getInFlightBytes();
  o.written_to_ssd = in.getWrittenToSsd();
  o.ssd_write_failed = in.getSsdWriteFailed();
  o.served = in.getServed();
  o.served_none = in.getServedNone();
  o.serve_refused = in.getServeRefused();
  o.serve_bytes = in.getServeBytes();
  o.feed_snapshots = in.getFeedSnapshots();
  o.feed_gap_resyncs = in.getFeedGapResyncs();
  o.feed_restart_resyncs = in.getFeedRestartResyncs();
  o.refused_remote = in.getRefusedRemote();
  o.lane_refused = in.getLaneRefused();
  o.lane_failed = in.getLaneFailed();
}

} // namespace

caf::expected<service_report> report(const sealed<msg::ReadReportReply>& r) {
  auto in = r.root();
  service_report out;
  ram_part(in.getRam(), out.ram);
  ssd_part(in.getSsd(), out.ssd);
  out.sessions = {in.getSessions().getOpen(),
                  in.getSessions().getProtectedEntries(),
                  in.getSessions().getClosed(), in.getSessions().getOpened()};
  auto obj = in.getObjects();
  out.objects = {obj.getEntries(), obj.getBytes(), obj.getHits(),
                 obj.getMisses()};
  out.demotions = in.getDemotions();
  out.cold_tiers = in.getColdTiers();
  out.dead_tiers = in.getDeadTiers();
  out.cold_late = in.getColdLate();
  out.closed = in.getClosed();
  admission_part(in.getAdmission(), out.admission);
  checkpoints_part(in.getCheckpoints(), out.checkpoints);
  peer_part(in.getPeer(), out.peer);
  auto t = in.getTokens();
  out.tokens = {t.getRam(),        t.getSsd(),      t.getPeer(),
                t.getCheckpoint(), t.getComputed(), t.getStore()};
  for (auto sec : in.getTiers()) {
    auto& to = out.tiers.emplace_back();
    to.tier = sec.getTier().cStr();
    for (auto c : sec.getCounters())
      to.counters.push_back(
        {c.getName().cStr(), c.getHelp().cStr(), c.getGauge(), c.getValue()});
  }
  for (auto name : in.getSilentTiers())
    out.silent_tiers.emplace_back(name.cStr());
  for (auto io : in.getIo()) {
    if (io.getTier() == msg::Tier::RAM)
      out.ram_io = io_part(io);
    else if (io.getTier() == msg::Tier::SSD)
      out.ssd_io = io_part(io);
  }
  return out;
}

} // namespace kvtier::runtime::codec
