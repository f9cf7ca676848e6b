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

namespace {

// A response whose output holds items `<id>-0` .. `<id>-<n-1>`, and whose input holds `in-<id>`.
StoredResponse with_items(const std::string& id, int n, const std::string& owner = "") {
  StoredResponse r;
  r.id = id;
  r.owner = owner;
  r.input = ojson::array({{{"type", "message"}, {"id", "in-" + id}, {"content", id}}});
  ojson output = ojson::array();
  for (int i = 0; i < n; ++i)
    output.push_back({{"type", "message"}, {"id", id + "-" + std::to_string(i)}, {"n", i}});
  r.object = {{"id", id}, {"output", output}};
  return r;
}

}  // namespace

TEST(ResponseStore, ItemsAreFoundUntilTheirResponseIsEvictedOrDeleted) {
  ResponseStore store(size_t(1) << 20);
  ASSERT_TRUE(store.put(with_items("a", 2)));
  ASSERT_TRUE(store.put(with_items("b", 2, "key:k")));
  EXPECT_EQ((*store.item("a-1", ""))["n"], 1);
  EXPECT_EQ((*store.item("in-a", ""))["content"], "a");  // an input item it kept
  EXPECT_FALSE(store.item("b-0", ""));                   // another key's
  EXPECT_EQ((*store.item("b-0", "key:k"))["n"], 0);
  EXPECT_TRUE(store.erase("a", ""));
  EXPECT_FALSE(store.item("a-0", ""));
  EXPECT_FALSE(store.item("in-a", ""));
  // a response continuing "b" keeps b's items in its input: found there once b is gone
  StoredResponse c = with_items("c", 1, "key:k");
  c.input.push_back((*store.item("b-1", "key:k")));
  ASSERT_TRUE(store.put(c));
  EXPECT_TRUE(store.erase("b", "key:k"));
  EXPECT_EQ((*store.item("b-1", "key:k"))["n"], 1);
  EXPECT_FALSE(store.item("b-0", "key:k"));
  // replaced: the old version's items go with it
  ASSERT_TRUE(store.put(with_items("c", 0, "key:k")));
  EXPECT_FALSE(store.item("b-1", "key:k"));
  EXPECT_FALSE(store.item("c-0", "key:k"));
  EXPECT_TRUE(store.item("in-c", "key:k"));
  // evicted: a budget of about two responses, three put
  const size_t one = with_items("x", 50).object.dump().size() + 100;
  ResponseStore small(2 * one + one / 2);
  for (const char* id : {"x", "y", "z"}) ASSERT_TRUE(small.put(with_items(id, 50)));
  EXPECT_EQ(small.size(), 2u);
  EXPECT_FALSE(small.item("x-7", ""));
  EXPECT_FALSE(small.item("in-x", ""));
  EXPECT_EQ((*small.item("z-49", ""))["n"], 49);
  EXPECT_EQ((*small.item("y-0", ""))["n"], 0);
}

// An item is looked up by its id, not by scanning the store: the items a lookup examines
// (item_probes) stay the same whether 10 or 4000 responses are stored.
TEST(ResponseStore, ItemLookupDoesNotGrowWithTheStore) {
  auto probes_per_lookup = [](int responses) {
    ResponseStore store(size_t(1) << 30);
    for (int r = 0; r < responses; ++r) store.put(with_items("r" + std::to_string(r), 4));
    const size_t before = store.item_probes();
    for (int r = 0; r < 10; ++r) {  // the oldest responses' items: the last a scan would reach
      auto found = store.item("r" + std::to_string(r) + "-3", "");
      EXPECT_TRUE(found && (*found)["n"] == 3);
    }
    EXPECT_FALSE(store.item("nowhere", ""));
    return double(store.item_probes() - before) / 11;
  };
  const double few = probes_per_lookup(10), many = probes_per_lookup(4000);
  std::printf("items examined per lookup: %.1f with 10 responses stored, %.1f with 4000\n", few,
              many);
  EXPECT_LE(many, 2.0);
  EXPECT_LE(many, few + 0.5);
}
