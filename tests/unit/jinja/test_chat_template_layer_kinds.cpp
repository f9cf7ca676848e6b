// The gemma and smollm3 built-in chat templates: the exact prompt text of a conversation, and
// the detection of Gemma's template text.
#include <gtest/gtest.h>

#include "jinja/chat_template.h"

using namespace kamera;

namespace {

std::string render(const char* name, const std::vector<ChatMessage>& msgs,
                   nlohmann::ordered_json extra = nlohmann::ordered_json::object()) {
  auto t = ChatTemplate::named(name);
  EXPECT_TRUE(t.ok()) << t.message();
  ChatRenderOptions o;
  o.bos_token = "<bos>";
  o.extra = std::move(extra);
  auto r = t->render(msgs, o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : "";
}

}  // namespace

// As llama.cpp's gemma fallback (llm_chat_apply_template) after the BOS: the system message
// (trimmed) opens the first user turn, assistant turns are the model's, contents are trimmed.
TEST(ChatTemplateLayerKinds, GemmaTurns) {
  const std::vector<ChatMessage> msgs = {
      {"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello."}, {"user", "Bye"}};
  EXPECT_EQ(render("gemma", msgs),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render("gemma", {{"user", "Hi"}}),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplate::detect_builtin("{{ '<start_of_turn>' + role }}"), "gemma");
}

// SmolLM3: /think and /no_think in the system message choose the reasoning mode (and leave its
// text); enable_thinking = false does the same without a flag; the empty think block marks
// turns and the generation prompt without thinking.
TEST(ChatTemplateLayerKinds, Smollm3ReasoningFlags) {
  const std::string head =
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ";
  const std::string no_think =
      head + "/no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n" +
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</"
      "think>\nHello.<|im_end|>\n" +
      "<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n";
  const std::vector<ChatMessage> turns = {
      {"user", "Hi"}, {"assistant", "Hello."}, {"user", "More"}};
  std::vector<ChatMessage> msgs = {{"system", "Be brief. /no_think"}};
  msgs.insert(msgs.end(), turns.begin(), turns.end());
  EXPECT_EQ(render("smollm3", msgs), no_think);
  msgs[0].content = "Be brief.";
  EXPECT_EQ(render("smollm3", msgs, {{"enable_thinking", false}}), no_think);
  msgs[0].content = "Be brief. /think";
  EXPECT_EQ(render("smollm3", msgs, {{"enable_thinking", false}}),
            head + "/think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n" +
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n" +
                "<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("smollm3", {{"user", "Hi"}}),
            head +
                "/think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named "
                "SmolLM, trained by Hugging Face.\n\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\n");
}
