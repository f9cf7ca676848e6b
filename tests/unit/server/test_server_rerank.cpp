// POST /v1/rerank (and /rerank, /v1/reranking, /reranking) on a tiny Qwen3-Reranker written as
// llama.cpp's converter writes one (make-model --reranker). The reference for every score: a
// plain forward of the whole prompt through the engine (its own pool, every vocabulary logit of
// the LM head), softmax over the logits of "yes" and "no" (Qwen3-Reranker's card), p("yes");
// the server's path shares the prompts' prefix by a fork and reads the file's cls.output head.
// The forward tokens the shared prefix saves are counted against N full prompts; ordering,
// top_n, both request shapes and the refusals (by name) are checked. And llama.cpp's own rank
// pooling of the same files (tests/data/rerank): the scores it computed are committed.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "model/rerank.h"
#include "support/test_server.h"
#include "synthetic/synthetic_model.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kDocs = {
    "The cat sat on the mat and looked at the bird.",
    "Paris is the capital of France.",
    "A big dog ran down the road to the park.",
    "She had a little house by the sea.",
    "He did not know the way back home.",
    "The best time to plant a tree was long ago, the next best is now."};
const std::string kQuery = "Where did the dog go?";

std::string reranker_path(bool tied = true) {
  SyntheticSpec spec;
  spec.cfg = *synthetic_preset(Arch::Qwen3, "tiny");
  spec.cfg.tied_output = tied;
  spec.seed = 11;
  spec.reranker = true;
  const std::string path = testing::TempDir() + "kamera-reranker-server.gguf";
  auto st = write_synthetic_gguf(spec, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

std::string prompt_of(const std::string& tmpl, const std::string& doc) {
  std::string t = tmpl;
  t.replace(t.find("{query}"), 7, kQuery);
  t.replace(t.find("{document}"), 10, doc);
  return t;
}

// p("yes") of one prompt from a whole forward: softmax over the LM head's "yes" and "no" logits.
double reference_score(const Model& m, const std::vector<int32_t>& ids) {
  const auto& pieces = m.tokenizer->vocab().pieces;
  const auto yes = std::find(pieces.begin(), pieces.end(), "yes") - pieces.begin();
  const auto no = std::find(pieces.begin(), pieces.end(), "no") - pieces.begin();
  auto pool = tiny::pool_for(m, int(ids.size()) + 32);
  Engine engine(m, 1);
  const SeqId s = pool->create_sequence();
  const auto pos = tiny::linear_positions(int(ids.size()));
  auto logits = engine.forward(*pool, s, ForwardInput::from_tokens(ids, pos));
  EXPECT_TRUE(logits.ok()) << logits.message();
  if (!logits.ok()) return NAN;
  const double y = (*logits)[size_t(yes)], n = (*logits)[size_t(no)];
  return 1.0 / (1.0 + std::exp(n - y));
}

struct Reranker : tiny::TestServer {
  Reranker() : TestServer({}, reranker_path()) {}
  std::vector<std::vector<int32_t>> prompts() const {
    std::vector<std::vector<int32_t>> out;
    auto info = read_rerank_file(model->source);
    EXPECT_TRUE(info.ok() && info->head) << info.message();
    for (const std::string& d : kDocs)
      out.push_back(model->tokenizer->encode(prompt_of(info->head->prompt, d), false));
    return out;
  }
};

json body(json extra = json::object()) {
  json b = {{"model", "any"}, {"query", kQuery}, {"documents", kDocs}};
  b.update(extra);
  return b;
}

void expect_refused(tiny::TestServer& s, const json& b, const std::string& param,
                    const std::string& code = "") {
  int st = 0;
  const json r = s.post("/v1/rerank", b, &st);
  EXPECT_EQ(st, 400) << b.dump() << " -> " << r.dump();
  EXPECT_EQ(r["error"]["param"], param) << r.dump();
  if (!code.empty()) {
    EXPECT_EQ(r["error"]["code"], code) << r.dump();
  }
}

}  // namespace

TEST(ServerRerank, ScoresAreAFullForwardsPYesAndTheQueryIsForwardedOnce) {
  Reranker s;
  int st = 0;
  const json r = s.post("/v1/rerank", body(), &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["object"], "list");
  const auto prompts = s.prompts();
  ASSERT_EQ(r["results"].size(), kDocs.size());
  std::vector<bool> seen(kDocs.size());
  double prev = 2, worst = 0;
  for (const json& e : r["results"]) {
    const size_t i = e["index"].get<size_t>();
    ASSERT_LT(i, kDocs.size());
    EXPECT_FALSE(seen[i]);
    seen[i] = true;
    const double got = e["relevance_score"].get<double>();
    const double want = reference_score(*s.model, prompts[i]);
    EXPECT_NEAR(got, want, 1e-5) << "document " << i;
    worst = std::max(worst, std::fabs(got - want));
    EXPECT_LE(got, prev) << "results are best first";
    prev = got;
  }
  // usage: every prompt's tokens; the shared prefix is served without a forward but once
  int64_t total = 0;
  size_t common = prompts[0].size();
  for (const auto& p : prompts) {
    total += int64_t(p.size());
    common = std::min<size_t>(
        common,
        std::mismatch(p.begin(), p.begin() + std::min(common, p.size()), prompts[0].begin()).first -
            p.begin());
  }
  ASSERT_GT(common, 40u) << "the instruction and the query are shared";
  EXPECT_EQ(r["usage"]["prompt_tokens"], total);
  const int64_t cached = r["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(cached, int64_t(kDocs.size() - 1) * int64_t(common));
  std::printf(
      "rerank of %zu documents: %lld tokens forwarded, %lld as %zu full prompts; scores within "
      "%.1e of the full forwards\n",
      kDocs.size(), (long long)(total - cached), (long long)total, kDocs.size(), worst);
}

TEST(ServerRerank, TopNReturnTextAndTheOtherPathsAndShapes) {
  Reranker s;
  int st = 0;
  const json all = s.post("/v1/rerank", body(), &st);
  ASSERT_EQ(st, 200) << all.dump();
  const json top = s.post("/v1/rerank", body({{"top_n", 2}, {"return_documents", true}}), &st);
  ASSERT_EQ(st, 200) << top.dump();
  ASSERT_EQ(top["results"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(top["results"][k]["index"], all["results"][k]["index"]);
    EXPECT_EQ(top["results"][k]["relevance_score"], all["results"][k]["relevance_score"]);
    EXPECT_EQ(top["results"][k]["document"]["text"],
              kDocs[top["results"][k]["index"].get<size_t>()]);
  }
  EXPECT_EQ(s.post("/v1/rerank", body({{"top_n", 99}}), &st)["results"].size(), kDocs.size());
  for (const char* path : {"/rerank", "/v1/reranking", "/reranking"})
    EXPECT_EQ(s.post(path, body(), &st)["results"], all["results"]) << path;
  // TEI's shape: "texts" in, a bare array of {index, score[, text]} out
  const json tei = s.post(
      "/rerank", {{"query", kQuery}, {"texts", kDocs}, {"return_text", true}, {"top_n", 3}}, &st);
  ASSERT_EQ(st, 200) << tei.dump();
  ASSERT_TRUE(tei.is_array()) << tei.dump();
  ASSERT_EQ(tei.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(tei[k]["index"], all["results"][k]["index"]);
    EXPECT_EQ(tei[k]["score"], all["results"][k]["relevance_score"]);
    EXPECT_EQ(tei[k]["text"], kDocs[tei[k]["index"].get<size_t>()]);
  }
  // one document: nothing to share, the same score
  const json one = s.post("/v1/rerank", body({{"documents", {kDocs[2]}}}), &st);
  ASSERT_EQ(st, 200) << one.dump();
  for (const json& e : all["results"]) {
    if (e["index"] == 2) {
      EXPECT_NEAR(one["results"][0]["relevance_score"].get<double>(),
                  e["relevance_score"].get<double>(), 1e-6);
    }
  }
}

TEST(ServerRerank, RefusalsNameTheirField) {
  Reranker s;
  expect_refused(s, {{"documents", kDocs}}, "query");
  expect_refused(s, body({{"query", 3}}), "query");
  expect_refused(s, {{"query", kQuery}}, "documents");
  expect_refused(s, body({{"documents", json::array()}}), "documents");
  // the document at fault by its index, as OpenAI names an array element (documents[i])
  expect_refused(s, body({{"documents", {"a", 2}}}), "documents[1]");
  expect_refused(s, {{"query", kQuery}, {"texts", {"a", "b", json::object()}}}, "texts[2]");
  expect_refused(s, body({{"texts", kDocs}}), "texts");
  expect_refused(s, body({{"top_n", 0}}), "top_n");
  expect_refused(s, body({{"top_n", 1.5}}), "top_n");
  expect_refused(s, body({{"return_documents", "yes"}}), "return_documents");
  expect_refused(s, body({{"instruction", "x"}}), "instruction", "unknown_field");
  expect_refused(s, body({{"documents", {"a", std::string(5000, 'a')}}}), "documents[1]",
                 "context_length_exceeded");
}

TEST(ServerRerank, AModelThatIsNoRerankerIsRefusedByName) {
  tiny::TestServer plain({}, tiny::model_path("qwen3"));
  int st = 0;
  const json r = plain.post("/v1/rerank", body(), &st);
  EXPECT_EQ(st, 400) << r.dump();
  EXPECT_EQ(r["error"]["code"], "model_not_reranker") << r.dump();
  EXPECT_NE(r["error"]["message"].get<std::string>().find("pooling type is 0 (none)"),
            std::string::npos)
      << r.dump();
}

// llama.cpp (d32676d, its rank pooling: tests/data/rerank/README.md) scored the same documents on
// make-model's reranker files, tied and untied; the files are regenerated here and must hash as
// they did.
TEST(ServerRerank, ScoresMatchLlamaCppsRankPooling) {
  std::ifstream mf(std::string(KAMERA_SOURCE_DIR) + "/tests/data/rerank/llama_cpp_scores.json");
  ASSERT_TRUE(mf);
  const json fixture = json::parse(mf);
  ASSERT_EQ(fixture["cases"].size(), 2u);
  for (const json& c : fixture["cases"]) {
    SCOPED_TRACE(c.dump());
    // what `kamera make-model --arch qwen3 --reranker --seed S --dims D` writes
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(Arch::Qwen3, "tiny");
    ASSERT_TRUE(apply_dims(spec.cfg, c["dims"].get<std::string>()).ok());
    spec.seed = c["seed"];
    spec.reranker = true;
    spec.name = fmt::format("kamera-synthetic-qwen3-tiny-seed{}", spec.seed);
    const std::string path = testing::TempDir() + "kamera-reranker-llama-cpp.gguf";
    ASSERT_TRUE(write_synthetic_gguf(spec, path).ok());
    std::ifstream gf(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(gf)), {});
    ASSERT_EQ(fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size())),
              c["xxh3_64"].get<std::string>())
        << "make-model writes other bytes than the fixture was made from";
    tiny::TestServer s({}, path);
    int st = 0;
    const json r = s.post("/v1/rerank",
                          {{"query", fixture["query"]}, {"documents", fixture["documents"]}}, &st);
    ASSERT_EQ(st, 200) << r.dump();
    int64_t tokens = 0;
    for (const json& n : c["n_tokens"]) tokens += n.get<int64_t>();
    EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);
    for (const json& e : r["results"]) {
      const size_t i = e["index"];
      EXPECT_NEAR(e["relevance_score"].get<double>(), c["scores"][i].get<double>(), 1e-5) << i;
    }
  }
}
