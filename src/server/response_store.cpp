#include "server/response_store.h"

namespace kamera {

namespace {

// Calls fn(id, item) for each item of r with a string "id": its output items, then its input's.
template <class Fn>
void each_item(const StoredResponse& r, Fn fn) {
  auto scan = [&](const nlohmann::ordered_json& items) {
    if (!items.is_array()) return;
    for (const auto& i : items)
      if (i.is_object() && i.contains("id") && i["id"].is_string())
        fn(i["id"].get_ref<const std::string&>(), i);
  };
  if (auto output = r.object.find("output"); output != r.object.end()) scan(*output);
  scan(r.input);
}

}  // namespace

nlohmann::ordered_json StoredResponse::conversation() const {
  nlohmann::ordered_json items = input;
  for (const auto& item : object.value("output", nlohmann::ordered_json::array()))
    items.push_back(item);
  return items;
}

bool ResponseStore::put(StoredResponse r) {
  const size_t bytes =
      r.id.size() + r.owner.size() + r.input.dump().size() + r.object.dump().size();
  std::lock_guard lock(mu_);
  if (auto it = by_id_.find(r.id); it != by_id_.end()) drop(it->second);
  if (bytes > budget_) return false;
  while (bytes_ + bytes > budget_ && !lru_.empty()) drop(std::prev(lru_.end()));
  const std::string id = r.id;
  lru_.push_front({std::make_shared<const StoredResponse>(std::move(r)), bytes, ++clock_});
  by_id_[id] = lru_.begin();
  index_items(lru_.begin());
  bytes_ += bytes;
  return true;
}

ResponseStore::List::iterator ResponseStore::find(const std::string& id, const std::string& owner) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return lru_.end();
  const std::string& o = it->second->r->owner;
  return o.empty() || o == owner ? it->second : lru_.end();
}

void ResponseStore::index_items(List::iterator it) {
  each_item(*it->r, [&](const std::string& id, const nlohmann::ordered_json& item) {
    std::vector<Holder>& holders = by_item_[id];
    if (holders.empty() || holders.back().at != it) holders.push_back({it, &item});  // its first
  });
}

void ResponseStore::unindex_items(List::iterator it) {
  each_item(*it->r, [&](const std::string& id, const nlohmann::ordered_json&) {
    auto found = by_item_.find(id);
    if (found == by_item_.end()) return;  // an id it held twice, gone already
    std::erase_if(found->second, [&](const Holder& h) { return h.at == it; });
    if (found->second.empty()) by_item_.erase(found);
  });
}

void ResponseStore::drop(List::iterator it) {
  unindex_items(it);
  bytes_ -= it->bytes;
  by_id_.erase(it->r->id);
  lru_.erase(it);
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id,
                                                         const std::string& owner) {
  std::lock_guard lock(mu_);
  auto it = find(id, owner);
  if (it == lru_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it);
  it->used = ++clock_;
  return it->r;
}

std::optional<nlohmann::ordered_json> ResponseStore::item(const std::string& id,
                                                          const std::string& owner) const {
  std::lock_guard lock(mu_);
  auto found = by_item_.find(id);
  if (found == by_item_.end()) return std::nullopt;
  const Holder* best = nullptr;  // the most recently used response holding it, of `owner`
  for (const Holder& h : found->second) {
    ++probes_;
    const std::string& o = h.at->r->owner;
    if ((o.empty() || o == owner) && (!best || h.at->used > best->at->used)) best = &h;
  }
  if (!best) return std::nullopt;
  return *best->item;
}

bool ResponseStore::erase(const std::string& id, const std::string& owner) {
  std::lock_guard lock(mu_);
  auto it = find(id, owner);
  if (it == lru_.end()) return false;
  drop(it);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t ResponseStore::item_probes() const {
  std::lock_guard lock(mu_);
  return probes_;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace kamera
