// The tool-call parsers on real template outputs: an assistant message with tool calls is
// rendered by each model's own chat template (tests/fixtures/chat_templates/templates), the text
// the model would have generated is cut out of the prompt, and parsing it (whole, and streamed
// in pieces of every size from 1 to 9 bytes) gives back the message's text and calls.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "jinja/chat_template.h"
#include "toolcall/format.h"
#include "toolcall/parser.h"

namespace kamera::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/fixtures/chat_templates/templates/" +
                  name + ".jinja");
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const ojson kTools = ojson::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"Weather of a city.",
   "parameters":{"type":"object","properties":{"city":{"type":"string"},
   "unit":{"enum":["c","f"]}},"required":["city"]}}},
  {"type":"function","function":{"name":"search","parameters":{"type":"object",
   "properties":{"q":{"type":"string"},"n":{"type":"integer"}},"required":["q"]}}}])");

struct TemplateCase {
  std::string name;
  Format format;
  std::string end_of_turn;  // the text the template closes an assistant turn with
  bool arguments_as_text;   // the template concatenates arguments (deepseek3)
  size_t max_calls;
};

const TemplateCase kTemplates[] = {
    {"qwen3", Format::Hermes, "<|im_end|>\n", false, 2},
    {"qwen2_5", Format::Hermes, "<|im_end|>\n", false, 2},
    {"llama3_1_tools", Format::Llama3, "<|eot_id|>", false, 1},
    {"llama3_2", Format::Llama3, "<|eot_id|>", false, 1},
    {"deepseek3", Format::DeepSeek3, "<｜end▁of▁sentence｜>", true, 2},
};

ojson assistant_turn(const TemplateCase& t, const std::string& content, size_t n_calls) {
  const ojson args[] = {ojson::parse(R"({"city":"Zürich","unit":"c"})"),
                        ojson::parse(R"({"q":"kamera \"cache\"","n":3})")};
  const char* names[] = {"get_weather", "search"};
  ojson calls = ojson::array();
  for (size_t i = 0; i < n_calls; ++i)
    calls.push_back({{"type", "function"},
                     {"function",
                      {{"name", names[i]},
                       {"arguments", t.arguments_as_text ? ojson(args[i].dump()) : args[i]}}}});
  ojson m = {{"role", "assistant"}};
  m["content"] = content.empty() && t.format == Format::DeepSeek3 ? ojson() : ojson(content);
  m["tool_calls"] = calls;
  return m;
}

// The text the model generated for the last message: the full rendering minus the prompt.
std::string generated_part(const TemplateCase& t, const ojson& turn) {
  auto tmpl = ChatTemplate::from_source(read_template(t.name), t.name);
  EXPECT_TRUE(tmpl.ok()) << tmpl.message();
  ojson msgs = ojson::array({{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "Weather in Zürich?"}}});
  ChatRenderOptions o;
  o.tools = kTools;
  o.extra = {{"date_string", "26 Jul 2024"}};
  o.add_generation_prompt = true;
  auto prompt = tmpl->render_json(msgs, o);
  EXPECT_TRUE(prompt.ok()) << prompt.message();
  msgs.push_back(turn);
  o.add_generation_prompt = false;
  auto full = tmpl->render_json(msgs, o);
  EXPECT_TRUE(full.ok()) << full.message();
  if (!prompt.ok() || !full.ok()) return "";
  EXPECT_EQ(full->substr(0, prompt->size()), *prompt) << t.name;
  std::string gen = full->substr(prompt->size());
  // DeepSeek-V3's template closes the turn only after a second call.
  const bool closed = gen.size() >= t.end_of_turn.size() &&
                      gen.substr(gen.size() - t.end_of_turn.size()) == t.end_of_turn;
  EXPECT_TRUE(closed || t.format == Format::DeepSeek3) << t.name << ": " << gen;
  if (closed) gen.resize(gen.size() - t.end_of_turn.size());
  return gen;
}

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

// Streams `text` in pieces of `chunk` bytes and rebuilds the message from the deltas alone.
Parsed stream(Format f, const std::string& text, size_t chunk) {
  ToolCallParser p(f);
  Parsed out;
  auto apply = [&](const Delta& d) {
    out.content += d.content;
    for (const CallDelta& c : d.calls) {
      if (!c.name.empty()) {
        EXPECT_EQ(size_t(c.index), out.calls.size());
        out.calls.push_back(ToolCall{c.id, c.name, ""});
      }
      EXPECT_LT(size_t(c.index), out.calls.size());
      if (size_t(c.index) < out.calls.size()) out.calls[size_t(c.index)].arguments += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += chunk) apply(p.feed(text.substr(i, chunk)));
  apply(p.finish());
  EXPECT_EQ(out.content, p.content());
  EXPECT_EQ(out.calls.size(), p.calls().size());
  return out;
}

TEST(ToolCallParser, RecoversCallsRenderedByEachTemplate) {
  size_t checked = 0;
  for (const TemplateCase& t : kTemplates) {
    EXPECT_EQ(detect_format(read_template(t.name)), t.format) << t.name;
    for (size_t n = 1; n <= t.max_calls; ++n) {
      for (const std::string content : {"", "Let me check."}) {
        // Llama-3's call is the whole message; DeepSeek-V3's template renders calls only
        // when the content is null.
        if (t.format != Format::Hermes && !content.empty()) continue;
        const std::string gen = generated_part(t, assistant_turn(t, content, n));
        SCOPED_TRACE(t.name + " generated: " + gen);
        // Qwen3's template writes an (empty) reasoning block before the answer: text too.
        std::string want_text = content;
        if (gen.rfind("<think>", 0) == 0) {
          const size_t end = gen.find("</think>") + std::string("</think>").size();
          want_text = gen.substr(0, end) + (content.empty() ? "" : "\n\n" + content);
        }
        for (size_t chunk = 1; chunk <= 9; ++chunk) {
          const Parsed p = stream(t.format, gen, chunk);
          EXPECT_EQ(p.content, want_text);
          ASSERT_EQ(p.calls.size(), n);
          const ojson want = assistant_turn(t, content, n)["tool_calls"];
          for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(p.calls[i].name, want[i]["function"]["name"].get<std::string>());
            EXPECT_EQ(p.calls[i].id, "call_" + std::to_string(i));
            const ojson a = want[i]["function"]["arguments"];
            EXPECT_EQ(ojson::parse(p.calls[i].arguments),
                      a.is_string() ? ojson::parse(a.get<std::string>()) : a);
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 9u * (4 + 4 + 1 + 1 + 2));
}

TEST(ToolCallParser, TemplatesWithoutToolCallsHaveNoFormat) {
  for (const char* name : {"llama3", "llama3_1", "deepseek2"})
    EXPECT_FALSE(detect_format(read_template(name)).has_value()) << name;
}

TEST(ToolCallParser, TextThatOnlyLooksLikeACallStaysText) {
  const std::pair<Format, std::string> cases[] = {
      {Format::Llama3, R"({"answer": 42, "name": "x"})"},
      {Format::Llama3, "Sure: {\"name\": \"f\"}"},
      {Format::Hermes, "a <tool_call> b"},
      {Format::Hermes, "<tool_call>\nnot json\n</tool_call> after"},
      {Format::Hermes, "less <tool_ than a marker"},
      {Format::DeepSeek3, "<｜tool▁calls▁begin｜>oops"},
      {Format::Hermes, "  spaces kept  \n"},
  };
  for (const auto& [f, text] : cases) {
    for (size_t chunk : {1, 3, 100}) {
      const Parsed p = stream(f, text, chunk);
      EXPECT_EQ(p.content, text) << format_name(f) << " chunk " << chunk;
      EXPECT_TRUE(p.calls.empty()) << text;
    }
  }
}

TEST(ToolCallParser, CallsCutShortKeepWhatWasWritten) {
  const Parsed p =
      stream(Format::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, ", 4);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, "{\"a\": [1, ");
  const Parsed q = stream(Format::Hermes, "<tool_call>\n{\"name\": \"g\"}\n</tool_call>", 5);
  ASSERT_EQ(q.calls.size(), 1u);
  EXPECT_EQ(q.calls[0].arguments, "{}");
  const Parsed r = stream(Format::Hermes,
                          "<tool_call>\n{\"name\": \"h\", \"arguments\": \"{\\\"x\\\": 1}\"}\n"
                          "</tool_call>",
                          2);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"x\": 1}");  // arguments written as a JSON string
}

// A forced, parallel call cut by max_tokens while it wrote its second call's name: the complete
// call stays, and no raw marker is left in the text beside it (nor when no call came before).
TEST(ToolCallParser, ACallCutBeforeItsNameLeavesNoMarkerInTheText) {
  const std::string first =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  for (size_t chunk : {1, 3, 100}) {
    const Parsed p = stream(Format::Hermes, first + "\n<tool_call>\n{\"name\": \"ge", chunk);
    ASSERT_EQ(p.calls.size(), 1u) << chunk;
    EXPECT_EQ(p.calls[0].arguments, "{\"a\": 1}");
    EXPECT_EQ(p.content, "") << chunk;
    const Parsed q = stream(Format::Hermes, "Sure.\n<tool_call>\n{\"na", chunk);
    EXPECT_TRUE(q.calls.empty());
    EXPECT_EQ(q.content, "Sure.") << chunk;
    const Parsed r = stream(Format::Llama3, "{\"name\": \"f", chunk);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "") << chunk;
  }
}

}  // namespace
}  // namespace kamera::toolcall
