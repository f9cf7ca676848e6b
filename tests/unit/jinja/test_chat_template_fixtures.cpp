// Chat templates against independent references, byte for byte (tests/fixtures/chat_templates):
//   - the real templates of Qwen3, Llama-3, DeepSeek-V2 and DeepSeek-V3 (and kamera's own
//     feature template) on every conversation, as @huggingface/jinja renders them (expected.json,
//     render_reference.mjs; Python's jinja2 agrees on every case, render_jinja2.py);
//   - small templates whose output rests on Python semantics, as jinja2 renders them
//     (expected_jinja2.json);
//   - the built-ins against llama.cpp's built-ins of the same names (expected_llama_cpp.json), and
//     against the real templates they stand for.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "jinja/chat_template.h"

namespace kamera {
namespace {

using json = nlohmann::ordered_json;

std::string fixture_path(const std::string& name) {
  return std::string(KAMERA_SOURCE_DIR) + "/tests/fixtures/chat_templates/" + name;
}

std::string read_text(const std::string& name) {
  std::ifstream f(fixture_path(name), std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing fixture " << fixture_path(name);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json load(const std::string& name) {
  return json::parse(read_text(name));
}

std::map<std::string, json> conversations() {
  std::map<std::string, json> out;
  const json all = load("conversations.json");
  for (const json& c : all["conversations"]) {
    out[c["name"].get<std::string>()] = c;
  }
  return out;
}

ChatRenderOptions options_for(const json& conv, bool add_generation_prompt, const json& spec) {
  ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  if (spec.contains("bos_token") && spec["bos_token"].is_string()) o.bos_token = spec["bos_token"];
  if (spec.contains("eos_token") && spec["eos_token"].is_string()) o.eos_token = spec["eos_token"];
  if (conv.contains("tools")) o.tools = conv["tools"];
  if (spec.contains("extra")) o.extra = spec["extra"];
  if (conv.contains("extra"))
    for (const auto& [k, v] : conv["extra"].items()) o.extra[k] = v;
  return o;
}

std::string case_name(const json& c) {
  return c["template"].get<std::string>() + " / " + c["conversation"].get<std::string>() +
         " / add_generation_prompt=" + (c["add_generation_prompt"].get<bool>() ? "true" : "false");
}

TEST(ChatTemplateFixtures, RealTemplatesRenderLikeTheReference) {
  const json expected = load("expected.json");
  const auto convs = conversations();
  std::map<std::string, ChatTemplate> templates;
  size_t checked = 0;
  for (const json& c : expected["cases"]) {
    const std::string name = c["template"].get<std::string>();
    if (!templates.count(name)) {
      auto t = ChatTemplate::from_source(read_text("templates/" + name + ".jinja"), name);
      ASSERT_TRUE(t.ok()) << t.message();
      templates.emplace(name, std::move(t).value());
    }
    const json& conv = convs.at(c["conversation"].get<std::string>());
    const auto opts =
        options_for(conv, c["add_generation_prompt"].get<bool>(), expected["templates"][name]);
    const auto got = templates.at(name).render_json(conv["messages"], opts);
    if (c.contains("error")) {
      EXPECT_FALSE(got.ok()) << case_name(c) << ": the reference failed, kamera rendered";
    } else {
      ASSERT_TRUE(got.ok()) << case_name(c) << ": " << got.message();
      EXPECT_EQ(*got, c["expected"].get<std::string>()) << case_name(c);
    }
    ++checked;
  }
  // qwen3 qwen2_5 llama3 llama3_1 llama3_1_tools llama3_2 deepseek3 deepseek2 features
  EXPECT_EQ(templates.size(), 9u);
  EXPECT_GE(checked, 140u);
}

TEST(ChatTemplateFixtures, PythonSemanticsLikeJinja2) {
  const json expected = load("expected_jinja2.json");
  jinja::Object ctx;
  for (const auto& [k, v] : expected["context"].items()) ctx.set(k, jinja::from_json(v));
  size_t checked = 0;
  for (const json& c : expected["cases"]) {
    const std::string src = c["template"].get<std::string>();
    auto t = jinja::Template::parse(src, "snippet");
    Result<std::string> got = t.ok() ? t->render(ctx) : Result<std::string>(t.error());
    if (c.contains("error")) {
      EXPECT_FALSE(got.ok()) << src << ": jinja2 failed (" << c["error"] << "), kamera rendered '"
                             << (got.ok() ? *got : "") << "'";
    } else {
      ASSERT_TRUE(got.ok()) << src << ": " << got.message();
      EXPECT_EQ(*got, c["expected"].get<std::string>()) << src;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20u);
}

TEST(ChatTemplateFixtures, BuiltinsRenderLikeLlamaCpp) {
  const json expected = load("expected_llama_cpp.json");
  const auto convs = conversations();
  size_t checked = 0;
  for (const json& c : expected["cases"]) {
    auto t = ChatTemplate::named(c["template"].get<std::string>());
    ASSERT_TRUE(t.ok()) << t.message();
    const json& conv = convs.at(c["conversation"].get<std::string>());
    const auto got = t->render_json(conv["messages"],
                                    options_for(conv, c["add_generation_prompt"].get<bool>(), {}));
    ASSERT_TRUE(got.ok()) << case_name(c) << ": " << got.message();
    EXPECT_EQ(*got, c["expected"].get<std::string>()) << case_name(c);
    ++checked;
  }
  // 7 conversations x 2 for every built-in but smollm3 (llama.cpp has no smollm3 fallback: it
  // detects SmolLM3's template as chatml; ChatTemplateLayerKinds checks its prompts)
  EXPECT_EQ(checked, (ChatTemplate::builtin_names().size() - 1) * 14);
}

// Each built-in with the model's BOS equals the model's own template (rendered by the reference)
// on conversations where the two agree by design: no tools, no reasoning; for deepseek3 also no
// system message (DeepSeek-V3 hoists system text to the front, llama.cpp's built-in does not).
TEST(ChatTemplateFixtures, BuiltinsMatchTheRealTemplatesTheyStandFor) {
  const json expected = load("expected.json");
  const auto convs = conversations();
  const std::map<std::string, std::string> stands_for = {{"qwen3", "chatml"},
                                                         {"llama3_1", "llama3"},
                                                         {"deepseek2", "deepseek2"},
                                                         {"deepseek3", "deepseek3"}};
  std::map<std::string, size_t> checked;
  for (const json& c : expected["cases"]) {
    const std::string real = c["template"].get<std::string>();
    if (!stands_for.count(real) || !c.contains("expected")) continue;
    const json& conv = convs.at(c["conversation"].get<std::string>());
    if (conv.contains("only") || conv.contains("tools")) continue;
    bool has_system = false;
    for (const json& m : conv["messages"]) has_system |= m["role"] == "system";
    if (real == "deepseek3" && has_system) continue;
    auto t = ChatTemplate::named(stands_for.at(real));
    ASSERT_TRUE(t.ok());
    const auto got = t->render_json(
        conv["messages"],
        options_for(conv, c["add_generation_prompt"].get<bool>(), expected["templates"][real]));
    ASSERT_TRUE(got.ok()) << got.message();
    EXPECT_EQ(*got, c["expected"].get<std::string>()) << "built-in for " << case_name(c);
    ++checked[real];
  }
  for (const auto& [real, builtin] : stands_for) {
    EXPECT_GE(checked[real], 4u) << real << " vs built-in " << builtin;
  }
}

// The phi3 built-in equals Phi-3.5-mini-instruct's real template (templates/phi3_5.jinja, from
// llama.cpp d32676d's models/templates) on every conversation without tools but the one with an
// empty system message (the real template drops it, llama.cpp's built-in keeps it), with
// eos_token "" (the real template ends a prompt without the generation prompt with it).
TEST(ChatTemplateFixtures, Phi3BuiltinMatchesTheRealTemplate) {
  auto real = ChatTemplate::from_source(read_text("templates/phi3_5.jinja"), "phi3_5");
  auto builtin = ChatTemplate::named("phi3");
  ASSERT_TRUE(real.ok()) << real.message();
  ASSERT_TRUE(builtin.ok()) << builtin.message();
  size_t checked = 0;
  for (const auto& [name, conv] : conversations()) {
    if (conv.contains("only") || conv.contains("tools") || name == "empty_system") continue;
    for (bool gen : {true, false}) {
      const auto o = options_for(conv, gen, json::object());
      const auto want = real->render_json(conv["messages"], o);
      const auto got = builtin->render_json(conv["messages"], o);
      ASSERT_TRUE(want.ok() && got.ok()) << name;
      EXPECT_EQ(*got, *want) << name << " add_generation_prompt=" << gen;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12u);
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/phi3_5.jinja")), "phi3");
}

// The default budget is no obstacle to real use: Qwen3's template with tools on a conversation
// of 1,000+ messages renders, with every repetition's turns in it.
TEST(ChatTemplateFixtures, LongConversationFitsTheDefaultBudget) {
  const auto convs = conversations();
  const json& conv = convs.at("tools_qwen");
  auto t = ChatTemplate::from_source(read_text("templates/qwen3.jinja"), "qwen3");
  ASSERT_TRUE(t.ok()) << t.message();
  json messages = json::array();
  for (int r = 0; r < 150; ++r) {
    for (const json& m : conv["messages"]) messages.push_back(m);
  }
  const auto opts = options_for(conv, true, json::object());
  const auto one = t->render_json(conv["messages"], opts);
  const auto many = t->render_json(messages, opts);
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_TRUE(many.ok()) << many.message();
  EXPECT_GE(messages.size(), 1000u);
  const auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(*many, "<|im_start|>user"), 150 * count(*one, "<|im_start|>user"));
  EXPECT_EQ(count(*many, "<tool_response>"), 150 * count(*one, "<tool_response>"));
  // Assistant turns repeat; the generation prompt at the end does not.
  EXPECT_EQ(count(*many, "<|im_start|>assistant") - 1,
            150 * (count(*one, "<|im_start|>assistant") - 1));
  EXPECT_GT(count(*one, "<tool_response>"), 0u);
}

TEST(ChatTemplateFixtures, RealTemplatesAreDetectedAsLlamaCppDetectsThem) {
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/qwen3.jinja")), "chatml");
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/llama3.jinja")), "llama3");
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/llama3_1.jinja")), "llama3");
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/deepseek2.jinja")), "deepseek2");
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/deepseek3.jinja")), "deepseek3");
  EXPECT_EQ(ChatTemplate::detect_builtin(read_text("templates/features.jinja")), std::nullopt);
}

}  // namespace
}  // namespace kamera
