// The HTTP server end to end on a synthetic model: OpenAI-compatible completions (plain, chat,
// streamed), chunk and window APIs, concurrency, back-pressure, bad input, store tiers.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/server.h"
#include "support/temp_path.h"
#include "support/test_server.h"
#include "support/tiny_models.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

struct Running : tiny::TestServer {
  explicit Running(ServerOptions o = {}, const std::string& arch = "qwen2")
      : TestServer(o, tiny::model_path(arch)) {}
};

bool redis_up() {
  timeval tv{0, 200000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", 6379, tv);
  bool ok = c && !c->err;
  if (ok) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return ok;
}

// Tokens of a completion's query: the prompt minus the reused chunks and the BOS anchor.
int query_tokens(const json& c) {
  return c["usage"]["prompt_tokens"].get<int>() - c["usage"]["kamera"]["reused_tokens"].get<int>() -
         1;
}

std::string completion_text(const json& j) {
  return j["choices"][0]["text"].get<std::string>();
}

// Parses an SSE body into the concatenated text and the final usage.
std::pair<std::string, json> parse_sse(const std::string& body) {
  std::string text;
  json usage;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    json j = json::parse(payload);
    text += j["choices"][0].value("text", "");
    if (j.contains("usage")) usage = j["usage"];
  }
  return {text, usage};
}

}  // namespace

TEST(Server, CompletionsChatAndStreamingAgree) {
  Running s;
  int st = 0;
  auto h = s.get("/health", &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(h["status"], "ok");
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 12}};
  auto a = s.post("/v1/completions", req, &st);
  ASSERT_EQ(st, 200) << a.dump();
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["usage"]["completion_tokens"], 12);
  json sreq = req;
  sreq["stream"] = true;
  auto r = s.client->Post("/v1/completions", sreq.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  auto [text, usage] = parse_sse(r->body);
  EXPECT_EQ(text, completion_text(a));  // greedy: the stream says the same thing
  EXPECT_EQ(usage["completion_tokens"], 12);
  auto c = s.post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 5}}, &st);
  ASSERT_EQ(st, 200) << c.dump();
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["choices"][0]["message"]["role"], "assistant");
}

// Prompts referencing stored chunks: the first request forms the patch, the second is served
// from the store (only the query is recomputed); the usage says which segment came from where.
// On GQA with biases (qwen2) and with per-head q/k norms (qwen3, qwen3moe, qwen3vl).
TEST(Server, ChunkReferencesAreReusedAndReportedHonestly) {
  for (const std::string arch :
       {"qwen2", "qwen3", "qwen3moe", "qwen3vl", "deepseek2:kimi-vl-tiny"}) {
    SCOPED_TRACE(arch);
    Running s({}, arch);
    int st = 0;
    auto up =
        s.post("/v1/chunks", {{"text", " The little dog found a red ball in the garden."}}, &st);
    ASSERT_EQ(st, 201) << up.dump();
    const std::string id = up["id"];
    EXPECT_TRUE(up["formed"].get<bool>());
    auto again =
        s.post("/v1/chunks", {{"text", " The little dog found a red ball in the garden."}}, &st);
    EXPECT_EQ(again["id"], id);  // content-addressed
    EXPECT_FALSE(again["formed"].get<bool>());
    const json req = {{"prompt",
                       {{{"type", "text"}, {"text", "Tom had a dog."}},
                        {{"type", "chunk"}, {"id", id}},
                        " Then"}},
                      {"max_tokens", 6}};
    auto first = s.post("/v1/completions", req, &st);
    ASSERT_EQ(st, 200) << first.dump();
    auto second = s.post("/v1/completions", req, &st);
    ASSERT_EQ(st, 200);
    const json& segs = second["usage"]["kamera"]["segments"];
    ASSERT_EQ(segs.size(), 2u);
    EXPECT_EQ(segs[0]["source"], "canonical");
    EXPECT_EQ(segs[1]["source"], "patch-hit");
    EXPECT_EQ(first["usage"]["kamera"]["segments"][1]["source"], "patch-formed");
    // forming the patch ran more forward tokens than the prompt holds: cached_tokens stays >= 0
    EXPECT_GT(first["usage"]["kamera"]["recomputed_tokens"].get<int>(),
              first["usage"]["prompt_tokens"].get<int>());
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(second["usage"]["kamera"]["recomputed_tokens"],
              query_tokens(second));  // " Then" only
    EXPECT_EQ(completion_text(first), completion_text(second));
    // re-prefill policy reports recomputation, never reuse
    json rp = req;
    rp["reuse"] = "reprefill";
    auto third = s.post("/v1/completions", rp, &st);
    EXPECT_EQ(third["usage"]["kamera"]["reused_tokens"], 0);
    EXPECT_EQ(third["usage"]["kamera"]["segments"][1]["source"], "reprefilled");
    // chunk metadata and deletion
    EXPECT_EQ(s.get("/v1/chunks/" + id, &st)["n_tokens"], up["n_tokens"]);
    EXPECT_EQ(st, 200);
    ASSERT_TRUE(s.client->Delete(("/v1/chunks/" + id).c_str()));
    s.get("/v1/chunks/" + id, &st);
    EXPECT_EQ(st, 404);
    auto metrics = s.client->Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("kamera_segments_total{source=\"patch_exact\"} 1"),
              std::string::npos)
        << metrics->body;
    EXPECT_NE(metrics->body.find("kamera_ttft_seconds_count"), std::string::npos);
  }
}

// Concurrent clients are decoded together (continuous batching) and each gets exactly what it
// gets alone.
TEST(Server, ConcurrentRequestsAreBatchedAndUnchanged) {
  Running s;
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat",   "Tom and Ben went",
                                            "A big red ball",   "In the garden", "She was happy"};
  // Long enough that six requests overlap even where the engine's workers spin between steps and
  // the machine is busy (at 48 tokens a request could end before the next one arrived).
  const int max_tokens = 192;
  std::vector<std::string> alone;
  for (const auto& p : prompts)
    alone.push_back(
        completion_text(s.post("/v1/completions", {{"prompt", p}, {"max_tokens", max_tokens}})));
  const auto field = [&](const std::string& name) {
    auto m = s.client->Get("/metrics");
    if (!m) return -1.0;
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
  };
  // Requests served one by one decode one row per step.
  EXPECT_EQ(field("kamera_decode_rows_total"), field("kamera_decode_steps_total"));
  // Concurrent requests: every answer is unchanged, and some steps decode several sequences at
  // once (more rows than steps). Whether the requests overlap in time is up to the OS scheduler
  // on a loaded CI machine, so the concurrent round is repeated (up to 5 times) until they do;
  // the outputs are checked on every round.
  bool batched = false;
  for (int round = 0; round < 5 && !batched; ++round) {
    std::vector<std::string> together(prompts.size());
    std::vector<std::thread> th;
    for (size_t i = 0; i < prompts.size(); ++i)
      th.emplace_back([&, i] {
        httplib::Client c("127.0.0.1", s.server->port());
        c.set_read_timeout(60, 0);
        json req = {{"prompt", prompts[i]}, {"max_tokens", max_tokens}, {"stream", i % 2 == 0}};
        auto r = c.Post("/v1/completions", req.dump(), "application/json");
        if (!r) return;
        together[i] = i % 2 == 0 ? parse_sse(r->body).first : completion_text(json::parse(r->body));
      });
    for (auto& t : th) t.join();
    EXPECT_EQ(together, alone) << "round " << round;
    batched = field("kamera_decode_rows_total") > field("kamera_decode_steps_total");
  }
  EXPECT_TRUE(batched) << "no decode step served two sequences in 5 concurrent rounds";
}

TEST(Server, BackPressureAnswers429WithRetryAfter) {
  ServerOptions o;
  o.max_queue = 1;
  o.max_active = 1;
  Running s(o);
  std::atomic<int> ok{0}, busy{0}, retry_after{0};
  std::vector<std::thread> th;
  for (int i = 0; i < 10; ++i)
    th.emplace_back([&] {
      httplib::Client c("127.0.0.1", s.server->port());
      c.set_read_timeout(60, 0);
      auto r =
          c.Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 40}}.dump(),
                 "application/json");
      if (!r) return;
      if (r->status == 200) ++ok;
      if (r->status == 429) {
        ++busy;
        retry_after += r->get_header_value("Retry-After") == "1";
      }
    });
  for (auto& t : th) t.join();
  EXPECT_GE(ok.load(), 1);
  EXPECT_GE(busy.load(), 1);
  EXPECT_EQ(retry_after.load(), busy.load());
}

TEST(Server, BadInputGetsA4xxJsonErrorAndStoresNothing) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  Running s(o);
  const int dim = s.model->cfg.dim, ctx = s.model->cfg.ctx_len;
  int st = 0;
  auto r = s.client->Post("/v1/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
  s.post("/v1/completions", {{"prompt", {{{"type", "chunk"}, {"id", std::string(32, 'a')}}, " q"}}},
         &st);
  EXPECT_EQ(st, 404);
  s.post("/v1/completions", {{"prompt", {{{"type", "chunk"}, {"id", "xyz"}}, " q"}}}, &st);
  EXPECT_EQ(st, 400);
  s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", ctx}}, &st);
  EXPECT_EQ(st, 400);  // prompt + max_tokens past the context
  s.post("/v1/completions", {{"prompt", "hi"}, {"temperature", "hot"}}, &st);
  EXPECT_EQ(st, 400);
  s.post("/v1/chunks", {{"embeddings", json::array({std::vector<float>(dim + 1, 0.f)})}}, &st);
  EXPECT_EQ(st, 400);  // wrong row width
  s.post("/v1/chunks",
         {{"embeddings", json::array({std::vector<float>(dim, 0.f)})},
          {"positions", json::array({json::array({ctx + 5, 0, 0})})}},
         &st);
  EXPECT_EQ(st, 400);  // past the context
  s.post("/v1/chunks", {{"tokens", {1, 2, s.model->cfg.n_vocab}}}, &st);
  EXPECT_EQ(st, 400);
  r = s.client->Post("/v1/chunks", std::string(8000, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  s.post("/v1/windows/w99/append", {{"text", "x"}}, &st);
  EXPECT_EQ(st, 404);
  auto m = s.client->Get("/metrics");
  EXPECT_NE(m->body.find("kamera_store_bytes{tier=\"memory\"} 0"), std::string::npos)
      << "nothing stored";
  // an embedding chunk with a 3-D grid is accepted
  auto ok = s.post(
      "/v1/chunks",
      {{"embeddings", json::array({std::vector<float>(dim, 0.1f), std::vector<float>(dim, 0.2f)})},
       {"positions", {{0, 0, 0}, {0, 0, 1}}}},
      &st);
  EXPECT_EQ(st, 201) << ok.dump();
}

TEST(Server, ApiKeyIsChecked) {
  ServerOptions o;
  o.api_key = "s3cret";
  Running s(o);
  int st = 0;
  s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}}, &st);
  EXPECT_EQ(st, 401);
  httplib::Headers h = {{"Authorization", "Bearer s3cret"}};
  auto r = s.client->Post("/v1/completions", h, json{{"prompt", "hi"}, {"max_tokens", 2}}.dump(),
                          "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  s.get("/health", &st);
  EXPECT_EQ(st, 200);  // health stays open for load balancers
}

TEST(Server, WindowsThroughHttp) {
  Running s;
  int st = 0;
  auto w = s.post("/v1/windows", {{"rank", 4}}, &st);
  ASSERT_EQ(st, 201);
  const std::string id = w["id"];
  std::vector<std::string> ids;
  for (const char* t : {" Lily had a cat.", " The cat was black.", " It liked milk."}) {
    auto r = s.post("/v1/windows/" + id + "/append", {{"text", t}}, &st);
    ASSERT_EQ(st, 200) << r.dump();
    ids.push_back(r["slots"].back()["id"]);
  }
  auto after_evict = s.post("/v1/windows/" + id + "/evict", {{"end", "front"}}, &st);
  ASSERT_EQ(after_evict["slots"].size(), 2u);
  EXPECT_EQ(after_evict["slots"][0]["position"], 1);  // survivors moved up
  auto recalled = s.post("/v1/windows/" + id + "/recall",
                         {{"chunk", ids[0]}, {"at", 0}, {"mode", "fresh"}}, &st);
  ASSERT_EQ(st, 200) << recalled.dump();
  EXPECT_EQ(recalled["slots"][0]["id"], ids[0]);
  auto reordered =
      s.post("/v1/windows/" + id + "/reorder", {{"order", {2, 0, 1}}, {"mode", "orbit"}}, &st);
  ASSERT_EQ(st, 200) << reordered.dump();
  EXPECT_TRUE(reordered["slots"][1]["orbit"].get<bool>());
  auto fork = s.post("/v1/windows/" + id + "/fork", json::object(), &st);
  EXPECT_EQ(st, 201);
  auto c = s.post("/v1/windows/" + id + "/completions", {{"prompt", " The cat"}, {"max_tokens", 5}},
                  &st);
  ASSERT_EQ(st, 200) << c.dump();
  EXPECT_EQ(c["usage"]["kamera"]["segments"].size(), 3u);
  EXPECT_EQ(c["usage"]["kamera"]["recomputed_tokens"], query_tokens(c));
  auto bad = s.post("/v1/windows/" + id + "/reorder", {{"order", {0, 0, 1}}}, &st);
  EXPECT_EQ(st, 400);
  ASSERT_TRUE(s.client->Delete(("/v1/windows/" + fork["id"].get<std::string>()).c_str()));
}

// The disk tier: a second server over the same directory serves the first one's chunks.
TEST(Server, StoreDirSurvivesRestart) {
  const std::string dir = unique_temp("kamera-serve-store-") + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ServerOptions o;
  o.store_dir = dir;
  std::string id;
  json req;
  std::string text1;
  {
    Running s(o);
    auto up = s.post("/v1/chunks", {{"text", " A bird sang in the tall tree."}});
    id = up["id"];
    req = {{"prompt",
            {{{"type", "text"}, {"text", "The sun was up."}},
             {{"type", "chunk"}, {"id", id}},
             " And"}},
           {"max_tokens", 5}};
    text1 = completion_text(s.post("/v1/completions", req));
  }
  Running s2(o);
  int st = 0;
  auto meta = s2.get("/v1/chunks/" + id, &st);
  EXPECT_EQ(st, 200) << meta.dump();
  auto again = s2.post("/v1/completions", req, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(completion_text(again), text1);
  EXPECT_EQ(again["usage"]["kamera"]["recomputed_tokens"],
            query_tokens(again));  // all else from disk
  std::filesystem::remove_all(dir);
}

// Redis down: requests still succeed from the local tiers, with an error metric.
TEST(Server, UnreachableRedisDegradesGracefully) {
  ServerOptions o;
  o.redis_url = "redis://127.0.0.1:1";
  o.store_key = "test store key, 32 bytes long...";
  Running s(o);
  int st = 0;
  auto up = s.post("/v1/chunks", {{"text", " Rain fell on the roof."}}, &st);
  EXPECT_EQ(st, 201);
  auto c =
      s.post("/v1/completions",
             {{"prompt", {{{"type", "chunk"}, {"id", up["id"]}}, " It"}}, {"max_tokens", 3}}, &st);
  EXPECT_EQ(st, 200) << c.dump();
  auto m = s.client->Get("/metrics");
  EXPECT_NE(m->body.find("kamera_tier_errors_total{tier=\"redis\"}"), std::string::npos);
  EXPECT_EQ(m->body.find("kamera_tier_errors_total{tier=\"redis\"} 0"), std::string::npos);
}

// Two servers sharing one Redis reuse each other's chunks (needs redis-server on 127.0.0.1:6379;
// .ci/run starts one).
TEST(Server, TwoServersShareChunksThroughRedis) {
  if (!redis_up())
    GTEST_SKIP() << "no Redis on 127.0.0.1:6379 (CI starts redis-server; locally: redis-server "
                    "--daemonize yes)";
  ServerOptions o;
  o.redis_url = "redis://127.0.0.1:6379/3";
  o.store_key = "test store key, 32 bytes long...";
  Running a(o), b(o);
  int st = 0;
  const std::string text = " A fox ran over the hill at " + std::to_string(::getpid()) + ".";
  auto up = a.post("/v1/chunks", {{"text", text}}, &st);
  ASSERT_EQ(st, 201);
  auto meta = b.get("/v1/chunks/" + up["id"].get<std::string>(), &st);
  EXPECT_EQ(st, 200) << meta.dump();
  const json req = {
      {"prompt",
       {{{"type", "text"}, {"text", "Look."}}, {{"type", "chunk"}, {"id", up["id"]}}, " Then"}},
      {"max_tokens", 4}};
  auto ra = a.post("/v1/completions", req);
  auto rb = b.post("/v1/completions", req, &st);  // the patch a formed is in Redis
  ASSERT_EQ(st, 200);
  EXPECT_EQ(rb["usage"]["kamera"]["segments"][1]["source"], "patch-hit");
  EXPECT_EQ(rb["usage"]["kamera"]["recomputed_tokens"], query_tokens(rb));
  EXPECT_EQ(completion_text(ra), completion_text(rb));
}
