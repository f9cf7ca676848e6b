// Reasoning split out of a thinking model's output (toolcall/reasoning.h): streamed in pieces of
// any size, the pieces join to the reasoning and the answer of the whole text, markers and the
// whitespace around the reasoning in neither; a prompt that opened <think> makes the output start
// as reasoning; text that only looks like a marker stays the answer.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "toolcall/reasoning.h"

namespace kamera::toolcall {
namespace {

struct Split {
  std::string reasoning, content;
};

Split split(bool opened, const std::string& text, size_t chunk) {
  ReasoningSplitter s(opened);
  Split out;
  auto add = [&](const ReasoningDelta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
  };
  for (size_t i = 0; i < text.size(); i += chunk) add(s.feed(text.substr(i, chunk)));
  add(s.finish());
  EXPECT_EQ(out.reasoning, s.reasoning());
  return out;
}

TEST(ReasoningSplitter, SplitsThinkBlocksInPiecesOfAnySize) {
  struct Case {
    bool opened;
    std::string text, reasoning, content;
  };
  const Case cases[] = {
      {false, "<think>\nLet me see.\n2 + 2 = 4.\n</think>\n\nIt is 4.", "Let me see.\n2 + 2 = 4.",
       "It is 4."},
      {false, "\n<think>a</think>b <think>c</think>", "a", "b <think>c</think>"},
      {true, "\nThe user asks.\n</think>\n\nHello.", "The user asks.", "Hello."},
      {true, "cut short inside the reasoning </thi", "cut short inside the reasoning </thi", ""},
      {true, "</think>answer", "", "answer"},
      {false, "No reasoning here.", "", "No reasoning here."},
      {false, "  <thinking> is not a marker", "", "  <thinking> is not a marker"},
      {false, "<think", "", "<think"},
      {false, "<think>\n\n</think>\n\n<tool_call>", "", "<tool_call>"},
  };
  for (const Case& c : cases)
    for (size_t chunk : {1, 2, 3, 7, 1000}) {
      const Split s = split(c.opened, c.text, chunk);
      EXPECT_EQ(s.reasoning, c.reasoning) << c.text << " chunk " << chunk;
      EXPECT_EQ(s.content, c.content) << c.text << " chunk " << chunk;
    }
}

TEST(ReasoningSplitter, PromptsThatOpenTheReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<think>a</think> then <|im_start|>assistant\n"));
}

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(KAMERA_SOURCE_DIR) + "/tests/fixtures/chat_templates/templates/" +
                  name + ".jinja");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(ReasoningSplitter, MarkersAreReadOffTheTemplate) {
  EXPECT_TRUE(has_reasoning_markers(read_template("qwen3")));
  for (const char* name : {"qwen2_5", "llama3_1", "deepseek3"})
    EXPECT_FALSE(has_reasoning_markers(read_template(name))) << name;
}

}  // namespace
}  // namespace kamera::toolcall
