// The Jinja interpreter's errors and limits, and ChatTemplate's sources (built-ins, files,
// detection, fallback). Rendering against references is in test_chat_template_fixtures.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "jinja/chat_template.h"

namespace kamera {
namespace {

using jinja::Template;

Result<std::string> render(std::string_view src, const jinja::RenderLimits& limits = {}) {
  KAMERA_ASSIGN_OR_RETURN(Template t, Template::parse(src, "t"));
  jinja::Object ctx;
  ctx.set("messages", jinja::from_json(
                          nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])")));
  return t.render(ctx, limits);
}

void expect_error(const Result<std::string>& r, ErrorCode code, std::string_view needle) {
  ASSERT_FALSE(r.ok()) << "rendered: " << *r;
  EXPECT_EQ(r.code(), code) << r.message();
  EXPECT_NE(r.message().find(needle), std::string::npos)
      << "'" << r.message() << "' does not contain '" << needle << "'";
}

TEST(Jinja, SyntaxErrorsNameLineAndColumn) {
  expect_error(render("line one\n{% if x %}\n{{ x + }}\n{% endif %}"), ErrorCode::InvalidArgument,
               "t:3:8: expected an expression, got '}}'");
  expect_error(render("{% if x %}never closed"), ErrorCode::InvalidArgument, "'{% endif %}'");
  expect_error(render("ab\n  {{ 'open string }}"), ErrorCode::InvalidArgument,
               "t:2:6: string literal is never closed");
  expect_error(render("{{ x"), ErrorCode::InvalidArgument, "t:1:1: tag '{{' is never closed");
  expect_error(render("{# no end"), ErrorCode::InvalidArgument, "t:1:1: comment");
  expect_error(render("{% endfor %}"), ErrorCode::InvalidArgument, "without a matching");
  expect_error(render("{% break %}"), ErrorCode::InvalidArgument, "outside a for loop");
  expect_error(render("{{ a ? b }}"), ErrorCode::InvalidArgument, "t:1:6: unexpected character");
}

TEST(Jinja, UnknownNamesAreUnsupportedNotGuessed) {
  expect_error(render("{{ x | frobnicate }}"), ErrorCode::Unsupported,
               "t:1:8: unknown filter 'frobnicate'");
  expect_error(render("{% if x is shiny %}{% endif %}"), ErrorCode::Unsupported,
               "unknown test 'shiny'");
  expect_error(render("{% include 'other.jinja' %}"), ErrorCode::Unsupported,
               "tag 'include' is not supported");
  expect_error(render("{{ 'a'.frob() }}"), ErrorCode::InvalidArgument, "t:1:12:");
}

TEST(Jinja, RuntimeErrorsArePythonsAndPlaced) {
  expect_error(render("\n  {{ 'a' + 1 }}"), ErrorCode::InvalidArgument,
               "t:2:6: unsupported operand type(s) for +: 'str' and 'int'");
  expect_error(render("{{ missing.attr }}"), ErrorCode::InvalidArgument, "'missing' is undefined");
  expect_error(render("{{ 1 // 0 }}"), ErrorCode::InvalidArgument, "division by zero");
  expect_error(render("{{ 9223372036854775807 + 1 }}"), ErrorCode::InvalidArgument, "overflow");
  expect_error(render("{{ 1 < 'a' }}"), ErrorCode::InvalidArgument, "'<' not supported");
  expect_error(render("{% set x = 1 %}{% set x.y = 2 %}"), ErrorCode::InvalidArgument,
               "not a namespace()");
  expect_error(render("{{ messages | tojson(indent='x') }}"), ErrorCode::InvalidArgument,
               "must be an integer");
}

TEST(Jinja, RaiseExceptionBecomesAnErrorWithItsMessage) {
  auto t = ChatTemplate::from_source(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant') }}"
      "{% endif %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.message();
  const std::vector<ChatMessage> good = {{"user", "a"}, {"assistant", "b"}};
  const auto ok = t->render(good, {});
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(*ok, "ab");
  const std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  expect_error(t->render(bad, {}), ErrorCode::InvalidArgument,
               "Conversation roles must alternate user/assistant");
}

TEST(Jinja, StepBudgetStopsHugeLoops) {
  jinja::RenderLimits limits;
  limits.max_steps = 200'000;
  const auto start = std::chrono::steady_clock::now();
  expect_error(render("{% for i in range(1000000) %}{% for j in range(1000000) %}{{ j }}"
                      "{% endfor %}{% endfor %}",
                      limits),
               ErrorCode::InvalidArgument, "budget of 200000 steps");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 30.0);
  expect_error(render("{{ range(100000000) | length }}"), ErrorCode::InvalidArgument,
               "over the limit");
  // Big values cost steps by their size: copying one around in a loop runs out of budget.
  expect_error(render("{% set big = 'x' * 8000000 %}{% for i in range(1000000) %}"
                      "{% set y = big ~ big %}{% endfor %}",
                      limits),
               ErrorCode::InvalidArgument, "budget of 200000 steps");
}

TEST(Jinja, OutputAndStringLimitsStopBlowUps) {
  jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  expect_error(render("{% for i in range(100000) %}{{ 'xxxxxxxxxx' * 1000 }}{% endfor %}", limits),
               ErrorCode::InvalidArgument, "output exceeded its limit");
  expect_error(render("{{ 'x' * 10000000000 }}", limits), ErrorCode::InvalidArgument, "limit");
  expect_error(render("{% set ns = namespace(s='xx') %}{% for i in range(64) %}"
                      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      limits),
               ErrorCode::InvalidArgument, "limit");
}

TEST(Jinja, HostileNestingIsAnErrorNotACrash) {
  const std::string parens =
      "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  expect_error(render(parens), ErrorCode::InvalidArgument, "nests deeper than");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  expect_error(render(ifs), ErrorCode::InvalidArgument, "nests deeper than");
  expect_error(render("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}"),
               ErrorCode::InvalidArgument, "nests deeper than");
  expect_error(render("{{ " + std::string(100000, '[') + " }}"), ErrorCode::InvalidArgument,
               "t:1:1: tag '{{' is never closed");
  expect_error(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
               ErrorCode::InvalidArgument, "macro calls nest deeper than 64");
  expect_error(render("{% set ns = namespace() %}{% set ns.me = ns %}"), ErrorCode::InvalidArgument,
               "would make the namespace contain itself");
  expect_error(render("{% set a = namespace() %}{% set b = namespace(x=[a]) %}"
                      "{% set a.y = {'k': b} %}"),
               ErrorCode::InvalidArgument, "would make the namespace contain itself");
  // Shared sublists: 2^60 leaves in 61 lists. Printing, JSON and == stay bounded.
  const std::string dag =
      "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}"
      "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}";
  expect_error(render(dag + "{{ ns.a }}"), ErrorCode::InvalidArgument, "more than");
  expect_error(render(dag + "{{ ns.a | tojson }}"), ErrorCode::InvalidArgument, "more than");
  const auto eq = render(dag + "{{ ns.a == ns.a }}|{{ ns.a == ns.b }}");
  ASSERT_TRUE(eq.ok()) << eq.message();
  EXPECT_EQ(*eq, "True|False");  // the same list; two lists past the comparison bound
  expect_error(render(dag + "{{ ns.a < ns.b }}"), ErrorCode::InvalidArgument, "comparison");
}

TEST(ChatTemplate, BuiltinsByNameAndArgument) {
  const std::vector<std::string> names = ChatTemplate::builtin_names();
  EXPECT_EQ(names, (std::vector<std::string>{"chatml", "llama3", "deepseek2", "deepseek3", "phi3",
                                             "gemma", "smollm3"}));
  for (const auto& n : names) {
    auto t = ChatTemplate::from_arg(n);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_TRUE(t->is_builtin());
    EXPECT_EQ(t->name(), n);
  }
  auto missing = ChatTemplate::named("vicuna");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), ErrorCode::NotFound);
  EXPECT_NE(missing.message().find("chatml, llama3, deepseek2, deepseek3"), std::string::npos);
  auto no_file = ChatTemplate::from_arg("/nonexistent/template.jinja");
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.code(), ErrorCode::NotFound);
}

TEST(ChatTemplate, FromFileRendersAndNamesTheFileInErrors) {
  const std::string path = std::string(KAMERA_BINARY_DIR) + "/chat_template_test.jinja";
  {
    std::ofstream f(path);
    f << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
         "{% if add_generation_prompt %}[assistant]{% endif %}\n";
  }
  auto t = ChatTemplate::from_arg(path);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_FALSE(t->is_builtin());
  const std::vector<ChatMessage> msgs = {{"system", "S"}, {"user", "U"}};
  ChatRenderOptions opt;
  auto out = t->render(msgs, opt);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(*out, "[system] S\n[user] U\n[assistant]");  // trailing newline dropped, as jinja2
  {
    std::ofstream f(path);
    f << "ok\n{{ broken(";
  }
  auto bad = ChatTemplate::from_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(path + ":2:"), std::string::npos) << bad.message();
  std::remove(path.c_str());
}

TEST(ChatTemplate, GgufTemplateFallsBackToTheDetectedBuiltin) {
  // Parses: runs as Jinja.
  auto jinja_ok = ChatTemplate::from_gguf("{{ messages[0].content }}<|im_start|>");
  ASSERT_TRUE(jinja_ok.ok());
  EXPECT_FALSE(jinja_ok->is_builtin());
  // Does not parse, carries chatml markers: the chatml built-in.
  auto fallback = ChatTemplate::from_gguf("{% include 'x' %}<|im_start|>{{ m }}<|im_end|>");
  ASSERT_TRUE(fallback.ok()) << fallback.message();
  EXPECT_TRUE(fallback->is_builtin());
  EXPECT_EQ(fallback->name(), "chatml");
  // Neither: the parse error.
  auto none = ChatTemplate::from_gguf("{% include 'x' %}");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.code(), ErrorCode::Unsupported);
  EXPECT_FALSE(ChatTemplate::from_gguf("").ok());
}

TEST(ChatTemplate, DetectionFollowsLlamaCppOrder) {
  EXPECT_EQ(ChatTemplate::detect_builtin("chatml"), "chatml");
  EXPECT_EQ(ChatTemplate::detect_builtin("deepseek3"), "deepseek3");
  EXPECT_EQ(ChatTemplate::detect_builtin("x <|im_start|> y"), "chatml");
  EXPECT_EQ(ChatTemplate::detect_builtin("<|im_start|><|im_sep|>"), std::nullopt);  // phi4
  EXPECT_EQ(ChatTemplate::detect_builtin("[INST] <|start_header_id|><|end_header_id|>"),
            std::nullopt);  // mistral wins
  EXPECT_EQ(ChatTemplate::detect_builtin("<|start_header_id|>x<|end_header_id|>"), "llama3");
  EXPECT_EQ(ChatTemplate::detect_builtin("<start_of_turn> <|start_header_id|><|end_header_id|>"),
            "gemma");  // gemma comes first
  EXPECT_EQ(ChatTemplate::detect_builtin("{{ 'Assistant: ' + message['content'] + eos_token }}"),
            "deepseek2");
  EXPECT_EQ(ChatTemplate::detect_builtin("<｜User｜><｜Assistant｜><｜end▁of▁sentence｜>"),
            "deepseek3");
  EXPECT_EQ(ChatTemplate::detect_builtin("plain"), std::nullopt);
}

TEST(ChatTemplate, MessagesCarryExtraFieldsAndOptionsReachTheTemplate) {
  auto t = ChatTemplate::from_source(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content if m.content is not none "
      "else 'null' }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %};{% endfor %}"
      "{{ tools | tojson }}|{{ enable_thinking }}|{{ documents is none }}|{{ eos_token }}|"
      "{{ add_generation_prompt }}|{{ strftime_now('%Y-%m-%d') }}");
  ASSERT_TRUE(t.ok()) << t.message();
  ChatMessage call{"assistant", "", {}};
  call.fields["content"] = nullptr;
  call.fields["tool_calls"] = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": [true]}}}])");
  const std::vector<ChatMessage> msgs = {{"user", "q"}, call};
  ChatRenderOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = false;
  o.tools = nlohmann::ordered_json::parse(R"([{"name": "f"}])");
  o.extra["enable_thinking"] = false;
  o.now = 86400 * 365 + 43200;  // 1971-01-01, noon UTC
  const auto out = t->render(msgs, o);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(*out,
            "<s>user:q;assistant:null[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
            "\"arguments\": {\"z\": 1, \"a\": [true]}}}];[{\"name\": \"f\"}]|False|True|</s>|"
            "False|1971-01-01");
  // The same conversation as OpenAI JSON.
  const auto json_out = t->render_json(
      nlohmann::ordered_json::parse(R"([{"role": "user", "content": "q"}, {"role": "assistant",
        "content": null, "tool_calls": [{"type": "function", "function": {"name": "f",
        "arguments": {"z": 1, "a": [true]}}}]}])"),
      o);
  ASSERT_TRUE(json_out.ok()) << json_out.message();
  EXPECT_EQ(*json_out, *out);
  EXPECT_FALSE(t->render_json(nlohmann::ordered_json::object(), o).ok());
  EXPECT_FALSE(t->render_json(nlohmann::ordered_json::parse(R"([{"content": "x"}])"), o).ok());
}

}  // namespace
}  // namespace kamera
