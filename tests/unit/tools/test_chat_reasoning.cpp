// `kamera chat`'s reply printer (tools/chat_reasoning.h) on canned replies: gpt-oss's harmony
// output (its real chat template, tests/fixtures/chat_templates/templates/gpt_oss.jinja) shows the
// analysis channel as reasoning ("| " lines) and the final channel as the answer, with no
// <|channel|> markers left, whatever the stream's cut; a <think> model's reply still splits; a
// template with neither prints the reply as it is.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tools/chat_reasoning.h"

namespace kamera::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string gpt_oss_template() {
  return read_file(std::string(KAMERA_SOURCE_DIR) +
                   "/tests/fixtures/chat_templates/templates/gpt_oss.jinja");
}

// What the printer writes for `reply` fed in pieces of `step` bytes (0: all at once).
std::string printed(ReasoningView view, const std::string& tmpl, const std::string& reply,
                    size_t step, bool opened = false) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  {
    ReasoningPrinter p(view, tmpl, opened, /*dim=*/false, out);
    if (step == 0) step = reply.size();
    for (size_t at = 0; at < reply.size(); at += step) p.feed(reply.substr(at, step));
    p.finish();
  }
  std::fclose(out);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

// A harmony reply as gpt-oss writes it after the generation prompt's <|start|>assistant.
const std::string kHarmonyReply =
    "<|channel|>analysis<|message|>The user greets.\nAnswer briefly.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>";

TEST(ChatReasoning, HarmonyAnalysisIsReasoningAndFinalIsTheAnswer) {
  const std::string tmpl = gpt_oss_template();
  ASSERT_NE(tmpl.find("<|channel|>"), std::string::npos) << "gpt_oss.jinja missing";
  for (size_t step : {size_t(0), size_t(1), size_t(3), size_t(7)}) {
    const std::string s = printed(ReasoningView::Show, tmpl, kHarmonyReply, step);
    EXPECT_EQ(s, "| The user greets.\n| Answer briefly.\n\nHello! How can I help?")
        << "fed " << step << " bytes at a time";
    EXPECT_EQ(s.find("<|"), std::string::npos) << s;
  }
}

TEST(ChatReasoning, HarmonyHideDropsTheAnalysisRawKeepsTheMarkers) {
  const std::string tmpl = gpt_oss_template();
  EXPECT_EQ(printed(ReasoningView::Hide, tmpl, kHarmonyReply, 2), "Hello! How can I help?");
  EXPECT_EQ(printed(ReasoningView::Raw, tmpl, kHarmonyReply, 2), kHarmonyReply);
}

TEST(ChatReasoning, HarmonyToolCallIsShownOnItsOwnLine) {
  const std::string reply =
      "<|channel|>analysis<|message|>Need weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\":\"Paris\"}<|call|>";
  EXPECT_EQ(printed(ReasoningView::Show, gpt_oss_template(), reply, 4),
            "| Need weather.\n\n[call get_weather {\"city\":\"Paris\"}]");
}

// The next turn's prompt: gpt-oss's template refuses a kept reply that holds its <|channel|>
// markers (what the chat kept before); the kept final channel renders, the analysis dropped.
TEST(ChatReasoning, HarmonyReplyIsKeptAsItsFinalChannel) {
  auto tmpl = ChatTemplate::from_source(gpt_oss_template());
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  ChatRenderOptions o;
  o.add_generation_prompt = true;
  std::vector<ChatMessage> raw = {{"user", "Hi"}, {"assistant", kHarmonyReply}, {"user", "More"}};
  EXPECT_FALSE(tmpl->render(raw, o).ok()) << "the template takes the raw reply";
  auto kept = harmony_history(gpt_oss_template(), kHarmonyReply);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->content, "Hello! How can I help?");
  EXPECT_EQ(kept->fields.value("thinking", ""), "The user greets.\nAnswer briefly.");
  std::vector<ChatMessage> msgs = {{"user", "Hi"}, *kept, {"user", "More"}};
  auto prompt = tmpl->render(msgs, o);
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  EXPECT_NE(prompt->find("<|start|>assistant<|channel|>final<|message|>Hello! How can I help?"
                         "<|end|><|start|>user<|message|>More<|end|>"),
            std::string::npos)
      << *prompt;
  EXPECT_EQ(prompt->find("The user greets"), std::string::npos) << *prompt;
  EXPECT_FALSE(harmony_history("{{ messages }}", kHarmonyReply).has_value());
}

TEST(ChatReasoning, ThinkModelsStillSplitAndPlainTemplatesPrintAsIs) {
  const std::string think = "{{ '<think>' }}{{ '</think>' }}";
  EXPECT_EQ(printed(ReasoningView::Show, think, "<think>\nhmm\n</think>\n\nYes.", 2),
            "| hmm\n\nYes.");
  EXPECT_EQ(printed(ReasoningView::Show, "{{ messages }}", kHarmonyReply, 5), kHarmonyReply);
}

}  // namespace
}  // namespace kamera::cli
