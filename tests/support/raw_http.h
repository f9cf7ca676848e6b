// Loopback HTTP by hand, for tests that must control every byte a client sends (partial heads,
// chunked bodies, abandoned connections) and the server's memory (/proc/self/status).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include "support/sanitizer.h"

namespace rawhttp {

// A connected socket to 127.0.0.1:port (-1 on failure), with send/recv timeouts; `source`: the
// local address to connect from (another loopback address is another peer: 127.0.0.2).
inline int connect_to(int port, int timeout_ms = 5000, const char* source = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (source) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Reads until the peer closes, a whole response (by Content-Length) is in, or the timeout.
inline std::string read_response(int fd, int timeout_ms = 5000) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
    const size_t head = out.find("\r\n\r\n");
    const size_t cl = out.find("Content-Length: ");
    if (head != std::string::npos && cl != std::string::npos && cl < head &&
        out.size() >= head + 4 + std::stoul(out.substr(cl + 16)))
      break;
  }
  return out;
}

// The status code of a raw response (0 when none).
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// The response after any interim 1xx answers ("HTTP/1.1 100 Continue\r\n\r\n").
inline std::string final_response(std::string response) {
  while (status_of(response) >= 100 && status_of(response) < 200) {
    const size_t end = response.find("\r\n\r\n");
    if (end == std::string::npos) return {};
    response.erase(0, end + 4);
  }
  return response;
}

// One request on a fresh connection, the whole of it sent first; `half_close`: then
// shutdown(SHUT_WR), as a client that has nothing more to send. The raw response (read until the
// server closes or the timeout).
inline std::string exchange(int port, const std::string& request, bool half_close = false,
                            int timeout_ms = 5000, const char* source = nullptr) {
  const int fd = connect_to(port, timeout_ms, source);
  if (fd < 0) return {};
  std::string out;
  if (send_all(fd, request)) {
    if (half_close) ::shutdown(fd, SHUT_WR);
    out = read_response(fd, timeout_ms);
  }
  ::close(fd);
  return out;
}

// A POST with a JSON body, as raw bytes.
inline std::string post(const std::string& path, const std::string& body,
                        const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A line of /proc/self/status in kB ("VmRSS", "VmHWM").
inline int64_t proc_kb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

// Memory measurements mean nothing under AddressSanitizer (its quarantine keeps freed memory).
constexpr bool kRssMeaningful = !test_sanitizer::kAsan;

// Resets VmHWM to the current RSS (Linux >= 4.0), so that the next peak is this test's.
inline void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace rawhttp
