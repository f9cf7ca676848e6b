// gpt-oss's harmony format through the server: a synthetic model whose byte-level vocabulary has
// harmony's special tokens (<|start|>, <|end|>, <|message|>, <|channel|>, <|constrain|>,
// <|return|>, <|call|>) served with gpt-oss's real chat template
// (tests/fixtures/chat_templates/templates/gpt_oss.jinja). The template selects the harmony
// format; a forced tool call is decoded in harmony's framing (an optional analysis message, then
// <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS, ended by <|call|>)
// and comes back as a tool call, its analysis as reasoning_content; the same request to a server
// with --reasoning-format none shows the output as written (the reference for the split);
// response_format's document comes back as the content without harmony's markers.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/chat_templates.h"
#include "support/test_server.h"
#include "support/tiny_models.h"
#include "synthetic/synthetic_model.h"
#include "tokenizer/bpe.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

const char* const kHarmonyTokens[] = {"<|start|>",   "<|end|>",       "<|message|>",
                                      "<|channel|>", "<|constrain|>", "<|return|>",
                                      "<|call|>",    "<|endoftext|>"};
constexpr int32_t kStart = 256, kEnd = 257, kMessage = 258, kChannel = 259, kConstrain = 260,
                  kReturn = 261, kCall = 262, kEndOfText = 263;

// 256 byte pieces (no merges: one token a byte), then harmony's special tokens.
Tokenizer::Vocab harmony_vocab() {
  Tokenizer::Vocab v;
  v.kind = VocabKind::Bpe;
  v.pre = "default";
  for (int b = 0; b < 256; ++b) v.pieces.push_back(gpt2_byte_char(uint8_t(b)));
  v.types.assign(256, TokenType::Normal);
  for (const char* t : kHarmonyTokens) {
    v.pieces.push_back(t);
    v.types.push_back(TokenType::Control);
  }
  v.bos = -1;
  v.eos = kReturn;
  v.pad = kEndOfText;
  v.add_bos = false;
  return v;
}

std::string harmony_model_path() {
  static const std::string path = [] {
    SyntheticSpec spec;
    spec.cfg = *synthetic_preset(Arch::Qwen2, "tiny");
    spec.vocab = harmony_vocab();
    spec.cfg.n_vocab = int(spec.vocab->pieces.size());
    spec.seed = 5;
    const std::string p = testing::TempDir() + "kamera-harmony-bpe.gguf";
    EXPECT_TRUE(write_synthetic_gguf(spec, p).ok());
    return p;
  }();
  return path;
}

struct Served : tiny::TestServer {
  explicit Served(const std::string& reasoning = "parsed")
      : TestServer(options(reasoning), harmony_model_path()) {}
  static ServerOptions options(const std::string& reasoning) {
    ServerOptions o;
    o.chat_template = tiny::template_fixture("gpt_oss");
    o.reasoning_format = reasoning;
    return o;
  }
  json post(const json& body) {
    int status = 0;
    json r = TestServer::post("/v1/chat/completions", body, &status);
    EXPECT_EQ(status, 200) << r.dump();
    return r;
  }
};

const json kTools = json::parse(R"([{"type":"function","function":{"name":"get_weather",
  "description":"Weather now.","parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]}},"required":["unit"],
  "additionalProperties":false}}}])");

// A forced call; the biases steer the random model into an analysis message first ('a' of
// "analysis" over 'c' of "commentary") of 'a's that each step ends (<|end|>) about half the
// time, as the sampler's seed draws.
json forced_call(int seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
          {"tools", kTools},
          {"tool_choice", "required"},
          {"max_tokens", 200},
          {"temperature", 1},
          {"seed", seed},
          {"logit_bias", {{std::to_string(int('a')), 8}, {std::to_string(kEnd), 8}}}};
}

}  // namespace

TEST(ServerHarmony, ForcedCallComesBackAsACallWithItsReasoning) {
  // the first seed whose answer has some analysis, as the model wrote it (the reference)
  const std::string open = "<|channel|>analysis<|message|>", close = "<|end|>";
  std::string analysis;
  int seed = 0;
  {
    Served none("none");
    for (; seed < 16 && analysis.empty(); ++seed) {
      const json m = none.post(forced_call(seed))["choices"][0]["message"];
      ASSERT_EQ(m["tool_calls"].size(), 1u) << m.dump();
      if (!m["content"].is_string()) continue;  // no analysis: the content is null
      const std::string raw = m["content"].get<std::string>();
      ASSERT_EQ(raw.substr(0, open.size()), open) << raw;
      ASSERT_EQ(raw.substr(raw.size() - close.size()), close) << raw;
      analysis = raw.substr(open.size(), raw.size() - open.size() - close.size());
    }
  }
  ASSERT_FALSE(analysis.empty());
  --seed;

  Served s;
  const json r = s.post(forced_call(seed));
  const json& c = r["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << r.dump();
  EXPECT_TRUE(c["message"]["content"].is_null()) << r.dump();
  EXPECT_EQ(c["message"]["reasoning_content"], analysis) << r.dump();
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.dump();
  const json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_weather");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args == json({{"unit", "c"}}) || args == json({{"unit", "f"}})) << args.dump();
  EXPECT_GT(r["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(), 0);

  std::string reasoning, content, arguments, name;
  for (const json& chunk : s.stream("/v1/chat/completions", forced_call(seed))) {
    if (chunk["choices"].empty()) continue;
    const json& d = chunk["choices"][0]["delta"];
    reasoning += d.value("reasoning_content", "");
    if (d.contains("content") && d["content"].is_string()) content += d["content"];
    for (const json& t : d.value("tool_calls", json::array())) {
      if (t["function"].contains("name")) name += t["function"]["name"].get<std::string>();
      arguments += t["function"].value("arguments", "");
    }
  }
  EXPECT_EQ(reasoning, analysis);
  EXPECT_EQ(content, "");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, call["function"]["arguments"]);
  std::printf("harmony forced call: seed %d, analysis of %zu bytes, %d reasoning tokens of %d\n",
              seed, analysis.size(),
              r["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(),
              r["usage"]["completion_tokens"].get<int>());
}

TEST(ServerHarmony, JsonOutputIsTheFinalChannelsDocument) {
  Served s;
  const json body = {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                     {"response_format",
                      {{"type", "json_schema"},
                       {"json_schema",
                        {{"name", "w"},
                         {"schema",
                          {{"type", "object"},
                           {"properties", {{"unit", {{"enum", {"c", "f"}}}}}},
                           {"required", {"unit"}},
                           {"additionalProperties", false}}}}}}},
                     {"max_tokens", 200},
                     {"temperature", 0},
                     {"logit_bias", {{std::to_string(int('f')), 6}}}};  // "final" over "analysis"
  const json r = s.post(body);
  const json& m = r["choices"][0]["message"];
  ASSERT_TRUE(m["content"].is_string()) << m.dump();
  const std::string content = m["content"].get<std::string>();
  const json doc = json::parse(content, nullptr, false);
  EXPECT_TRUE(doc == json({{"unit", "c"}}) || doc == json({{"unit", "f"}})) << m.dump();
  EXPECT_FALSE(m.contains("tool_calls"));
  // the model wrote <|channel|>final<|message|> before the document (one token a byte, or the
  // special tokens: 3 at least), and the parser took it out
  EXPECT_GE(r["usage"]["completion_tokens"].get<size_t>(), content.size() + 3) << r.dump();
}

// The vocabulary: harmony's header markers print (the parser reads them), <|return|> and
// <|call|> end the generation and <|end|> does not (it only ends a message), as llama.cpp's
// loader sets them.
TEST(ServerHarmony, VocabularyPrintsHeaderMarkersAndStopsOnReturnAndCall) {
  auto tok = Tokenizer::from_vocab(harmony_vocab());
  ASSERT_TRUE(tok.ok());
  for (int32_t id : {kStart, kEnd, kMessage, kChannel, kConstrain})
    EXPECT_EQ(tok->decode(-1, id), kHarmonyTokens[id - 256]);
  for (int32_t id : {kReturn, kCall, kEndOfText}) EXPECT_EQ(tok->decode(-1, id), "");
  EXPECT_TRUE(tok->is_eog(kReturn));
  EXPECT_TRUE(tok->is_eog(kCall));
  EXPECT_FALSE(tok->is_eog(kEnd));
  EXPECT_FALSE(tok->is_eog(kChannel));
  // a vocabulary without <|return|> and <|call|> (Phi-3's <|end|>) keeps <|end|> a stop
  Tokenizer::Vocab v = harmony_vocab();
  v.pieces[size_t(kReturn)] = "<|x|>";
  v.pieces[size_t(kCall)] = "<|y|>";
  v.eos = kEndOfText;
  auto plain = Tokenizer::from_vocab(v);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->is_eog(kEnd));
  EXPECT_EQ(plain->decode(-1, kChannel), "");
}
