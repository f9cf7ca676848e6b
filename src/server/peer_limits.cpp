#include "server/peer_limits.h"

namespace kamera {

bool PeerLimits::take(std::map<std::string, int>& m, const std::string& k, int cap, bool always) {
  int& n = m[k];
  if (n >= cap && !always) {
    if (n == 0) m.erase(k);
    return false;
  }
  return ++n <= cap;
}

void PeerLimits::give(std::map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  if (it != m.end() && --it->second <= 0) m.erase(it);
}

bool PeerLimits::open_address(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  return take(addresses_, address, max_connections_, false);
}

void PeerLimits::close_address(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  give(addresses_, address);
}

bool PeerLimits::open_client(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  return take(clients_, client, max_connections_, true);
}

void PeerLimits::close_client(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  give(clients_, client);
}

bool PeerLimits::begin_request(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  return take(inflight_, client, max_inflight_, false);
}

void PeerLimits::end_request(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  give(inflight_, client);
}

}  // namespace kamera
