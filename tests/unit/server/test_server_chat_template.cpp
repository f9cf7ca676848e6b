// /v1/chat/completions renders messages with the model's chat template: the prompt parts equal the
// template's own rendering (the reference), and chunk parts stay chunks at their place in it.
#include <gtest/gtest.h>

#include "server/openai.h"

using namespace kamera;
using json = nlohmann::json;

namespace {

// The concatenated text of parts, with each chunk written as [id].
std::string flatten(const std::vector<PromptPart>& parts) {
  std::string s;
  for (const PromptPart& p : parts) {
    if (!p.is_chunk) {
      s += p.text;
      continue;
    }
    s += '[';
    s += p.id.hex();
    s += ']';
  }
  return s;
}

ModelConfig config() {
  ModelConfig c;
  c.ctx_len = 512;
  c.n_vocab = 1000;
  return c;
}

}  // namespace

TEST(ServerChatTemplate, MessagesRenderAsTheTemplateDoes) {
  auto tmpl = ChatTemplate::named("chatml");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}}}};
  auto r = gen_request(body, true, ServerOptions{}, config(), &*tmpl);
  ASSERT_TRUE(r.ok()) << r.message();
  std::vector<ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hello"}};
  auto ref = tmpl->render(msgs, ChatRenderOptions{});
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(flatten(r->parts), *ref);
  EXPECT_NE(ref->find("<|im_start|>assistant\n"), std::string::npos);
  ASSERT_EQ(r->parts.size(), 1u);
}

TEST(ServerChatTemplate, ChunkPartsKeepTheirPlace) {
  auto tmpl = ChatTemplate::named("llama3");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  const std::string id(32, 'a');
  const json content = json::array({{{"type", "text"}, {"text", "Look: "}},
                                    {{"type", "chunk"}, {"id", id}},
                                    {{"type", "text"}, {"text", " What is it?"}}});
  const json body = {{"messages", {{{"role", "user"}, {"content", content}}}}};
  auto r = gen_request(body, true, ServerOptions{}, config(), &*tmpl);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->parts.size(), 3u);
  EXPECT_TRUE(r->parts[1].is_chunk);
  EXPECT_EQ(r->parts[1].id.hex(), id);
  std::vector<ChatMessage> msgs = {{"user", "Look: [" + id + "] What is it?"}};
  auto ref = tmpl->render(msgs, ChatRenderOptions{});
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(flatten(r->parts), *ref);
  EXPECT_EQ(r->parts.back().text.substr(r->parts.back().text.size() - 2), "\n\n");
}

TEST(ServerChatTemplate, WithoutATemplateMessagesAreRoleLines) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  auto r = gen_request(body, true, ServerOptions{}, config(), nullptr);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(flatten(r->parts), "user: Hi\nassistant:");
}

// No byte is reserved (chunk parts are pieces with spans of their own, jinja/value.h): the old
// marker's spelling in a content is the client's text.
TEST(ServerChatTemplate, TheOldMarkerSpellingIsText) {
  auto tmpl = ChatTemplate::named("chatml");
  ASSERT_TRUE(tmpl.ok());
  const std::string text = "a\x02kamera-chunk:" + std::string(32, 'a') + "\x02";
  const json body = {{"messages", {{{"role", "user"}, {"content", text}}}}};
  auto r = gen_request(body, true, ServerOptions{}, config(), &*tmpl);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->parts.size(), 1u);
  EXPECT_NE(r->parts[0].text.find(text), std::string::npos);
}
