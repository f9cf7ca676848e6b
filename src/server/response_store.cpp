#include "server/response_store.h"

namespace kamera {

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
  lru_.push_front({std::make_shared<const StoredResponse>(std::move(r)), bytes});
  by_id_[id] = lru_.begin();
  bytes_ += bytes;
  return true;
}

ResponseStore::List::iterator ResponseStore::find(const std::string& id, const std::string& owner) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return lru_.end();
  const std::string& o = it->second->r->owner;
  return o.empty() || o == owner ? it->second : lru_.end();
}

void ResponseStore::drop(List::iterator it) {
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
  return it->r;
}

std::optional<nlohmann::ordered_json> ResponseStore::item(const std::string& id,
                                                          const std::string& owner) const {
  std::lock_guard lock(mu_);
  auto holds = [&](const nlohmann::ordered_json& items) -> const nlohmann::ordered_json* {
    if (!items.is_array()) return nullptr;
    for (const auto& i : items)
      if (i.is_object() && i.contains("id") && i["id"] == id) return &i;
    return nullptr;
  };
  for (const Entry& e : lru_) {
    const StoredResponse& r = *e.r;
    if (!r.owner.empty() && r.owner != owner) continue;
    const auto output = r.object.find("output");  // a reference into the stored object
    if (output != r.object.end())
      if (auto* i = holds(*output)) return *i;
    if (auto* i = holds(r.input)) return *i;
  }
  return std::nullopt;
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

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace kamera
