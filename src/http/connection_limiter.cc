#include "http/connection_limiter.h"

#include <algorithm>

namespace gpuherd::http {

bool ConnectionLimiter::Reserved(const Peer& peer) const {
  return peer.uid && std::find(limits_.reserved_for.begin(), limits_.reserved_for.end(), *peer.uid) !=
                         limits_.reserved_for.end();
}

Refusal ConnectionLimiter::Admit(const Peer& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  Refusal refusal = Refusal::kNone;
  if (peer.uid) {
    auto it = by_uid_.find(*peer.uid);
    if (limits_.per_user > 0 && it != by_uid_.end() && it->second >= limits_.per_user) refusal = Refusal::kPerUser;
  } else {
    auto it = by_address_.find(peer.address);
    if (limits_.per_address > 0 && it != by_address_.end() && it->second >= limits_.per_address) {
      refusal = Refusal::kPerAddress;
    }
  }
  if (refusal == Refusal::kNone && limits_.total > 0) {
    int available = Reserved(peer) ? limits_.total : limits_.total - limits_.reserved;
    if (open_ >= available) refusal = Refusal::kTotal;
  }
  switch (refusal) {
    case Refusal::kNone:
      ++open_;
      if (peer.uid) {
        ++by_uid_[*peer.uid];
      } else {
        ++by_address_[peer.address];
      }
      break;
    case Refusal::kPerUser:
      ++stats_.refused_per_user;
      break;
    case Refusal::kPerAddress:
      ++stats_.refused_per_address;
      break;
    case Refusal::kTotal:
      ++stats_.refused_total;
      break;
  }
  return refusal;
}

void ConnectionLimiter::Release(const Peer& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  --open_;
  // Entries go when their count does, so that the maps hold only the peers
  // connected now.
  if (peer.uid) {
    if (auto it = by_uid_.find(*peer.uid); it != by_uid_.end() && --it->second <= 0) by_uid_.erase(it);
  } else {
    if (auto it = by_address_.find(peer.address); it != by_address_.end() && --it->second <= 0) {
      by_address_.erase(it);
    }
  }
}

void ConnectionLimiter::CountAcceptError() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.accept_errors;
}

ConnectionStats ConnectionLimiter::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ConnectionStats stats = stats_;
  stats.open = open_;
  stats.limit = limits_.total;
  return stats;
}

std::string ConnectionLimiter::Explain(Refusal refusal, const Peer& peer) const {
  switch (refusal) {
    case Refusal::kPerUser:
      return "too many connections: uid " + std::to_string(peer.uid.value_or(0)) + " already holds " +
             std::to_string(limits_.per_user) + ", the limit per user; close some and retry";
    case Refusal::kPerAddress:
      return "too many connections: " + peer.address + " already holds " + std::to_string(limits_.per_address) +
             ", the limit per address; close some and retry (local users can use the unix socket)";
    case Refusal::kTotal:
      return "too many connections: the server is at its limit of " + std::to_string(limits_.total) +
             " open connections (the last " + std::to_string(limits_.reserved) + " kept for admins); retry later";
    case Refusal::kNone:
      break;
  }
  return "";
}

}  // namespace gpuherd::http
