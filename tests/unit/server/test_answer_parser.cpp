// AnswerParser's count of reasoning tokens (usage's reasoning_tokens): an answer fed token by token
// counts the tokens read inside the reasoning, the markers' tokens included, up to the one that
// completes </think>; markers split over several tokens, whitespace before <think>, a prompt that
// opened the reasoning, a reasoning cut short, and text with no reasoning (none counted).
#include <gtest/gtest.h>

#include "server/answer_parser.h"

using namespace kamera;

namespace {

struct Case {
  bool opened;
  std::vector<std::string> tokens;
  int64_t reasoning_tokens;
};

}  // namespace

TEST(AnswerParser, ReasoningTokensAreTheTokensReadInsideTheReasoning) {
  const Case cases[] = {
      {false,
       {"<think>", "\n", "Let", " me", " see", ".", "\n", "</think>", "\n\n", "It", " is"},
       8},
      {false, {"<", "think", ">", "a", "</", "think", ">", "b", "c"}, 7},
      {false, {"\n", "<think>", "x", "</think>", "y"}, 4},
      {true, {"a", "b", "</think>", "c", "d"}, 3},
      {true, {"a", "b", "c"}, 3},  // cut inside its reasoning
      {false, {"Hello", " <think>", "x", "</think>"}, 0},
      {false, {"<", "b", ">"}, 0},  // looked like <think> for a token
  };
  for (const Case& c : cases) {
    AnswerParser p(std::nullopt, c.opened, "call_");
    std::string reasoning, content;
    for (const std::string& t : c.tokens) {
      AnswerPiece piece = p.feed(t, 1);
      reasoning += piece.reasoning;
      content += piece.d.content;
    }
    p.finish();
    EXPECT_EQ(p.reasoning_tokens(), c.reasoning_tokens) << testing::PrintToString(c.tokens);
  }
  // a delta of several tokens counts them all
  AnswerParser p(std::nullopt, true, "call_");
  p.feed("ab", 2);
  p.feed("</think>", 1);
  p.feed("c", 3);
  EXPECT_EQ(p.reasoning_tokens(), 3);
}
