// Position-free segment reuse through the OpenAI routes (cache/segment_index.h in the scheduler):
// past the exact prefix, every message the server has computed before is served from its KV at
// its new position (a sliding window's survivors, which are no longer a prefix), the usage says
// which segments and from what, and segments served from the very context they were computed in
// give what a cold run gives.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/prompt_plan.h"
#include "support/temp_path.h"
#include "support/test_server.h"
#include "support/tiny_models.h"

using json = nlohmann::json;

namespace {

int cached(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

const std::vector<std::string> kObservations = {
    "The red door of the old house was open and a cat sat on the step in the sun.",
    "A boy ran down the hill with a blue kite that pulled hard on its long string.",
    "Two birds built a nest in the tall tree by the river where the water is slow.",
    "The baker put warm bread in the window and the street smelled of it all day.",
    "Rain fell on the tin roof of the barn and the horses listened to the sound.",
    "At night the lighthouse turned its lamp and the ships found their way home.",
};

// Turn t of a sliding window of 4 observations: a system message, observations t..t+3, a question.
json window_turn(int t, const char* reuse = nullptr) {
  json msgs = json::array({{{"role", "system"}, {"content", "You describe what you see."}}});
  for (int i = t; i < t + 4; ++i)
    msgs.push_back({{"role", "user"}, {"content", kObservations[size_t(i)]}});
  msgs.push_back({{"role", "user"}, {"content", "What changed?"}});
  json body = {{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}};
  if (reuse) body["reuse"] = reuse;
  return body;
}

// Tokens of the segments served with `source`.
int served(const json& r, const std::string& source) {
  int n = 0;
  for (const json& s : r["usage"]["kamera"]["segments"])
    if (s["source"] == source) n += s["tokens"].get<int>();
  return n;
}

// A counter of the server's /metrics (-1 when absent).
double metric(tiny::TestServer& s, const std::string& name) {
  const std::string body = s.client->Get("/metrics")->body;
  const size_t at = body.find("\n" + name + " ");  // a sample line, not its # HELP
  return at == std::string::npos ? -1.0 : std::stod(body.substr(at + name.size() + 2));
}

}  // namespace

TEST(ServerSegments, ASlidingWindowsSurvivorsAreReusedThoughTheyAreNoLongerAPrefix) {
  tiny::TestServer s;
  int st = 0;
  const json t0 = s.post("/v1/chat/completions", window_turn(0), &st);
  ASSERT_EQ(st, 200) << t0.dump();
  const json t1 = s.post("/v1/chat/completions", window_turn(1), &st);
  ASSERT_EQ(st, 200) << t1.dump();
  // The first observation left: the prefix ends with the system message; the three survivors
  // come from the context they were computed in (nearest: it shared the system message).
  const int nearest = served(t1, "context-nearest");
  EXPECT_GT(nearest, 30) << t1["usage"].dump();
  EXPECT_EQ(cached(t1), served(t1, "prefix") + nearest + 1);  // + the anchor
  EXPECT_EQ(t1["usage"]["kamera"]["recomputed_tokens"].get<int>(),
            t1["usage"]["prompt_tokens"].get<int>() - cached(t1));
  // The same turns on a server of prefix-only reuse (vLLM's): the survivors are recomputed.
  kamera::ServerOptions o;
  o.reuse = kamera::ReusePolicy::Prefix;
  tiny::TestServer prefix_only(o);
  prefix_only.post("/v1/chat/completions", window_turn(0), &st);
  const json p1 = prefix_only.post("/v1/chat/completions", window_turn(1), &st);
  ASSERT_EQ(st, 200) << p1.dump();
  EXPECT_EQ(p1["usage"]["kamera"]["policy"], "prefix");
  EXPECT_EQ(served(p1, "context-nearest"), 0);
  EXPECT_EQ(cached(p1), served(p1, "prefix") + 1);        // the prefix only: the system message
  EXPECT_LE(served(t1, "prefix"), served(p1, "prefix"));  // cut back to a served segment's start
  EXPECT_LT(cached(p1) + nearest / 2, cached(t1));
  EXPECT_EQ(p1["usage"]["prompt_tokens"], t1["usage"]["prompt_tokens"]);
  // keep (llama.cpp's --cache-reuse) relocates the latest KV of each survivor as it is.
  const json k2 = s.post("/v1/chat/completions", window_turn(2, "keep"), &st);
  ASSERT_EQ(st, 200) << k2.dump();
  EXPECT_GT(served(k2, "keep"), 30) << k2["usage"].dump();
  auto m = s.client->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kamera_segments_total{source=\"context_nearest\"}"), std::string::npos);
}

// With no prefix index, a repeated prompt's messages are all served from the segment index, each
// behind the very antecedents it was computed behind: its rows are the cold run's, so is the
// output.
TEST(ServerSegments, SegmentsServedBehindTheirOwnAntecedentsSayWhatAColdRunSays) {
  kamera::ServerOptions o;
  o.prefix_cache_tokens = 0;
  tiny::TestServer warm(o);
  kamera::ServerOptions off;
  off.prefix_cache_tokens = 0;
  off.segment_cache_bytes = 0;
  tiny::TestServer cold(off);
  int st = 0;
  const json body = window_turn(0);
  const json ref = cold.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << ref.dump();
  EXPECT_EQ(cached(cold.post("/v1/chat/completions", body, &st)), 0);
  warm.post("/v1/chat/completions", body, &st);
  const json again = warm.post("/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_GT(served(again, "context-exact"), 40) << again["usage"].dump();
  EXPECT_EQ(served(again, "context-nearest"), 0);
  EXPECT_EQ(again["choices"][0]["message"]["content"], ref["choices"][0]["message"]["content"]);
  EXPECT_EQ(again["choices"][0]["message"]["content"],
            warm.post("/v1/chat/completions",
                      window_turn(0, "reprefill"))["choices"][0]["message"]["content"]);
}

// The prefix index holds only rows a cold run computes: after a slide whose survivors came from
// another context, the same prompt under prefix-only reuse (whose every reused row must be
// exact) reuses none of the survivors' rows (only what an earlier cold run shares with it), and
// answers as a re-prefill does (before the fix: the whole prompt, 0.23 off in log-probability).
TEST(ServerSegments, APrefixNeverHoldsRowsServedFromAnotherContext) {
  tiny::TestServer s;
  int st = 0;
  json t0 = window_turn(0), t1 = window_turn(1);
  t1["logprobs"] = true;
  s.post("/v1/chat/completions", t0, &st);
  const json slid = s.post("/v1/chat/completions", t1, &st);
  ASSERT_EQ(st, 200) << slid.dump();
  int last_near = -1;  // where the last survivor starts
  for (const json& seg : slid["usage"]["kamera"]["segments"])
    if (seg["source"] == "context-nearest") last_near = seg["position"];
  ASSERT_GT(last_near, 0) << slid["usage"].dump();
  json again = t1, ref = t1;
  again["reuse"] = "prefix";
  ref["reuse"] = "reprefill";
  const json p = s.post("/v1/chat/completions", again, &st);
  ASSERT_EQ(st, 200) << p.dump();
  EXPECT_LT(served(p, "prefix") + 1, last_near) << p["usage"].dump();  // + the anchor
  const json r = s.post("/v1/chat/completions", ref, &st);
  ASSERT_EQ(st, 200) << r.dump();
  auto logprob = [](const json& j) {
    return j["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>();
  };
  EXPECT_NEAR(logprob(p), logprob(r), 1e-5);
  EXPECT_EQ(p["choices"][0]["message"]["content"], r["choices"][0]["message"]["content"]);
}

// A budget too small for a window's segments evicts them; requests never fail for it.
TEST(ServerSegments, ATinySegmentBudgetEvictsAndNeverFailsARequest) {
  kamera::ServerOptions o;
  o.segment_cache_bytes = 64 << 10;
  tiny::TestServer s(o);
  int st = 0;
  for (int t = 0; t < 3; ++t) {
    const json r = s.post("/v1/chat/completions", window_turn(t), &st);
    ASSERT_EQ(st, 200) << r.dump();
  }
}

// The segments' KV lives in the KV pool (cache/segment_index.h), not in the memory tier: the
// store keeps all of --store-mb whatever --segment-cache-mb says, and the segments' share of the
// pool is at most a quarter of it (before: carved out of --store-mb, a quarter by default, and a
// segment budget of all of it refused at start).
TEST(ServerSegments, TheSegmentsLiveInTheKvPoolNotInTheStore) {
  auto budget = [](tiny::TestServer& s) {
    const std::string body = s.client->Get("/metrics")->body;
    const std::string name = "\nkamera_store_budget_bytes ";
    const size_t at = body.find(name);
    return at == std::string::npos ? -1.0 : std::stod(body.substr(at + name.size()));
  };
  kamera::ServerOptions o;
  o.store_bytes = size_t(64) << 20;
  tiny::TestServer by_default(o);
  EXPECT_EQ(budget(by_default), double(64 << 20));
  o.segment_cache_bytes = 64 << 20;
  tiny::TestServer all(o);
  EXPECT_EQ(budget(all), double(64 << 20));
  int code = 0;
  all.post("/v1/chat/completions", window_turn(0), &code);  // the pool's pages noted
  ASSERT_EQ(code, 200);
  const json st = all.get("/v1/stats", &code);
  ASSERT_EQ(code, 200) << st.dump();
  EXPECT_GT(st["segment_cache"]["occurrences"].get<int>(), 3) << st.dump();
  const double pool =
      st["kv_pool"]["pages"].get<double>() * st["kv_pool"]["page_bytes"].get<double>();
  EXPECT_GT(st["segment_cache"]["budget_bytes"].get<double>(), 0) << st.dump();
  EXPECT_LE(st["segment_cache"]["budget_bytes"].get<double>(), pool / 4) << st.dump();
}

// The cut: contiguous segments covering the prompt, each ending after a line's last token (a
// chat turn's end), none shorter than the minimum but the last.
TEST(PromptSegments, CutsAfterLineEndsAndKeepsShortLinesWithTheNext) {
  const auto model = tiny::load(tiny::model_path("qwen2"));
  ASSERT_TRUE(model && model->tokenizer);
  const kamera::Tokenizer& tok = *model->tokenizer;
  const std::string text =
      "a first line that is long enough to stand alone\nshort\nand a third line after the short "
      "one, long as well\ntail";
  const std::vector<int32_t> ids = tok.encode_raw(text);
  const auto segs = kamera::cut_segments(tok, ids, 8);
  ASSERT_EQ(segs.size(), 3u);
  int at = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i].begin, at);
    at = segs[i].end;
    if (i + 1 < segs.size()) {
      EXPECT_GE(segs[i].size(), 8);
      EXPECT_EQ(tok.piece(ids[size_t(segs[i].end - 1)]).back(), '\n');
    }
  }
  EXPECT_EQ(at, int(ids.size()));
  // "short\n" joined the line after it.
  std::vector<int32_t> second(ids.begin() + segs[1].begin, ids.begin() + segs[1].end);
  EXPECT_EQ(tok.decode_all(second).substr(0, 6), "short\n");
}

// Off the request path: once idle, the server forms the canonical of each long segment and the
// contexts it was seen in keep a low-rank patch instead of their rows; a later slide serves the
// survivors as canonical + patch (patch-nearest), and says so in /metrics.
TEST(ServerSegments, IdleTimeFormsCanonicalsAndLongSegmentsKeepPatches) {
  kamera::ServerOptions o;
  o.segment_compact_tokens = 16;
  o.segment_patch_rank = 4;  // small enough to be smaller than the tiny model's rows
  tiny::TestServer s(o);
  int st = 0;
  const json t0 = s.post("/v1/chat/completions", window_turn(0), &st);
  ASSERT_EQ(st, 200) << t0.dump();
  EXPECT_GT(t0["usage"]["kamera"]["background"]["canonicals_queued"].get<int>(), 3);
  auto counter = [&](const std::string& name) { return metric(s, name); };
  for (int i = 0; i < 100 && counter("kamera_background_patches_total") < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the engine is idle now
  EXPECT_GE(counter("kamera_background_canonicals_total"), 4);
  EXPECT_GE(counter("kamera_background_patches_total"), 4);
  const json t1 = s.post("/v1/chat/completions", window_turn(1), &st);
  ASSERT_EQ(st, 200) << t1.dump();
  EXPECT_GT(served(t1, "patch-nearest"), 30) << t1["usage"].dump();
  for (const json& seg : t1["usage"]["kamera"]["segments"])  // only short ones keep their rows
    if (seg["source"] == "context-nearest") {
      EXPECT_LT(seg["tokens"].get<int>(), 16);
    }
}

// Under steady load the engine is never idle for 0.3 s, yet the canonicals of long segments are
// formed (and so reach the shared tiers): while generations decode and nothing is being admitted,
// the queued canonical's forward runs, waiting for any admission that arrives. With
// --segment-compact-when idle, the same load leaves them unformed.
TEST(ServerSegments, CanonicalsAreFormedUnderSteadyLoad) {
  for (const bool while_decoding : {true, false}) {
    SCOPED_TRACE(while_decoding ? "decoding" : "idle");
    kamera::ServerOptions o;
    o.segment_compact_tokens = 16;
    o.segment_patch_rank = 4;
    o.segment_compact_while_decoding = while_decoding;
    tiny::TestServer s(o);
    std::atomic<bool> stop{false};
    std::atomic<int> done{0};
    auto load = [&](int k) {  // short completions back to back: something always decodes
      httplib::Client c("127.0.0.1", s.server->port());
      c.set_read_timeout(60, 0);
      const json body = {{"prompt", "Once upon a time " + std::to_string(k)},
                         {"max_tokens", 24},
                         {"temperature", 0}};
      while (!stop) {
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200);
        ++done;
      }
    };
    std::thread l0(load, 0), l1(load, 1);
    int st = 0;
    const json t0 = s.post("/v1/chat/completions", window_turn(0), &st);
    EXPECT_EQ(st, 200) << t0.dump();
    EXPECT_GT(t0["usage"]["kamera"]["background"]["canonicals_queued"].get<int>(), 3);
    auto counter = [&](const std::string& name) { return metric(s, name); };
    const int before = done;
    const auto t_start = std::chrono::steady_clock::now();
    // formed while decoding: well within 10 s; idle: watched for 1 s of load
    const auto limit = std::chrono::milliseconds(while_decoding ? 10000 : 1000);
    while (counter("kamera_background_canonicals_total") < 4 &&
           std::chrono::steady_clock::now() - t_start < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double formed = counter("kamera_background_canonicals_total");
    const int during = done - before;
    stop = true;
    l0.join();
    l1.join();
    EXPECT_GT(during, 5) << "the load did not keep the engine busy";
    if (while_decoding) {
      EXPECT_GE(formed, 4);
    } else {
      EXPECT_EQ(formed, 0);
    }
  }
}

// A disk tier keeps no patches' contexts: after a restart on the same --store-dir, a segment the
// memory no longer holds is asked for with the patch of its own context (store-patch), and the
// answer is the one the first run gave.
TEST(ServerSegments, ARestartServesSegmentsFromTheDiskTier) {
  const std::string dir = unique_temp("segments-disk");
  std::filesystem::remove_all(dir);
  kamera::ServerOptions o;
  o.store_dir = dir;
  o.segment_compact_tokens = 16;
  o.segment_patch_rank = 4096;  // capped at full rank: the patch restores the rows
  o.store_fetch = "always";     // the tiny model recomputes faster than any fetch
  json first;
  {
    tiny::TestServer s(o);
    int st = 0;
    first = s.post("/v1/chat/completions", window_turn(0), &st);
    ASSERT_EQ(st, 200) << first.dump();
    for (int i = 0; i < 100 && metric(s, "kamera_background_canonicals_total") < 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // idle: stored to disk
    ASSERT_GE(metric(s, "kamera_background_canonicals_total"), 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last one's patches
  }
  tiny::TestServer s(o);
  int st = 0;
  const json again = s.post("/v1/chat/completions", window_turn(0), &st);
  ASSERT_EQ(st, 200) << again.dump();
  EXPECT_GT(served(again, "store-patch"), 40) << again["usage"].dump();
  EXPECT_EQ(again["choices"][0]["message"]["content"], first["choices"][0]["message"]["content"]);
  std::filesystem::remove_all(dir);
}
