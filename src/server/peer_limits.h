// Per-peer shares of the HTTP front (server/http_front.h), under its global connection cap: open
// connections of one remote address and of one client (an API key, or the address when there are
// no keys), and requests of one client being handled at once. Thread-safe: sessions end on any
// thread (the last holder of a responder drops them).
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace kamera {

class PeerLimits {
 public:
  PeerLimits(int max_connections, int max_inflight)
      : max_connections_(max_connections), max_inflight_(max_inflight) {}

  // A connection from `address`: false (not counted) when the address holds its share already.
  bool open_address(const std::string& address);
  void close_address(const std::string& address);
  // The connection's first request named its client: false (still counted, released with the
  // connection) when that client holds more connections than its share.
  bool open_client(const std::string& client);
  void close_client(const std::string& client);
  // A request of `client` is handled until end_request: false (not counted) past its share.
  bool begin_request(const std::string& client);
  void end_request(const std::string& client);

  int max_connections() const { return max_connections_; }
  int max_inflight() const { return max_inflight_; }

 private:
  static bool take(std::map<std::string, int>& m, const std::string& k, int cap, bool always);
  static void give(std::map<std::string, int>& m, const std::string& k);

  const int max_connections_, max_inflight_;
  std::mutex mu_;
  std::map<std::string, int> addresses_, clients_, inflight_;
};

}  // namespace kamera
