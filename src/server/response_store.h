// The Responses API's stored responses (`store`, the default): each finished Response object with
// the input items its conversation had (those of the responses it continued included), so that a
// request naming it as previous_response_id continues the conversation, and GET / DELETE
// /v1/responses/{id} find it. Bounded by a byte budget (kamera serve --responses-store-mb), the
// least recently used out first; a response larger than the budget is not kept. A response stored
// for an API key is found for that key only. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kamera {

struct StoredResponse {
  std::string id;
  std::string owner;              // the client it was stored for ("" : any)
  nlohmann::ordered_json input;   // the conversation's input items, before this response's output
  nlohmann::ordered_json object;  // the Response object, as answered
  // The items a request continuing it starts with: its input, then its output.
  nlohmann::ordered_json conversation() const;
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t budget_bytes) : budget_(budget_bytes) {}
  // Keeps r (replacing one with its id), the least recently used going while over the budget;
  // false when r alone is larger than the budget (nothing kept).
  bool put(StoredResponse r);
  // The response `id` stored for `owner` (or for any client), now the most recently used; null
  // when unknown, evicted, deleted or another client's.
  std::shared_ptr<const StoredResponse> get(const std::string& id, const std::string& owner);
  // The item whose "id" is `id` in a response stored for `owner` (or for any client): an output
  // item (message, function_call, reasoning) or an input item it kept, the most recent response
  // first; null when none holds it. The target of a request's item_reference.
  std::optional<nlohmann::ordered_json> item(const std::string& id, const std::string& owner) const;
  // Forgets `id` (as get finds it); false when get would not have found it.
  bool erase(const std::string& id, const std::string& owner);
  size_t bytes() const;
  size_t size() const;
  // The stored items item() has examined so far (one per response holding the id it looks up,
  // never the whole store): what a test measures of a lookup's cost.
  size_t item_probes() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> r;
    size_t bytes = 0;
    uint64_t used = 0;  // when last put or found: the most recently used holder of an item wins
  };
  using List = std::list<Entry>;  // most recently used first
  // A response holding an item id, and the item (in its immutable StoredResponse).
  struct Holder {
    List::iterator at;
    const nlohmann::ordered_json* item;
  };
  List::iterator find(const std::string& id, const std::string& owner);
  void drop(List::iterator it);
  void index_items(List::iterator it);
  void unindex_items(List::iterator it);

  const size_t budget_;
  mutable std::mutex mu_;
  List lru_;
  std::unordered_map<std::string, List::iterator> by_id_;
  std::unordered_map<std::string, std::vector<Holder>> by_item_;  // item id -> its holders
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  mutable size_t probes_ = 0;
};

}  // namespace kamera
