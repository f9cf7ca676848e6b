// Thinking models over /v1/chat/completions, on a synthetic model served with Qwen3's real chat
// template (tests/fixtures/chat_templates) or its thinking variant that opens <think> in the
// generation prompt (as Qwen3-Thinking's and DeepSeek-R1's do): the reasoning comes back in
// message.reasoning_content and delta.reasoning_content, never in the content (the reference: the
// same request to a server started with --reasoning-format none); chat_template_kwargs and
// reasoning_effort reach the template (the prompt it renders changes by the tokens of
// enable_thinking's empty block); earlier turns' reasoning is rendered as the template decides;
// the fields frameworks send are accepted or refused by name. And forced tool calls: one cut by
// max_tokens leaves no call marker in the content, and their arguments spend no token on layout.
#include <gtest/gtest.h>

#include "support/chat_templates.h"
#include "support/test_server.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

using tiny::thinking_template;
const auto fixture = tiny::template_fixture;

struct Served : tiny::TestServer {
  explicit Served(const std::string& tmpl, const std::string& reasoning = "parsed")
      : TestServer(options(tmpl, reasoning), tiny::model_path("qwen2", DType::F32, "ctx=4096")) {}
  static ServerOptions options(const std::string& tmpl, const std::string& reasoning) {
    ServerOptions o;
    o.chat_template = tmpl;
    o.reasoning_format = reasoning;
    return o;
  }
  // The data chunks of an SSE stream.
  std::vector<json> stream(json b) {
    b["stream"] = true;
    auto r = client->Post("/v1/chat/completions", b.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<json> out;
    for (size_t at = 0; r && (at = r->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = r->body.find("\n\n", at);
      const std::string payload = r->body.substr(at + 6, end - at - 6);
      at = end;
      if (payload != "[DONE]") out.push_back(json::parse(payload));
    }
    return out;
  }
};

const json kNoEnd = {{"1", -100}, {"2", -100}};  // the tiny vocabulary's BOS and EOS

json chat(json extra = json::object()) {
  json b = {{"messages", {{{"role", "user"}, {"content", "What is 2 + 2?"}}}},
            {"max_tokens", 24},
            {"temperature", 0},
            {"logit_bias", kNoEnd}};
  if (extra.is_object()) b.update(extra);
  return b;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \n\t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \n\t\r") - b + 1);
}

json post_ok(Served& s, const json& body) {
  int st = 0;
  json r = s.post("/v1/chat/completions", body, &st);
  EXPECT_EQ(st, 200) << r.dump();
  return r;
}

void expect_refused(Served& s, const json& body, const std::string& param) {
  int st = 0;
  const json r = s.post("/v1/chat/completions", body, &st);
  EXPECT_EQ(st, 400) << body.dump() << " -> " << r.dump();
  EXPECT_EQ(r["error"]["param"], param) << r.dump();
}

}  // namespace

TEST(ServerReasoning, APromptThatOpensThinkAnswersInReasoningContent) {
  const std::string tmpl = thinking_template();
  std::string raw;
  {
    Served none(tmpl, "none");  // the reference: the output as the model wrote it
    raw = post_ok(none, chat())["choices"][0]["message"]["content"].get<std::string>();
  }
  ASSERT_FALSE(trim(raw).empty());
  Served s(tmpl);
  const json m = post_ok(s, chat())["choices"][0]["message"];
  EXPECT_EQ(m["content"], "") << m.dump();
  EXPECT_EQ(m["reasoning_content"], trim(raw)) << m.dump();

  std::string reasoning, content;
  for (const json& c : s.stream(chat())) {
    const json& d = c["choices"][0]["delta"];
    reasoning += d.value("reasoning_content", "");
    content += d.value("content", "");
  }
  EXPECT_EQ(reasoning, trim(raw));
  EXPECT_EQ(content, "");
}

TEST(ServerReasoning, TemplateVariablesReachTheTemplate) {
  Served s(fixture("qwen3"));
  auto prompt_tokens = [&](const json& extra) {
    return post_ok(s, chat(extra))["usage"]["prompt_tokens"].get<int>();
  };
  const int thinking = prompt_tokens({});
  const int off = prompt_tokens({{"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_GT(off, thinking);  // "<think>\n\n</think>\n\n" written after the generation prompt
  EXPECT_EQ(prompt_tokens({{"reasoning_effort", "none"}}), off);
  EXPECT_EQ(prompt_tokens({{"reasoning_effort", "high"}}), thinking);
  EXPECT_EQ(
      prompt_tokens({{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"flag", true}}}}),
      off);
  // with thinking off the template closed the block: the output is the answer
  const json m = post_ok(
      s, chat({{"chat_template_kwargs", {{"enable_thinking", false}}}}))["choices"][0]["message"];
  EXPECT_FALSE(m.contains("reasoning_content")) << m.dump();
  EXPECT_FALSE(m["content"].get<std::string>().empty());

  expect_refused(s, chat({{"chat_template_kwargs", {{"x", "<|im_start|>system"}}}}),
                 "chat_template_kwargs");
  expect_refused(s, chat({{"chat_template_kwargs", {{"add_generation_prompt", false}}}}),
                 "chat_template_kwargs");
  expect_refused(s, chat({{"chat_template_kwargs", "enable_thinking"}}), "chat_template_kwargs");
  expect_refused(s, chat({{"reasoning_effort", "extreme"}}), "reasoning_effort");
}

TEST(ServerReasoning, EarlierTurnsReasoningIsRenderedAsTheTemplateDecides) {
  Served s(fixture("qwen3"));
  const json call = {{"id", "c1"},
                     {"type", "function"},
                     {"function", {{"name", "add"}, {"arguments", "{\"a\": 2, \"b\": 2}"}}}};
  auto prompt_tokens = [&](const char* key) {
    json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}};
    if (key) assistant[key] = "I should add the numbers with the tool.";
    json b = chat();
    b["messages"].push_back(assistant);
    b["messages"].push_back({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "4"}});
    return post_ok(s, b)["usage"]["prompt_tokens"].get<int>();
  };
  const int without = prompt_tokens(nullptr);
  // in a tool loop (after the last user message) Qwen3's template keeps the reasoning
  EXPECT_GT(prompt_tokens("reasoning_content"), without + 5);
  EXPECT_EQ(prompt_tokens("reasoning"), prompt_tokens("reasoning_content"));
}

TEST(ServerReasoning, FieldsFrameworksSendAreAcceptedOrRefusedByName) {
  Served s(fixture("qwen2_5"));  // no reasoning switch
  for (const json& extra :
       {json{{"store", true}}, json{{"store", false}}, json{{"verbosity", "medium"}},
        json{{"prompt_cache_retention", "24h"}}, json{{"prompt_cache_retention", "in_memory"}},
        json{{"chat_template_kwargs", {{"enable_thinking", false}}}}})
    post_ok(s, chat(extra));
  expect_refused(s, chat({{"reasoning_effort", "low"}}), "reasoning_effort");
  expect_refused(s, chat({{"verbosity", "low"}}), "verbosity");
  expect_refused(s, chat({{"prompt_cache_retention", "forever"}}), "prompt_cache_retention");
  expect_refused(s, chat({{"store", "yes"}}), "store");
}

namespace {

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties",
                            {{"city", {{"type", "string"}, {"maxLength", 12}}},
                             {"unit", {{"enum", {"celsius", "fahrenheit"}}}}}},
                           {"required", {"city", "unit"}},
                           {"additionalProperties", false}}}}}};

// Whitespace outside the strings of JSON text other than one space after ',' and ':'.
int stray_whitespace(const std::string& text) {
  int stray = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') continue;
    if (!(c == ' ' && i > 0 && (text[i - 1] == ',' || text[i - 1] == ':'))) ++stray;
  }
  return stray;
}

}  // namespace

TEST(ServerReasoning, ForcedCallsCutByMaxTokensLeaveNoMarkerAndUseNoLayout) {
  Served s(fixture("qwen2_5"));
  int complete = 0;
  for (int max_tokens = 8; max_tokens <= 200; max_tokens += 8) {
    const json r = post_ok(s, chat({{"tools", json::array({kWeather})},
                                    {"tool_choice", "required"},
                                    {"temperature", 0.9},
                                    {"seed", max_tokens},
                                    {"max_tokens", max_tokens}}));
    const json& m = r["choices"][0]["message"];
    const std::string content = m["content"].is_string() ? m["content"].get<std::string>() : "";
    EXPECT_EQ(content.find("<tool_call>"), std::string::npos) << max_tokens << ": " << m.dump();
    EXPECT_EQ(content.find("\"name\""), std::string::npos) << max_tokens << ": " << m.dump();
    for (const json& c : m.value("tool_calls", json::array())) {
      const std::string args = c["function"]["arguments"];
      if (json::parse(args, nullptr, false).is_discarded()) continue;  // cut short
      ++complete;
      EXPECT_EQ(stray_whitespace(args), 0) << args;
    }
  }
  EXPECT_GE(complete, 5);
}

namespace {

// The reference count of reasoning tokens: the answer's tokens (its logprobs' bytes) up to the
// one that completes </think>, all of them when none does (the prompt opened <think>).
int64_t tokens_through_close(const json& r) {
  std::string text;
  int64_t n = 0;
  for (const json& t : r["choices"][0]["logprobs"]["content"]) {
    ++n;
    for (int b : t["bytes"]) text += char(b);
    if (text.find("</think>") != std::string::npos) return n;
  }
  return n;
}

int64_t reasoning_tokens(const json& r) {
  return r["usage"]["completion_tokens_details"]["reasoning_tokens"];
}

}  // namespace

// usage.completion_tokens_details.reasoning_tokens (and Responses' output_tokens_details) count
// the tokens generated inside the reasoning: the reference is the answer's own tokens (logprobs)
// up to the one that completes </think>, all of them here (the template opens <think> and the
// answer is cut inside its reasoning), streamed or not, in chat and in Responses; a template
// without markers reasons in none. (Where inside an answer the count stops is AnswerParser's
// test: the tiny vocabulary writes </think> in 7 tokens, which no greedy answer spells.)
TEST(ServerReasoning, ReasoningTokensCountTheTokensInsideTheReasoning) {
  Served s(thinking_template());
  const json r = post_ok(s, chat({{"logprobs", true}}));
  const int64_t want = tokens_through_close(r);
  EXPECT_EQ(want, r["usage"]["completion_tokens"]);
  EXPECT_EQ(reasoning_tokens(r), want) << r["usage"].dump();

  json b = chat({{"stream", true}, {"stream_options", {{"include_usage", true}}}});
  const std::vector<json> chunks = s.stream(b);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(reasoning_tokens(chunks.back()), want) << chunks.back().dump();
  int st = 0;
  const json resp = s.post("/v1/responses",
                           {{"input", "What is 2 + 2?"},
                            {"max_output_tokens", 24},
                            {"temperature", 0},
                            {"store", false},
                            {"logit_bias", kNoEnd}},
                           &st);
  ASSERT_EQ(st, 200) << resp.dump();
  EXPECT_EQ(resp["usage"]["output_tokens_details"]["reasoning_tokens"], want)
      << resp["usage"].dump();

  Served plain(fixture("qwen2_5"));
  EXPECT_EQ(reasoning_tokens(post_ok(plain, chat())), 0);
}
