// The agent windows of the server (/v1/windows): their registry and the edits the API exposes
// (append, evict, recall, reorder, refresh, fork), from request JSON to response JSON. Every
// member runs on the scheduler thread, which owns the engine and the KV pool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "context/context.h"
#include "window/window.h"

namespace kamera {

// A window policy from the body of POST /v1/windows (parsed on the HTTP side).
Result<WindowPolicy> window_policy(const nlohmann::json& body);

// What windows may hold. Pages are KV pool pages; a window's count is an upper bound (its
// tokens in whole pages, plus a partial page per slot).
struct WindowQuota {
  int max_windows = 16;              // per client
  double ttl_s = 600;                // unused this long: deleted (0: never)
  int64_t client_pages = INT64_MAX;  // held by one client's windows
  int64_t total_pages = INT64_MAX;   // held by all windows
};

// Windows by id, each owned by the client that created it (others get 404). Not thread-safe:
// every call runs on the scheduler thread.
class WindowRegistry {
 public:
  using ContentParser = std::function<Result<ChunkContent>(const nlohmann::json&)>;
  // `parse_content` turns an append body without "chunk" into the chunk's content.
  WindowRegistry(Context& ctx, ContentParser parse_content, WindowQuota quota)
      : ctx_(ctx), parse_content_(std::move(parse_content)), quota_(quota) {}

  Result<nlohmann::json> create(const std::string& client, const WindowPolicy& p);
  Result<nlohmann::json> describe(const std::string& client, const std::string& id);
  Result<nlohmann::json> erase(const std::string& client, const std::string& id);
  // op: append, evict, recall, reorder, refresh or fork; the result is the window's JSON (the
  // new window's for fork).
  Result<nlohmann::json> edit(const std::string& client, const std::string& id,
                              const std::string& op, const nlohmann::json& body);
  Result<Window*> find(const std::string& client, const std::string& id);

  // Why `op` on window `id` (empty for create) would pass a quota, or nullopt when it fits.
  // total: true when the refusal is the server's capacity rather than the client's share.
  struct Refusal {
    std::string message;
    bool total = false;
  };
  std::optional<Refusal> over_quota(const std::string& client, const std::string& id,
                                    const std::string& op, const nlohmann::json& body);
  // Deletes windows unused for longer than the TTL; returns how many.
  int expire();
  int64_t pages_held(const std::string& client) const;  // "" for all clients
  size_t size() const { return windows_.size(); }
  void clear() { windows_.clear(); }

 private:
  struct Entry {
    std::unique_ptr<Window> window;
    std::string owner;
    double last_used = 0;
  };
  Status append(Window& w, const nlohmann::json& b);
  Status evict(Window& w, const nlohmann::json& b);
  Status recall(Window& w, const nlohmann::json& b);
  Status reorder(Window& w, const nlohmann::json& b);
  std::string add(const std::string& client, std::unique_ptr<Window> w);
  int64_t pages_of(const Window& w) const;
  int64_t growth_pages(const std::string& client, const std::string& id, const std::string& op,
                       const nlohmann::json& b);

  Context& ctx_;
  ContentParser parse_content_;
  WindowQuota quota_;
  std::map<std::string, Entry> windows_;
  int counter_ = 0;
};

nlohmann::json window_json(const std::string& id, const Window& w);

}  // namespace kamera
