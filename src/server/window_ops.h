// The agent windows of the server (/v1/windows): their registry and the edits the API exposes
// (append, evict, recall, reorder, refresh, fork), from request JSON to response JSON. Every
// member runs on the scheduler thread, which owns the engine and the KV pool.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "context/context.h"
#include "window/window.h"

namespace kamera {

// A window policy from the body of POST /v1/windows (parsed on the HTTP side).
Result<WindowPolicy> window_policy(const nlohmann::json& body);

class WindowRegistry {
 public:
  using ContentParser = std::function<Result<ChunkContent>(const nlohmann::json&)>;
  // `parse_content` turns an append body without "chunk" into the chunk's content.
  WindowRegistry(Context& ctx, ContentParser parse_content)
      : ctx_(ctx), parse_content_(std::move(parse_content)) {}

  Result<nlohmann::json> create(const WindowPolicy& p);
  Result<nlohmann::json> describe(const std::string& id);
  Result<nlohmann::json> erase(const std::string& id);
  // op: append, evict, recall, reorder, refresh or fork; the result is the window's JSON (the
  // new window's for fork).
  Result<nlohmann::json> edit(const std::string& id, const std::string& op,
                              const nlohmann::json& body);
  Result<Window*> find(const std::string& id);
  void clear() { windows_.clear(); }

 private:
  Status append(Window& w, const nlohmann::json& b);
  Status evict(Window& w, const nlohmann::json& b);
  Status recall(Window& w, const nlohmann::json& b);
  Status reorder(Window& w, const nlohmann::json& b);
  std::string add(std::unique_ptr<Window> w);

  Context& ctx_;
  ContentParser parse_content_;
  std::map<std::string, std::unique_ptr<Window>> windows_;
  int counter_ = 0;
};

nlohmann::json window_json(const std::string& id, const Window& w);

}  // namespace kamera
