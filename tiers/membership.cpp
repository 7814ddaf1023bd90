#include "tiers/membership.hpp"

#include <algorithm>
#include <ostream>

namespace kvtier::tiers {

const char* to_string(refusal r) {
  switch (r) {
    case refusal::none: return "accepted";
    case refusal::malformed: return "malformed";
    case refusal::protocol: return "protocol version";
    case refusal::model_identity: return "model identity";
    case refusal::node_id: return "node id";
    case refusal::leaving: return "leaving";
  }
  return "?";
}

const char* to_string(peer_state s) {
  switch (s) {
    case peer_state::up: return "up";
    case peer_state::down: return "down";
    case peer_state::left: return "left";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, refusal r) {
  return os << to_string(r);
}

std::ostream& operator<<(std::ostream& os, peer_state s) {
  return os << to_string(s);
}

millis backoff::delay(uint32_t failures) const {
  auto d = base;
  for (uint32_t i = 0; i < failures && d < cap; ++i)
    d *= 2;
  return std::min(d, cap);
}

membership::membership(identity self, timing t)
  : self_(std::move(self))
  , timing_(t) {}

void membership::set_self(std::string node_id, std::string address) {
  self_.node_id = std::move(node_id);
  self_.address = std::move(address);
  targets_.erase(self_.address);
}

void membership::add_address(const std::string& address, time_point now) {
  if (address == self_.address || address.empty())
    return;
  if (targets_.count(address) == 0)
    targets_[address].next = now;
}

decision membership::judge(const identity& remote, bool count) {
  auto refuse = [&](refusal r, std::string text) {
    if (count)
      switch (r) {
        case refusal::malformed: ++refused_.malformed; break;
        case refusal::protocol: ++refused_.protocol; break;
        case refusal::model_identity: ++refused_.model_identity; break;
        case refusal::node_id: ++refused_.node_id; break;
        default: break;
      }
    return decision{r, std::move(text)};
  };
  if (remote.node_id.empty() || remote.node_id.size() > max_node_id_bytes)
    return refuse(refusal::malformed,
                  "node id of " + std::to_string(remote.node_id.size())
                    + " bytes (1 .. " + std::to_string(max_node_id_bytes)
                    + ")");
  if (remote.fingerprint.empty()
      || remote.fingerprint.size() > max_fingerprint_bytes)
    return refuse(refusal::malformed,
                  "fingerprint of " + std::to_string(remote.fingerprint.size())
                    + " bytes");
  if (!parse_address(remote.address))
    return refuse(refusal::malformed, "listen address is not HOST:PORT");
  if (remote.protocol != self_.protocol)
    return refuse(refusal::protocol, "peer " + remote.node_id
                                       + " speaks protocol "
                                       + std::to_string(remote.protocol)
                                       + ", node " + self_.node_id + " speaks "
                                       + std::to_string(self_.protocol));
  if (remote.fingerprint != self_.fingerprint)
    return refuse(refusal::model_identity,
                  "peer " + remote.node_id + " has model identity "
                    + remote.fingerprint + ", node " + self_.node_id + " has "
                    + self_.fingerprint);
  if (remote.node_id == self_.node_id)
    return refuse(refusal::node_id, "peer at " + remote.address
                                      + " uses this node's id "
                                      + self_.node_id);
  if (auto m = find(remote.node_id);
      m && m->state == peer_state::up && m->address != remote.address)
    return refuse(refusal::node_id, "node id " + remote.node_id + " is up at "
                                      + m->address + ", a peer at "
                                      + remote.address + " uses it too");
  return {};
}

bool membership::mark_up(const identity& remote, time_point now) {
  auto& m = members_[remote.node_id];
  bool changed = m.state != peer_state::up;
  m.node_id = remote.node_id;
  m.address = remote.address;
  m.state = peer_state::up;
  m.last_heard = now;
  add_address(remote.address, now);
  auto& t = targets_[remote.address];
  t.failures = 0;
  t.refused = false;
  return changed;
}

bool membership::heard(const std::string& node_id, time_point now) {
  auto i = members_.find(node_id);
  if (i == members_.end() || i->second.state != peer_state::up)
    return false;
  i->second.last_heard = now;
  return true;
}

bool membership::mark_down(const std::string& node_id, time_point now,
                           bool left) {
  auto i = members_.find(node_id);
  if (i == members_.end())
    return false;
  auto& m = i->second;
  bool was_up = m.state == peer_state::up;
  if (!was_up && !(left && m.state == peer_state::down))
    return false;
  m.state = left ? peer_state::left : peer_state::down;
  if (auto t = targets_.find(m.address); t != targets_.end() && was_up) {
    t->second.next = now + timing_.reconnect.delay(t->second.failures);
    ++t->second.failures;
  }
  return was_up;
}

std::vector<std::string> membership::expire(time_point now) {
  std::vector<std::string> out;
  for (auto& [id, m] : members_)
    if (m.state == peer_state::up && now - m.last_heard > timing_.down_after)
      out.push_back(id);
  for (auto& id : out)
    mark_down(id, now);
  return out;
}

bool membership::up_at(const std::string& address) const {
  return std::any_of(members_.begin(), members_.end(), [&](auto& kv) {
    return kv.second.state == peer_state::up && kv.second.address == address;
  });
}

std::vector<std::string> membership::due(time_point now) {
  std::vector<std::string> out;
  for (auto& [address, t] : targets_)
    if (!t.in_flight && !t.refused && t.next <= now && !up_at(address)) {
      t.in_flight = true;
      out.push_back(address);
    }
  return out;
}

void membership::attempt_done(const std::string& address, bool success,
                              time_point now, bool refused) {
  auto i = targets_.find(address);
  if (i == targets_.end())
    return;
  auto& t = i->second;
  t.in_flight = false;
  t.refused = refused;
  if (success) {
    t.failures = 0;
    return;
  }
  t.next = now + timing_.reconnect.delay(t.failures);
  ++t.failures;
}

void membership::retry_now(const std::string& address, time_point now) {
  auto i = targets_.find(address);
  if (i == targets_.end()) {
    add_address(address, now);
    return;
  }
  if (!i->second.in_flight)
    i->second.next = now;
}

const member* membership::find(const std::string& node_id) const {
  auto i = members_.find(node_id);
  return i == members_.end() ? nullptr : &i->second;
}

std::vector<const member*> membership::up_members() const {
  std::vector<const member*> out;
  for (auto& [id, m] : members_)
    if (m.state == peer_state::up)
      out.push_back(&m);
  return out;
}

uint32_t membership::failures(const std::string& address) const {
  auto i = targets_.find(address);
  return i == targets_.end() ? 0 : i->second.failures;
}

std::optional<time_point>
membership::next_attempt(const std::string& address) const {
  auto i = targets_.find(address);
  if (i == targets_.end() || i->second.refused)
    return std::nullopt;
  return i->second.next;
}

} // namespace kvtier::tiers
