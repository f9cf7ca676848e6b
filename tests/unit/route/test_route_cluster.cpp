// Several servers, one cache (issue 29's done-when), on loopback: a Redis Cluster of the test's
// own (3 masters + 3 replicas, support/redis_cluster.h), two kamera servers sharing it and
// `kamera route` in front of them.
//   - a segment one server computed is served by the other from the cluster (store-patch), and
//     the answer is the one the first server gave; behind other antecedents, a third server
//     serves it with the nearest stored context's patch (store-patch-nearest), as the first
//     does from memory;
//   - the router sends a repeated conversation to the server that holds it (its events say so);
//   - a master killed under load: every request through the router still answers 200, the
//     repeated request's answer is unchanged and nothing discarded was read (nothing wrong is
//     served); the tier's own test (RedisClusterFailover) checks the acknowledged entries;
//   - a backend killed: new requests go to the other one.
// Skips, saying why, without redis-server.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "route/router.h"
#include "server/server.h"
#include "support/redis_cluster.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::string kKey = "the server's store key, 32 bytes";

// A system prompt of a few lines (each line a segment of its own past 16 tokens).
std::string system_prompt() {
  return "You are a careful assistant for a team of agents that watch a small town.\n"
         "Report what you see in short plain sentences, one fact per line, no guessing.\n"
         "When two agents disagree, say so and name the agent and the time of each report.\n";
}

json conversation(int who, int turns) {
  json msgs = json::array({{{"role", "system"}, {"content", system_prompt()}}});
  for (int t = 0; t < turns; ++t) {
    msgs.push_back({{"role", "user"},
                    {"content", fmt::format("Agent {} report {}: the baker on street {} opened at "
                                            "{} and the line was {} people long today.",
                                            who, t, who * 7 + t, 6 + t, 3 * who + t)}});
    msgs.push_back({{"role", "assistant"}, {"content", fmt::format("Noted report {}.", t)}});
  }
  msgs.push_back({{"role", "user"}, {"content", "What changed?"}});
  return {{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}};
}

struct Node {
  std::unique_ptr<Server> server;
  explicit Node(std::shared_ptr<const Model> m, const std::string& redis) {
    ServerOptions o;
    o.port = 0;
    o.threads = 1;
    o.redis_url = redis;
    o.store_key = kKey;
    o.store_fetch = "always";       // the tiny model recomputes faster than any fetch
    o.segment_compact_tokens = 16;  // every line gets a canonical and its contexts a patch
    o.segment_patch_rank = 4096;    // capped at full rank: the patch restores the rows
    o.redis_wait_replicas = 1;
    server = std::make_unique<Server>(m, o);
    EXPECT_TRUE(server->start().ok());
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", server->port()); }
};

json post(int port, const std::string& path, const json& body, int* status,
          std::string* backend = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  *status = r ? r->status : 0;
  if (r && backend) *backend = r->get_header_value("x-kamera-backend");
  return r ? json::parse(r->body, nullptr, false) : json();
}

int served(const json& r, const std::string& source) {
  int n = 0;
  if (!r.contains("usage")) return 0;
  for (const json& s : r["usage"]["kamera"]["segments"])
    if (s["source"] == source) n += s["tokens"].get<int>();
  return n;
}

std::string text(const json& r) {
  return r.contains("choices") ? r["choices"][0]["message"]["content"].get<std::string>() : "?";
}

double metric(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");  // a sample line, not its # HELP
  return at == std::string::npos ? 0 : std::stod(r->body.substr(at + name.size() + 2));
}

// Waits until the server has formed its long segments' canonicals when idle (each one's patches
// are stored right after it).
bool compacted(int port, double at_least) {
  const bool ok = OwnCluster::wait_for(
      [&] { return metric(port, "kamera_background_canonicals_total") >= at_least; }, 20000);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return ok;
}

}  // namespace

TEST(RouteCluster, TwoServersShareSegmentsAndTheRouterSendsAConversationWhereItIsHeld) {
  OwnCluster cluster;
  if (!cluster.ok()) GTEST_SKIP() << cluster.why();
  std::shared_ptr<const Model> model = tiny::load(tiny::model_path("qwen2"));
  Node a(model, cluster.url(3)), b(model, cluster.url(3));

  // 1. A computes a conversation; once idle it stores its long segments' canonicals and patches
  // in the cluster. B, which never saw it, serves them from there, with A's answer.
  int st = 0;
  const json first = post(a.server->port(), "/v1/chat/completions", conversation(1, 2), &st);
  ASSERT_EQ(st, 200) << first.dump();
  ASSERT_TRUE(compacted(a.server->port(), 3)) << "A formed no canonicals";
  const json other = post(b.server->port(), "/v1/chat/completions", conversation(1, 2), &st);
  ASSERT_EQ(st, 200) << other.dump();
  EXPECT_GT(served(other, "store-patch"), 40) << other["usage"].dump();
  EXPECT_EQ(text(other), text(first));
  EXPECT_GT(metric(b.server->port(), "kamera_store_fetch_batches_total"), 0);

  // 1b. The same reports behind another system prompt, on a third server: served from the
  // cluster with the patch of the nearest context stored (A's): the answer A gives from memory.
  Node c(model, cluster.url(3));
  json moved = conversation(1, 2);
  moved["messages"][0]["content"] = "You watch the town for the team and report in short lines.\n";
  const json near = post(c.server->port(), "/v1/chat/completions", moved, &st);
  ASSERT_EQ(st, 200) << near.dump();
  EXPECT_GT(served(near, "store-patch-nearest"), 40) << near["usage"].dump();
  EXPECT_EQ(served(near, "store-patch"), 0) << near["usage"].dump();
  EXPECT_GT(metric(c.server->port(), "kamera_segments_total{source=\"store_patch_nearest\"}"), 0);
  const json near_a = post(a.server->port(), "/v1/chat/completions", moved, &st);
  ASSERT_EQ(st, 200) << near_a.dump();
  // A keeps their rows (a full-rank patch is not smaller): C's canonical + patch restores them
  EXPECT_GT(served(near_a, "context-nearest"), 40) << near_a["usage"].dump();
  EXPECT_EQ(text(near), text(near_a));

  // 2. The router, told by the servers' events only: a conversation B computed (sent to B
  // directly) goes to B when it comes back one turn longer, one A computed goes to A.
  const json on_b = post(b.server->port(), "/v1/chat/completions", conversation(20, 2), &st);
  ASSERT_EQ(st, 200) << on_b.dump();
  post(a.server->port(), "/v1/chat/completions", conversation(21, 2), &st);
  ASSERT_EQ(st, 200);
  RouterOptions ro;
  ro.backends = {a.url(), b.url()};
  ro.redis_url = cluster.url(3);
  ro.health_ms = 200;
  auto router = Router::create(model, ro);
  ASSERT_TRUE(router.ok()) << router.message();
  ASSERT_TRUE((*router)->start().ok());
  const int rp = (*router)->port();
  // the events' first snapshot (every 2 s) tells what each holds
  ASSERT_TRUE(OwnCluster::wait_for(
      [&] {
        const json s = (*router)->state();
        return s["backends"][0]["snapshots"].get<int>() > 0 &&
               s["backends"][1]["snapshots"].get<int>() > 0;
      },
      8000))
      << (*router)->state().dump();
  for (auto [who, where] : {std::pair{20, b.url()}, {21, a.url()}, {20, b.url()}}) {
    std::string went;
    const json again = post(rp, "/v1/chat/completions", conversation(who, 3), &st, &went);
    ASSERT_EQ(st, 200) << again.dump();
    EXPECT_EQ(went, where) << "conversation " << who << ": " << (*router)->state().dump();
    // its segments come from that server's memory (or the cluster), not a forward
    EXPECT_GT(again["usage"]["kamera"]["reused_tokens"].get<int>(),
              again["usage"]["prompt_tokens"].get<int>() * 2 / 3)
        << again.dump();
  }
  const json state = (*router)->state();
  EXPECT_GT(state["events"].get<int>(), 0) << state.dump();
  EXPECT_EQ(state["routed_hot"].get<int>(), 3) << state.dump();

  // 3. A master killed under load through the router: nothing fails, nothing wrong is served.
  const json reference = post(rp, "/v1/chat/completions", conversation(1, 2), &st);
  ASSERT_EQ(st, 200);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, bad{0}, wrong{0};
  std::vector<std::thread> load;
  for (int c = 0; c < 2; ++c)
    load.emplace_back([&, c] {
      for (int i = 0; !stop && i < 200; ++i) {
        int s = 0;
        const json r = post(rp, "/v1/chat/completions", conversation(1, 2), &s);
        (s == 200 ? ok : bad)++;
        if (s == 200 && text(r) != text(reference)) ++wrong;
        post(rp, "/v1/chat/completions", conversation(10 + c * 100 + i, 1), &s);
        (s == 200 ? ok : bad)++;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const bool took_over = cluster.kill_and_wait_failover(cluster.masters()[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_TRUE(took_over);
  EXPECT_EQ(bad.load(), 0) << ok.load() << " answered";
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(ok.load(), 4);
  for (const Node* n : {&a, &b})
    EXPECT_EQ(metric(n->server->port(), "kamera_tier_discarded_total{tier=\"redis\"}"), 0);

  // 4. A backend gone: marked down, the next requests go to the other.
  a.server->stop();
  std::string where;
  for (int i = 0; i < 3; ++i) {
    post(rp, "/v1/chat/completions", conversation(2, 1), &st, &where);
    EXPECT_EQ(st, 200);
    EXPECT_EQ(where, b.url());
  }
  (*router)->stop();
}

// A backend killed (SIGKILL) while it streams through the router: the client's stream ends with
// the router's error event (no [DONE]), the backend is marked down, and the next requests go to
// the other backend. No Redis needed.
TEST(RouteFaults, ABackendKilledMidStreamEndsTheStreamWithAnErrorEvent) {
  const std::string bin = std::string(KAMERA_BINARY_DIR) + "/bin/kamera";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " is not built";
  // wide enough that 900 tokens take a while to decode
  const std::string path = tiny::model_path("qwen2", DType::F32, "dim=256,layers=4,ffn=512");
  std::shared_ptr<const Model> model = tiny::load(path);
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    ::close(fd);
  }
  std::vector<std::string> args_s = {bin,  "serve", "-m", path, "--port", std::to_string(port),
                                     "-t", "1"};
  std::vector<char*> args;
  for (auto& a : args_s) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execv(bin.c_str(), args.data());
    ::_exit(127);
  }
  Server other(model, [] {
    ServerOptions o;
    o.port = 0;
    o.threads = 1;
    return o;
  }());
  ASSERT_TRUE(other.start().ok());
  RouterOptions ro;
  ro.backends = {fmt::format("http://127.0.0.1:{}", port),
                 fmt::format("http://127.0.0.1:{}", other.port())};
  ro.policy = "round-robin";  // the first request goes to the first backend
  ro.health_ms = 100000;      // only the failure marks it down
  auto router = Router::create(model, ro);
  ASSERT_TRUE(router.ok()) << router.message();
  httplib::Client child("127.0.0.1", port);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    auto h = child.Get("/health");
    up = h && h->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << "kamera serve did not start";
  ASSERT_TRUE((*router)->start().ok());
  // every control token (the end of text among them) biased away: the stream runs its course
  json bias = json::object();
  const auto& types = model->tokenizer->vocab().types;
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i] == TokenType::Control) bias[std::to_string(i)] = -100;
  const json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 900}, {"stream", true}, {"logit_bias", bias}};
  httplib::Client c("127.0.0.1", (*router)->port());
  c.set_read_timeout(60, 0);
  std::string got;
  bool killed = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.headers.emplace("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    got.append(d, n);
    if (!killed && got.find("data: ") != std::string::npos) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(killed);
  EXPECT_NE(got.find("backend_failed"), std::string::npos) << got.substr(0, 400);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos) << "the stream ended as if complete";
  const json state = (*router)->state();
  EXPECT_FALSE(state["backends"][0]["up"].get<bool>()) << state.dump();
  EXPECT_EQ(state["midstream_failures"].get<int>(), 1);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("x-kamera-backend"), ro.backends[1]);
  }
  (*router)->stop();
}
