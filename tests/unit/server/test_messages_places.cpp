// A refusal of a Messages request names the client's field (server/messages_api.h,
// MessagePlaces): the chat body the translator builds has a top `system` as message 0 and each
// tool_result block as a message of its own, so its messages[k].content[c] is not the client's.
// The reference is written by hand from the body below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/messages_api.h"

using namespace kamera;
using ojson = nlohmann::ordered_json;

namespace {

ojson image_block() {
  return {{"type", "image"},
          {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}};
}

}  // namespace

TEST(MessagesPlaces, ChatParamsNameTheClientsBlocks) {
  const ojson body = {
      {"model", "m"},
      {"max_tokens", 8},
      {"system", "Be brief."},
      {"messages",
       {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Look"}}, image_block()}}},
        {{"role", "assistant"}, {"content", "ok"}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "42"}},
           {{"type", "text"}, {"text", "and"}},
           image_block()}}}}}};
  std::string param;
  MessagePlaces places;
  auto chat = messages_request(body, false, &param, &places);
  ASSERT_TRUE(chat.ok()) << chat.message() << " " << param;
  // system, user [text, image], assistant, tool, user [text, image]
  ASSERT_EQ((*chat)["messages"].size(), 5u);
  ASSERT_EQ(places.message.size(), 5u);
  EXPECT_EQ(places.rename("messages[1].content[1]"), "messages[0].content[1]");
  EXPECT_EQ(places.rename("messages[4].content[1]"), "messages[2].content[2]");
  EXPECT_EQ(places.rename("messages[4].content[0].text"), "messages[2].content[1].text");
  EXPECT_EQ(places.rename("messages[2].content"), "messages[1].content");
  EXPECT_EQ(places.rename("messages[3].content[0]"), "messages[2].content[0].content[0]");
  EXPECT_EQ(places.rename("messages[0].content"), "system");
  EXPECT_EQ(places.rename("stop"), "stop_sequences");  // the names messages_param renames
  EXPECT_EQ(places.rename("messages[9].content[0]"), "messages[9].content[0]");
  EXPECT_EQ(places.rename("messages[x]"), "messages[x]");
}
