// ResponseStore (server/response_store.h): the stored responses stay under the byte budget, the
// least recently used (put or found) going first; a response larger than the budget is not kept;
// an API key's responses are its own; conversation() is the input then the output items.
#include <gtest/gtest.h>

#include "server/response_store.h"

using namespace kamera;
using ojson = nlohmann::ordered_json;

namespace {

// A response of about `bytes` bytes of JSON.
StoredResponse response(const std::string& id, size_t bytes, const std::string& owner = "") {
  StoredResponse r;
  r.id = id;
  r.owner = owner;
  r.input = ojson::array({{{"role", "user"}, {"content", std::string(bytes, 'x')}}});
  r.object = {{"id", id}, {"output", ojson::array({{{"type", "message"}, {"id", "m"}}})}};
  return r;
}

}  // namespace

TEST(ResponseStore, KeepsItsBudgetLeastRecentlyUsedOut) {
  ResponseStore store(3500);
  EXPECT_TRUE(store.put(response("a", 1000)));
  EXPECT_TRUE(store.put(response("b", 1000)));
  EXPECT_TRUE(store.put(response("c", 1000)));
  EXPECT_EQ(store.size(), 3u);
  ASSERT_NE(store.get("a", ""), nullptr);  // a is now the most recently used: b goes next
  EXPECT_TRUE(store.put(response("d", 1000)));
  EXPECT_LE(store.bytes(), 3500u);
  EXPECT_EQ(store.get("b", ""), nullptr);
  for (const char* id : {"a", "c", "d"}) EXPECT_NE(store.get(id, ""), nullptr) << id;
  EXPECT_FALSE(store.put(response("huge", 4000)));
  EXPECT_EQ(store.get("huge", ""), nullptr);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE(store.put(response("e", 3000)));  // takes the room of all three
  EXPECT_EQ(store.size(), 1u);
  EXPECT_LE(store.bytes(), 3500u);
  EXPECT_TRUE(store.erase("e", ""));
  EXPECT_FALSE(store.erase("e", ""));
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, AKeysResponsesAreItsOwn) {
  ResponseStore store(1 << 20);
  store.put(response("a", 10, "key:0"));
  store.put(response("b", 10));
  EXPECT_NE(store.get("a", "key:0"), nullptr);
  EXPECT_EQ(store.get("a", "key:1"), nullptr);
  EXPECT_FALSE(store.erase("a", "key:1"));
  EXPECT_NE(store.get("b", "key:1"), nullptr);
  const ojson items = store.get("a", "key:0")->conversation();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0]["role"], "user");
  EXPECT_EQ(items[1]["type"], "message");
}
