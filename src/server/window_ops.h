// The JSON of /v1/windows: a window policy and an edit from a request body, and a window as the
// API shows it. The edits run on the scheduler (serve/window_registry.h); these run on the HTTP
// side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/window_registry.h"

namespace kamera {

// A window policy from the body of POST /v1/windows.
Result<WindowPolicy> window_policy(const nlohmann::json& body);

// The edit `op` (append, evict, recall, reorder, refresh or fork) from its body; `content` turns
// an append body without "chunk" into the chunk's content (tokenized here, not on the engine).
using ContentParser = std::function<Result<ChunkContent>(const nlohmann::json&)>;
Result<WindowEdit> window_edit(const std::string& op, const nlohmann::json& body,
                               const ContentParser& content);

nlohmann::json window_json(const WindowView& w);

}  // namespace kamera
