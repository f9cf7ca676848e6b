// A phi3 file that carries no chat template (tests/data/phi3/phi3_tiny.gguf, written by llama.cpp's
// gguf-py) chats through the built-in phi3 template, its control tokens read where the template
// wrote them: the prompt of [user "Hello"] is llama.cpp's ids of the same rendering,
// "<|user|>\nHello<|end|>\n<|assistant|>\n" with BOS (SpmSpecialTokens lists them: 12 tokens).
// Before, the server refused the chat (no template) and the markers were characters.
#include <gtest/gtest.h>

#include "support/test_server.h"

using json = nlohmann::json;

TEST(ServerPhi3, ChatsThroughTheBuiltinTemplateWithLlamaCppsTokens) {
  tiny::TestServer s({}, std::string(KAMERA_SOURCE_DIR) + "/tests/data/phi3/phi3_tiny.gguf");
  int status = 0;
  const json r = s.post("/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                         {"max_tokens", 4},
                         {"temperature", 0}},
                        &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["usage"]["prompt_tokens"], 12) << r.dump();
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string());
}
