// The RAM tier actor's object cache (actors/ram_tier_objects.hpp): puts,
// gets that fall back to the SSD by exact key, spills and snapshots of
// objects, and the discarding of restores a put or a close made stale.
#include "actors/ram_tier_objects.hpp"

#include "actors/codec.hpp"
#include "tiers/entry_message.hpp"

namespace kvtier::actors::ram_objects {

namespace {

using tiers::attachment;
using tensors = std::vector<attachment>;

/// How long the SSD may take to answer (the storage deadline): a late
/// write leaves the object undurable (written again by the next flush), a
/// late read is a miss.
std::chrono::milliseconds deadline(ram_tier_pointer self) {
  return std::chrono::milliseconds{self->state.cfg.deadline_ms};
}

uint64_t now(ram_tier_pointer self) {
  return millis(self->clock().now());
}

tiers::ram_tier& tier(ram_tier_pointer self) {
  return *self->state.tier;
}

caf::error unsupported() {
  return make_error(ec::unsupported,
                    "this service has no object cache (ram-tier.objects is "
                    "false)");
}

sealed<msg::SpillEntry> spill_message(ram_tier_pointer self,
                                      msg::SpillReason reason,
                                      const std::string& key,
                                      const tensors& t) {
  msg::draft<msg::SpillEntry> d;
  d.root().setOrderId(self->state.next_order++);
  d.root().setReason(reason);
  auto obj = d.root().getItem().initObject();
  obj.setKey(key);
  tiers::write_attachments(d, obj.initAttachments(t.size()), t);
  return std::move(d).seal();
}

sealed<msg::GetObjectReply> object_reply(const std::string& key,
                                         const tensors& t) {
  msg::draft<msg::GetObjectReply> d;
  auto out = d.root().initObject();
  out.setKey(key);
  tiers::write_attachments(d, out.initAttachments(t.size()), t);
  return std::move(d).seal();
}

sealed<msg::GetObjectReply> missing() {
  msg::draft<msg::GetObjectReply> d;
  d.root().setMissing();
  return std::move(d).seal();
}

/// Writes the object `key` as of `serial`; marks it durable when the write
/// is and the object was not replaced meanwhile.
void write_then_mark(ram_tier_pointer self, const std::string& key,
                     uint64_t serial, const tensors& t,
                     msg::SpillReason reason) {
  self
    ->request(self->state.ssd, deadline(self),
              spill_message(self, reason, key, t))
    .then(
      [self, key, serial](const sealed<msg::SpillEntryReply>& r) {
        auto o = r.root().getOutcome();
        bool ok = o == msg::SpillOutcome::DURABLE
                  || o == msg::SpillOutcome::ALREADY_DURABLE;
        auto now_obj = tier(self).peek_object(key);
        if (ok && now_obj && now_obj->serial == serial)
          tier(self).mark_durable({true, key, {}});
      },
      [](const caf::error&) {});
}

/// Tells the SSD actor that every older copy of object `key` is dead: its
/// file and any write of it pending are erased before anything this actor
/// sends later (one FIFO), so no restore can bring an older object back.
void erase_on_ssd(ram_tier_pointer self, const std::string& key) {
  msg::draft<msg::EraseEntry> d;
  tiers::write_key(d.root().initKey(), tiers::storage_key::object(key));
  self->request(self->state.ssd, deadline(self), std::move(d).seal())
    .then([](const sealed<msg::EraseEntryReply>&) {}, [](const caf::error&) {});
}

/// The object the SSD actor answered with: its tensors, when the reply is
/// an object's entry (no tokens, no layers).
std::optional<tensors>
restored_tensors(const sealed<msg::RestoreEntryReply>& r) {
  if (!r.root().isEntry())
    return std::nullopt;
  auto e = tiers::read_entry(r, r.root().getEntry());
  if (!e || !e->tokens.empty() || !e->layers.empty())
    return std::nullopt;
  return std::move(e->attachments);
}

/// The restore of `key` ended (`r` null: the request failed): installs the
/// object unless a put or a close made it stale, and answers every get
/// waiting for it.
void restored(ram_tier_pointer self, const std::string& key,
              const sealed<msg::RestoreEntryReply>* r) {
  auto& reads = self->state.object_reads;
  auto it = reads.find(key);
  if (it == reads.end())
    return; // closed meanwhile: answered then, the result discarded
  auto read = std::move(it->second);
  reads.erase(it);
  std::optional<tensors> out;
  if (read.stale) {
    // Put again while the read ran: the newer object is the answer, the
    // restored one is never installed.
    if (auto o = tier(self).peek_object(key))
      out = std::move(o->tensors);
  } else if (r != nullptr) {
    out = restored_tensors(*r);
    if (out) {
      auto put =
        tier(self).put_object(key, *out, now(self), r->root().getDurable());
      spill_orders(self, std::move(put.evicted));
    }
  }
  for (auto& rp : read.waiters)
    rp.deliver(out ? object_reply(key, *out) : missing());
}

} // namespace

caf::result<sealed<msg::PutObjectReply>> put(ram_tier_pointer self,
                                             const sealed<msg::PutObject>& m) {
  if (!self->state.objects)
    return unsupported();
  auto obj = m.root().getObject();
  auto t = tiers::read_attachments(m, obj.getAttachments());
  if (!t)
    return std::move(t.error());
  if (self->state.closed)
    return msg::draft<msg::PutObjectReply>{}.seal(); // not kept
  std::string key = obj.getKey().cStr();
  if (auto rd = self->state.object_reads.find(key);
      rd != self->state.object_reads.end())
    rd->second.stale = true;
  if (self->state.ssd)
    erase_on_ssd(self, key);
  auto r = tier(self).put_object(key, std::move(*t), now(self));
  msg::draft<msg::PutObjectReply> d;
  d.root().setKept(r.kept);
  spill_orders(self, std::move(r.evicted));
  return std::move(d).seal();
}

caf::result<sealed<msg::GetObjectReply>> get(ram_tier_pointer self,
                                             const std::string& key) {
  if (!self->state.objects)
    return unsupported();
  if (auto t = tier(self).object(key, now(self)))
    return object_reply(key, *t);
  if (!self->state.ssd || self->state.closed)
    return missing();
  auto rp = self->make_response_promise<sealed<msg::GetObjectReply>>();
  auto& read = self->state.object_reads[key];
  read.waiters.push_back(rp);
  if (read.waiters.size() > 1)
    return rp; // joins the restore in flight
  msg::draft<msg::RestoreEntry> d;
  tiers::write_key(d.root().initKey(), tiers::storage_key::object(key));
  self->request(self->state.ssd, deadline(self), std::move(d).seal())
    .then(
      [self, key](const sealed<msg::RestoreEntryReply>& r) {
        restored(self, key, &r);
      },
      [self, key](const caf::error&) { restored(self, key, nullptr); });
  return rp;
}

void spill(ram_tier_pointer self, tiers::spill_order& o) {
  self
    ->request(
      self->state.ssd, deadline(self),
      spill_message(self, msg::SpillReason::SPILL, o.key.name, o.object))
    .then([](const sealed<msg::SpillEntryReply>&) {}, [](const caf::error&) {});
}

void snapshot(ram_tier_pointer self) {
  if (!self->state.ssd)
    return;
  for (auto& key : tier(self).undurable_objects())
    if (auto o = tier(self).peek_object(key))
      write_then_mark(self, key, o->serial, o->tensors,
                      msg::SpillReason::SNAPSHOT);
}

void file_gone(ram_tier_pointer self, const std::string& key) {
  tier(self).object_not_durable(key);
}

void close(ram_tier_pointer self) {
  auto reads = std::exchange(self->state.object_reads, {});
  for (auto& [key, read] : reads)
    for (auto& rp : read.waiters)
      rp.deliver(make_error(ec::closed, "the service closed while object " + key
                                          + " was read from SSD"));
}

} // namespace kvtier::actors::ram_objects
