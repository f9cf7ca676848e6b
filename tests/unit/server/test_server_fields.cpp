// The OpenAI request fields end to end on a synthetic model: stop strings (plain and streamed,
// cut exactly), n choices on forks of one prefill, batch prompts, logprobs in OpenAI's shapes,
// the default max_tokens (to the end of the context), stream_options.include_usage, embeddings,
// tool messages sent back, and refusals that name their field.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "media/data_url.h"
#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

struct Served : tiny::TestServer {
  explicit Served(ServerOptions o = {})
      : TestServer(o, tiny::model_path("qwen2", DType::F32, "ctx=160")) {}
  // The data chunks of an SSE stream ([DONE] not included).
  std::vector<json> stream(const std::string& path, json body) {
    body["stream"] = true;
    auto r = client->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<json> out;
    if (!r) return out;
    bool done = false;
    for (size_t at = 0; (at = r->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = r->body.find("\n\n", at);
      const std::string payload = r->body.substr(at + 6, end - at - 6);
      at = end;
      if (payload == "[DONE]") done = true;
      if (payload != "[DONE]") out.push_back(json::parse(payload));
    }
    EXPECT_TRUE(done) << "the stream did not end with [DONE]";
    return out;
  }
};

std::string text_of(const json& c, int i = 0) {
  const json& ch = c["choices"][i];
  return ch.contains("message") ? ch["message"]["content"].get<std::string>()
                                : ch["text"].get<std::string>();
}

// The concatenated text of a stream's chunks for choice `index`.
std::string streamed_text(const std::vector<json>& chunks, int index = 0) {
  std::string s;
  for (const json& c : chunks)
    for (const json& ch : c["choices"])
      if (ch["index"] == index)
        s += ch.contains("delta") ? ch["delta"].value("content", "") : ch.value("text", "");
  return s;
}

// Refusal checks: status 400 with this code and param.
json expect_refused(Served& s, const std::string& path, const json& body, const std::string& code,
                    const std::string& param) {
  int st = 0;
  json r = s.post(path, body, &st);
  EXPECT_EQ(st, 400) << body.dump() << " -> " << r.dump();
  EXPECT_EQ(r["error"]["code"], code) << r.dump();
  EXPECT_EQ(r["error"]["param"], param) << r.dump();
  EXPECT_EQ(r["error"]["type"], "invalid_request_error") << r.dump();
  return r;
}

const json kNoEnd = {{"1", -100}, {"2", -100}};  // the tiny vocabulary's BOS and EOS

}  // namespace

// A stop string that the greedy text holds: the completion is that text cut right before its
// first occurrence, in one body and in a stream, and no streamed piece holds a byte of it.
TEST(ServerFields, StopStringsCutExactlyBeforeTheStopPlainAndStreamed) {
  Served s;
  json req = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"logit_bias", kNoEnd}};
  const std::string full = text_of(s.post("/v1/completions", req));
  ASSERT_GE(full.size(), 12u) << full;
  const std::string stop = full.substr(6, 3);
  const std::string want = full.substr(0, full.find(stop));
  req["stop"] = json::array({"\x01never", stop});
  json plain = s.post("/v1/completions", req);
  EXPECT_EQ(text_of(plain), want);
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
  auto chunks = s.stream("/v1/completions", req);
  EXPECT_EQ(streamed_text(chunks), want);
  req["stop"] = stop;  // a string alone
  EXPECT_EQ(text_of(s.post("/v1/completions", req)), want);
  json chat = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
               {"max_tokens", 24},
               {"logit_bias", kNoEnd}};
  const std::string cfull = text_of(s.post("/v1/chat/completions", chat));
  ASSERT_GE(cfull.size(), 12u);
  chat["stop"] = cfull.substr(5, 4);
  const std::string cwant = cfull.substr(0, cfull.find(cfull.substr(5, 4)));
  EXPECT_EQ(text_of(s.post("/v1/chat/completions", chat)), cwant);
  EXPECT_EQ(streamed_text(s.stream("/v1/chat/completions", chat)), cwant);
}

// n choices: at temperature 0 every choice is the single completion; sampled, they are numbered
// 0..n-1 and the prompt is counted once.
TEST(ServerFields, NChoicesFromOnePrefill) {
  Served s;
  json req = {{"prompt", "The dog"}, {"max_tokens", 8}, {"logit_bias", kNoEnd}};
  json one = s.post("/v1/completions", req);
  req["n"] = 3;
  json three = s.post("/v1/completions", req);
  ASSERT_EQ(three["choices"].size(), 3u) << three.dump();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(three["choices"][i]["index"], i);
    EXPECT_EQ(text_of(three, i), text_of(one));
  }
  EXPECT_EQ(three["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
  EXPECT_EQ(three["usage"]["completion_tokens"], 3 * one["usage"]["completion_tokens"].get<int>());
  req["temperature"] = 1.5;
  req["seed"] = 5;
  json hot = s.post("/v1/completions", req);
  ASSERT_EQ(hot["choices"].size(), 3u);
  EXPECT_FALSE(text_of(hot, 0) == text_of(hot, 1) && text_of(hot, 1) == text_of(hot, 2))
      << "three sampled choices came out identical";
  auto chunks = s.stream("/v1/completions", req);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(streamed_text(chunks, i), text_of(hot, i)) << i;
}

// An array of strings (or of token arrays) is a batch: one choice per prompt, each the prompt's
// own completion; an array with part objects stays one prompt of parts.
TEST(ServerFields, BatchPromptsGiveOneChoiceEach) {
  Served s;
  const json base = {{"max_tokens", 6}, {"logit_bias", kNoEnd}};
  json a = base, b = base, batch = base;
  a["prompt"] = "Once upon";
  b["prompt"] = "The cat sat";
  batch["prompt"] = {"Once upon", "The cat sat"};
  json ra = s.post("/v1/completions", a), rb = s.post("/v1/completions", b);
  json rbatch = s.post("/v1/completions", batch);
  ASSERT_EQ(rbatch["choices"].size(), 2u) << rbatch.dump();
  EXPECT_EQ(text_of(rbatch, 0), text_of(ra));
  EXPECT_EQ(text_of(rbatch, 1), text_of(rb));
  EXPECT_EQ(rbatch["usage"]["prompt_tokens"],
            ra["usage"]["prompt_tokens"].get<int>() + rb["usage"]["prompt_tokens"].get<int>());
  batch["n"] = 2;
  json r4 = s.post("/v1/completions", batch);
  ASSERT_EQ(r4["choices"].size(), 4u);
  EXPECT_EQ(text_of(r4, 3), text_of(rb));  // prompt 1's second choice
  // token prompts: the ids /tokenize gives, alone and as a batch
  json ids = s.post("/tokenize", {{"content", "Once upon"}})["tokens"];
  json t = base;
  t["prompt"] = ids;
  EXPECT_EQ(text_of(s.post("/v1/completions", t)), text_of(ra));
  t["prompt"] = {ids, ids};
  json rt = s.post("/v1/completions", t);
  ASSERT_EQ(rt["choices"].size(), 2u);
  EXPECT_EQ(text_of(rt, 1), text_of(ra));
  json parts = base;  // strings with a part object: one prompt of parts
  parts["prompt"] = {"Once", {{"type", "text"}, {"text", " upon"}}};
  EXPECT_EQ(s.post("/v1/completions", parts)["choices"].size(), 1u);
}

// logprobs: the chosen token's log-probability equals the most likely one's at temperature 0,
// every value is <= 0, and the shapes are OpenAI's (chat: content[]; completions: tokens,
// token_logprobs, top_logprobs, text_offset).
TEST(ServerFields, LogprobsAreConsistentInBothShapes) {
  Served s;
  json chat = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
               {"max_tokens", 6},
               {"logit_bias", kNoEnd},
               {"logprobs", true},
               {"top_logprobs", 3}};
  json r = s.post("/v1/chat/completions", chat);
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u) << r.dump();
  std::string joined;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_FLOAT_EQ(e["top_logprobs"][0]["logprob"].get<float>(), e["logprob"].get<float>());
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    for (const json& t : e["top_logprobs"]) EXPECT_LE(t["logprob"].get<double>(), 0.0);
    for (const json& b : e["bytes"]) joined += char(b.get<int>());
  }
  EXPECT_EQ(joined, text_of(r));  // the tokens' bytes spell the text
  json comp = {{"prompt", "Hello"}, {"max_tokens", 5}, {"logit_bias", kNoEnd}, {"logprobs", 2}};
  json c = s.post("/v1/completions", comp);
  const json& lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << c.dump();
  size_t offset = 0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += lp["tokens"][i].get<std::string>().size();
    double best = -1e30;
    for (const auto& [tok, v] : lp["top_logprobs"][i].items())
      best = std::max(best, v.get<double>());
    EXPECT_FLOAT_EQ(float(best), lp["token_logprobs"][i].get<float>());
  }
  auto chunks = s.stream("/v1/chat/completions", chat);
  size_t streamed = 0;
  for (const json& ch : chunks)
    for (const json& x : ch["choices"])
      if (x.contains("logprobs") && x["logprobs"].is_object())
        streamed += x["logprobs"]["content"].size();
  EXPECT_EQ(streamed, 6u);
}

// No max_tokens: the completion runs to the end of the context ("length"), as OpenAI and
// llama-server; one past what the prompt leaves is context_length_exceeded naming max_tokens.
TEST(ServerFields, DefaultMaxTokensRunsToTheEndOfTheContext) {
  Served s;
  json r = s.post("/v1/completions", {{"prompt", "hi"}, {"logit_bias", kNoEnd}});
  const int prompt = r["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(r["usage"]["completion_tokens"].get<int>(), 160 - prompt) << r.dump();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  expect_refused(s, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 160 - prompt + 1}},
                 "context_length_exceeded", "max_tokens");
  expect_refused(
      s, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_completion_tokens", 159}},
      "context_length_exceeded", "max_completion_tokens");
  std::string longer;
  for (int i = 0; i < 200; ++i) longer += " dog";
  expect_refused(s, "/v1/completions", {{"prompt", longer}, {"max_tokens", 1}},
                 "context_length_exceeded", "prompt");
  expect_refused(s, "/v1/chat/completions",
                 {{"messages", {{{"role", "user"}, {"content", longer}}}}},
                 "context_length_exceeded", "messages");
}

TEST(ServerFields, IncludeUsageSendsALastChunkWithTheUsageOnly) {
  Served s;
  json req = {{"prompt", "Once"}, {"max_tokens", 4}, {"logit_bias", kNoEnd}};
  auto plain = s.stream("/v1/completions", req);
  ASSERT_FALSE(plain.empty());
  for (const json& c : plain) EXPECT_FALSE(c["choices"].empty());  // no empty-choices chunk
  req["stream_options"] = {{"include_usage", true}};
  auto with = s.stream("/v1/completions", req);
  ASSERT_GE(with.size(), 2u);
  EXPECT_TRUE(with.back()["choices"].empty());
  EXPECT_EQ(with.back()["usage"]["completion_tokens"], 4);
  for (size_t i = 0; i + 1 < with.size(); ++i) EXPECT_FALSE(with[i].contains("usage"));
}

// One normalized vector per input, the same as float or base64; the mean and the last token
// agree on a one-token input and differ on longer ones.
TEST(ServerFields, EmbeddingsOneNormalizedVectorPerInput) {
  Served s;
  int st = 0;
  json r = s.post("/v1/embeddings", {{"input", {"Once upon a time", "The dog", "a"}}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  ASSERT_EQ(r["data"].size(), 3u);
  const int dim = s.model->cfg.dim;
  for (int i = 0; i < 3; ++i) {
    const json& e = r["data"][i];
    EXPECT_EQ(e["index"], i);
    ASSERT_EQ(int(e["embedding"].size()), dim);
    double n = 0;
    for (const json& x : e["embedding"]) n += x.get<double>() * x.get<double>();
    EXPECT_NEAR(n, 1.0, 1e-5);
  }
  json b64 =
      s.post("/v1/embeddings", {{"input", "Once upon a time"}, {"encoding_format", "base64"}});
  auto bytes = base64_decode(b64["data"][0]["embedding"].get<std::string>());
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->size(), size_t(dim) * 4);
  for (int j = 0; j < dim; ++j) {
    float v;
    std::memcpy(&v, bytes->data() + 4 * j, 4);
    EXPECT_FLOAT_EQ(v, r["data"][0]["embedding"][j].get<float>());
  }
  json last = s.post("/v1/embeddings", {{"input", "Once upon a time"}, {"pooling", "last"}});
  EXPECT_NE(last["data"][0]["embedding"], r["data"][0]["embedding"]);
  json ids = s.post("/tokenize", {{"content", "a"}})["tokens"];
  ASSERT_EQ(ids.size(), 1u);
  json m1 = s.post("/v1/embeddings", {{"input", ids}});
  json l1 = s.post("/v1/embeddings", {{"input", ids}, {"pooling", "last"}});
  for (int j = 0; j < dim; ++j)
    EXPECT_FLOAT_EQ(m1["data"][0]["embedding"][j].get<float>(),
                    l1["data"][0]["embedding"][j].get<float>());
  expect_refused(s, "/v1/embeddings", {{"input", "x"}, {"dimensions", dim + 1}},
                 "unsupported_field", "dimensions");
  expect_refused(s, "/v1/embeddings", {{"input", json::array()}}, "invalid_value", "input");
}

// What every agent loop sends back after a tool call: an assistant message with content null and
// tool_calls, then the tool's result.
TEST(ServerFields, ToolResultsSentBackGetAReply) {
  const json msgs = {
      {{"role", "user"}, {"content", "What is the weather in Paris?"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}}};
  for (const char* tmpl : {"", "chatml"}) {
    ServerOptions o;
    o.chat_template = tmpl;
    Served s(o);
    int st = 0;
    json r = s.post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 3}}, &st);
    EXPECT_EQ(st, 200) << tmpl << ": " << r.dump();
    EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  }
}

TEST(ServerFields, FieldsThatWouldBeIgnoredAreRefusedByName) {
  Served s;
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  auto chat = [&](json extra) {
    json b = {{"messages", msgs}, {"max_tokens", 2}};
    b.update(extra);
    return b;
  };
  expect_refused(s, "/v1/chat/completions", chat({{"response_format", {{"type", "xml"}}}}),
                 "invalid_value", "response_format.type");
  const json pattern = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "p"},
        {"schema",
         {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"pattern", "^x"}}}}}}}}}};
  const json r = expect_refused(s, "/v1/chat/completions", chat({{"response_format", pattern}}),
                                "unsupported_field", "response_format.json_schema.schema");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("'pattern'"), std::string::npos) << r;
  // This server's template ("role: content" lines) renders no tool calls.
  expect_refused(s, "/v1/chat/completions",
                 chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}),
                 "unsupported_field", "tools");
  expect_refused(s, "/v1/chat/completions", chat({{"tool_choice", "required"}}), "invalid_value",
                 "tool_choice");
  expect_refused(s, "/v1/chat/completions", chat({{"grammar", "root ::= \"a\""}}),
                 "unsupported_field", "grammar");
  expect_refused(s, "/v1/chat/completions", chat({{"functions", json::array()}}),
                 "unsupported_field", "functions");
  expect_refused(s, "/v1/completions", {{"prompt", "hi"}, {"response_format", {{"type", "text"}}}},
                 "unknown_field", "response_format");
  expect_refused(s, "/v1/chat/completions", chat({{"mirostat", 2}}), "unknown_field", "mirostat");
  expect_refused(s, "/v1/chat/completions", chat({{"top_logprobs", 2}}), "invalid_argument",
                 "top_logprobs");
  expect_refused(s, "/v1/chat/completions", chat({{"stop", {"a", "b", "c", "d", "e"}}}),
                 "invalid_argument", "stop");
  expect_refused(s, "/v1/chat/completions", chat({{"logit_bias", {{"x", 1}}}}), "invalid_argument",
                 "logit_bias");
  expect_refused(s, "/v1/chat/completions", chat({{"n", 0}}), "invalid_argument", "n");
  expect_refused(s, "/v1/chat/completions", chat({{"stream_options", {{"include_usage", true}}}}),
                 "invalid_value", "stream_options");
  expect_refused(s, "/v1/completions", {{"prompt", "hi"}, {"echo", true}}, "unsupported_field",
                 "echo");
  // no-op values of those fields are taken
  int st = 0;
  s.post("/v1/chat/completions",
         chat({{"response_format", {{"type", "text"}}}, {"tool_choice", "none"}, {"user", "u1"}}),
         &st);
  EXPECT_EQ(st, 200);
}
