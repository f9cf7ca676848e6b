// Decoding plans from OpenAI request fields: which grammar (if any) constrains the output, when
// it starts, whether calls are parsed and tools rendered; every refusal names its field.
#include <gtest/gtest.h>

#include "grammar/grammar_cache.h"
#include "toolcall/request.h"
#include "unit/grammar/grammar_util.h"

namespace kamera::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

const char* kTools = R"([
  {"type":"function","function":{"name":"get_weather","strict":true,"parameters":{
   "type":"object","properties":{"city":{"type":"string"}},"required":["city"],
   "additionalProperties":false}}},
  {"type":"function","function":{"name":"lookup","parameters":{"type":"object",
   "properties":{"q":{"type":"string","pattern":"^a"}}}}}])";

ojson with(const std::string& extra) {
  ojson b = ojson::parse(R"({"messages":[{"role":"user","content":"hi"}]})");
  const ojson more = ojson::parse(extra);
  for (const auto& [k, v] : more.items()) b[k] = v;
  return b;
}

DecodePlan plan_ok(const ojson& body, std::optional<Format> f = Format::Hermes) {
  auto p = plan_decoding(body, f);
  if (auto* e = std::get_if<PlanError>(&p)) {
    ADD_FAILURE() << body.dump() << ": " << e->error.message;
    return {};
  }
  return std::get<DecodePlan>(p);
}

PlanError plan_err(const ojson& body, std::optional<Format> f = Format::Hermes) {
  auto p = plan_decoding(body, f);
  EXPECT_TRUE(std::holds_alternative<PlanError>(p)) << body.dump() << " was accepted";
  return std::holds_alternative<PlanError>(p) ? std::get<PlanError>(p) : PlanError{};
}

TEST(DecodePlan, ResponseFormats) {
  EXPECT_FALSE(plan_ok(with("{}")).grammar);
  EXPECT_FALSE(plan_ok(with(R"({"response_format":{"type":"text"}})")).grammar);
  const DecodePlan o = plan_ok(with(R"({"response_format":{"type":"json_object"}})"));
  ASSERT_TRUE(o.grammar);
  EXPECT_TRUE(o.json_output);
  EXPECT_TRUE(grammar_test::accepts(*o.grammar, R"({"a":1})"));
  EXPECT_FALSE(grammar_test::accepts(*o.grammar, "[1]"));
  const DecodePlan s = plan_ok(with(R"({"response_format":{"type":"json_schema","json_schema":
      {"name":"n","strict":true,"schema":{"type":"object","properties":{"b":{"type":"boolean"},
      "a":{"type":"integer"}},"required":["b","a"],"additionalProperties":false}}}})"));
  ASSERT_TRUE(s.grammar);
  EXPECT_TRUE(grammar_test::accepts(*s.grammar, R"({"b":true,"a":3})"));  // the schema's order
  EXPECT_FALSE(grammar_test::accepts(*s.grammar, R"({"a":3,"b":true})"));
  EXPECT_EQ(plan_err(with(R"({"response_format":{"type":"json_schema","json_schema":{"schema":
      {"type":"string","pattern":"x"}}}})"))
                .param,
            "response_format.json_schema.schema");
  EXPECT_EQ(plan_err(with(R"({"response_format":{"type":"yaml"}})")).param, "response_format.type");
  EXPECT_EQ(plan_err(with(R"({"response_format":{"type":"json_schema"}})")).param,
            "response_format.json_schema");
}

TEST(DecodePlan, ToolChoices) {
  const std::string tools = std::string(R"({"tools":)") + kTools;
  // auto with a strict tool: free text, the call grammar from the marker on.
  const DecodePlan a = plan_ok(with(tools + "}"));
  EXPECT_TRUE(a.parse_calls);
  EXPECT_EQ(a.trigger, "<tool_call>");
  ASSERT_TRUE(a.grammar);
  EXPECT_EQ(a.render_tools.size(), 2u);
  // required: the whole output is calls; the non-strict tool's unsupported schema is any object.
  const DecodePlan r = plan_ok(with(tools + R"(,"tool_choice":"required"})"));
  ASSERT_TRUE(r.grammar);
  EXPECT_TRUE(r.trigger.empty());
  EXPECT_TRUE(grammar_test::accepts(
      *r.grammar,
      "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"z\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(grammar_test::accepts(*r.grammar, "hello"));
  // named, no parallel calls: exactly one call of that tool.
  const DecodePlan n = plan_ok(with(tools + R"(,"parallel_tool_calls":false,
      "tool_choice":{"type":"function","function":{"name":"get_weather"}}})"));
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(grammar_test::accepts(*n.grammar, call));
  EXPECT_FALSE(grammar_test::accepts(*n.grammar, call + "\n" + call));
  EXPECT_FALSE(grammar_test::accepts(
      *n.grammar, "<tool_call>\n{\"name\": \"lookup\", \"arguments\": {}}\n</tool_call>"));
  // none: nothing constrained, nothing parsed, tools not rendered.
  const DecodePlan none = plan_ok(with(tools + R"(,"tool_choice":"none"})"));
  EXPECT_FALSE(none.grammar);
  EXPECT_FALSE(none.parse_calls);
  EXPECT_TRUE(none.render_tools.is_null());
}

TEST(DecodePlan, RefusalsNameTheField) {
  const std::string tools = std::string(R"({"tools":)") + kTools;
  EXPECT_EQ(plan_err(with(tools + R"(,"tool_choice":{"type":"function","function":{"name":"x"}}})"))
                .param,
            "tool_choice");
  EXPECT_EQ(plan_err(with(tools + R"(,"tool_choice":"always"})")).param, "tool_choice");
  EXPECT_EQ(plan_err(with(R"({"tool_choice":"required"})")).param, "tool_choice");
  EXPECT_EQ(plan_err(with(R"({"tools":[{"type":"retrieval"}]})")).param, "tools[0].type");
  EXPECT_EQ(plan_err(with(R"({"tools":[{"type":"function","function":{}}]})")).param,
            "tools[0].function.name");
  EXPECT_EQ(plan_err(with(tools + R"(,"parallel_tool_calls":"yes"})")).param,
            "parallel_tool_calls");
  EXPECT_EQ(plan_err(with(tools + "}"), std::nullopt).param, "tools");
  EXPECT_EQ(plan_err(with(tools + R"(,"response_format":{"type":"json_object"}})")).param,
            "response_format");
  // A strict tool whose parameters kamera cannot compile.
  const PlanError e = plan_err(with(R"({"tools":[{"type":"function","function":{"name":"f",
      "strict":true,"parameters":{"type":"object","properties":{"d":{"type":"string",
      "format":"date"}}}}}]})"));
  EXPECT_EQ(e.param, "tools[0].function.parameters");
  EXPECT_NE(e.error.message.find("'format'"), std::string::npos) << e.error.message;
}

TEST(DecodePlan, MessagesPreparedForTheTemplate) {
  const ojson msgs = ojson::parse(R"([{"role":"assistant","content":null,"tool_calls":[
      {"id":"c0","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}},
      {"id":"c1","type":"function","function":{"name":"g","arguments":{"b":2}}}]}])");
  const ojson h = prepare_messages(msgs, Format::Hermes);
  EXPECT_EQ(h[0]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"a":1})"));
  EXPECT_EQ(h[0]["tool_calls"][1]["function"]["arguments"], ojson::parse(R"({"b":2})"));
  const ojson d = prepare_messages(msgs, Format::DeepSeek3);
  EXPECT_EQ(d[0]["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
  EXPECT_EQ(d[0]["tool_calls"][1]["function"]["arguments"], "{\"b\":2}");
  // json, as the chat completion they go into (its keys sorted)
  const nlohmann::json calls = tool_calls_json({{"call_0", "f", "{\"a\": 1}"}});
  EXPECT_EQ(calls, nlohmann::json::parse(R"([{"id": "call_0", "type": "function",
      "function": {"name": "f", "arguments": "{\"a\": 1}"}}])"));
  const nlohmann::json delta = delta_calls_json({{0, "call_0", "f", ""}, {0, "", "", "{\"a\""}});
  EXPECT_EQ(delta[0]["id"], "call_0");
  EXPECT_EQ(delta[0]["function"]["name"], "f");
  EXPECT_FALSE(delta[1].contains("id"));
  EXPECT_EQ(delta[1]["function"]["arguments"], "{\"a\"");
}

TEST(DecodePlan, RequestsWithTheSameFieldsShareOneCompiledGrammar) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  grammar::GrammarCache cache(
      std::make_shared<const grammar::TokenTrie>(bytes, std::vector<int32_t>{}), size_t(64) << 20);
  const std::string tools = std::string(R"({"tools":)") + kTools + R"(,"tool_choice":"required")";
  const DecodePlan a = plan_ok(with(tools + R"(,"temperature":0.5})"));
  const DecodePlan b = plan_ok(with(tools + R"(,"temperature":0.9})"));
  const DecodePlan c = plan_ok(with(tools + R"(,"parallel_tool_calls":false})"));
  EXPECT_EQ(a.grammar_key, b.grammar_key);
  EXPECT_NE(a.grammar_key, c.grammar_key);
  int builds = 0;
  auto get = [&](const DecodePlan& p) {
    auto g = cache.get(p.grammar_key, [&]() -> Result<std::shared_ptr<const grammar::Grammar>> {
      ++builds;
      return p.grammar;
    });
    EXPECT_TRUE(g.ok());
    return g.ok() ? *g : nullptr;
  };
  EXPECT_EQ(get(a), get(b));
  EXPECT_NE(get(a), get(c));
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(cache.hits(), 2u);
  auto failed = cache.get("bad", []() -> Result<std::shared_ptr<const grammar::Grammar>> {
    return make_error(ErrorCode::InvalidArgument, "no");
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(cache.size(), 2u);  // a failed build is not kept
}

}  // namespace
}  // namespace kamera::toolcall
