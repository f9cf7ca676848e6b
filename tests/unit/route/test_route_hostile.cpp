// `kamera route` against hostile clients and broken backends (issue 46, finding 6), on loopback:
// the router in-process on a tiny model, in front of a backend of the test's own that answers
// /health 200 (as a server whose I/O thread lives on) and every other request as the test says.
//   - a client that leaves a non-streamed request closes the backend's connection (the server
//     cancels there) within a bound, not at the router's read timeout;
//   - a prompt whose text cannot fit the context is refused by the router itself
//     (context_length_exceeded) before it is tokenized: the backend never sees it;
//   - a non-streamed answer over the router's bound is cut off there (502), the router's peak
//     memory stays near the bound;
//   - an answer no server gives (not JSON, text/html, status 999) is answered 502 bad_gateway;
//   - a backend that hangs (its /health still answers) is given up after the timeout (504), and
//     stays down past its next health checks.
// Each test prints what it measured (docs/SERVER.md, "Hostile clients", issue 46).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "route/router.h"
#include "support/raw_http.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One connection's request as the fake backend read it.
struct Seen {
  std::string head, path;
};

// A backend on loopback: /health answers 200; every other request is handed to `serve` with the
// connection's socket (it writes what it wants and returns; the socket is closed after).
class FakeBackend {
 public:
  using Serve = std::function<void(int fd, const Seen& req)>;
  explicit FakeBackend(Serve serve) : serve_(std::move(serve)) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(lfd_, 64);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeBackend() {
    stop = true;
    ::shutdown(lfd_, SHUT_RDWR);
    ::close(lfd_);
    acceptor_.join();
    for (auto& t : conns_) t.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  std::atomic<int> requests{0};  // other than /health
  std::atomic<bool> stop{false};

 private:
  void accept_loop() {
    while (!stop) {
      pollfd p{lfd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(lfd_, nullptr, nullptr);
      if (fd < 0) continue;
      conns_.emplace_back([this, fd] { handle(fd); });
    }
  }
  void handle(int fd) {
    Seen req;
    std::string in;
    char buf[65536];
    while (in.find("\r\n\r\n") == std::string::npos && !stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, size_t(n));
    }
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      req.head = in.substr(0, end);
      read_body(fd, req.head, in.size() - end - 4);
      const size_t sp = req.head.find(' ');
      req.path = req.head.substr(sp + 1, req.head.find(' ', sp + 1) - sp - 1);
      if (req.path == "/health") {
        rawhttp::send_all(fd,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                          "15\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}");
      } else {
        ++requests;
        serve_(fd, req);
      }
    }
    // FIN, then what the peer still sends: a close with unread bytes would be a reset, which the
    // router may take for the backend failing before it reads the answer.
    ::shutdown(fd, SHUT_WR);
    for (int i = 0; i < 50 && !stop; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0 && ::recv(fd, buf, sizeof buf, 0) <= 0) break;
    }
    ::close(fd);
  }
  // The rest of the request's Content-Length body (`have` bytes of it came with the head).
  void read_body(int fd, const std::string& head, size_t have) {
    std::string h = head;
    for (char& c : h) c = char(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = h.find("content-length:");
    size_t left = at == std::string::npos ? 0 : std::stoul(h.substr(at + 15));
    left -= std::min(left, have);
    char buf[65536];
    while (left > 0 && !stop) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, left), 0);
      if (n <= 0) return;
      left -= size_t(n);
    }
  }
  Serve serve_;
  int lfd_ = -1, port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> conns_;  // joined at the end (a test makes a handful)
};

// Waits, while the backend holds the connection, for the peer (the router) to close it; the
// seconds it took, or -1 when it did not within `limit_s` (or the backend stops).
double wait_for_close(int fd, double limit_s, const std::atomic<bool>& stop) {
  const auto t0 = Clock::now();
  char buf[4096];
  while (!stop && seconds_since(t0) < limit_s) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return seconds_since(t0);
  }
  return -1;
}

struct RouterUnderTest {
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  std::unique_ptr<Router> router;
  explicit RouterUnderTest(const std::vector<std::string>& backends,
                           std::function<void(RouterOptions&)> tune = nullptr) {
    RouterOptions o;
    o.backends = backends;
    o.policy = "round-robin";
    o.health_ms = 100;
    if (tune) tune(o);
    auto r = Router::create(model, o);
    EXPECT_TRUE(r.ok()) << r.message();
    router = std::move(*r);
    EXPECT_TRUE(router->start().ok());
  }
  int port() const { return router->port(); }
};

std::string completion(int max_tokens = 8) {
  return json{{"prompt", "Hello there"}, {"max_tokens", max_tokens}}.dump();
}

json body_of(const std::string& raw) {
  const std::string r = rawhttp::final_response(raw);
  const size_t end = r.find("\r\n\r\n");
  return end == std::string::npos ? json() : json::parse(r.substr(end + 4), nullptr, false);
}

}  // namespace

// The probe's finding: the backend generated 1,859 more tokens in 8 s through the router after
// the client left, 14 directly. The router must close the backend's connection (which the server
// takes as the client leaving) as soon as its own client has gone.
TEST(RouterHostile, ClientThatLeavesANonStreamedRequestClosesTheBackends) {
  std::atomic<double> closed_after{-2};
  std::atomic<bool> arrived{false};
  FakeBackend backend([&](int fd, const Seen&) {
    arrived = true;
    closed_after = wait_for_close(fd, 8.0, backend.stop);
  });
  RouterUnderTest rt({backend.url()});
  const int fd = rawhttp::connect_to(rt.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(rawhttp::send_all(fd, rawhttp::post("/v1/completions", completion(2000))));
  for (int i = 0; i < 200 && !arrived; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(arrived) << "the request never reached the backend";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::close(fd);  // the client leaves while the backend computes its (non-streamed) answer
  for (int i = 0; i < 500 && closed_after == -2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("[measure] backend connection closed %.3f s after the client left (-1: not in 8 s)\n",
              closed_after.load());
  EXPECT_GE(closed_after, 0) << "the router kept the backend's request after its client left";
  EXPECT_LT(closed_after, 2.0);
}

// The probe's finding: a 30 MiB prompt the server refuses up front cost the router 15-33 s and up
// to 1.3 GB of tokenizing. The router refuses it as the server does, before tokenizing, without
// the backend.
TEST(RouterHostile, PromptThatCannotFitIsRefusedBeforeTokenizing) {
  FakeBackend backend([](int fd, const Seen&) {
    rawhttp::send_all(fd,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                      "2\r\n\r\n{}");
  });
  RouterUnderTest rt({backend.url()});
  const size_t limit = max_prompt_bytes(*rt.model);
  const std::string prompt(size_t(8) << 20, 'a');  // 8 MiB of text, far over the context
  ASSERT_GT(prompt.size(), limit);
  const auto t0 = Clock::now();
  const std::string raw = rawhttp::exchange(
      rt.port(),
      rawhttp::post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 1}}.dump()), false,
      120000);
  const double took = seconds_since(t0);
  const json b = body_of(raw);
  std::printf("[measure] 8 MiB prompt (limit %zu bytes): status %d in %.2f s, backend saw %d\n",
              limit, rawhttp::status_of(rawhttp::final_response(raw)), took,
              backend.requests.load());
  EXPECT_EQ(rawhttp::status_of(rawhttp::final_response(raw)), 400);
  EXPECT_EQ(b["error"].value("code", ""), "context_length_exceeded");
  EXPECT_EQ(b["error"].value("param", ""), "prompt");
  EXPECT_EQ(backend.requests, 0) << "the refusal was the backend's, after the router tokenized";
  // The same text split over chat messages: counted together, refused by name.
  json msgs = json::array();
  for (int i = 0; i < 4; ++i)
    msgs.push_back({{"role", "user"}, {"content", std::string(limit / 3, 'b')}});
  const json c = body_of(rawhttp::exchange(
      rt.port(), rawhttp::post("/v1/chat/completions", json{{"messages", msgs}}.dump())));
  EXPECT_EQ(c["error"].value("code", ""), "context_length_exceeded");
  EXPECT_EQ(c["error"].value("param", ""), "messages");
  EXPECT_EQ(backend.requests, 0);
}

// The probe's finding: a 1 GiB body from a backend took the router to 2.1 GB. An answer past the
// bound is cut off there (502) and the backend's connection closed: the router holds at most
// about the bound (256 MiB here, which the router held whole before).
TEST(RouterHostile, OversizedAnswerIsCutOffAtTheBound) {
  std::atomic<int64_t> sent{0};
  FakeBackend backend([&](int fd, const Seen&) {
    // 256 MiB of digits, chunked, made as they are sent (the backend holds 1 MiB)
    rawhttp::send_all(fd,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n");
    const std::string piece(size_t(1) << 20, '1');
    const std::string chunk = fmt::format("{:x}\r\n", piece.size()) + piece + "\r\n";
    for (int i = 0; i < 256 && !backend.stop; ++i) {
      if (!rawhttp::send_all(fd, chunk)) return;
      sent += int64_t(piece.size());
    }
    rawhttp::send_all(fd, "0\r\n\r\n");
  });
  const size_t bound = size_t(16) << 20;
  RouterUnderTest rt({backend.url()}, [&](RouterOptions& o) { o.max_reply_bytes = bound; });
  rawhttp::reset_peak_rss();
  const int64_t rss0 = rawhttp::proc_kb("VmRSS");
  const std::string raw =
      rawhttp::exchange(rt.port(), rawhttp::post("/v1/completions", completion()), false, 120000);
  const int64_t peak_mb = (rawhttp::proc_kb("VmHWM") - rss0) / 1024;
  const int status = rawhttp::status_of(rawhttp::final_response(raw));
  std::printf(
      "[measure] 256 MiB answer, bound %zu MiB: status %d, backend sent %lld MiB, peak RSS "
      "+%lld MB\n",
      bound >> 20, status, (long long)(sent.load() >> 20), (long long)peak_mb);
  EXPECT_EQ(status, 502);
  EXPECT_EQ(body_of(raw)["error"].value("code", ""), "bad_gateway");
  EXPECT_LT(sent.load(), int64_t(64) << 20) << "the router read on past its bound";
  if (rawhttp::kRssMeaningful) {
    EXPECT_LT(peak_mb, 200);
  }
}

// The probe's finding: invalid JSON, text/html and status 999 were passed through unchanged.
TEST(RouterHostile, AnswersNoServerGivesAre502) {
  struct Case {
    const char* name;
    std::string response;
  };
  const std::vector<Case> cases = {
      {"invalid JSON",
       "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"choices"},
      {"text/html",
       "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n\r\n<html></html>"},
      {"status 999",
       "HTTP/1.1 999 Odd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"},
      {"no content type", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"},
  };
  for (const Case& c : cases) {
    FakeBackend backend([&](int fd, const Seen&) { rawhttp::send_all(fd, c.response); });
    RouterUnderTest rt({backend.url()});
    const std::string raw =
        rawhttp::exchange(rt.port(), rawhttp::post("/v1/completions", completion()));
    const int status = rawhttp::status_of(rawhttp::final_response(raw));
    std::printf("[measure] backend answers %s: the client gets %d\n", c.name, status);
    EXPECT_EQ(status, 502) << c.name;
    EXPECT_EQ(body_of(raw)["error"].value("code", ""), "bad_gateway") << c.name;
    int counted = 0;  // the router counts it just after the answer left
    for (int i = 0; i < 100 && counted == 0;
         ++i, std::this_thread::sleep_for(std::chrono::milliseconds(10)))
      counted = rt.router->state()["backends"][0].value("bad_replies", 0);
    EXPECT_EQ(counted, 1) << c.name;
  }
  // and a good answer still passes, byte for byte
  FakeBackend good([](int fd, const Seen&) {
    rawhttp::send_all(fd,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                      "11\r\n\r\n{\"ok\":true}");
  });
  RouterUnderTest rt({good.url()});
  const std::string raw =
      rawhttp::exchange(rt.port(), rawhttp::post("/v1/completions", completion()));
  EXPECT_EQ(rawhttp::status_of(rawhttp::final_response(raw)), 200);
  EXPECT_EQ(body_of(raw), json({{"ok", true}}));
}

// The probe's finding: a backend that hangs held requests for 600 s and stayed "up". With a
// timeout of 1 s the request is answered 504 within a few seconds, and the backend stays down
// past its next health checks (it answers /health: a hung server's I/O thread still does).
TEST(RouterHostile, HungBackendTimesOutAndIsHeldDown) {
  FakeBackend hung([&](int fd, const Seen&) { wait_for_close(fd, 30.0, hung.stop); });
  RouterUnderTest rt({hung.url()}, [](RouterOptions& o) {
    o.backend_timeout_s = 1;
    o.down_hold_s = 5;
  });
  const auto t0 = Clock::now();
  const std::string raw =
      rawhttp::exchange(rt.port(), rawhttp::post("/v1/completions", completion()), false, 30000);
  const double took = seconds_since(t0);
  const int status = rawhttp::status_of(rawhttp::final_response(raw));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // 10 health checks
  const json st = rt.router->state()["backends"][0];
  std::printf("[measure] hung backend: status %d after %.2f s; up %d, timeouts %d\n", status, took,
              int(st.value("up", true)), int(st.value("timeouts", 0)));
  EXPECT_EQ(status, 504);
  EXPECT_EQ(body_of(raw)["error"].value("code", ""), "backend_timeout");
  EXPECT_LT(took, 5.0);
  EXPECT_FALSE(st.value("up", true)) << "the hung backend was marked up again by /health";
  // a request now finds no backend up at once
  const auto t1 = Clock::now();
  EXPECT_EQ(rawhttp::status_of(rawhttp::final_response(
                rawhttp::exchange(rt.port(), rawhttp::post("/v1/completions", completion())))),
            503);
  EXPECT_LT(seconds_since(t1), 1.0);
}
