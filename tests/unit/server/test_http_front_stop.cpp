// HttpFront::stop() ends what it serves: its port refuses connections as soon as stop() returns
// (a stop that raced ahead of the acceptor's close left the port listening: the kernel queued
// connections that nobody answered, and a router sent a request there that hung for its whole
// time-out), and a keep-alive client waiting for its next request reads an end of stream.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <cerrno>
#include <string>
#include <thread>

#include "server/http_front.h"

namespace kamera {
namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    return -e;
  }
  return fd;
}

std::unique_ptr<HttpFront> started_front() {
  FrontOptions o;
  o.workers = 1;
  auto f = HttpFront::bind(
      o,
      [](HttpRequest& head) {
        // the I/O thread busy when stop() comes
        if (head.path == "/slow") std::this_thread::sleep_for(std::chrono::milliseconds(300));
        HttpResponse r;
        r.body = "{}";
        return std::optional<HttpResponse>(r);
      },
      [](HttpRequest, std::shared_ptr<Responder>) {});
  EXPECT_TRUE(f.ok()) << f.message();
  (*f)->start();
  return std::move(*f);
}

// Whether fd reads an end of stream (or a reset) within ms, after `skip` bytes of answer.
bool reads_end(int fd, int ms) {
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

TEST(HttpFrontStop, ThePortRefusesConnectionsOnceStopReturns) {
  for (const bool busy : {false, true}) {
    auto f = started_front();
    const int port = f->port();
    int slow = -1;
    if (busy) {  // the I/O thread inspects a head while stop() is called
      slow = connect_to(port);
      ASSERT_GE(slow, 0);
      const std::string req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
      ASSERT_EQ(::send(slow, req.data(), req.size(), 0), ssize_t(req.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    f->stop();
    const int fd = connect_to(port);
    if (fd >= 0) ::close(fd);
    if (slow >= 0) ::close(slow);
    EXPECT_EQ(fd, -ECONNREFUSED) << (busy ? "busy" : "idle") << ": port " << port
                                 << " still accepts";
  }
}

TEST(HttpFrontStop, AKeepAliveClientReadsTheEndOfStream) {
  auto f = started_front();
  const int fd = connect_to(f->port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, size_t(n)).rfind("HTTP/1.1 200", 0), 0u);
  // the connection is kept for the next request; the front stops meanwhile
  f->stop();
  EXPECT_TRUE(reads_end(fd, 2000)) << "the client still waits on a stopped front";
  ::close(fd);
}

}  // namespace
}  // namespace kamera
