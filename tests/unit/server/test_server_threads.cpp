// The server's threads do not grow with its clients (issue 45): an admission is a sliced task on a
// stack of its own (serve/sliced_task.h, core/fiber.h), not a thread, and answers are written on a
// fixed pool (server/answer_threads.h). Before, every admission and every scheduler operation
// started an OS thread: with 64 clients streaming at once, 16 admissions ran beside each other
// and the process held 16 more threads while their prompts were prefilled.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/raw_http.h"
#include "support/served.h"

using json = nlohmann::json;

namespace {

int threads_now() {
  return int(rawhttp::proc_kb("Threads"));
}

// Clients that each stream one completion, all on the calling thread (non-blocking sockets and
// poll), so that the test adds no thread per client. Returns how many saw "data: [DONE]".
int stream_all(int port, int clients, const json& body) {
  std::vector<int> fds;
  std::vector<std::string> seen(static_cast<size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    const int fd = rawhttp::connect_to(port, 60000);
    if (fd < 0 || !rawhttp::send_all(fd, rawhttp::post("/v1/completions", body.dump()))) return 0;
    fds.push_back(fd);
  }
  int done = 0;
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (done < clients && std::chrono::steady_clock::now() < deadline) {
    if (::poll(p.data(), p.size(), 1000) <= 0) continue;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, 0);
      if (n > 0) seen[i].append(buf, size_t(n));
      const bool refused = seen[i].size() >= 12 && seen[i].rfind("HTTP/1.1 200", 0) != 0;
      if (n <= 0 || refused || seen[i].find("data: [DONE]") != std::string::npos) {
        done += seen[i].find("data: [DONE]") != std::string::npos;
        ::close(p[i].fd);
        p[i].fd = -1;
      }
    }
  }
  for (auto& x : p)
    if (x.fd >= 0) ::close(x.fd);
  return done;
}

TEST(ServerThreads, ThreadCountStaysConstantWhile64ClientsStream) {
  kamera::ServerOptions o;
  o.prefill_slice_tokens = 16;  // admissions last several steps: they overlap
  o.max_queue = 128;            // every client is queued, none refused
  o.max_client_requests = 128;
  tiny::Served s(o);
  // Warm up: the engine's and BLAS's own threads start with the first forward.
  ASSERT_EQ(s.post("/v1/completions", {{"prompt", "Tom"}, {"max_tokens", 4}}).first, 200);
  std::string prompt;  // about 200 tokens, so that each admission takes several slices
  for (int i = 0; i < 40; ++i) prompt += "Tom saw a big dog. ";
  const json body = {
      {"prompt", prompt}, {"max_tokens", 24}, {"stream", true}, {"reuse", "reprefill"}};

  std::atomic<bool> stop{false};
  std::atomic<int> most{0};
  std::thread sampler([&] {  // started before the baseline: it is counted in it
    while (!stop) {
      most = std::max(most.load(), threads_now());
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int baseline = threads_now();
  most = baseline;
  const int done = stream_all(s.port(), 64, body);
  stop = true;
  sampler.join();
  EXPECT_EQ(done, 64);
  EXPECT_GT(s.metric("kamera_prefill_pauses_total"), 0)
      << "admissions were never sliced: the test did not make them overlap";
  EXPECT_LE(most.load(), baseline + 2) << "threads grew from " << baseline << " to " << most;
}

}  // namespace
