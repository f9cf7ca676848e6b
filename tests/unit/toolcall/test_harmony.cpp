// The harmony parser (gpt-oss's output format): a table of outputs with the reasoning, content
// and calls each must give, parsed whole, byte by byte, and split in two at every byte boundary
// (the streamed deltas must join to the same message); and outputs cut out of gpt-oss's real
// chat template's rendering of assistant turns (tests/fixtures/chat_templates/templates/gpt_oss).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "jinja/chat_template.h"
#include "toolcall/format.h"
#include "toolcall/harmony.h"
#include "toolcall/request.h"

namespace kamera::toolcall {
namespace {

using ojson = nlohmann::ordered_json;

struct Want {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

struct Case {
  const char* what;
  std::string text;
  Want want;
  bool split = true;  // analysis as reasoning (false: as content, with its markers)
};

const Case kCases[] = {
    {"reasoning then final",
     "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>"
     "final<|message|>2 + 2 = 4.<|return|>",
     {"User asks 2+2. Answer 4.", "2 + 2 = 4.", {}}},
    {"final only, cut by the stop token (not rendered)",
     "<|channel|>final<|message|>Hi <there> | <|x|>",
     {"", "Hi <there> | <|x|>", {}}},
    {"a call with the recipient in the channel header",
     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Z\\u00fcrich\"}<|call|>",
     {"Need weather.", "", {{"get_weather", "{\"city\":\"Z\\u00fcrich\"}"}}}},
    {"a call with the recipient in the role header (the template's form)",
     " to=functions.search<|channel|>commentary json<|message|>{\"q\": \"a<b\"}<|call|>",
     {"", "", {{"search", "{\"q\": \"a<b\"}"}}}},
    {"<|end|> not rendered: <|start|> ends the reasoning",
     "<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>ok",
     {"think", "ok", {}}},
    {"a preamble on commentary is content, a built-in tool's call is dropped",
     "<|channel|>commentary<|message|>Looking.<|end|><|start|>assistant<|channel|>analysis "
     "to=browser.search<|message|>{\"query\":\"x\"}<|call|>",
     {"", "Looking.", {}}},
    {"a stray commentary before analysis",
     "<|channel|>commentary to=assistant<|channel|>analysis<|message|>hmm<|end|>"
     "<|start|>assistant<|channel|>final<|message|>yes",
     {"hmm", "yes", {}}},
    {"two calls",
     "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|>"
     "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>[1]",
     {"", "", {{"a", "{}"}, {"b", "[1]"}}}},
    {"no header: the output is content as it is",
     "Hello <|channel|> world",
     {"", "Hello <|channel|> world", {}}},
    {"a header cut short tells nothing",
     "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin",
     {"a", "", {}}},
    {"a call cut short keeps its arguments so far",
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Z",
     {"", "", {{"get_weather", "{\"city\":\"Z"}}}},
    {"reasoning cut short is all reasoning",
     "<|channel|>analysis<|message|>so the answer is <|en",
     {"so the answer is <|en", "", {}}},
    // llama.cpp's own cases for gpt-oss (d32676d, tests/test-chat.cpp lines 5846-6003, the
    // outputs and the messages it expects of them)
    {"llama.cpp: final channel",
     "<|channel|>final<|message|>Hello, world!\nWhat's up?",
     {"", "Hello, world!\nWhat's up?", {}}},
    {"llama.cpp: commentary channel",
     "<|channel|>commentary<|message|>Hello, world!\nWhat's up?",
     {"", "Hello, world!\nWhat's up?", {}}},
    {"llama.cpp: analysis then final",
     "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
     "<|message|>Hello, world!\nWhat's up?",
     {"I'm\nthinking", "Hello, world!\nWhat's up?", {}}},
    {"llama.cpp: analysis then final, reasoning format none",
     "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final"
     "<|message|>Hello, world!\nWhat's up?",
     {"", "<|channel|>analysis<|message|>I'm\nthinking<|end|>Hello, world!\nWhat's up?", {}},
     false},
    {"llama.cpp: analysis only (partial)",
     "<|channel|>analysis<|message|>I'm\nthinking",
     {"I'm\nthinking", "", {}}},
    {"llama.cpp: recipient in role header",
     " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}",
     {"", "", {{"special_function", "{\"arg1\": 1}"}}}},
    {"llama.cpp: recipient in channel header",
     "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}",
     {"", "", {{"special_function", "{\"arg1\": 1}"}}}},
    {"llama.cpp: recipient with constraint",
     " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}",
     {"", "", {{"special_function", "{\"arg1\": 1}"}}}},
    {"llama.cpp: call on commentary",
     "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}",
     {"", "", {{"special_function", "{\"arg1\": 1}"}}}},
    {"llama.cpp: reasoning then call",
     "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant "
     "to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}",
     {"I'm\nthinking", "", {{"special_function", "{\"arg1\": 1}"}}}},
    {"llama.cpp: structured output",
     "<|channel|>analysis<|message|>I need to output the invoice details in JSON<|end|>"
     "<|start|>assistant<|channel|>final <|constrain|>json<|message|>{\"amount\": 123.45}",
     {"I need to output the invoice details in JSON", "{\"amount\": 123.45}", {}}},
    {"llama.cpp: built-in tool, recipient in role",
     "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant "
     "to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'",
     {"I will execute python to say hello", "", {}}},
    {"llama.cpp: built-in tool, recipient in channel",
     "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant"
     "<|channel|>commentary to=python <|constrain|>code<|message|>print(\"hello\")",
     {"I will execute python to say hello", "", {}}},
    {"llama.cpp: stray commentary before final",
     "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary "
     "to=assistant<|channel|>final<|message|>Hello, world!\nWhat's up?",
     {"I'm\nthinking", "Hello, world!\nWhat's up?", {}}},
};

// The deltas of one parse, joined.
struct Joined {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;
  void add(const HarmonyDelta& d) {
    reasoning += d.reasoning;
    content += d.d.content;
    for (const CallDelta& c : d.d.calls) {
      if (!c.id.empty()) {
        EXPECT_EQ(c.index, int(calls.size()));
        calls.push_back({c.name, ""});
      }
      ASSERT_LT(size_t(c.index), calls.size());
      calls[size_t(c.index)].second += c.arguments;
    }
  }
};

void expect_message(const Joined& j, const Want& w, const std::string& how) {
  EXPECT_EQ(j.reasoning, w.reasoning) << how;
  EXPECT_EQ(j.content, w.content) << how;
  EXPECT_EQ(j.calls, w.calls) << how;
}

Joined parse_pieces(const std::vector<std::string_view>& pieces, HarmonyParser& p) {
  Joined j;
  for (std::string_view piece : pieces) j.add(p.feed(piece));
  j.add(p.finish());
  return j;
}

TEST(HarmonyParser, EachOutputGivesItsMessageWholeAndStreamed) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    HarmonyParser whole("call_", c.split);
    const Joined j = parse_pieces({c.text}, whole);
    expect_message(j, c.want, "whole");
    EXPECT_EQ(whole.reasoning(), c.want.reasoning);
    EXPECT_EQ(whole.content(), c.want.content);
    ASSERT_EQ(whole.calls().size(), c.want.calls.size());
    for (size_t i = 0; i < c.want.calls.size(); ++i) {
      EXPECT_EQ(whole.calls()[i].id, "call_" + std::to_string(i));
      EXPECT_EQ(whole.calls()[i].name, c.want.calls[i].first);
      EXPECT_EQ(whole.calls()[i].arguments, c.want.calls[i].second);
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < c.text.size(); ++i)
      bytes.push_back(std::string_view(c.text).substr(i, 1));
    HarmonyParser by_byte("call_", c.split);
    expect_message(parse_pieces(bytes, by_byte), c.want, "byte by byte");
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      HarmonyParser p("call_", c.split);
      const std::string_view t = c.text;
      expect_message(parse_pieces({t.substr(0, cut), t.substr(cut)}, p), c.want,
                     "split at " + std::to_string(cut));
    }
  }
}

TEST(HarmonyParser, NoMarkerReachesTheContentWhileStreaming) {
  // Text held back while it may be a marker: no delta ever carries part of one.
  const std::string t =
      "<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>c";
  HarmonyParser p;
  for (char ch : t) {
    const HarmonyDelta d = p.feed(std::string(1, ch));
    EXPECT_EQ(d.reasoning.find('<'), std::string::npos);
    EXPECT_EQ(d.d.content.find('<'), std::string::npos);
  }
  EXPECT_EQ(p.reasoning(), "r");
}

TEST(HarmonyParser, CountsReadingInsideTheAnalysis) {
  HarmonyParser p;
  p.feed("<|channel|>analysis<|message|>");
  EXPECT_TRUE(p.read_reasoning());
  p.feed("thinking");
  EXPECT_TRUE(p.read_reasoning());
  p.feed("<|end|><|start|>assistant<|channel|>final<|message|>");
  p.feed("answer");
  EXPECT_FALSE(p.read_reasoning());
}

std::string gpt_oss_source() {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) +
                  "/tests/fixtures/chat_templates/templates/gpt_oss.jinja");
  EXPECT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(HarmonyParser, GptOssTemplateSelectsHarmony) {
  EXPECT_EQ(detect_format(gpt_oss_source()), Format::Harmony);
  EXPECT_STREQ(format_name(Format::Harmony), "harmony");
}

// The assistant turn as gpt-oss's own template renders it (what the model was trained to write
// after the generation prompt), parsed back.
TEST(HarmonyParser, RecoversTurnsRenderedByGptOssTemplate) {
  auto tmpl = ChatTemplate::from_source(gpt_oss_source(), "gpt_oss");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"get_weather",
    "description":"Weather of a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  const ojson user = {{"role", "user"}, {"content", "Weather in Zürich?"}};
  const ojson call_turn = ojson::parse(R"({"role":"assistant","content":"",
    "reasoning_content":"The user wants weather.","tool_calls":[{"type":"function",
    "function":{"name":"get_weather","arguments":"{\"city\":\"Zürich\"}"}}]})");
  ojson plain_call = call_turn;  // the template drops an answered call's reasoning
  plain_call.erase("reasoning_content");
  const ojson tool_turn = {{"role", "tool"}, {"content", "12 C"}};
  const ojson final_turn = {{"role", "assistant"}, {"content", "It is 12 °C."}};
  struct Turn {
    ojson before, turn;
    Want want;
  };
  const Turn turns[] = {
      {ojson::array({user}),
       call_turn,
       {"The user wants weather.", "", {{"get_weather", "{\"city\": \"Zürich\"}"}}}},
      {ojson::array({user, plain_call, tool_turn}), final_turn, {"", "It is 12 °C.", {}}},
  };
  for (const Turn& t : turns) {
    ChatRenderOptions o;
    o.tools = tools;
    o.add_generation_prompt = true;
    auto prompt = tmpl->render_json(prepare_messages(t.before, Format::Harmony), o);
    ASSERT_TRUE(prompt.ok()) << prompt.message();
    ojson all = t.before;
    all.push_back(t.turn);
    o.add_generation_prompt = false;
    auto full = tmpl->render_json(prepare_messages(all, Format::Harmony), o);
    ASSERT_TRUE(full.ok()) << full.message();
    ASSERT_EQ(full->substr(0, prompt->size()), *prompt);
    const std::string generated = full->substr(prompt->size());
    HarmonyParser p;
    expect_message(parse_pieces({generated}, p), t.want, generated);
  }
}

}  // namespace
}  // namespace kamera::toolcall
